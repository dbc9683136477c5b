//! The coordinator's journal: `<state-dir>/journal.redb`, a `shardsched-journal` store of
//! one record per queue, per node and per unfinished move, in the coordinator's own record
//! format (`shardsched_coordinator_core::records`, format v1), encoded with the journal's
//! format (`shardsched_journal::format`), never the wire's codec.
//!
//! The pure core keeps its state in memory and hands the driver only what changed
//! ([`DurableDelta`]); [`CoordJournal::write`] turns a delta into one batch for the group
//! [`Committer`] and returns once it is durable. So a 1,024-node move costs a few commits
//! (its start, then releases and acquisitions as they come, each carrying every change
//! made meanwhile), not one per node, and finished moves' records are deleted in the
//! commit that finishes them: the journal holds the present, not the history.
//!
//! # Start
//!
//! [`CoordJournal::open`] opens and verifies the journal (a damaged one refuses the start
//! with the file named), checks its format stamp, `shardsched-coordinator-journal v1`, and
//! reads every record back into a [`Durable`]. A journal of an earlier shardsched (records
//! in the wire's encoding, with no stamp or with the old numeric one), the TOML state file
//! of the versions before the journal (`coordinator-state.toml`), a journal of another
//! kind or of a newer format are refused by name: never misread. A new journal is stamped
//! at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use shardsched_journal::format::{self, FORMAT_META, Stamp};
use shardsched_journal::{
    Batch, CommitInfo, CommitStats, Committer, ErrorKind, Journal, JournalError,
};

use crate::records::{
    ALLOWANCES_META, Durable, DurableDelta, FAIRSHARE_META, JOURNAL_KIND, JOURNAL_VERSION,
    LIMITS_META, MOVES_TABLE, MoveStepRecord, NEXT_MOVE_ID_META, NODES_TABLE, NodeRecord,
    QUEUE_TABLE_META, QUEUES_TABLE, QueueRecord,
};

/// The journal's file name in the state directory.
pub use shardsched_proto::state_dir::JOURNAL_FILE;
/// The state file of the versions before the journal, refused by name.
pub const LEGACY_STATE_FILE: &str = "coordinator-state.toml";

/// The journal could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum CoordJournalError {
    /// The store refused (damaged file, a record that does not decode, a format this build
    /// does not read, I/O error, stopped committer); names the file.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The state directory holds the state file of a version before the journal.
    #[error(
        "{}: the state file of a shardsched before the coordinator journal, which this build \
         does not read; move the state directory aside to start afresh, or run the \
         shardsched that wrote it",
        .path.display()
    )]
    Legacy {
        /// The file.
        path: PathBuf,
    },
}

impl CoordJournalError {
    /// Whether the journal cannot be read back: restarting would fail the same way.
    pub fn is_unreadable(&self) -> bool {
        match self {
            CoordJournalError::Journal(e) => e.is_unreadable(),
            CoordJournalError::Legacy { .. } => true,
        }
    }
}

/// Where the state a start begins from came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// First start: nothing was there.
    Fresh,
    /// The journal.
    Journal,
}

/// The open journal and its commit thread.
pub struct CoordJournal {
    committer: Committer,
    /// Node name → key in the nodes table.
    node_keys: HashMap<String, u64>,
    next_node_key: u64,
}

impl std::fmt::Debug for CoordJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordJournal")
            .field("path", &self.path())
            .field("nodes", &self.node_keys.len())
            .finish()
    }
}

impl CoordJournal {
    /// Opens (creating and stamping on first start) and verifies `<dir>/journal.redb`, and
    /// reads the durable state from it. Blocking: call before serving, or off the runtime.
    pub fn open(dir: &Path) -> Result<(CoordJournal, Durable, Origin), CoordJournalError> {
        let path = dir.join(JOURNAL_FILE);
        let journal = Journal::open(&path)?;
        refuse_numeric_stamp(&journal)?;
        let origin = match format::check(&journal, JOURNAL_KIND, JOURNAL_VERSION)? {
            Stamp::Current => Origin::Journal,
            Stamp::Fresh => {
                let legacy = dir.join(LEGACY_STATE_FILE);
                if legacy.exists() {
                    return Err(CoordJournalError::Legacy { path: legacy });
                }
                Origin::Fresh
            }
            // v1 is the first format: an older one is not a coordinator journal this build
            // knows how to read.
            Stamp::Older(found) => {
                return Err(format_error(
                    &journal,
                    format!(
                        "{JOURNAL_KIND} journal format v{found}; this build reads \
                         v{JOURNAL_VERSION} only"
                    ),
                )
                .into());
            }
        };
        let (durable, node_keys) = read_state(&journal)?;
        let next_node_key = node_keys.values().max().map_or(0, |k| k + 1);
        let committer = Committer::start(journal)?;
        if origin == Origin::Fresh {
            let mut stamp = Batch::new();
            stamp.put_meta(
                FORMAT_META,
                format::stamp_value(JOURNAL_KIND, JOURNAL_VERSION),
            );
            committer.submit_blocking(stamp)?.wait_blocking()?;
        }
        let this = CoordJournal {
            committer,
            node_keys,
            next_node_key,
        };
        Ok((this, durable, origin))
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        self.committer.journal().path()
    }

