//! What the coordinator's journal holds, record by record, and the deltas that change it.
//! Pure: no I/O. [`super::CoordJournal`] turns a [`DurableDelta`] into one journal batch.
//!
//! ```text
//! table queues  key = generator id   QueueRecord  queue name, and the admin's run-time
//!                                                 state (enabled, started, reason) if set
//! table nodes   key = node key       NodeRecord   node name, owner, generation, moved,
//!                                                 down and drained flags (with reasons)
//! table moves   key = move id        Vec<MoveRecord>  one unfinished move's records,
//!                                                 compacted; deleted when it finishes
//! meta  format                       u32 LE       JOURNAL_FORMAT
//! meta  next_move_id                 u64 LE       the id the next move gets
//! meta  queue_table                  RuntimeQueues  the queue table as changed at run time
//!                                                 (absent: the configuration file's)
//! ```
//!
//! Node keys are small integers given to node names in the order they are first written,
//! kept forever (a node name is in the record, so a key never needs to mean anything else).
//! The journal's records together are exactly a [`Durable`]: [`Durable::from_records`]
//! rebuilds it, and [`Durable::diff`] gives the writes that turn one into another.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shardsched_wire::msg::MoveId;

use crate::moves::MoveRecord;
use crate::ownership::{DURABLE_FORMAT, Durable, DurableNode, DurableQueue};
use crate::queue_table::RuntimeQueues;

/// Version of the journal's records.
pub const JOURNAL_FORMAT: u32 = 1;
/// Table of queue records.
pub const QUEUES_TABLE: &str = "queues";
/// Table of node records.
pub const NODES_TABLE: &str = "nodes";
/// Table of unfinished moves' records.
pub const MOVES_TABLE: &str = "moves";
/// Meta value: [`JOURNAL_FORMAT`].
pub const FORMAT_META: &str = "format";
/// Meta value: the next move id.
pub const NEXT_MOVE_ID_META: &str = "next_move_id";
/// Meta value: the run-time queue table (`queue add|remove|update`), until `reload`.
pub const QUEUE_TABLE_META: &str = "queue_table";

/// One queue: its name (the key is its generator id) and the admin's state, if set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRecord {
    /// Queue name.
    pub name: String,
    /// Run-time state set by an admin (`None`: as configured).
    pub state: Option<DurableQueue>,
}

/// One node's durable state, with its name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Node name.
    pub name: String,
    /// Owning queue.
    pub owner: Option<String>,
    /// Generation.
    pub generation: u64,
    /// Owner set by a move.
    pub moved: bool,
    /// Down, with the reason.
    pub down: Option<String>,
    /// Drained, with the reason.
    pub drained: Option<String>,
}

impl NodeRecord {
    /// The record of `node` named `name`.
    pub fn new(name: &str, node: &DurableNode) -> NodeRecord {
        NodeRecord {
            name: name.to_owned(),
            owner: node.owner.clone(),
            generation: node.generation,
            moved: node.moved,
            down: node.down.clone(),
            drained: node.drained.clone(),
        }
    }

    fn into_durable(self) -> (String, DurableNode) {
        (
            self.name,
            DurableNode {
                owner: self.owner,
                generation: self.generation,
                moved: self.moved,
                down: self.down,
                drained: self.drained,
            },
        )
    }
}

/// The writes that bring the journal from one [`Durable`] to another: only what changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableDelta {
    /// Queue records to write, by generator id.
    pub queues: Vec<(u16, QueueRecord)>,
    /// Node records to write.
    pub nodes: Vec<NodeRecord>,
    /// Moves: their records to write, or `None` to delete them (finished).
    pub moves: Vec<(MoveId, Option<Vec<MoveRecord>>)>,
    /// The next move id, when it changed.
    pub next_move_id: Option<u64>,
    /// The run-time queue table, when it changed (`Some(None)`: back to the file's).
    pub queue_table: Option<Option<RuntimeQueues>>,
}

impl DurableDelta {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
            && self.nodes.is_empty()
            && self.moves.is_empty()
            && self.next_move_id.is_none()
            && self.queue_table.is_none()
    }

    /// Adds `later`'s writes after this delta's (a later write of the same key wins).
    pub fn merge(&mut self, later: DurableDelta) {
        self.queues.extend(later.queues);
        self.nodes.extend(later.nodes);
        self.moves.extend(later.moves);
        if later.next_move_id.is_some() {
            self.next_move_id = later.next_move_id;
        }
        if later.queue_table.is_some() {
            self.queue_table = later.queue_table;
        }
    }
}

/// Groups a flat list of move records by move, keeping their order.
pub fn group_moves(records: &[MoveRecord]) -> BTreeMap<MoveId, Vec<MoveRecord>> {
    let mut out: BTreeMap<MoveId, Vec<MoveRecord>> = BTreeMap::new();
    for r in records {
        out.entry(r.move_id()).or_default().push(r.clone());
    }
    out
}

