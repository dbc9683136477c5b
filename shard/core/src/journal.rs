//! What the shard journals: record types of its own, apart from the wire's, so that a
//! change to a message never changes what is on disk (journal format
//! `shardsched-shard-journal v2`, docs/JOURNAL.md).
//!
//! ```text
//! table jobs    key = job id  AcceptedJob  written when the job is accepted (never changes)
//! table runs    key = job id  StartedJob   when it starts: start, sim end, its allocation
//! table ends    key = job id  EndedJob     when it ends: state, reason, end time
//! table urgency key = job id  u8           its urgency, once changed after submit (v2)
//! meta  last_job_id           u64          the highest id issued (FLUIDs continue after it)
//! meta  node:<name>           NodeRecord   the node table's entry: generation, holding, flags
//! meta  format                             "shardsched-shard-journal v2" (the store's stamp)
//! ```
//!
//! Version 2 only adds tables: every v1 record is a v2 record, so a v1 journal is upgraded
//! by stamping it v2 (the driver does so when it opens one).
//!
//! A node is journaled once, whole, when its entry changes ([`crate::nodes`]), so a move
//! of a few nodes writes a few small values whatever the cluster size. A job requeued after
//! a node failure loses its `runs` record: it is pending again.
//!
//! The pure core queues [`JournalRecord`]s (no I/O here); the driver encodes them with the
//! journal's own format (`shardsched_journal::format`) and reads them back into a
//! [`Restored`]. [`MemJournal`] keeps the same tables in memory, for tests and the
//! simulator. **Changing any type of this module changes the bytes on disk:** that is a new
//! [`FORMAT_VERSION`], with the golden journals of `shard/tests/golden/` made again.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use shardsched_matcher::{StoredAllocation, StoredVertex};
use shardsched_wire::Fluid;
use shardsched_wire::msg::client_shard::IdempotencyKey;
use shardsched_wire::msg::shard_coord::HeldNode;
use shardsched_wire::msg::{Generation, JobId, JobState, MoveId, NodeGen};

use crate::nodes::{Holding, NodeEntry};

/// The journal kind in the format stamp.
pub const FORMAT_KIND: &str = "shard";
/// The journal format this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest format this build upgrades (by restamping: see the module documentation).
pub const FORMAT_VERSION_UPGRADED: u32 = 1;

/// A job as accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedJob {
    /// Its id (a FLUID).
    pub id: u64,
    /// The submitting certificate's name (the user).
    pub owner: String,
    /// The client's idempotency key.
    pub key: [u8; 16],
    /// The jobspec as submitted.
    pub jobspec_json: String,
    /// Urgency at submit, 0..=31 (format v1 called it priority, on the same scale with
    /// the same default, 16); a later change is in the `urgency` table.
    pub urgency: u32,
    /// Submission time, ms since the Unix epoch.
    pub submit_ms: u64,
}

/// A job's start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedJob {
    /// Its id.
    pub id: u64,
    /// Start time, ms.
    pub start_ms: u64,
    /// When its sim run ends, ms (so it ends on time after a restart).
    pub sim_end_ms: u64,
    /// The allocation's vertices by path, in the allocation's order.
    pub vertices: Vec<AllocatedVertex>,
    /// The allocation's start, the matcher's seconds.
    pub at: i64,
    /// The allocation's length, seconds.
    pub duration: u64,
}

/// One vertex of a stored allocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedVertex {
    /// Containment path.
    pub path: String,
    /// Units taken.
    pub needs: i64,
    /// Taken exclusively.
    pub exclusive: bool,
}

/// A job's end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedJob {
    /// Its id.
    pub id: u64,
    /// How it ended.
    pub state: EndState,
    /// Why, in words (empty when completed).
    pub reason: String,
    /// End time, ms.
    pub end_ms: u64,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndState {
    /// Ran to its end.
    Completed,
    /// Failed (denied, timed out, its node went down, its command failed).
    Failed,
    /// Cancelled.
    Cancelled,
}

/// A node's entry in the node table, as journaled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The newest generation seen for it.
    pub generation: u64,
    /// Whose it is.
    pub holding: HoldingRecord,
    /// Drained, with the reason given.
    pub drained: Option<String>,
    /// Marked down, with the reason given.
    pub down: Option<String>,
}

/// Whose a node is, as journaled ([`Holding`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldingRecord {
    /// Not this shard's.
    NotOwned,
    /// This shard's.
    Owned,
    /// Moving out in this move.
    Outgoing {
        /// The move.
        move_id: u64,
    },
    /// Moving in in this move.
    Incoming {
        /// The move.
        move_id: u64,
        /// When the donor expects it free, ms.
        expected_free_ms: Option<u64>,
    },
}

/// One change the core made that must be durable before it is acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalRecord {
    /// A job was accepted.
    Accepted(AcceptedJob),
    /// A job started.
    Started(StartedJob),
    /// A job ended.
    Ended(EndedJob),
    /// A finished job passed its retention: forget it.
    Forgotten(JobId),
    /// The highest job id issued now.
    LastId(JobId),
    /// A running job went back to pending (requeued): its start is void.
    Requeued(JobId),
    /// A pending job's urgency changed.
    Urgency(JobId, u8),
    /// A node's entry changed.
    Node(String, NodeRecord),
}

