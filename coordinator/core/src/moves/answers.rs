//! The machine's inputs from shards: answers to commands, `Released` reports and
//! registrations. Every answer is checked against the move it names (the right shard, the
//! node's current generation, the right step); anything else is ignored, which is what makes
//! duplicates, late answers and answers from a previous connection harmless.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use shardsched_wire::msg::coord_shard::{FreeAt, ReleaseState, Request, StaleNode};
use shardsched_wire::msg::shard_coord::{HeldNode, Released};
use shardsched_wire::msg::{MoveId, NodeGen};

use super::MoveMachine;
use super::emit::{self, Want};
use super::state::{Move, MoveNode, Phase};
use super::types::{MoveRecord, ShardAssignment};

impl MoveMachine {
    /// The donor's answer to a `Release`: nodes free now are released (journaled, then
    /// `Acquire` to the recipient); for the others the expected free time is passed on to
    /// the recipient (`Incoming`). Answers about another generation, or from a shard that
    /// is not the move's donor, are ignored.
    pub fn handle_releasing(
        &mut self,
        now: u64,
        queue: &str,
        nodes: &[ReleaseState],
        stale: &[StaleNode],
    ) {
        self.state.now_ms = now;
        self.note_stale(queue, stale);
        let mut free_now: BTreeMap<MoveId, Vec<NodeGen>> = BTreeMap::new();
        let mut updated: BTreeSet<MoveId> = BTreeSet::new();
        for answer in nodes {
            let Some((move_id, node)) = self.outgoing_node(queue, &answer.node, Side::Donor) else {
                continue;
            };
            match answer.free {
                FreeAt::Now => {
                    free_now
                        .entry(move_id)
                        .or_default()
                        .push(answer.node.clone());
                }
                FreeAt::Expected(t) => {
                    if let Phase::Outgoing {
                        answered,
                        expected_free_ms,
                        jobs,
                        ..
                    } = &mut node.phase
                    {
                        *answered = true;
                        *expected_free_ms = Some(t);
                        jobs.clone_from(&answer.jobs);
                    }
                    updated.insert(move_id);
                }
            }
        }
        for (move_id, nodes) in free_now {
            self.release(move_id, nodes);
            updated.insert(move_id);
        }
        for move_id in updated {
            self.send_only(move_id, now, |r| {
                matches!(
                    r,
                    Request::Incoming(_) | Request::Acquire(_) | Request::CancelJobs(_)
                )
            });
        }
    }

    /// A donor's report that nodes became free after its `Releasing` answer.
    pub fn handle_released(&mut self, now: u64, queue: &str, released: &Released) {
        self.state.now_ms = now;
        let nodes: Vec<NodeGen> = released
            .nodes
            .iter()
            .filter(|ng| {
                self.outgoing_node(queue, ng, Side::Donor)
                    .is_some_and(|(id, _)| id == released.move_id)
            })
            .cloned()
            .collect();
        if nodes.is_empty() {
            return;
        }
        self.release(released.move_id, nodes);
        self.send_only(released.move_id, now, |r| matches!(r, Request::Acquire(_)));
    }

    /// A shard acknowledged a command (`Incoming`, `Acquire`, `Reclaim`, `Withdraw`,
    /// `CancelJobs`); `stale` lists the nodes it refused as older than one it has seen.
    pub fn handle_ack(&mut self, now: u64, queue: &str, request: &Request, stale: &[StaleNode]) {
        self.state.now_ms = now;
        self.note_stale(queue, stale);
        let refused: HashSet<&NodeGen> = stale.iter().map(|s| &s.node).collect();
        match request {
            Request::Incoming(incoming) => {
                for inc in incoming.nodes.iter().filter(|n| !refused.contains(&n.node)) {
                    if let Some((_, node)) = self.outgoing_node(queue, &inc.node, Side::Recipient)
                        && let Phase::Outgoing { incoming_acked, .. } = &mut node.phase
                    {
                        *incoming_acked = Some(inc.expected_free_ms);
                    }
                }
            }
            Request::CancelJobs(cancel) => {
                for ng in cancel.nodes.iter().filter(|n| !refused.contains(n)) {
                    if let Some((_, node)) = self.outgoing_node(queue, ng, Side::Donor)
                        && let Phase::Outgoing { cancel_acked, .. } = &mut node.phase
                    {
                        *cancel_acked = true;
                    }
                }
            }
            Request::Acquire(acquire) => {
                let nodes = self.in_phase(
                    acquire.move_id,
                    queue,
                    Side::Recipient,
                    &acquire.nodes,
                    &refused,
                    |p| matches!(p, Phase::Released).then_some(true),
                );
                if !nodes.is_empty() && self.outbox.has_room() {
                    self.commit(MoveRecord::Acquired {
                        move_id: acquire.move_id,
                        nodes,
                    });
                }
            }
            Request::Reclaim(r) => self.returned(r.move_id, queue, Side::Donor, &r.nodes, &refused),
            Request::Withdraw(w) => {
                self.returned(w.move_id, queue, Side::Recipient, &w.nodes, &refused);
            }
            Request::Release(_)
            | Request::SetQueueState { .. }
            | Request::SetNodeState { .. }
            | Request::SetNodeDrain { .. }
            | Request::DryRunRelease { .. }
            | Request::Reconfigure(_)
            | Request::DisableIfIdle
            | Request::Jobs(_)
            | Request::JobFacts { .. }
            | Request::Facts(_)
            | Request::History(_)
            | Request::SetLimits(_)
            | Request::Allowances(_)
            | Request::FairShare(_) => {}
        }
    }

