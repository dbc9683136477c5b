//! What the shard writes to its journal, and what it reads back on restart.
//!
//! ```text
//! table jobs   key = job id   AcceptedJob  written when the job is accepted (never changes)
//! table runs   key = job id   StartedJob   when it starts: start, sim end, its allocation
//! table ends   key = job id   EndedJob     when it ends: state, reason, end time
//! meta  owned                 Vec<NodeGen> the nodes owned and their generations
//! meta  last_job_id           JobId        the highest id issued (FLUIDs continue after it)
//! meta  down_nodes            Vec<(String, String)>  nodes an admin marked down, with why
//! meta  drained_nodes         Vec<(String, String)>  nodes an admin drained, with why
//! meta  node:<name>           NodeEntry    a node's move state: generation, holding, flags
//! ```
//!
//! A node's move state (`shard/src/moves.rs`) is one meta value per node, written when it
//! changes, so a move of a few nodes writes a few small values whatever the cluster size.
//!
//! A job requeued after a node failure loses its `runs` record: it is pending again.
//!
//! Each record is a serde type encoded by [`shardsched_proto::codec`]. A job's three
//! records are separate so that each change writes only what changed (the jobspec is
//! written once). Retention deletes the three keys of a job past it.
//!
//! The pure core produces [`JournalRecord`]s (no I/O there); [`to_batch`] encodes them
//! for the journal's committer; [`load`] reads a journal back into a [`Restored`], checking
//! that every record decodes and belongs to a job the journal has (errors name the file,
//! table and key).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use shardsched_journal::{Batch, Journal, JournalError};
use shardsched_matcher::{StoredAllocation, StoredVertex};
use shardsched_proto::codec::{decode, encode};
use shardsched_proto::msg::client_shard::IdempotencyKey;
use shardsched_proto::msg::shard_coord::HeldNode;
use shardsched_proto::msg::{JobId, JobState, NodeGen};

use crate::moves::{Holding, NodeEntry};

/// Accepted jobs.
pub const JOBS_TABLE: &str = "jobs";
/// Started jobs.
pub const RUNS_TABLE: &str = "runs";
/// Ended jobs.
pub const ENDS_TABLE: &str = "ends";
/// The owned nodes.
pub const OWNED_META: &str = "owned";
/// The highest job id issued.
pub const LAST_ID_META: &str = "last_job_id";
/// The nodes marked down.
pub const DOWN_META: &str = "down_nodes";
/// The nodes drained.
pub const DRAINED_META: &str = "drained_nodes";
/// Prefix of the per-node move state metas (`node:<name>`).
pub const NODE_META_PREFIX: &str = "node:";

/// A job as accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedJob {
    /// Its id.
    pub id: JobId,
    /// The submitting certificate's name (the user).
    pub owner: String,
    /// The client's idempotency key.
    pub key: IdempotencyKey,
    /// The jobspec as submitted.
    pub jobspec_json: String,
    /// Priority within the queue.
    pub priority: u32,
    /// Submission time, ms since the Unix epoch.
    pub submit_ms: u64,
}

/// A job's start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedJob {
    /// Its id.
    pub id: JobId,
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
    pub id: JobId,
    /// Completed, failed or cancelled.
    pub state: JobState,
    /// Why, in words (empty when completed).
    pub reason: String,
    /// End time, ms.
    pub end_ms: u64,
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
    /// The owned nodes now.
    Owned(Vec<NodeGen>),
    /// The highest job id issued now.
    LastId(JobId),
    /// A running job went back to pending (requeued): its start is void.
    Requeued(JobId),
    /// The nodes marked down now, with their reasons.
    Down(Vec<(String, String)>),
    /// The nodes drained now, with their reasons.
    Drained(Vec<(String, String)>),
    /// A node's move state changed.
    Node(String, NodeEntry),
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
}

/// Everything the journal remembers, in job id order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Every job, by id (= submission order).
    pub jobs: Vec<RestoredJob>,
    /// The owned nodes, as last journaled.
    pub owned: Vec<NodeGen>,
    /// The highest job id issued.
    pub last_id: Option<JobId>,
    /// Nodes marked down, with their reasons.
    pub down: Vec<(String, String)>,
    /// Nodes drained, with their reasons.
    pub drained: Vec<(String, String)>,
    /// Every node's move state, by name.
    pub moves: Vec<(String, NodeEntry)>,
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
            id,
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

