//! What the shard journals: record types of its own, apart from the wire's, so that a
//! change to a message never changes what is on disk (journal format
//! `shardsched-shard-journal v3`, docs/JOURNAL.md).
//!
//! ```text
//! table jobs       key = job id  AcceptedJob      written when the job is accepted (never changes)
//! table runs       key = job id  StartedJob       when it starts: start, sim end, its allocation
//! table ends       key = job id  EndedJob         when it ends: state, reason, end time
//! table signatures key = job id  SignatureRecord  with the job, when its submit was signed
//!                                                 (an array's: keyed by the array's id)
//! table urgency    key = job id  u8               its urgency, once changed after submit (v2)
//! table kills      key = job id  KillRecord       a running job's processes are being killed:
//!                                                 how it ends, and why (v3); deleted when it
//!                                                 ends or is requeued
//! table arrays     key = job id  ArrayRecord      an array's indices and `%N` (v2); its jobspec
//!                                                 is the `jobs` record of the same id, its
//!                                                 elements' runs and ends are keyed by their ids
//! meta  last_job_id           u64          the highest id issued (FLUIDs continue after it)
//! meta  node:<name>           NodeRecord   the node table's entry: generation, holding, flags
//! meta  allowance:<user>      AllowanceRecord  the user's allowance under a per-user limit
//!                                          (docs/POLICIES.md, "Limits"): grant seq, held
//! meta  format                             "shardsched-shard-journal v3" (the store's stamp)
//! ```
//!
//! Versions 2 and 3 only add tables: every v1 or v2 record is a v3 record, so an older
//! journal is upgraded by stamping it v3 (the driver does so when it opens one). Version 3
//! is a version of its own, not a table slipped into v2, so that a build that does not know
//! the `kills` table refuses the journal by name instead of running on a job whose cancel
//! was acknowledged ([`KillRecord`]).
//!
//! An array is accepted as one `jobs` record and one `arrays` record, whatever its size:
//! a restart makes its elements from them ([`Restored::assemble`]). Its elements' ends stay
//! until the whole array is forgotten ([`JournalRecord::ArrayForgotten`]), so an element
//! forgotten early does not come back pending.
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

use serde::{Deserialize, Serialize};
use shardsched_matcher::{StoredAllocation, StoredVertex};
use shardsched_wire::array::{ArraySpec, IndexRange};
use shardsched_wire::msg::client_shard::IdempotencyKey;
use shardsched_wire::msg::{Generation, JobId, JobState, MoveId};

use crate::nodes::{Holding, NodeEntry};

mod mem;
mod restored;

pub use mem::MemJournal;
pub use restored::{ElementOf, JobTables, Orphan, Restored, RestoredJob};

/// The journal kind in the format stamp.
pub const FORMAT_KIND: &str = "shard";
/// The journal format this build writes and reads.
pub const FORMAT_VERSION: u32 = 3;
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

/// A job's signature: the submitter's certificate and signature of the jobspec, relayed to
/// node agents in every launch. A table of its own (a journal without it reads as jobs
/// without signatures); an array's is keyed by the array's id and shared by its elements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureRecord {
    /// Its job's id.
    pub id: u64,
    /// The submitter's certificate (PEM).
    pub cert_pem: String,
    /// The signature (ASN.1 DER).
    pub signature: Vec<u8>,
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

/// A kill of a running job's processes that was asked for and answered (a client's or an
/// admin's cancel, a node marked down, a move's deadline): written before the answer leaves
/// (write, then acknowledge), so that a shard restarted before the processes are gone
/// kills them again and records the job as the request said, with its reason. Executors
/// that really run jobs only (exec, agents): under the sim executor a job ends at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillRecord {
    /// The job.
    pub id: u64,
    /// When the kill was asked for, ms.
    pub requested_ms: u64,
    /// How the job is recorded once its processes are gone.
    pub plan: KillPlan,
}