/// A job read back from the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredJob {
    /// As accepted.
    pub accepted: AcceptedJob,
    /// Its start, if it started.
    pub started: Option<StartedJob>,
    /// Its end, if it ended.
    pub ended: Option<EndedJob>,
    /// Its urgency, if it changed after submit.
    pub urgency: Option<u8>,
}

/// Everything the journal remembers, in job id order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Every job, by id (= submission order).
    pub jobs: Vec<RestoredJob>,
    /// The highest job id issued.
    pub last_id: Option<JobId>,
    /// Every node's entry, by name.
    pub nodes: Vec<(String, NodeRecord)>,
}

impl RestoredJob {
    /// Its urgency now: the last change, else the one it was accepted with (at most 31).
    pub fn urgency(&self) -> u8 {
        let accepted = u8::try_from(self.accepted.urgency).unwrap_or(u8::MAX);
        self.urgency
            .unwrap_or(accepted)
            .min(shardsched_wire::limits::URGENCY_MAX)
    }
}

/// A `runs` or `ends` record whose job the `jobs` table does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Orphan {
    /// `runs` or `ends`.
    pub table: &'static str,
    /// The job id it is keyed by.
    pub key: u64,
}

/// The `jobs` table.
pub const JOBS_TABLE: &str = "jobs";
/// The `runs` table.
pub const RUNS_TABLE: &str = "runs";
/// The `ends` table.
pub const ENDS_TABLE: &str = "ends";
/// The `urgency` table.
pub const URGENCY_TABLE: &str = "urgency";
/// The meta value holding the highest job id issued.
pub const LAST_ID_META: &str = "last_job_id";
/// Prefix of the node table's meta values (`node:<name>`).
pub const NODE_META_PREFIX: &str = "node:";

impl Restored {
    /// Puts a journal's records together: each `runs` and `ends` record joins the `jobs`
    /// record of its key; one with no such job is an [`Orphan`].
    pub fn assemble(
        jobs: impl IntoIterator<Item = AcceptedJob>,
        runs: impl IntoIterator<Item = StartedJob>,
        ends: impl IntoIterator<Item = EndedJob>,
        urgencies: impl IntoIterator<Item = (u64, u8)>,
        last_id: Option<u64>,
        nodes: impl IntoIterator<Item = (String, NodeRecord)>,
    ) -> Result<Restored, Orphan> {
        let mut by_id: BTreeMap<u64, RestoredJob> = jobs
            .into_iter()
            .map(|accepted| {
                let job = RestoredJob {
                    accepted,
                    started: None,
                    ended: None,
                    urgency: None,
                };
                (job.accepted.id, job)
            })
            .collect();
        for run in runs {
            let job = job_of(&mut by_id, RUNS_TABLE, run.id)?;
            job.started = Some(run);
        }
        for end in ends {
            let job = job_of(&mut by_id, ENDS_TABLE, end.id)?;
            job.ended = Some(end);
        }
        for (id, urgency) in urgencies {
            job_of(&mut by_id, URGENCY_TABLE, id)?.urgency = Some(urgency);
        }
        Ok(Restored {
            jobs: by_id.into_values().collect(),
            last_id: last_id.map(Fluid),
            nodes: nodes.into_iter().collect(),
        })
    }

    /// Whether the journal had nothing (a first start).
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.last_id.is_none() && self.nodes.is_empty()
    }

    /// The node table's entries.
    pub fn node_entries(&self) -> impl Iterator<Item = (String, NodeEntry)> + '_ {
        self.nodes
            .iter()
            .map(|(name, record)| (name.clone(), NodeEntry::from(record)))
    }

    /// What a restarting shard reports in `Register::held`: the nodes it owned or was
    /// giving away, each marked allocated when a job that was running holds it (a node's
    /// last path component is its name).
    pub fn held(&self) -> Vec<HeldNode> {
        let mut busy = BTreeSet::new();
        for job in &self.jobs {
            if let (Some(run), None) = (&job.started, &job.ended) {
                for v in &run.vertices {
                    if let Some(name) = v.path.rsplit('/').next() {
                        busy.insert(name);
                    }
                }
            }
        }
        self.node_entries()
            .filter(|(_, e)| e.is_held())
            .map(|(name, e)| HeldNode {
                allocated: busy.contains(name.as_str()),
                node: NodeGen {
                    node: name,
                    generation: e.generation,
                },
            })
            .collect()
    }

    /// Jobs pending or running when the journal was last written.
    pub fn live(&self) -> usize {
        self.jobs.iter().filter(|j| j.ended.is_none()).count()
    }
}

/// The job a `table` record keyed `key` belongs to.
fn job_of<'a>(
    jobs: &'a mut BTreeMap<u64, RestoredJob>,
    table: &'static str,
    key: u64,
) -> Result<&'a mut RestoredJob, Orphan> {
    jobs.get_mut(&key).ok_or(Orphan { table, key })
}

