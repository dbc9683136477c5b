//! What the coordinator's journal holds — its own record types, format v1 — and the deltas
//! that change it. Pure: no I/O. The driver encodes each record with the journal's format
//! (`shardsched_journal::format`), never with the wire's codec: these types are the disk's,
//! and a change to a wire message cannot change them.
//!
//! ```text
//! table queues  key = generator id   QueueRecord      queue name, and the admin's run-time
//!                                                     state (enabled, started, reason) if set
//! table nodes   key = node key       NodeRecord       node name, owner, generation, kept,
//!                                                     down and drained flags (with reasons)
//! table moves   key = move id        Vec<MoveStepRecord>  one unfinished move's records,
//!                                                     compacted; deleted when it finishes
//! meta  format                       "shardsched-coordinator-journal v1"
//! meta  next_move_id                 u64 LE           the id the next move gets
//! meta  queue_table                  QueueTableRecord the queue table as changed at run time
//!                                                     (absent: the configuration file's)
//! meta  limits                       Vec<LimitRecord> the limits as set at run time (absent:
//!                                                     the configuration file's `[limits]`)
//! meta  allowances                   Vec<AllowanceRecord> every shard's granted allowance
//!                                                     under per-user limits, with its seq
//! meta  fairshare                    FairShareRecord  every user's decayed usage, the decay
//!                                                     applied to it (origin, half-life,
//!                                                     exponent), and each queue's last
//!                                                     usage batch counted
//! ```
//!
//! Node keys are small integers given to node names in the order they are first written,
//! kept forever (a node name is in the record, so a key never needs to mean anything else).
//!
//! In memory the journal's content is a [`Durable`], in the core's own types: what a start
//! begins from, and what [`Core::durable_state`](crate::core::Core::durable_state) computes
//! from the core. [`Durable::diff`] gives the records that turn one into another, and
//! [`Durable::apply`] applies records (reading a journal is applying all of them to an
//! empty state).
//!
//! A change to any record type that changes its bytes is a new format version
//! ([`JOURNAL_VERSION`]); the golden journals under `coordinator/tests/golden/` fail to
//! decode otherwise.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use shardsched_wire::msg::{Generation, MoveId, NodeGen};

use crate::moves::{MoveRecord, NodeIntent};

/// The journal kind in its format stamp.
pub const JOURNAL_KIND: &str = "coordinator";
/// The record format this build writes and reads.
pub const JOURNAL_VERSION: u32 = 1;
/// Table of queue records.
pub const QUEUES_TABLE: &str = "queues";
/// Table of node records.
pub const NODES_TABLE: &str = "nodes";
/// Table of unfinished moves' records.
pub const MOVES_TABLE: &str = "moves";
/// Meta value: the next move id.
pub const NEXT_MOVE_ID_META: &str = "next_move_id";
/// Meta value: the run-time queue table (`queue add|remove|update`), until `reload`.
pub const QUEUE_TABLE_META: &str = "queue_table";
/// Meta value: the run-time limits (`limits set`).
pub const LIMITS_META: &str = "limits";
/// Meta value: the allowances granted (docs/POLICIES.md, "Limits").
pub const ALLOWANCES_META: &str = "allowances";
/// Meta value: fair-share's usage table (docs/POLICIES.md, "Fair-share").
pub const FAIRSHARE_META: &str = "fairshare";

/// Everything the journal holds, in the core's types (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// Queue name → generator id, for every queue ever configured.
    pub generators: BTreeMap<String, u16>,
    /// Queue name → the run-time state an admin set (enable/disable/start/stop). A queue
    /// absent here runs as its configuration says.
    pub queues: BTreeMap<String, AdminQueueState>,
    /// Node name → intent (owner, generation, flags), for every node ever written.
    pub nodes: BTreeMap<String, NodeIntent>,
    /// The unfinished moves' records, compacted, by move in id order
    /// ([`MoveMachine::active_records`](crate::moves::MoveMachine::active_records)).
    pub moves: Vec<MoveRecord>,
    /// The id the next move gets (0 when no move was ever made: ids start at 1).
    pub next_move_id: u64,
    /// The queue table as changed at run time (`queue add|remove|update`); it replaces the
    /// configuration file's queues until `reload` (`None`: the file is authoritative).
    pub queue_table: Option<QueueTableRecord>,
    /// The limits as set at run time (`None`: the configuration file's).
    pub limits: Option<Vec<LimitRecord>>,
    /// Every allowance granted, by user then queue.
    pub allowances: Vec<AllowanceRecord>,
    /// Fair-share's usage table (`None`: never written).
    pub fairshare: Option<FairShareRecord>,
}