impl Restored {
    /// Whether the journal had nothing (a first start).
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
            && self.owned.is_empty()
            && self.last_id.is_none()
            && self.down.is_empty()
            && self.drained.is_empty()
            && self.moves.is_empty()
    }

    /// What a restarting shard reports in `Register::held`: the owned nodes, each marked
    /// allocated when a job that was running holds it (a node's last path component is its
    /// name).
    pub fn held(&self) -> Vec<HeldNode> {
        let mut busy = std::collections::BTreeSet::new();
        for job in &self.jobs {
            if let (Some(run), None) = (&job.started, &job.ended) {
                for v in &run.vertices {
                    if let Some(name) = v.path.rsplit('/').next() {
                        busy.insert(name);
                    }
                }
            }
        }
        // Outgoing nodes are still held: their jobs run.
        let outgoing = self
            .moves
            .iter()
            .filter(|(_, e)| matches!(e.holding, Holding::Outgoing { .. }))
            .map(|(name, e)| NodeGen {
                node: name.clone(),
                generation: e.generation,
            });
        let mut nodes: BTreeMap<String, NodeGen> = BTreeMap::new();
        for n in self.owned.iter().cloned().chain(outgoing) {
            let keep = nodes
                .get(&n.node)
                .is_none_or(|old| old.generation < n.generation);
            if keep {
                nodes.insert(n.node.clone(), n);
            }
        }
        nodes
            .into_values()
            .map(|n| HeldNode {
                allocated: busy.contains(n.node.as_str()),
                node: n,
            })
            .collect()
    }

    /// Jobs pending or running when the journal was last written.
    pub fn live(&self) -> usize {
        self.jobs.iter().filter(|j| j.ended.is_none()).count()
    }
}

/// The journal writes for `records`, in order.
pub fn to_batch(records: &[JournalRecord]) -> Result<Batch, shardsched_proto::codec::CodecError> {
    let mut batch = Batch::new();
    for r in records {
        match r {
            JournalRecord::Accepted(job) => {
                batch.put(JOBS_TABLE, job.id.0, encode(job)?);
            }
            JournalRecord::Started(run) => {
                batch.put(RUNS_TABLE, run.id.0, encode(run)?);
            }
            JournalRecord::Ended(end) => {
                batch.put(ENDS_TABLE, end.id.0, encode(end)?);
            }
            JournalRecord::Forgotten(id) => {
                batch
                    .delete(JOBS_TABLE, id.0)
                    .delete(RUNS_TABLE, id.0)
                    .delete(ENDS_TABLE, id.0);
            }
            JournalRecord::Owned(nodes) => {
                batch.put_meta(OWNED_META, encode(nodes)?);
            }
            JournalRecord::LastId(id) => {
                batch.put_meta(LAST_ID_META, encode(id)?);
            }
            JournalRecord::Requeued(id) => {
                batch.delete(RUNS_TABLE, id.0);
            }
            JournalRecord::Down(nodes) => {
                batch.put_meta(DOWN_META, encode(nodes)?);
            }
            JournalRecord::Drained(nodes) => {
                batch.put_meta(DRAINED_META, encode(nodes)?);
            }
            JournalRecord::Node(name, entry) => {
                batch.put_meta(&format!("{NODE_META_PREFIX}{name}"), encode(entry)?);
            }
        }
    }
    Ok(batch)
}

/// Reads everything back (the journal was verified when opened).
pub fn load(journal: &Journal) -> Result<Restored, JournalError> {
    let tables = Tables {
        jobs: journal.scan(JOBS_TABLE)?,
        runs: journal.scan(RUNS_TABLE)?,
        ends: journal.scan(ENDS_TABLE)?,
        metas: journal.metas()?,
    };
    restored(journal.path(), tables)
}

/// The shard's tables as read from a journal (or kept by a test's in-memory journal).
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// [`JOBS_TABLE`], in key order.
    pub jobs: Vec<(u64, Vec<u8>)>,
    /// [`RUNS_TABLE`].
    pub runs: Vec<(u64, Vec<u8>)>,
    /// [`ENDS_TABLE`].
    pub ends: Vec<(u64, Vec<u8>)>,
    /// Named values.
    pub metas: BTreeMap<String, Vec<u8>>,
}