/// A journal's tables in memory, applied as the driver's committer would apply the same
/// records to disk: for tests, and for a simulator that restarts shards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemJournal {
    jobs: BTreeMap<u64, AcceptedJob>,
    runs: BTreeMap<u64, StartedJob>,
    ends: BTreeMap<u64, EndedJob>,
    urgency: BTreeMap<u64, u8>,
    last_id: Option<u64>,
    nodes: BTreeMap<String, NodeRecord>,
}

impl MemJournal {
    /// Applies `records`, in order (one committed batch).
    pub fn commit(&mut self, records: &[JournalRecord]) {
        for record in records {
            match record {
                JournalRecord::Accepted(job) => {
                    self.jobs.insert(job.id, job.clone());
                }
                JournalRecord::Started(run) => {
                    self.runs.insert(run.id, run.clone());
                }
                JournalRecord::Ended(end) => {
                    self.ends.insert(end.id, end.clone());
                }
                JournalRecord::Forgotten(id) => {
                    self.jobs.remove(&id.0);
                    self.runs.remove(&id.0);
                    self.ends.remove(&id.0);
                    self.urgency.remove(&id.0);
                }
                JournalRecord::Urgency(id, urgency) => {
                    self.urgency.insert(id.0, *urgency);
                }
                JournalRecord::LastId(id) => self.last_id = Some(id.0),
                JournalRecord::Requeued(id) => {
                    self.runs.remove(&id.0);
                }
                JournalRecord::Node(name, node) => {
                    self.nodes.insert(name.clone(), node.clone());
                }
            }
        }
    }

    /// What a restart reads back.
    pub fn restored(&self) -> Result<Restored, Orphan> {
        Restored::assemble(
            self.jobs.values().cloned(),
            self.runs.values().cloned(),
            self.ends.values().cloned(),
            self.urgency.iter().map(|(&id, &u)| (id, u)),
            self.last_id,
            self.nodes.iter().map(|(n, r)| (n.clone(), r.clone())),
        )
    }
}

impl AcceptedJob {
    /// The client's idempotency key.
    pub fn idempotency_key(&self) -> IdempotencyKey {
        IdempotencyKey(self.key)
    }
}

impl StartedJob {
    /// The allocation in the matcher's stored form.
    pub fn allocation(&self) -> StoredAllocation {
        StoredAllocation {
            vertices: self
                .vertices
                .iter()
                .map(|v| StoredVertex {
                    path: v.path.clone(),
                    needs: v.needs,
                    exclusive: v.exclusive,
                })
                .collect(),
            at: self.at,
            duration: self.duration,
        }
    }

    /// Builds the record from the matcher's stored form.
    pub fn new(id: JobId, start_ms: u64, sim_end_ms: u64, alloc: StoredAllocation) -> StartedJob {
        StartedJob {
            id: id.0,
            start_ms,
            sim_end_ms,
            vertices: alloc
                .vertices
                .into_iter()
                .map(|v| AllocatedVertex {
                    path: v.path,
                    needs: v.needs,
                    exclusive: v.exclusive,
                })
                .collect(),
            at: alloc.at,
            duration: alloc.duration,
        }
    }
}

impl EndState {
    /// The end state of a job in `state`; `None` for a live one.
    pub fn of(state: JobState) -> Option<EndState> {
        match state {
            JobState::Completed => Some(EndState::Completed),
            JobState::Failed => Some(EndState::Failed),
            JobState::Cancelled => Some(EndState::Cancelled),
            JobState::Pending | JobState::Running => None,
        }
    }
}

impl From<EndState> for JobState {
    fn from(state: EndState) -> JobState {
        match state {
            EndState::Completed => JobState::Completed,
            EndState::Failed => JobState::Failed,
            EndState::Cancelled => JobState::Cancelled,
        }
    }
}

impl From<&NodeEntry> for NodeRecord {
    fn from(e: &NodeEntry) -> NodeRecord {
        NodeRecord {
            generation: e.generation.0,
            holding: match e.holding {
                Holding::NotOwned => HoldingRecord::NotOwned,
                Holding::Owned => HoldingRecord::Owned,
                Holding::Outgoing { move_id } => HoldingRecord::Outgoing { move_id: move_id.0 },
                Holding::Incoming {
                    move_id,
                    expected_free_ms,
                } => HoldingRecord::Incoming {
                    move_id: move_id.0,
                    expected_free_ms,
                },
            },
            drained: e.drained.clone(),
            down: e.down.clone(),
        }
    }
}

impl From<&NodeRecord> for NodeEntry {
    fn from(r: &NodeRecord) -> NodeEntry {
        NodeEntry {
            generation: Generation(r.generation),
            holding: match r.holding {
                HoldingRecord::NotOwned => Holding::NotOwned,
                HoldingRecord::Owned => Holding::Owned,
                HoldingRecord::Outgoing { move_id } => Holding::Outgoing {
                    move_id: MoveId(move_id),
                },
                HoldingRecord::Incoming {
                    move_id,
                    expected_free_ms,
                } => Holding::Incoming {
                    move_id: MoveId(move_id),
                    expected_free_ms,
                },
            },
            drained: r.drained.clone(),
            down: r.down.clone(),
        }
    }
}
