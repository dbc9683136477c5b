//! The coordinator's commands about nodes, as the node table applies them: the
//! (re)registration's assignment, and the move steps `Release`, `Incoming`, `Acquire`,
//! `Reclaim`, `Withdraw` and `CancelJobs` (see the table's module documentation).

use std::collections::BTreeMap;

use shardsched_failpoint::mutant::{self, Mutant};

use shardsched_wire::msg::coord_shard::{
    Acquire, CancelJobs, FreeAt, Incoming, IncomingNode, Reclaim, Release, ReleaseState, Response,
    StaleNode, Withdraw,
};
use shardsched_wire::msg::shard_coord::Released;
use shardsched_wire::msg::{Generation, JobId, MoveId, NodeGen};

use super::{Effect, Holding, NodeEntry, NodeJobs, NodeTable, bring_up, refuse_older};

impl NodeTable {
    /// What a (re)registered shard was told it owns (`owned`) and receives (`incoming`).
    /// Listed nodes are taken at their generation unless a newer one was seen; owned nodes
    /// not listed go down (the coordinator moved them meanwhile: its `Release` follows);
    /// incoming nodes not listed are forgotten; outgoing nodes stay outgoing. The first
    /// assignment after a (re)start confirms ownership: every owned node goes up then.
    pub fn apply_assignment(
        &mut self,
        owned: &[NodeGen],
        incoming: &[(MoveId, IncomingNode)],
    ) -> Vec<Effect> {
        let confirming = !self.confirmed;
        let mut effects = Vec::new();
        let listed: std::collections::BTreeSet<&str> = owned
            .iter()
            .map(|n| n.node.as_str())
            .chain(incoming.iter().map(|(_, n)| n.node.node.as_str()))
            .collect();
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(name, e)| {
                !listed.contains(name.as_str())
                    && matches!(e.holding, Holding::Owned | Holding::Incoming { .. })
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.update(&name, &mut effects, |e| e.holding = Holding::NotOwned);
            effects.push(Effect::TakeDown(name));
        }
        for ng in owned {
            if refuse_older(ng, &self.entry(&ng.node)).is_some() {
                continue;
            }
            self.update(&ng.node, &mut effects, |e| {
                e.generation = ng.generation;
                e.holding = Holding::Owned;
            });
            let entry = self.entry(&ng.node);
            effects.push(bring_up(&ng.node, &entry));
        }
        for (move_id, inc) in incoming {
            let (_, eff) = self.incoming_one(*move_id, inc);
            effects.extend(eff);
        }
        if confirming {
            self.confirmed = true;
            let up: Vec<(String, Generation)> =
                self.up_nodes().map(|(n, g)| (n.to_owned(), g)).collect();
            effects.extend(
                up.into_iter()
                    .map(|(node, generation)| Effect::WentUp { node, generation }),
            );
        }
        effects
    }

    /// The donor's side of a move: each node becomes outgoing (no new work) or, when no job
    /// holds it, is released at once. The answer gives each node's free time and its jobs.
    pub fn handle_release(
        &mut self,
        release: &Release,
        jobs: &impl NodeJobs,
    ) -> (Response, Vec<Effect>) {
        let mut answers = Vec::new();
        let mut stale = Vec::new();
        let mut effects = Vec::new();
        for ng in &release.nodes {
            if let Some(s) = refuse_older(ng, &self.entry(&ng.node)) {
                stale.push(s);
                continue;
            }
            let holding = if mutant::active(Mutant::ReleaseWhileHeld) {
                Vec::new()
            } else {
                jobs.jobs_on(&ng.node)
            };
            let (free, now_holding) = match holding.iter().map(|(_, end)| *end).max() {
                None => (FreeAt::Now, Holding::NotOwned),
                Some(end) => (
                    FreeAt::Expected(end),
                    Holding::Outgoing {
                        move_id: release.move_id,
                    },
                ),
            };
            let changed = self.update(&ng.node, &mut effects, |e| {
                e.generation = ng.generation;
                e.holding = now_holding;
            });
            if changed {
                effects.push(match free {
                    FreeAt::Now => Effect::TakeDown(ng.node.clone()),
                    FreeAt::Expected(_) => Effect::StopAllocating(ng.node.clone()),
                });
            }
            answers.push(ReleaseState {
                node: ng.clone(),
                free,
                jobs: holding.into_iter().map(|(id, _)| id).collect(),
            });
        }
        let response = Response::Releasing {
            nodes: answers,
            stale,
        };
        (response, effects)
    }

    /// Allocations ended on `nodes` (a job ended or was cancelled): outgoing nodes left
    /// with no job are released. Returns the reports for the coordinator (one per move) and
    /// the effects.
    pub fn allocations_gone(
        &mut self,
        nodes: &[String],
        jobs: &impl NodeJobs,
    ) -> (Vec<Released>, Vec<Effect>) {
        let mut by_move: BTreeMap<MoveId, Vec<NodeGen>> = BTreeMap::new();
        let mut effects = Vec::new();
        for name in nodes {
            let Some(entry) = self.nodes.get(name) else {
                continue;
            };
            let Holding::Outgoing { move_id } = entry.holding else {
                continue;
            };
            if !jobs.jobs_on(name).is_empty() {
                continue;
            }
            let generation = entry.generation;
            self.update(name, &mut effects, |e| e.holding = Holding::NotOwned);
            effects.push(Effect::TakeDown(name.clone()));
            by_move.entry(move_id).or_default().push(NodeGen {
                node: name.clone(),
                generation,
            });
        }
        let released = by_move
            .into_iter()
            .map(|(move_id, nodes)| Released { move_id, nodes })
            .collect();
        (released, effects)
    }