    /// Commit statistics.
    pub fn stats(&self) -> CommitStats {
        self.committer.stats()
    }

    /// Makes `delta` durable: one batch, group-committed with whatever else is queued.
    /// Returns once it is on disk, with what the commit did (`None`: nothing to write). A
    /// failed commit stops the journal: every later write
    /// fails too (the file's state after a failed fsync is unknown), and the coordinator
    /// stops.
    pub async fn write(
        &mut self,
        delta: &DurableDelta,
    ) -> Result<Option<CommitInfo>, CoordJournalError> {
        if delta.is_empty() {
            return Ok(None);
        }
        let batch = self.batch(delta)?;
        Ok(Some(self.committer.commit(batch).await?))
    }

    /// [`CoordJournal::write`] from synchronous code (outside the runtime).
    pub fn write_blocking(&mut self, delta: &DurableDelta) -> Result<(), CoordJournalError> {
        if delta.is_empty() {
            return Ok(());
        }
        let batch = self.batch(delta)?;
        self.committer.submit_blocking(batch)?.wait_blocking()?;
        Ok(())
    }

    /// The batch for `delta`; gives new nodes their keys.
    fn batch(&mut self, delta: &DurableDelta) -> Result<Batch, CoordJournalError> {
        let path = self.path().to_owned();
        let encode = |table: &str, key: u64, value: &dyn Encode| {
            value
                .encode()
                .map_err(|e| JournalError::decode(&path, table, key, format!("encode: {e}")))
        };
        let mut batch = Batch::new();
        for (id, queue) in &delta.queues {
            let key = u64::from(*id);
            batch.put(QUEUES_TABLE, key, encode(QUEUES_TABLE, key, queue)?);
        }
        for node in &delta.nodes {
            let key = match self.node_keys.get(&node.name) {
                Some(&k) => k,
                None => {
                    let k = self.next_node_key;
                    self.next_node_key += 1;
                    self.node_keys.insert(node.name.clone(), k);
                    k
                }
            };
            batch.put(NODES_TABLE, key, encode(NODES_TABLE, key, node)?);
        }
        for (id, records) in &delta.moves {
            match records {
                Some(records) => {
                    batch.put(MOVES_TABLE, *id, encode(MOVES_TABLE, *id, records)?);
                }
                None => {
                    batch.delete(MOVES_TABLE, *id);
                }
            }
        }
        if let Some(next) = delta.next_move_id {
            batch.put_meta(NEXT_MOVE_ID_META, next.to_le_bytes());
        }
        change_meta(&mut batch, QUEUE_TABLE_META, &delta.queue_table, &encode)?;
        change_meta(&mut batch, LIMITS_META, &delta.limits, &encode)?;
        if let Some(allowances) = &delta.allowances {
            batch.put_meta(ALLOWANCES_META, encode("meta", 0, allowances)?);
        }
        if let Some(fairshare) = &delta.fairshare {
            batch.put_meta(FAIRSHARE_META, encode("meta", 0, fairshare)?);
        }
        Ok(batch)
    }
}

/// Writes the change a delta makes to meta record `name`: `Some(Some(value))` sets it,
/// `Some(None)` deletes it, `None` leaves it as it is.
fn change_meta<T: Encode, E>(
    batch: &mut Batch,
    name: &str,
    change: &Option<Option<T>>,
    encode: &impl Fn(&str, u64, &dyn Encode) -> Result<Vec<u8>, E>,
) -> Result<(), E> {
    match change {
        None => {}
        Some(None) => {
            batch.delete_meta(name);
        }
        Some(Some(value)) => {
            batch.put_meta(name, encode("meta", 0, value)?);
        }
    }
    Ok(())
}