/// Fair-share's usage table as journaled (docs/POLICIES.md, "Fair-share").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairShareRecord {
    /// The decay clock's origin, ms since the Unix epoch (its first tick).
    pub origin_ms: u64,
    /// The half-life the exponent below counts in, ms.
    pub half_life_ms: u64,
    /// The decay applied to `usage` since `origin_ms`, in Q16 half-lives.
    pub applied_q16: u64,
    /// Every user's decayed usage.
    pub usage: Vec<UserUsageRecord>,
    /// Every queue's last usage batch counted.
    pub seqs: Vec<QueueSeqRecord>,
}

/// One user's decayed usage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserUsageRecord {
    /// The user.
    pub user: String,
    /// Allocated cores × milliseconds, decayed.
    pub core_ms: u64,
}

/// The last usage batch counted from one queue's shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSeqRecord {
    /// The queue.
    pub queue: String,
    /// The batch's number.
    pub seq: u64,
}

/// One limit as journaled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitRecord {
    /// `max_running`, `max_nodes`, `max_cores` or `max_pending`.
    pub kind: String,
    /// The user it applies to (`None` with no queue either: every user's default).
    pub user: Option<String>,
    /// The queue it applies to.
    pub queue: Option<String>,
    /// Its value.
    pub value: u64,
}

/// What the coordinator granted one shard of one user's allowance (docs/POLICIES.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceRecord {
    /// The user.
    pub user: String,
    /// The queue.
    pub queue: String,
    /// The last grant's sequence number.
    pub seq: u64,
    /// Jobs granted.
    pub jobs: u64,
    /// Nodes granted.
    pub nodes: u64,
    /// Cores granted.
    pub cores: u64,
}

/// A queue's run-time state as an admin set it (also its journal record's form).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminQueueState {
    /// Accepts submissions.
    pub enabled: bool,
    /// Schedules.
    pub started: bool,
    /// Why it was disabled (empty when enabled, or when no reason was given).
    pub reason: String,
}

/// One queue: its name (the key is its generator id) and the admin's state, if set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRecord {
    /// Queue name.
    pub name: String,
    /// The state an admin set (`None`: as configured).
    pub admin: Option<AdminQueueState>,
}

/// One node's intent, with its name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Node name.
    pub name: String,
    /// Owning queue.
    pub owner: Option<String>,
    /// Generation.
    pub generation: u64,
    /// The owner is an admin's decision ([`NodeIntent::kept`]).
    pub kept: bool,
    /// Down, with the reason.
    pub down: Option<String>,
    /// Drained, with the reason.
    pub drained: Option<String>,
}

/// One step of a move, as journaled ([`MoveRecord`] in the journal's own terms).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MoveStepRecord {
    /// [`MoveRecord::Started`].
    Started {
        /// The move.
        move_id: u64,
        /// Donor queue.
        from: String,
        /// Recipient queue.
        to: String,
        /// `(node, new generation)`.
        nodes: Vec<(String, u64)>,
        /// When the admin asked, ms since the Unix epoch.
        started_ms: u64,
        /// The deadline, ms since the Unix epoch.
        deadline_ms: Option<u64>,
    },
    /// [`MoveRecord::Released`]: `(move, [(node, generation)])`.
    Released(u64, Vec<(String, u64)>),
    /// [`MoveRecord::Acquired`].
    Acquired(u64, Vec<(String, u64)>),
    /// [`MoveRecord::Cancelled`].
    Cancelled(u64, Vec<(String, u64)>),
    /// [`MoveRecord::Returned`].
    Returned(u64, Vec<(String, u64)>),
}

/// The whole queue table as last changed at run time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueTableRecord {
    /// Where a submit without `-q` goes.
    pub default_queue: String,
    /// Every queue, by name.
    pub queues: Vec<QueueDefRecord>,
}

/// One queue of [`QueueTableRecord`]: a queue definition with its nodes as a hostlist, so
/// that it survives a change of the cluster's node order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDefRecord {
    /// Queue name.
    pub name: String,
    /// The definition, as a hostlist.
    pub nodes: String,
    /// Queue policy name.
    pub policy: String,
    /// Match policy name.
    pub match_policy: String,
    /// Pending jobs considered per cycle.
    pub queue_depth: u32,
    /// Reservations made by `hybrid`.
    pub reservation_depth: u32,
    /// Milliseconds (0: unlimited).
    pub default_duration_ms: u64,
    /// Milliseconds (0: unlimited).
    pub max_duration_ms: u64,
    /// Started when the coordinator starts.
    pub started: bool,
    /// Enabled when the coordinator starts.
    pub enabled: bool,
}