impl Durable {
    /// The durable state the journal's records describe.
    pub fn from_records(
        queues: Vec<(u16, QueueRecord)>,
        nodes: Vec<NodeRecord>,
        moves: Vec<(MoveId, Vec<MoveRecord>)>,
        next_move_id: u64,
        queue_table: Option<RuntimeQueues>,
    ) -> Durable {
        let mut durable = Durable {
            format: DURABLE_FORMAT,
            next_move_id,
            queue_table,
            ..Durable::default()
        };
        for (id, q) in queues {
            durable.generators.insert(q.name.clone(), id);
            if let Some(state) = q.state {
                durable.queues.insert(q.name, state);
            }
        }
        for n in nodes {
            let (name, node) = n.into_durable();
            durable.nodes.insert(name, node);
        }
        let mut moves = moves;
        moves.sort_by_key(|(id, _)| *id);
        durable.moves = moves.into_iter().flat_map(|(_, r)| r).collect();
        durable
    }

    /// The writes that turn `old` into `self`.
    pub fn diff(&self, old: &Durable) -> DurableDelta {
        let mut delta = DurableDelta::default();
        for (name, &id) in &self.generators {
            let state = self.queues.get(name).cloned();
            let same =
                old.generators.get(name) == Some(&id) && old.queues.get(name) == state.as_ref();
            if !same {
                delta.queues.push((
                    id,
                    QueueRecord {
                        name: name.clone(),
                        state,
                    },
                ));
            }
        }
        for (name, node) in &self.nodes {
            if old.nodes.get(name) != Some(node) {
                delta.nodes.push(NodeRecord::new(name, node));
            }
        }
        let (new_moves, old_moves) = (group_moves(&self.moves), group_moves(&old.moves));
        for (id, records) in &new_moves {
            if old_moves.get(id) != Some(records) {
                delta.moves.push((*id, Some(records.clone())));
            }
        }
        for id in old_moves.keys().filter(|id| !new_moves.contains_key(id)) {
            delta.moves.push((*id, None));
        }
        if self.next_move_id != old.next_move_id {
            delta.next_move_id = Some(self.next_move_id);
        }
        if self.queue_table != old.queue_table {
            delta.queue_table = Some(self.queue_table.clone());
        }
        delta
    }
}

#[cfg(test)]
mod tests {
    use shardsched_wire::msg::{Generation, NodeGen};

    use super::*;

    fn sample() -> Durable {
        let mut d = Durable {
            format: DURABLE_FORMAT,
            next_move_id: 3,
            ..Durable::default()
        };
        d.generators.insert("batch".into(), 1);
        d.generators.insert("debug".into(), 2);
        d.queues.insert(
            "debug".into(),
            DurableQueue {
                enabled: false,
                started: true,
                reason: "maintenance".into(),
            },
        );
        d.nodes.insert(
            "node0".into(),
            DurableNode {
                owner: Some("batch".into()),
                generation: 4,
                moved: true,
                down: None,
                drained: Some("bad dimm".into()),
            },
        );
        d.moves.push(MoveRecord::Started {
            move_id: MoveId(2),
            from: "debug".into(),
            to: "batch".into(),
            nodes: vec![NodeGen {
                node: "node0".into(),
                generation: Generation(4),
            }],
            started_ms: 10,
            deadline_ms: None,
        });
        d
    }

    /// Applies a delta to a record set the way the journal stores it.
    fn rebuild(delta: &DurableDelta, base: &Durable) -> Durable {
        let mut queues: BTreeMap<u16, QueueRecord> = base
            .generators
            .iter()
            .map(|(n, &id)| {
                (
                    id,
                    QueueRecord {
                        name: n.clone(),
                        state: base.queues.get(n).cloned(),
                    },
                )
            })
            .collect();
        let mut nodes: BTreeMap<String, NodeRecord> = base
            .nodes
            .iter()
            .map(|(n, d)| (n.clone(), NodeRecord::new(n, d)))
            .collect();
        let mut moves = group_moves(&base.moves);
        for (id, q) in &delta.queues {
            queues.insert(*id, q.clone());
        }
        for n in &delta.nodes {
            nodes.insert(n.name.clone(), n.clone());
        }
        for (id, r) in &delta.moves {
            match r {
                Some(r) => moves.insert(*id, r.clone()),
                None => moves.remove(id),
            };
        }
        Durable::from_records(
            queues.into_iter().collect(),
            nodes.into_values().collect(),
            moves.into_iter().collect(),
            delta.next_move_id.unwrap_or(base.next_move_id),
            delta
                .queue_table
                .clone()
                .unwrap_or_else(|| base.queue_table.clone()),
        )
    }

