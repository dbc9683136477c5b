//! The machine's reads: intent, moves for `queue moves`, the compacted journal.

use std::collections::BTreeSet;

use shardsched_wire::msg::coord_shard::IncomingNode;
use shardsched_wire::msg::{Generation, MoveId, NodeGen};

use super::MoveMachine;
use super::nodes::{NodeIntent, NodeTable};
use super::state::{Move, Phase};
use super::types::{MoveError, MoveRecord, MoveView};
use super::types::{MovingNode, MovingStep, StepTook};

impl MoveMachine {
    /// The node table: every node's owner, generation, flags and move.
    pub fn nodes(&self) -> &NodeTable {
        &self.state.nodes
    }

    /// A node's owner (intent).
    pub fn owner_of(&self, node: &str) -> Option<&str> {
        self.state.nodes.owner(node)
    }

    /// A node's generation (intent).
    pub fn generation_of(&self, node: &str) -> Option<Generation> {
        self.state.nodes.generation(node)
    }

    /// The unfinished move a node is in.
    pub fn moving(&self, node: &str) -> Option<MoveId> {
        self.state.nodes.moving(node)
    }

    /// Where a node of an unfinished move is, without copying the move (for per-node
    /// views over many nodes).
    pub fn moving_node(&self, node: &str) -> Option<MovingNode<'_>> {
        let id = self.state.nodes.moving(node)?;
        let mv = self.state.active.get(&id)?;
        let step = match mv.nodes.get(node)?.phase {
            Phase::Outgoing { .. } | Phase::Returning { .. } => MovingStep::InDonor,
            Phase::Released => MovingStep::Released,
            Phase::Acquired | Phase::Returned => return None,
        };
        Some(MovingNode {
            move_id: id,
            from: &mv.from,
            to: &mv.to,
            step,
        })
    }

    /// The nodes `queue`'s shard may have up: those it owns that are in no move, released
    /// to it, or returned to it. (A node still outgoing to `queue` is in
    /// [`MoveMachine::incoming_for`] instead.) This is the intent *now*, possibly not yet
    /// durable: a shard must be told through [`MoveMachine::poll_assignment`].
    pub fn owned_for(&self, queue: &str) -> Vec<NodeGen> {
        self.state
            .nodes
            .iter()
            .filter(|(name, intent, moving)| {
                intent.owner.as_deref() == Some(queue)
                    && !moving.is_some_and(|id| {
                        self.state.active.get(&id).is_some_and(|m| {
                            m.to == queue
                                && m.nodes
                                    .get(*name)
                                    .is_some_and(|mn| matches!(mn.phase, Phase::Outgoing { .. }))
                        })
                    })
            })
            .map(|(name, intent, _)| NodeGen {
                node: name.to_owned(),
                generation: intent.generation,
            })
            .collect()
    }

    /// Nodes on their way to `queue` and not yet released (intent now; see
    /// [`MoveMachine::owned_for`]).
    pub fn incoming_for(&self, queue: &str) -> Vec<(MoveId, IncomingNode)> {
        let mut out = Vec::new();
        for mv in self.state.active.values().filter(|m| m.to == queue) {
            for (name, n) in &mv.nodes {
                if let Phase::Outgoing {
                    expected_free_ms, ..
                } = n.phase
                {
                    let node = NodeGen {
                        node: name.clone(),
                        generation: n.generation,
                    };
                    out.push((
                        mv.id,
                        IncomingNode {
                            node,
                            expected_free_ms,
                        },
                    ));
                }
            }
        }
        out
    }

    /// Every unfinished move and the finished ones still remembered, by move id.
    pub fn moves(&self) -> Vec<MoveView> {
        let mut views: Vec<MoveView> = self
            .state
            .active
            .values()
            .chain(self.state.finished.iter())
            .map(Move::view)
            .collect();
        views.sort_by_key(|v| v.move_id);
        views
    }

    /// One move, unfinished or remembered.
    pub fn move_view(&self, move_id: MoveId) -> Option<MoveView> {
        self.state
            .active
            .get(&move_id)
            .or_else(|| self.state.finished.iter().find(|m| m.id == move_id))
            .map(Move::view)
    }

    /// How long each node's step recorded by `record` took: a release from the move's
    /// request, an acquisition from the node's release; nothing for other records. Called
    /// as the record is taken for the journal; reads only the record's nodes.
    pub fn steps_took(&self, record: &MoveRecord) -> Vec<StepTook> {
        let (step, move_id, nodes) = match record {
            MoveRecord::Released { move_id, nodes } => ("release", *move_id, nodes),
            MoveRecord::Acquired { move_id, nodes } => ("acquire", *move_id, nodes),
            _ => return Vec::new(),
        };
        // The last acquisition finishes the move: it is remembered then, not active.
        let Some(mv) = self
            .state
            .active
            .get(&move_id)
            .or_else(|| self.state.finished.iter().rev().find(|m| m.id == move_id))
        else {
            return Vec::new();
        };
        nodes
            .iter()
            .filter_map(|ng| {
                let n = mv.nodes.get(&ng.node)?;
                let (from, to) = if step == "release" {
                    (Some(mv.started_ms), n.released_ms)
                } else {
                    (n.released_ms, n.acquired_ms)
                };
                Some(StepTook {
                    step,
                    took_ms: to?.saturating_sub(from?),
                })
            })
            .collect()
    }

    /// The journal, compacted: the records that rebuild every unfinished move over the
    /// current intent (see [`MoveMachine::intent`]). Finished moves need no record: their
    /// effect is in the intent. `recover(intent(), defs, next_move_id(), active_records())`
    /// rebuilds this machine's intent and unfinished moves.
    pub fn active_records(&self) -> Vec<MoveRecord> {
        self.state.active.values().flat_map(Move::records).collect()
    }

    /// One unfinished move's records, compacted (as in [`MoveMachine::active_records`]);
    /// `None` once it finished (its records can go).
    pub fn records_of(&self, move_id: MoveId) -> Option<Vec<MoveRecord>> {
        self.state.active.get(&move_id).map(Move::records)
    }

    /// Every node's intent, in the node table's order (what [`MoveMachine::new`] takes).
    pub fn intent(&self) -> Vec<(String, NodeIntent)> {
        self.state.nodes.intents()
    }

    /// The id the next move will get.
    pub fn next_move_id(&self) -> u64 {
        self.state.next_move_id
    }

    /// Whether [`MoveMachine::start_move`] would accept this move now (nothing changes).
    pub fn check_start(&self, nodes: &[String], from: &str, to: &str) -> Result<(), MoveError> {
        let nodes: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        self.check_move(&nodes, from, to)
    }

    /// Whether any move is unfinished.
    pub fn is_idle(&self) -> bool {
        self.state.active.is_empty()
    }

    /// Broken fences seen (a shard claiming a generation newer than the coordinator's).
    pub fn anomalies(&self) -> impl Iterator<Item = &str> {
        self.anomalies.iter().map(String::as_str)
    }
}