/// A journaled record that does not fit the others ([`Durable::apply`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("table {table}, key {key}: {message}")]
pub struct RecordError {
    /// The record's table.
    pub table: &'static str,
    /// Its key.
    pub key: u64,
    /// What does not fit.
    pub message: String,
}

/// The writes that bring the journal from one [`Durable`] to another: only what changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableDelta {
    /// Queue records to write, by generator id.
    pub queues: Vec<(u16, QueueRecord)>,
    /// Node records to write.
    pub nodes: Vec<NodeRecord>,
    /// Moves by id: their records to write, or `None` to delete them (finished).
    pub moves: Vec<(u64, Option<Vec<MoveStepRecord>>)>,
    /// The next move id, when it changed.
    pub next_move_id: Option<u64>,
    /// The run-time queue table, when it changed (`Some(None)`: back to the file's).
    pub queue_table: Option<Option<QueueTableRecord>>,
    /// The run-time limits, when they changed.
    pub limits: Option<Option<Vec<LimitRecord>>>,
    /// Every allowance, when any changed.
    pub allowances: Option<Vec<AllowanceRecord>>,
    /// Fair-share's usage table, when it changed.
    pub fairshare: Option<FairShareRecord>,
}

impl DurableDelta {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
            && self.nodes.is_empty()
            && self.moves.is_empty()
            && self.next_move_id.is_none()
            && self.queue_table.is_none()
            && self.limits.is_none()
            && self.allowances.is_none()
            && self.fairshare.is_none()
    }
}

impl QueueRecord {
    /// The record of queue `name` with the admin's state `admin`.
    pub fn new(name: &str, admin: Option<&AdminQueueState>) -> QueueRecord {
        QueueRecord {
            name: name.to_owned(),
            admin: admin.cloned(),
        }
    }
}

impl NodeRecord {
    /// The record of node `name`.
    pub fn new(name: &str, node: &NodeIntent) -> NodeRecord {
        NodeRecord {
            name: name.to_owned(),
            owner: node.owner.clone(),
            generation: node.generation.0,
            kept: node.kept,
            down: node.down.clone(),
            drained: node.drained.clone(),
        }
    }

    fn into_intent(self) -> (String, NodeIntent) {
        let intent = NodeIntent {
            owner: self.owner,
            generation: Generation(self.generation),
            kept: self.kept,
            down: self.down,
            drained: self.drained,
        };
        (self.name, intent)
    }
}

impl MoveStepRecord {
    /// The move the record is about.
    pub fn move_id(&self) -> u64 {
        match self {
            MoveStepRecord::Started { move_id, .. }
            | MoveStepRecord::Released(move_id, _)
            | MoveStepRecord::Acquired(move_id, _)
            | MoveStepRecord::Cancelled(move_id, _)
            | MoveStepRecord::Returned(move_id, _) => *move_id,
        }
    }
}

impl From<&MoveRecord> for MoveStepRecord {
    fn from(record: &MoveRecord) -> MoveStepRecord {
        let pairs = |nodes: &[NodeGen]| -> Vec<(String, u64)> {
            nodes
                .iter()
                .map(|ng| (ng.node.clone(), ng.generation.0))
                .collect()
        };
        match record {
            MoveRecord::Started {
                move_id,
                from,
                to,
                nodes,
                started_ms,
                deadline_ms,
            } => MoveStepRecord::Started {
                move_id: move_id.0,
                from: from.clone(),
                to: to.clone(),
                nodes: pairs(nodes),
                started_ms: *started_ms,
                deadline_ms: *deadline_ms,
            },
            MoveRecord::Released { move_id, nodes } => {
                MoveStepRecord::Released(move_id.0, pairs(nodes))
            }
            MoveRecord::Acquired { move_id, nodes } => {
                MoveStepRecord::Acquired(move_id.0, pairs(nodes))
            }
            MoveRecord::Cancelled { move_id, nodes } => {
                MoveStepRecord::Cancelled(move_id.0, pairs(nodes))
            }
            MoveRecord::Returned { move_id, nodes } => {
                MoveStepRecord::Returned(move_id.0, pairs(nodes))
            }
        }
    }
}