/// How a killed job is recorded ([`KillRecord`]); each reason names who asked
/// (`cancelled by admin root`) or what happened (`node n3 went down: psu`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KillPlan {
    /// Cancelled.
    Cancel {
        /// Why, and by whom.
        reason: String,
    },
    /// Failed, with an `exception` event of this type (`node-down`, …) if any.
    Fail {
        /// The exception's type.
        exception: Option<String>,
        /// Why.
        reason: String,
    },
    /// Back to pending (its jobspec allows requeue).
    Requeue {
        /// Why.
        reason: String,
    },
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
    /// An accepted job's signature (written with it).
    Signed(SignatureRecord),
    /// A job started.
    Started(StartedJob),
    /// A job ended.
    Ended(EndedJob),
    /// A finished job passed its retention: forget it.
    Forgotten(JobId),
    /// The highest job id issued now.
    LastId(JobId),
    /// A running job went back to pending (requeued): its start is void (and its kill
    /// request done with).
    Requeued(JobId),
    /// A running job's processes are to be killed (see [`KillRecord`]); its `Ended` or
    /// `Requeued` record removes it.
    KillRequested(KillRecord),
    /// A pending job's urgency changed.
    Urgency(JobId, u8),
    /// An array was accepted (with the `Accepted` record of its id).
    Array(ArrayRecord),
    /// An array's last element was forgotten: the array and every element's records go.
    ArrayForgotten {
        /// The array.
        id: JobId,
        /// Its elements.
        elements: Vec<JobId>,
    },
    /// A node's entry changed.
    Node(String, NodeRecord),
    /// A user's allowance changed (a grant applied, or allowance returned).
    Allowance(String, AllowanceRecord),
}

/// A user's allowance as the shard holds it (docs/POLICIES.md, "Limits").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceRecord {
    /// The last grant's sequence number applied.
    pub seq: u64,
    /// Jobs held.
    pub jobs: u64,
    /// Nodes held.
    pub nodes: u64,
    /// Cores held.
    pub cores: u64,
}

/// An array as accepted: its indices and how many of its elements may run at once. Its
/// owner, key, jobspec, urgency and submit time are its `jobs` record's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayRecord {
    /// The array's id.
    pub id: u64,
    /// Its indices, as written.
    pub ranges: Vec<IndexRangeRecord>,
    /// At most this many elements run at once; 0: no limit.
    pub max_running: u32,
}

/// `first-last:step` ([`IndexRange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRangeRecord {
    /// The first index.
    pub first: u32,
    /// The last index.
    pub last: u32,
    /// The step.
    pub step: u32,
}

/// The `jobs` table.
pub const JOBS_TABLE: &str = "jobs";
/// The `runs` table.
pub const RUNS_TABLE: &str = "runs";
/// The `ends` table.
pub const ENDS_TABLE: &str = "ends";
/// The `signatures` table.
pub const SIGNATURES_TABLE: &str = "signatures";
/// The `urgency` table.
pub const URGENCY_TABLE: &str = "urgency";
/// The `arrays` table.
pub const ARRAYS_TABLE: &str = "arrays";
/// The `kills` table (format v3).
pub const KILLS_TABLE: &str = "kills";
/// The meta value holding the highest job id issued.
pub const LAST_ID_META: &str = "last_job_id";
/// Prefix of the node table's meta values (`node:<name>`).
pub const NODE_META_PREFIX: &str = "node:";
/// Prefix of the allowances' meta values (`allowance:<user>`).
pub const ALLOWANCE_META_PREFIX: &str = "allowance:";

impl ArrayRecord {
    /// The record of array `id` of `spec`.
    pub fn new(id: JobId, spec: &ArraySpec) -> ArrayRecord {
        ArrayRecord {
            id: id.0,
            ranges: spec
                .ranges
                .iter()
                .map(|r| IndexRangeRecord {
                    first: r.first,
                    last: r.last,
                    step: r.step,
                })
                .collect(),
            max_running: spec.max_running,
        }
    }

    /// The spec it records.
    pub fn spec(&self) -> ArraySpec {
        ArraySpec {
            ranges: self
                .ranges
                .iter()
                .map(|r| IndexRange {
                    first: r.first,
                    last: r.last,
                    step: r.step,
                })
                .collect(),
            max_running: self.max_running,
        }
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
