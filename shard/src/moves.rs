//! The shard's side of node moves, pure: which nodes this shard owns, gives away or
//! receives, at which generation, and what the core must do about each command.
//!
//! # Per node
//!
//! ```text
//!   NotOwned ──Incoming──► Incoming{move, expected free} ──Acquire──► Owned (up)
//!   Owned ──Release──► Outgoing{move} (no new work) ──last job ends──► NotOwned (+ Released report)
//!   Outgoing ──Reclaim (cancelled move)──► Owned        Incoming ──Withdraw──► NotOwned
//! ```
//!
//! Every command carries (move, node, generation). A generation older than the newest this
//! shard has seen for the node is refused ([`StaleNode`]); the same generation again is a
//! repeat and gets the same answer; a newer one is applied. So commands may be duplicated,
//! reordered or re-sent after any restart.
//!
//! # How the core embeds it
//!
//! The machine knows nothing of jobs: the core answers "which jobs hold node X and when do
//! they end" through [`NodeJobs`] (a closure works). Each input returns the wire answer and
//! a list of [`Effect`]s, in order: [`Effect::Persist`] entries go to the journal *before*
//! the answer is sent; the others change what the scheduler may do with a node. After a
//! restart ([`ShardMoves::restore`]) no node is up until the coordinator's assignment
//! ([`ShardMoves::apply_assignment`]) confirms what the shard owns.
//!
//! Drain and down flags belong to the node, not to its owner: [`ShardMoves::handle_acquire`]
//! and [`ShardMoves::handle_reclaim`] keep them, and [`Effect::BringUp`] says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use shardsched_proto::msg::coord_shard::{
    Acquire, CancelJobs, FreeAt, Incoming, IncomingNode, Reclaim, Release, ReleaseState, Response,
    StaleNode, Withdraw,
};
use shardsched_proto::msg::shard_coord::Released;
use shardsched_proto::msg::{Generation, JobId, MoveId, NodeGen};

/// Answers "which jobs hold resources on this node, and when is each expected to end
/// (ms since the Unix epoch)". Implemented for closures.
pub trait NodeJobs {
    /// The jobs holding `node`.
    fn jobs_on(&self, node: &str) -> Vec<(JobId, u64)>;
}

impl<F: Fn(&str) -> Vec<(JobId, u64)>> NodeJobs for F {
    fn jobs_on(&self, node: &str) -> Vec<(JobId, u64)> {
        self(node)
    }
}

/// Whose a node is, from this shard's point of view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Holding {
    /// Not this shard's (never was, released, or withdrawn).
    NotOwned,
    /// This shard's; up once the coordinator confirmed it.
    Owned,
    /// Moving out: no new work; released when its last job ends.
    Outgoing {
        /// The move.
        move_id: MoveId,
    },
    /// Moving in: reservable from the expected free time, not allocatable.
    Incoming {
        /// The move.
        move_id: MoveId,
        /// When the donor expects it free (`None`: unknown, do not reserve).
        expected_free_ms: Option<u64>,
    },
}

/// One node's entry: what is journaled about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    /// The newest generation seen for it.
    pub generation: Generation,
    /// Whose it is.
    pub holding: Holding,
    /// Drained by an admin (travels with the node).
    pub drained: bool,
    /// Failed (travels with the node).
    pub down: bool,
}

impl Default for NodeEntry {
    fn default() -> Self {
        NodeEntry {
            generation: Generation(0),
            holding: Holding::NotOwned,
            drained: false,
            down: false,
        }
    }
}

/// What the core must do after an input, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Journal this entry before answering.
    Persist(String, NodeEntry),
    /// Stop allocating on the node now (it is outgoing); replan reservations there.
    StopAllocating(String),
    /// The node is this shard's: allocatable unless `drained` or `down`.
    BringUp {
        /// The node.
        node: String,
        /// Keep it out of scheduling: drained.
        drained: bool,
        /// Keep it out of scheduling: down.
        down: bool,
    },
    /// The node is not this shard's: not allocatable, not reservable.
    TakeDown(String),
    /// The node is coming: reservable from this time (`None`: do not reserve yet).
    Reservable {
        /// The node.
        node: String,
        /// From when.
        from_ms: Option<u64>,
    },
    /// Cancel these jobs (a move's deadline passed): the node is released when they end.
    CancelJobs {
        /// The node.
        node: String,
        /// The jobs holding it.
        jobs: Vec<JobId>,
    },
}

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct ShardMoves {
    nodes: BTreeMap<String, NodeEntry>,
    /// The coordinator confirmed ownership since the last (re)start.
    confirmed: bool,
}