impl From<MoveStepRecord> for MoveRecord {
    fn from(record: MoveStepRecord) -> MoveRecord {
        let gens = |nodes: Vec<(String, u64)>| -> Vec<NodeGen> {
            nodes
                .into_iter()
                .map(|(node, g)| NodeGen {
                    node,
                    generation: Generation(g),
                })
                .collect()
        };
        match record {
            MoveStepRecord::Started {
                move_id,
                from,
                to,
                nodes,
                started_ms,
                deadline_ms,
            } => MoveRecord::Started {
                move_id: MoveId(move_id),
                from,
                to,
                nodes: gens(nodes),
                started_ms,
                deadline_ms,
            },
            MoveStepRecord::Released(id, nodes) => MoveRecord::Released {
                move_id: MoveId(id),
                nodes: gens(nodes),
            },
            MoveStepRecord::Acquired(id, nodes) => MoveRecord::Acquired {
                move_id: MoveId(id),
                nodes: gens(nodes),
            },
            MoveStepRecord::Cancelled(id, nodes) => MoveRecord::Cancelled {
                move_id: MoveId(id),
                nodes: gens(nodes),
            },
            MoveStepRecord::Returned(id, nodes) => MoveRecord::Returned {
                move_id: MoveId(id),
                nodes: gens(nodes),
            },
        }
    }
}

/// A move's records as journaled.
pub fn move_steps(records: &[MoveRecord]) -> Vec<MoveStepRecord> {
    records.iter().map(MoveStepRecord::from).collect()
}

/// Groups a flat list of move records by move id, keeping their order.
pub fn group_moves(records: &[MoveRecord]) -> BTreeMap<u64, Vec<MoveRecord>> {
    let mut out: BTreeMap<u64, Vec<MoveRecord>> = BTreeMap::new();
    for r in records {
        out.entry(r.move_id().0).or_default().push(r.clone());
    }
    out
}

impl Durable {
    /// The writes that turn `old` into `self`.
    pub fn diff(&self, old: &Durable) -> DurableDelta {
        let mut delta = DurableDelta::default();
        for (name, &id) in &self.generators {
            let admin = self.queues.get(name);
            let same = old.generators.get(name) == Some(&id) && old.queues.get(name) == admin;
            if !same {
                delta.queues.push((id, QueueRecord::new(name, admin)));
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
                delta.moves.push((*id, Some(move_steps(records))));
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
        if self.limits != old.limits {
            delta.limits = Some(self.limits.clone());
        }
        if self.allowances != old.allowances {
            delta.allowances = Some(self.allowances.clone());
        }
        if self.fairshare != old.fairshare {
            delta.fairshare = self.fairshare.clone();
        }
        delta
    }

    /// Applies journaled writes (a later write of a key wins). An error names the record
    /// that does not fit: a queue record whose generator id another name holds, a move's
    /// records filed under another move's key.
    pub fn apply(&mut self, delta: DurableDelta) -> Result<(), RecordError> {
        for (id, queue) in delta.queues {
            if let Some((other, _)) = self
                .generators
                .iter()
                .find(|(name, known)| **known == id && **name != queue.name)
            {
                return Err(RecordError {
                    table: QUEUES_TABLE,
                    key: u64::from(id),
                    message: format!(
                        "names queue {}, but {other} has that generator id",
                        queue.name
                    ),
                });
            }
            self.generators.insert(queue.name.clone(), id);
            match queue.admin {
                Some(state) => {
                    self.queues.insert(queue.name, state);
                }
                None => {
                    self.queues.remove(&queue.name);
                }
            }
        }
        for node in delta.nodes {
            let (name, intent) = node.into_intent();
            self.nodes.insert(name, intent);
        }
        let mut moves = group_moves(&self.moves);
        for (id, records) in delta.moves {
            match records {
                Some(records) => {
                    if let Some(other) = records.iter().find(|r| r.move_id() != id) {
                        return Err(RecordError {
                            table: MOVES_TABLE,
                            key: id,
                            message: format!("holds a record of move {}", other.move_id()),
                        });
                    }
                    moves.insert(id, records.into_iter().map(MoveRecord::from).collect());
                }
                None => {
                    moves.remove(&id);
                }
            }
        }
        self.moves = moves.into_values().flatten().collect();
        if let Some(next) = delta.next_move_id {
            self.next_move_id = next;
        }
        if let Some(table) = delta.queue_table {
            self.queue_table = table;
        }
        if let Some(limits) = delta.limits {
            self.limits = limits;
        }
        if let Some(allowances) = delta.allowances {
            self.allowances = allowances;
        }
        if let Some(fairshare) = delta.fairshare {
            self.fairshare = Some(fairshare);
        }
        Ok(())
    }
}

#[cfg(test)]
impl Durable {
    /// This state written as records and read back, as a journal would (tests).
    pub(crate) fn reread(&self) -> Durable {
        let mut read = Durable::default();
        read.apply(self.diff(&Durable::default()))
            .expect("records written from a state fit");
        read
    }
}

#[cfg(test)]
mod tests;
