//! The machine's state and the one place it changes: [`State::apply`], which both the live
//! inputs and the journal replay go through, so a recovered machine is the machine that
//! wrote the journal.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use shardsched_resource::hostlist::split_host;
use shardsched_wire::msg::{Generation, JobId, MoveId, NodeGen};

use super::limits::MOVES_FINISHED_RETAINED;
use super::nodes::NodeTable;
use super::types::{MoveNodeState, MoveNodeView, MoveRecord, MoveStatus, MoveView};

/// Selects nodes by phase (for [`Move::records`]).
type PhaseFilter = fn(&Phase) -> bool;
/// Builds one kind of record (for [`Move::records`]).
type MakeRecord = fn(MoveId, Vec<NodeGen>) -> MoveRecord;

/// A node's step in one move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The donor still has it. `answered`: the donor said when it expects it free.
    Outgoing {
        answered: bool,
        expected_free_ms: Option<u64>,
        jobs: Vec<JobId>,
        /// The expected free time the recipient acknowledged (`Some(x)`: acked with x).
        incoming_acked: Option<Option<u64>>,
        /// The donor acknowledged the deadline's job cancellation.
        cancel_acked: bool,
    },
    /// Release journaled; Acquire being sent.
    Released,
    /// Up in the recipient (journaled).
    Acquired,
    /// Cancelled before release; Reclaim (donor) and Withdraw (recipient) being sent.
    Returning {
        reclaim_acked: bool,
        withdraw_acked: bool,
    },
    /// Back in the donor (journaled).
    Returned,
}

impl Phase {
    fn outgoing() -> Phase {
        Phase::Outgoing {
            answered: false,
            expected_free_ms: None,
            jobs: Vec::new(),
            incoming_acked: None,
            cancel_acked: false,
        }
    }

    fn is_done(&self) -> bool {
        matches!(self, Phase::Acquired | Phase::Returned)
    }
}

/// One node of a move: the generation its current step carries, and the step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MoveNode {
    pub(crate) generation: Generation,
    pub(crate) phase: Phase,
    /// Not journaled: when its release was recorded (coordinator clock), for `queue moves`.
    pub(crate) released_ms: Option<u64>,
    /// Not journaled: when its acquisition was recorded.
    pub(crate) acquired_ms: Option<u64>,
}

/// One move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    pub(crate) id: MoveId,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) started_ms: u64,
    pub(crate) deadline_ms: Option<u64>,
    pub(crate) cancelled: bool,
    pub(crate) nodes: BTreeMap<String, MoveNode>,
    /// Not journaled: when unacknowledged commands are next sent again.
    pub(crate) next_resend_ms: u64,
    /// Not journaled: the deadline's first `CancelJobs` went out.
    pub(crate) deadline_fired: bool,
}

impl Move {
    pub(crate) fn is_done(&self) -> bool {
        self.nodes.values().all(|n| n.phase.is_done())
    }

    /// The records that rebuild this move from its nodes' state before it started:
    /// started, then released, acquired, cancelled, returned, each for the nodes that took
    /// that step. A returned node's start generation is one below its current one.
    pub(crate) fn records(&self) -> Vec<MoveRecord> {
        let id = self.id;
        let select = |keep: PhaseFilter, start: bool| -> Vec<NodeGen> {
            self.nodes
                .iter()
                .filter(|(_, n)| keep(&n.phase))
                .map(|(name, n)| {
                    let cancelled = matches!(n.phase, Phase::Returning { .. } | Phase::Returned);
                    let generation = if start && cancelled {
                        Generation(n.generation.0.saturating_sub(1))
                    } else {
                        n.generation
                    };
                    NodeGen {
                        node: name.clone(),
                        generation,
                    }
                })
                .collect()
        };
        let mut out = vec![MoveRecord::Started {
            move_id: id,
            from: self.from.clone(),
            to: self.to.clone(),
            nodes: select(|_| true, true),
            started_ms: self.started_ms,
            deadline_ms: self.deadline_ms,
        }];
        let steps: [(PhaseFilter, MakeRecord); 4] = [
            (
                |p| matches!(p, Phase::Released | Phase::Acquired),
                |move_id, nodes| MoveRecord::Released { move_id, nodes },
            ),
            (
                |p| matches!(p, Phase::Acquired),
                |move_id, nodes| MoveRecord::Acquired { move_id, nodes },
            ),
            (
                |p| matches!(p, Phase::Returning { .. } | Phase::Returned),
                |move_id, nodes| MoveRecord::Cancelled { move_id, nodes },
            ),
            (
                |p| matches!(p, Phase::Returned),
                |move_id, nodes| MoveRecord::Returned { move_id, nodes },
            ),
        ];
        for (keep, make) in steps {
            let nodes = select(keep, false);
            if !nodes.is_empty() {
                out.push(make(id, nodes));
            }
        }
        out
    }