    #[test]
    fn a_diff_from_nothing_rebuilds_the_state_and_a_diff_with_itself_is_empty() {
        let d = sample();
        let empty = Durable {
            format: DURABLE_FORMAT,
            ..Durable::default()
        };
        let delta = d.diff(&empty);
        assert_eq!(rebuild(&delta, &empty), d);
        assert!(d.diff(&d).is_empty());
    }

    #[test]
    fn a_diff_writes_only_what_changed_and_deletes_finished_moves() {
        let old = sample();
        let mut new = old.clone();
        new.moves.clear();
        if let Some(n) = new.nodes.get_mut("node0") {
            n.drained = None;
        }
        new.next_move_id = 4;
        let delta = new.diff(&old);
        assert!(delta.queues.is_empty());
        assert_eq!(delta.nodes.len(), 1);
        assert_eq!(delta.moves, vec![(MoveId(2), None)]);
        assert_eq!(delta.next_move_id, Some(4));
        assert_eq!(rebuild(&delta, &old), new);
    }

    #[test]
    fn records_round_trip_through_the_codec() {
        let d = sample();
        let node = NodeRecord::new("node0", &d.nodes["node0"]);
        let bytes = shardsched_wire::codec::encode(&node).expect("encode");
        let back: NodeRecord = shardsched_wire::codec::decode(&bytes).expect("decode");
        assert_eq!(back, node);
        let bytes = shardsched_wire::codec::encode(&d.moves).expect("encode");
        let back: Vec<MoveRecord> = shardsched_wire::codec::decode(&bytes).expect("decode");
        assert_eq!(back, d.moves);
    }

    fn arbitrary_durable() -> impl proptest::strategy::Strategy<Value = Durable> {
        use proptest::collection::{btree_map, btree_set, vec};
        use proptest::option;
        use proptest::prelude::*;
        let name = || "[a-c][0-3]";
        let node = (
            option::of(name()),
            0u64..5,
            any::<bool>(),
            option::of("[a-z]{0,3}"),
            option::of("[a-z]{0,3}"),
        )
            .prop_map(|(owner, generation, moved, down, drained)| DurableNode {
                owner,
                generation,
                moved,
                down,
                drained,
            });
        let queue =
            (any::<bool>(), any::<bool>(), "[a-z]{0,3}").prop_map(|(enabled, started, reason)| {
                DurableQueue {
                    enabled,
                    started,
                    reason,
                }
            });
        let record = (1u64..4, name(), 0u64..5).prop_map(|(id, node, g)| MoveRecord::Released {
            move_id: MoveId(id),
            nodes: vec![shardsched_wire::msg::NodeGen {
                node,
                generation: shardsched_wire::msg::Generation(g),
            }],
        });
        (
            btree_set(name(), 0..4),
            btree_map(name(), node, 0..6),
            btree_map(name(), queue, 0..3),
            vec(record, 0..5),
            0u64..6,
        )
            .prop_map(|(queue_names, nodes, queues, moves, next_move_id)| {
                // A generator id per queue name, the same in every state (never reused).
                let generators: BTreeMap<String, u16> = queue_names
                    .into_iter()
                    .map(|q| {
                        let b = q.as_bytes();
                        let id = u16::from(b[0] - b'a') * 4 + u16::from(b[1] - b'0') + 1;
                        (q, id)
                    })
                    .collect();
                let queues = queues
                    .into_iter()
                    .filter(|(q, _)| generators.contains_key(q))
                    .collect();
                let mut durable = Durable {
                    format: DURABLE_FORMAT,
                    generators,
                    nodes,
                    moves,
                    next_move_id,
                    queues,
                    queue_table: None,
                };
                // The journal keeps a move's records together and moves in id order.
                durable.moves = group_moves(&durable.moves)
                    .into_values()
                    .flatten()
                    .collect();
                durable
            })
    }

    proptest::proptest! {
        /// Whatever the journal held and whatever the core has now, writing the diff gives
        /// back exactly the core's state.
        #[test]
        fn a_diff_always_rebuilds_the_new_state(
            old in arbitrary_durable(),
            new in arbitrary_durable(),
        ) {
            // Generator ids are never taken back: the new state extends the old one's.
            let mut new = new;
            for (q, id) in &old.generators {
                new.generators.insert(q.clone(), *id);
            }
            for q in old.generators.keys() {
                if let Some(s) = old.queues.get(q) {
                    new.queues.entry(q.clone()).or_insert_with(|| s.clone());
                }
            }
            let mut old = old;
            for name in old.nodes.keys().cloned().collect::<Vec<_>>() {
                if !new.nodes.contains_key(&name) {
                    old.nodes.remove(&name);
                }
            }
            proptest::prop_assert_eq!(rebuild(&new.diff(&old), &old), new);
        }
    }
}