    /// The recipient's side: nodes coming, reservable from their expected free time.
    pub fn handle_incoming(&mut self, incoming: &Incoming) -> (Response, Vec<Effect>) {
        let mut stale = Vec::new();
        let mut effects = Vec::new();
        for inc in &incoming.nodes {
            let (s, eff) = self.incoming_one(incoming.move_id, inc);
            stale.extend(s);
            effects.extend(eff);
        }
        (Response::Ack { stale }, effects)
    }

    /// The recipient's side: the nodes are this shard's now.
    pub fn handle_acquire(&mut self, acquire: &Acquire) -> (Response, Vec<Effect>) {
        self.own(&acquire.nodes)
    }

    /// `nodes` are this shard's now, up: a move's `Acquire`, or nodes a definition change
    /// gave the queue (`Reconfigure.granted`).
    pub fn own(&mut self, nodes: &[NodeGen]) -> (Response, Vec<Effect>) {
        self.set_holding(nodes, Holding::Owned, bring_up)
    }

    /// The donor's side of a cancelled move: the nodes are this shard's again. Their jobs
    /// were never touched; the node just takes new work again.
    pub fn handle_reclaim(&mut self, reclaim: &Reclaim) -> (Response, Vec<Effect>) {
        self.set_holding(&reclaim.nodes, Holding::Owned, bring_up)
    }

    /// The recipient's side of a cancelled move: the nodes are not coming.
    pub fn handle_withdraw(&mut self, withdraw: &Withdraw) -> (Response, Vec<Effect>) {
        self.set_holding(&withdraw.nodes, Holding::NotOwned, |node, _| {
            Effect::TakeDown(node.to_owned())
        })
    }

    /// The donor's side, past a move's deadline: cancel the jobs still holding the nodes.
    /// Only nodes outgoing at exactly the command's generation are concerned.
    pub fn handle_cancel_jobs(
        &mut self,
        cancel: &CancelJobs,
        jobs: &impl NodeJobs,
    ) -> (Response, Vec<Effect>) {
        let mut stale = Vec::new();
        let mut effects = Vec::new();
        for ng in &cancel.nodes {
            let entry = self.entry(&ng.node);
            if let Some(s) = refuse_older(ng, &entry) {
                stale.push(s);
                continue;
            }
            let outgoing =
                matches!(entry.holding, Holding::Outgoing { move_id } if move_id == cancel.move_id);
            if entry.generation == ng.generation && outgoing {
                let holding: Vec<JobId> = jobs
                    .jobs_on(&ng.node)
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect();
                if !holding.is_empty() {
                    effects.push(Effect::CancelJobs {
                        node: ng.node.clone(),
                        jobs: holding,
                    });
                }
            }
        }
        (Response::Ack { stale }, effects)
    }

    /// Sets each node (refusing stale generations) to `holding` at the command's
    /// generation; a node that changed is persisted, then `then` says what the core does.
    fn set_holding(
        &mut self,
        nodes: &[NodeGen],
        holding: Holding,
        then: impl Fn(&str, &NodeEntry) -> Effect,
    ) -> (Response, Vec<Effect>) {
        let mut stale = Vec::new();
        let mut effects = Vec::new();
        for ng in nodes {
            if let Some(s) = refuse_older(ng, &self.entry(&ng.node)) {
                stale.push(s);
                continue;
            }
            let changed = self.update(&ng.node, &mut effects, |e| {
                e.generation = ng.generation;
                e.holding = holding.clone();
            });
            if changed {
                let entry = self.entry(&ng.node);
                effects.push(then(&ng.node, &entry));
            }
        }
        (Response::Ack { stale }, effects)
    }

    fn incoming_one(
        &mut self,
        move_id: MoveId,
        inc: &IncomingNode,
    ) -> (Option<StaleNode>, Vec<Effect>) {
        let ng = &inc.node;
        let entry = self.entry(&ng.node);
        if let Some(s) = refuse_older(ng, &entry) {
            return (Some(s), Vec::new());
        }
        // The same generation already owned: the Acquire overtook this Incoming.
        if ng.generation == entry.generation && entry.holding == Holding::Owned {
            return (None, Vec::new());
        }
        let mut effects = Vec::new();
        if mutant::active(Mutant::UpBeforeRelease) {
            let changed = self.update(&ng.node, &mut effects, |e| {
                e.generation = ng.generation;
                e.holding = Holding::Owned;
            });
            if changed {
                effects.push(bring_up(&ng.node, &self.entry(&ng.node)));
            }
            return (None, effects);
        }
        let changed = self.update(&ng.node, &mut effects, |e| {
            e.generation = ng.generation;
            e.holding = Holding::Incoming {
                move_id,
                expected_free_ms: inc.expected_free_ms,
            };
        });
        if changed {
            effects.push(Effect::Reservable {
                node: ng.node.clone(),
                from_ms: inc.expected_free_ms,
            });
        }
        (None, effects)
    }
}