    /// When a node the donor expects free at `expected` will be free: then, or at the
    /// move's deadline if that is earlier (the donor cancels the jobs then). What the
    /// recipient plans on and `queue moves` shows.
    pub(crate) fn free_by(&self, expected: Option<u64>) -> Option<u64> {
        match (expected, self.deadline_ms) {
            (Some(t), Some(d)) if !self.cancelled => Some(t.min(d)),
            (t, _) => t,
        }
    }

    pub(crate) fn view(&self) -> MoveView {
        let status = if !self.is_done() {
            MoveStatus::Active
        } else if self.cancelled {
            MoveStatus::Cancelled
        } else {
            MoveStatus::Completed
        };
        // node2 before node10: the order people read (the map's is the text order). Each
        // name is split once, not at every comparison: a remembered move of 8,192 nodes is
        // viewed at every `queue moves`.
        let mut order: Vec<(&String, &MoveNode)> = self.nodes.iter().collect();
        order.sort_by_cached_key(|&(name, _)| (split_host(name.as_str()), name));
        let nodes: Vec<MoveNodeView> = order
            .into_iter()
            .map(|(name, n)| MoveNodeView {
                node: name.clone(),
                generation: n.generation,
                released_ms: n.released_ms,
                acquired_ms: n.acquired_ms,
                state: match &n.phase {
                    Phase::Outgoing {
                        expected_free_ms,
                        jobs,
                        ..
                    } => MoveNodeState::Outgoing {
                        expected_free_ms: self.free_by(*expected_free_ms),
                        jobs: jobs.clone(),
                    },
                    Phase::Released => MoveNodeState::Released,
                    Phase::Acquired => MoveNodeState::Up,
                    Phase::Returning { .. } => MoveNodeState::Returning,
                    Phase::Returned => MoveNodeState::Returned,
                },
            })
            .collect();
        MoveView {
            move_id: self.id,
            from: self.from.clone(),
            to: self.to.clone(),
            started_ms: self.started_ms,
            deadline_ms: self.deadline_ms,
            status,
            nodes,
        }
    }
}

/// Everything the machine knows, minus its output queues.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The node table: owners, generations, flags, and the move each node is in.
    pub(crate) nodes: NodeTable,
    pub(crate) definitions: BTreeMap<String, BTreeSet<String>>,
    pub(crate) active: BTreeMap<MoveId, Move>,
    pub(crate) finished: VecDeque<Move>,
    pub(crate) next_move_id: u64,
    /// The time of the input being handled (0 while replaying a journal: unknown), for the
    /// nodes' step times.
    pub(crate) now_ms: u64,
}