impl ShardMoves {
    /// A fresh shard: owns nothing until the coordinator's assignment.
    pub fn new() -> ShardMoves {
        ShardMoves::default()
    }

    /// A restarted shard, from its journaled entries: nothing is up until
    /// [`ShardMoves::apply_assignment`].
    pub fn restore(entries: impl IntoIterator<Item = (String, NodeEntry)>) -> ShardMoves {
        ShardMoves {
            nodes: entries.into_iter().collect(),
            confirmed: false,
        }
    }

    /// A node's entry (a default `NotOwned` entry at generation 0 when never heard of).
    pub fn entry(&self, node: &str) -> NodeEntry {
        self.nodes.get(node).cloned().unwrap_or_default()
    }

    /// Every entry, for the journal and `resource list`.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &NodeEntry)> {
        self.nodes.iter().map(|(n, e)| (n.as_str(), e))
    }

    /// Whether the node is up here: owned and confirmed (drain and down flags aside).
    pub fn is_up(&self, node: &str) -> bool {
        self.confirmed
            && self
                .nodes
                .get(node)
                .is_some_and(|e| e.holding == Holding::Owned)
    }

    /// Whether new work may start on the node: up, not drained, not down.
    pub fn is_schedulable(&self, node: &str) -> bool {
        self.is_up(node) && self.nodes.get(node).is_some_and(|e| !e.drained && !e.down)
    }

    /// What a (re)registered shard was told it owns (`owned`) and receives (`incoming`).
    /// Listed nodes are taken at their generation unless a newer one was seen; owned nodes
    /// not listed go down (the coordinator moved them meanwhile: its `Release` follows);
    /// incoming nodes not listed are forgotten; outgoing nodes stay outgoing.
    pub fn apply_assignment(
        &mut self,
        owned: &[NodeGen],
        incoming: &[(MoveId, IncomingNode)],
    ) -> Vec<Effect> {
        self.confirmed = true;
        let mut effects = Vec::new();
        let owned_names: BTreeMap<&str, Generation> = owned
            .iter()
            .map(|n| (n.node.as_str(), n.generation))
            .collect();
        let incoming_names: BTreeMap<&str, (MoveId, &IncomingNode)> = incoming
            .iter()
            .map(|(id, n)| (n.node.node.as_str(), (*id, n)))
            .collect();
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in names {
            let listed = owned_names.contains_key(name.as_str())
                || incoming_names.contains_key(name.as_str());
            let Some(entry) = self.nodes.get_mut(&name) else {
                continue;
            };
            if listed || matches!(entry.holding, Holding::NotOwned | Holding::Outgoing { .. }) {
                continue;
            }
            entry.holding = Holding::NotOwned;
            effects.push(Effect::Persist(name.clone(), entry.clone()));
            effects.push(Effect::TakeDown(name));
        }
        for ng in owned {
            let entry = self.nodes.entry(ng.node.clone()).or_default();
            if ng.generation < entry.generation {
                continue;
            }
            if ng.generation > entry.generation || entry.holding != Holding::Owned {
                entry.generation = ng.generation;
                entry.holding = Holding::Owned;
                effects.push(Effect::Persist(ng.node.clone(), entry.clone()));
            }
            effects.push(bring_up(&ng.node, entry));
        }
        for (move_id, inc) in incoming {
            let (_, eff) = self.incoming_one(*move_id, inc);
            effects.extend(eff);
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
            let entry = self.nodes.entry(ng.node.clone()).or_default();
            if let Some(s) = refuse_older(ng, entry) {
                stale.push(s);
                continue;
            }
            let holding = jobs.jobs_on(&ng.node);
            let before = entry.clone();
            entry.generation = ng.generation;
            let free = match holding.iter().map(|(_, end)| *end).max() {
                None => {
                    entry.holding = Holding::NotOwned;
                    FreeAt::Now
                }
                Some(end) => {
                    entry.holding = Holding::Outgoing {
                        move_id: release.move_id,
                    };
                    FreeAt::Expected(end)
                }
            };
            if *entry != before {
                effects.push(Effect::Persist(ng.node.clone(), entry.clone()));
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
            let Some(entry) = self.nodes.get_mut(name) else {
                continue;
            };
            let Holding::Outgoing { move_id } = entry.holding else {
                continue;
            };
            if !jobs.jobs_on(name).is_empty() {
                continue;
            }
            entry.holding = Holding::NotOwned;
            effects.push(Effect::Persist(name.clone(), entry.clone()));
            effects.push(Effect::TakeDown(name.clone()));
            by_move.entry(move_id).or_default().push(NodeGen {
                node: name.clone(),
                generation: entry.generation,
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
        self.take_owned(&acquire.nodes)
    }

    /// The donor's side of a cancelled move: the nodes are this shard's again. Their jobs
    /// were never touched; the node just takes new work again.
    pub fn handle_reclaim(&mut self, reclaim: &Reclaim) -> (Response, Vec<Effect>) {
        self.take_owned(&reclaim.nodes)
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

    /// Drains or undrains a node (an admin's request); the flag travels with the node.
    pub fn set_drained(&mut self, node: &str, drained: bool) -> Vec<Effect> {
        self.set_flag(node, |e| &mut e.drained, drained)
    }

    /// Marks a node down or up again; the flag travels with the node.
    pub fn set_down(&mut self, node: &str, down: bool) -> Vec<Effect> {
        self.set_flag(node, |e| &mut e.down, down)
    }

    fn set_flag(
        &mut self,
        node: &str,
        flag: impl Fn(&mut NodeEntry) -> &mut bool,
        value: bool,
    ) -> Vec<Effect> {
        let entry = self.nodes.entry(node.to_owned()).or_default();
        if *flag(entry) == value {
            return Vec::new();
        }
        *flag(entry) = value;
        let mut effects = vec![Effect::Persist(node.to_owned(), entry.clone())];
        if self.confirmed && entry.holding == Holding::Owned {
            effects.push(bring_up(node, entry));
        }
        effects
    }

    fn take_owned(&mut self, nodes: &[NodeGen]) -> (Response, Vec<Effect>) {
        self.set_holding(nodes, Holding::Owned, bring_up)
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
            let entry = self.nodes.entry(ng.node.clone()).or_default();
            if let Some(s) = refuse_older(ng, entry) {
                stale.push(s);
                continue;
            }
            let before = entry.clone();
            entry.generation = ng.generation;
            entry.holding = holding.clone();
            if *entry != before {
                effects.push(Effect::Persist(ng.node.clone(), entry.clone()));
                effects.push(then(&ng.node, entry));
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
        let entry = self.nodes.entry(ng.node.clone()).or_default();
        if let Some(s) = refuse_older(ng, entry) {
            return (Some(s), Vec::new());
        }
        // The same generation already owned: the Acquire overtook this Incoming.
        if ng.generation == entry.generation && entry.holding == Holding::Owned {
            return (None, Vec::new());
        }
        let before = entry.clone();
        entry.generation = ng.generation;
        entry.holding = Holding::Incoming {
            move_id,
            expected_free_ms: inc.expected_free_ms,
        };
        if *entry == before {
            return (None, Vec::new());
        }
        let effects = vec![
            Effect::Persist(ng.node.clone(), entry.clone()),
            Effect::Reservable {
                node: ng.node.clone(),
                from_ms: inc.expected_free_ms,
            },
        ];
        (None, effects)
    }
}

fn bring_up(node: &str, entry: &NodeEntry) -> Effect {
    Effect::BringUp {
        node: node.to_owned(),
        drained: entry.drained,
        down: entry.down,
    }
}

/// A command about a generation older than the newest seen is refused.
fn refuse_older(ng: &NodeGen, entry: &NodeEntry) -> Option<StaleNode> {
    (ng.generation < entry.generation).then(|| StaleNode {
        node: ng.clone(),
        seen: entry.generation,
    })
}

#[cfg(test)]
mod tests;