/// Decodes the tables of the journal at `path` (named in errors) into a [`Restored`].
pub fn restored(path: &Path, tables: Tables) -> Result<Restored, JournalError> {
    let mut jobs: BTreeMap<u64, RestoredJob> = BTreeMap::new();
    for (key, bytes) in tables.jobs {
        let accepted: AcceptedJob = decode_at(path, JOBS_TABLE, key, &bytes)?;
        jobs.insert(
            key,
            RestoredJob {
                accepted,
                started: None,
                ended: None,
            },
        );
    }
    for (key, bytes) in tables.runs {
        let run: StartedJob = decode_at(path, RUNS_TABLE, key, &bytes)?;
        let job = jobs
            .get_mut(&key)
            .ok_or_else(|| orphan(path, RUNS_TABLE, key))?;
        job.started = Some(run);
    }
    for (key, bytes) in tables.ends {
        let end: EndedJob = decode_at(path, ENDS_TABLE, key, &bytes)?;
        let job = jobs
            .get_mut(&key)
            .ok_or_else(|| orphan(path, ENDS_TABLE, key))?;
        job.ended = Some(end);
    }
    let owned = match tables.metas.get(OWNED_META) {
        Some(bytes) => decode(bytes).map_err(|e| JournalError::decode_meta(path, OWNED_META, e))?,
        None => Vec::new(),
    };
    let last_id = match tables.metas.get(LAST_ID_META) {
        Some(bytes) => {
            Some(decode(bytes).map_err(|e| JournalError::decode_meta(path, LAST_ID_META, e))?)
        }
        None => None,
    };
    let down = match tables.metas.get(DOWN_META) {
        Some(bytes) => decode(bytes).map_err(|e| JournalError::decode_meta(path, DOWN_META, e))?,
        None => Vec::new(),
    };
    let drained = match tables.metas.get(DRAINED_META) {
        Some(bytes) => {
            decode(bytes).map_err(|e| JournalError::decode_meta(path, DRAINED_META, e))?
        }
        None => Vec::new(),
    };
    let mut moves = Vec::new();
    for (name, bytes) in &tables.metas {
        let Some(node) = name.strip_prefix(NODE_META_PREFIX) else {
            continue;
        };
        let entry: NodeEntry =
            decode(bytes).map_err(|e| JournalError::decode_meta(path, name, e))?;
        moves.push((node.to_owned(), entry));
    }
    Ok(Restored {
        jobs: jobs.into_values().collect(),
        owned,
        last_id,
        down,
        drained,
        moves,
    })
}

/// Decodes a record whose id field must be its key.
fn decode_at<T: serde::de::DeserializeOwned + HasId>(
    path: &Path,
    table: &str,
    key: u64,
    bytes: &[u8],
) -> Result<T, JournalError> {
    let value: T = decode(bytes).map_err(|e| JournalError::decode(path, table, key, e))?;
    if value.id().0 != key {
        return Err(JournalError::decode(
            path,
            table,
            key,
            format!("the record is about job {}", value.id()),
        ));
    }
    Ok(value)
}

fn orphan(path: &Path, table: &str, key: u64) -> JournalError {
    JournalError::decode(
        path,
        table,
        key,
        "a record for a job the jobs table does not have",
    )
}

/// Records keyed by their job id.
trait HasId {
    fn id(&self) -> JobId;
}

impl HasId for AcceptedJob {
    fn id(&self) -> JobId {
        self.id
    }
}

impl HasId for StartedJob {
    fn id(&self) -> JobId {
        self.id
    }
}

impl HasId for EndedJob {
    fn id(&self) -> JobId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_does_not_decode_is_named_by_file_table_and_key() {
        let path = Path::new("/state/journal.redb");
        let mut tables = Tables::default();
        tables.metas.insert(DRAINED_META.into(), vec![0xFF; 3]);
        let e = restored(path, tables).expect_err("garbage meta");
        assert!(e.is_unreadable());
        assert!(
            e.to_string().starts_with(
                "journal /state/journal.redb: table meta, key drained_nodes: cannot decode"
            ),
            "{e}"
        );
        let mut tables = Tables::default();
        tables.jobs.push((7, b"not a job".to_vec()));
        let e = restored(path, tables).expect_err("garbage job");
        assert!(
            e.to_string().contains("table jobs, key 7: cannot decode"),
            "{e}"
        );
    }
}