impl State {
    /// Applies one journal record. An error says why the record does not fit; the state is
    /// then unchanged for the nodes after the offending one (callers treat it as fatal in
    /// replay, and it cannot happen for records the machine built itself).
    pub(crate) fn apply(&mut self, record: &MoveRecord) -> Result<(), String> {
        let id = record.move_id();
        match record {
            MoveRecord::Started {
                from,
                to,
                nodes,
                started_ms,
                deadline_ms,
                ..
            } => {
                if self.active.contains_key(&id) || self.finished.iter().any(|m| m.id == id) {
                    return Err("a move with this id already exists".into());
                }
                let mut move_nodes = BTreeMap::new();
                for ng in nodes {
                    let current = self
                        .nodes
                        .generation(&ng.node)
                        .ok_or_else(|| format!("no node {} in the cluster", ng.node))?;
                    // Live, a start always carries a newer generation. Replayed over a
                    // compacted base, a node that already finished its part of this move
                    // may have moved on since: its newer intent stays.
                    if ng.generation >= current {
                        debug_assert!(
                            self.nodes.moving(&ng.node).is_none(),
                            "node {} would be in two moves",
                            ng.node
                        );
                        self.nodes
                            .set_owner(&ng.node, Some(to.clone()), ng.generation, Some(id));
                    }
                    move_nodes.insert(
                        ng.node.clone(),
                        MoveNode {
                            generation: ng.generation,
                            phase: Phase::outgoing(),
                            released_ms: None,
                            acquired_ms: None,
                        },
                    );
                }
                self.next_move_id = self.next_move_id.max(id.0.saturating_add(1));
                self.active.insert(
                    id,
                    Move {
                        id,
                        from: from.clone(),
                        to: to.clone(),
                        started_ms: *started_ms,
                        deadline_ms: *deadline_ms,
                        cancelled: false,
                        nodes: move_nodes,
                        next_resend_ms: 0,
                        deadline_fired: false,
                    },
                );
            }
            MoveRecord::Released { nodes, .. } => {
                self.step(id, nodes, |phase| {
                    matches!(phase, Phase::Outgoing { .. }).then_some(Phase::Released)
                })?;
                self.stamp(id, nodes, |n, t| n.released_ms = t);
            }
            MoveRecord::Acquired { nodes, .. } => {
                self.step(id, nodes, |phase| {
                    matches!(phase, Phase::Released).then_some(Phase::Acquired)
                })?;
                self.stamp(id, nodes, |n, t| n.acquired_ms = t);
                self.clear_moving(id, nodes);
            }
            MoveRecord::Cancelled { nodes, .. } => {
                let mv = self.active.get_mut(&id).ok_or("no such move in progress")?;
                mv.cancelled = true;
                let from = mv.from.clone();
                for ng in nodes {
                    let node = mv
                        .nodes
                        .get_mut(&ng.node)
                        .ok_or_else(|| format!("node {} is not in the move", ng.node))?;
                    if !matches!(node.phase, Phase::Outgoing { .. }) {
                        return Err(format!("node {} was already released", ng.node));
                    }
                    node.generation = ng.generation;
                    node.phase = Phase::Returning {
                        reclaim_acked: false,
                        withdraw_acked: false,
                    };
                    // A returning node's start generation is one below its current one, so
                    // a replayed start left it alone: this record puts it back in the move.
                    if self
                        .nodes
                        .generation(&ng.node)
                        .is_some_and(|current| ng.generation >= current)
                    {
                        self.nodes
                            .set_owner(&ng.node, Some(from.clone()), ng.generation, Some(id));
                    }
                }
            }
            MoveRecord::Returned { nodes, .. } => {
                self.step(id, nodes, |phase| {
                    matches!(phase, Phase::Returning { .. }).then_some(Phase::Returned)
                })?;
                self.clear_moving(id, nodes);
            }
        }
        self.finish_if_done(id);
        Ok(())
    }

    /// Moves each named node of move `id` (at the named generation) to the phase `next`
    /// gives for its current one.
    fn step(
        &mut self,
        id: MoveId,
        nodes: &[NodeGen],
        next: impl Fn(&Phase) -> Option<Phase>,
    ) -> Result<(), String> {
        let mv = self.active.get_mut(&id).ok_or("no such move in progress")?;
        for ng in nodes {
            let node = mv
                .nodes
                .get_mut(&ng.node)
                .ok_or_else(|| format!("node {} is not in the move", ng.node))?;
            if node.generation != ng.generation {
                return Err(format!(
                    "node {} is at generation {} in the move, the record says {}",
                    ng.node, node.generation.0, ng.generation.0
                ));
            }
            node.phase = next(&node.phase).ok_or_else(|| {
                format!(
                    "node {} cannot take this step from {:?}",
                    ng.node, node.phase
                )
            })?;
        }
        Ok(())
    }

    /// Records the input's time on the named nodes of move `id` (nothing while replaying).
    fn stamp(&mut self, id: MoveId, nodes: &[NodeGen], set: impl Fn(&mut MoveNode, Option<u64>)) {
        let at = (self.now_ms > 0).then_some(self.now_ms);
        if let Some(mv) = self.active.get_mut(&id) {
            for ng in nodes {
                if let Some(node) = mv.nodes.get_mut(&ng.node) {
                    set(node, at);
                }
            }
        }
    }

    fn clear_moving(&mut self, id: MoveId, nodes: &[NodeGen]) {
        for ng in nodes {
            self.nodes.leave_move(&ng.node, id);
        }
    }

    fn finish_if_done(&mut self, id: MoveId) {
        if self.active.get(&id).is_some_and(Move::is_done)
            && let Some(mv) = self.active.remove(&id)
        {
            if self.finished.len() >= MOVES_FINISHED_RETAINED {
                self.finished.pop_front();
            }
            self.finished.push_back(mv);
        }
    }
}