/// The coordinator journals of the versions before format v1 carried a four-byte number in
/// the stamp's place; they are refused as written before v1, not as an unreadable stamp.
fn refuse_numeric_stamp(journal: &Journal) -> Result<(), JournalError> {
    match journal.meta(FORMAT_META)? {
        Some(stamp) if stamp.len() == 4 && !stamp.starts_with(b"shardsched-") => Err(format_error(
            journal,
            format!(
                "written before journal format v1 (a coordinator journal of an earlier \
                     shardsched, in the wire's encoding, which this build does not read); this \
                     build reads {JOURNAL_KIND} journal format v{JOURNAL_VERSION}: move the \
                     state directory aside to start afresh, or run the shardsched that wrote it"
            ),
        )),
        _ => Ok(()),
    }
}

fn format_error(journal: &Journal, why: String) -> JournalError {
    JournalError::new(journal.path(), ErrorKind::Format(why))
}

/// Reads every record back into a [`Durable`], with the node keys.
fn read_state(journal: &Journal) -> Result<(Durable, HashMap<String, u64>), JournalError> {
    let path = journal.path();
    let mut delta = DurableDelta::default();
    for (key, bytes) in journal.scan(QUEUES_TABLE)? {
        let record: QueueRecord = decode(path, QUEUES_TABLE, key, &bytes)?;
        let id = u16::try_from(key).map_err(|_| {
            JournalError::decode(path, QUEUES_TABLE, key, "generator id out of range")
        })?;
        delta.queues.push((id, record));
    }
    let mut keys = HashMap::new();
    for (key, bytes) in journal.scan(NODES_TABLE)? {
        let record: NodeRecord = decode(path, NODES_TABLE, key, &bytes)?;
        if keys.insert(record.name.clone(), key).is_some() {
            return Err(JournalError::decode(
                path,
                NODES_TABLE,
                key,
                format!("node {} has two records", record.name),
            ));
        }
        delta.nodes.push(record);
    }
    for (key, bytes) in journal.scan(MOVES_TABLE)? {
        let records: Vec<MoveStepRecord> = decode(path, MOVES_TABLE, key, &bytes)?;
        delta.moves.push((key, Some(records)));
    }
    delta.next_move_id = match journal.meta(NEXT_MOVE_ID_META)? {
        None => None,
        Some(bytes) => Some(
            <[u8; 8]>::try_from(bytes.as_slice())
                .map(u64::from_le_bytes)
                .map_err(|_| JournalError::decode_meta(path, NEXT_MOVE_ID_META, "not 8 bytes"))?,
        ),
    };
    if let Some(bytes) = journal.meta(QUEUE_TABLE_META)? {
        let table = format::decode(&bytes)
            .map_err(|e| JournalError::decode_meta(path, QUEUE_TABLE_META, e))?;
        delta.queue_table = Some(Some(table));
    }
    if let Some(bytes) = journal.meta(LIMITS_META)? {
        let limits =
            format::decode(&bytes).map_err(|e| JournalError::decode_meta(path, LIMITS_META, e))?;
        delta.limits = Some(Some(limits));
    }
    if let Some(bytes) = journal.meta(ALLOWANCES_META)? {
        let allowances = format::decode(&bytes)
            .map_err(|e| JournalError::decode_meta(path, ALLOWANCES_META, e))?;
        delta.allowances = Some(allowances);
    }
    if let Some(bytes) = journal.meta(FAIRSHARE_META)? {
        let fairshare = format::decode(&bytes)
            .map_err(|e| JournalError::decode_meta(path, FAIRSHARE_META, e))?;
        delta.fairshare = Some(fairshare);
    }
    let mut durable = Durable::default();
    durable
        .apply(delta)
        .map_err(|e| JournalError::decode(path, e.table, e.key, e.message))?;
    Ok((durable, keys))
}

/// One record of `table` at `key`, decoded in the journal's format.
fn decode<T: DeserializeOwned>(
    path: &Path,
    table: &str,
    key: u64,
    bytes: &[u8],
) -> Result<T, JournalError> {
    format::decode(bytes).map_err(|e| JournalError::decode(path, table, key, e))
}

/// Encoding the record types through one closure.
trait Encode {
    fn encode(&self) -> Result<Vec<u8>, format::FormatError>;
}

impl<T: Serialize> Encode for T {
    fn encode(&self) -> Result<Vec<u8>, format::FormatError> {
        format::encode(self)
    }
}

#[cfg(test)]
mod tests;