    /// A queue's shard (re)registered: its [`ShardAssignment`] is queued (see
    /// [`MoveMachine::poll_assignment`]), then everything unacknowledged for it goes out
    /// again, including a fresh `Release` for every node still outgoing from it and, past
    /// a move's deadline, a fresh `CancelJobs`: a donor keeps the kills a cancel asked for
    /// in memory only, until the jobs' processes are gone, so one that restarted meanwhile
    /// found the jobs running again, and without the cancel they would run on past the
    /// deadline, holding the nodes. `held` is what the shard remembers; a generation newer
    /// than the coordinator's is recorded as an anomaly.
    pub fn shard_registered(&mut self, now: u64, queue: &str, held: &[HeldNode]) {
        self.state.now_ms = now;
        self.outbox.assign(ShardAssignment {
            queue: queue.to_owned(),
            owned: self.owned_for(queue),
            incoming: self.incoming_for(queue),
        });
        for h in held {
            if let Some(intent) = self.state.nodes.get(&h.node.node)
                && h.node.generation > intent.generation
            {
                self.anomaly(format!(
                    "shard {queue} holds {} at generation {}, newer than the coordinator's {}",
                    h.node.node, h.node.generation.0, intent.generation.0
                ));
            }
        }
        let ids: Vec<MoveId> = self
            .state
            .active
            .values()
            .filter(|m| m.from == queue || m.to == queue)
            .map(|m| m.id)
            .collect();
        for id in ids {
            if let Some(mv) = self.state.active.get_mut(&id) {
                if mv.from == queue {
                    for node in mv.nodes.values_mut() {
                        if let Phase::Outgoing { cancel_acked, .. } = &mut node.phase {
                            *cancel_acked = false;
                        }
                    }
                }
                let want = Want {
                    force_release: true,
                    only_queue: Some(queue),
                };
                for t in emit::commands(mv, now, want) {
                    self.outbox.send(t);
                }
            }
        }
    }

    /// Marks nodes of a cancelled move acknowledged by one side; journals those now
    /// acknowledged by both.
    fn returned(
        &mut self,
        move_id: MoveId,
        queue: &str,
        side: Side,
        nodes: &[NodeGen],
        refused: &HashSet<&NodeGen>,
    ) {
        let done = self.in_phase(move_id, queue, side, nodes, refused, |p| match p {
            Phase::Returning {
                reclaim_acked,
                withdraw_acked,
            } => {
                match side {
                    Side::Donor => *reclaim_acked = true,
                    Side::Recipient => *withdraw_acked = true,
                }
                Some(*reclaim_acked && *withdraw_acked)
            }
            _ => None,
        });
        if !done.is_empty() && self.outbox.has_room() {
            self.commit(MoveRecord::Returned {
                move_id,
                nodes: done,
            });
        }
    }

    /// For each of `nodes` in move `move_id` whose side is `queue` and whose generation
    /// matches, calls `visit` on its phase; returns the nodes for which it said `Some(true)`.
    fn in_phase(
        &mut self,
        move_id: MoveId,
        queue: &str,
        side: Side,
        nodes: &[NodeGen],
        refused: &HashSet<&NodeGen>,
        mut visit: impl FnMut(&mut Phase) -> Option<bool>,
    ) -> Vec<NodeGen> {
        let Some(mv) = self.state.active.get_mut(&move_id) else {
            return Vec::new();
        };
        if side.queue(mv) != queue {
            return Vec::new();
        }
        nodes
            .iter()
            .filter(|ng| !refused.contains(ng))
            .filter(|ng| {
                mv.nodes.get_mut(&ng.node).is_some_and(|n| {
                    n.generation == ng.generation && visit(&mut n.phase) == Some(true)
                })
            })
            .cloned()
            .collect()
    }

    /// The move node for `ng` if it is outgoing in its node's current move, at `ng`'s
    /// generation, and `queue` is that move's `side`.
    fn outgoing_node(
        &mut self,
        queue: &str,
        ng: &NodeGen,
        side: Side,
    ) -> Option<(MoveId, &mut MoveNode)> {
        let id = self.state.nodes.moving(&ng.node)?;
        let mv = self.state.active.get_mut(&id)?;
        if side.queue(mv) != queue {
            return None;
        }
        let node = mv.nodes.get_mut(&ng.node)?;
        (node.generation == ng.generation && matches!(node.phase, Phase::Outgoing { .. }))
            .then_some((id, node))
    }

    fn note_stale(&mut self, queue: &str, stale: &[StaleNode]) {
        for s in stale {
            if let Some(intent) = self.state.nodes.get(&s.node.node)
                && s.seen > intent.generation
            {
                self.anomaly(format!(
                    "shard {queue} has seen {} at generation {}, newer than the coordinator's {}",
                    s.node.node, s.seen.0, intent.generation.0
                ));
            }
        }
    }
}

/// Which end of a move a shard is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Donor,
    Recipient,
}

impl Side {
    fn queue(self, mv: &Move) -> &str {
        match self {
            Side::Donor => &mv.from,
            Side::Recipient => &mv.to,
        }
    }
}
