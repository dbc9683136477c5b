//! The coordinator's journal: `<state-dir>/journal.redb`, a `shardsched-journal` store of
//! one record per queue, per node and per unfinished move (see [`records`] for the layout).
//!
//! The pure core keeps the whole [`Durable`] state in memory and hands the driver only what
//! changed ([`DurableDelta`]); [`CoordJournal::write`] turns a delta into one batch for the
//! group [`Committer`] and returns once it is durable. So a 1,024-node move costs a few
//! commits (its start, then releases and acquisitions as they come, each carrying every
//! change made meanwhile), not one per node, and finished moves' records are deleted in the
//! commit that finishes them: the journal holds the present, not the history.
//!
//! # Start
//!
//! [`CoordJournal::open`] opens and verifies the journal (a damaged one refuses the start
//! with the file named). A journal never initialised (no `format` value: new, or created
//! by a start that died before its first commit) is filled from the TOML state file of
//! earlier versions, `coordinator-state.toml`, when one exists; once that import is
//! durable, the file is renamed `coordinator-state.toml.imported`, so it is imported once.

pub mod records;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use shardsched_journal::{Batch, CommitStats, Committer, Journal, JournalError};
use shardsched_proto::codec;
use shardsched_proto::msg::MoveId;

use crate::moves::MoveRecord;
use crate::ownership::{Durable, DurableError};
pub use records::{DurableDelta, JOURNAL_FORMAT, NodeRecord, QueueRecord};
use records::{
    FORMAT_META, MOVES_TABLE, NEXT_MOVE_ID_META, NODES_TABLE, QUEUE_TABLE_META, QUEUES_TABLE,
};

/// The journal's file name in the state directory.
pub use shardsched_proto::state_dir::JOURNAL_FILE;
/// The state file of earlier versions, imported once.
pub const LEGACY_STATE_FILE: &str = "coordinator-state.toml";
/// What the legacy state file is renamed to once imported.
pub const LEGACY_IMPORTED_SUFFIX: &str = ".imported";

/// The journal could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum CoordJournalError {
    /// The store refused (damaged file, I/O error, stopped committer); names the file.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The legacy state file could not be read or renamed.
    #[error("{}: {error}", .path.display())]
    Legacy {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// The legacy state file does not decode.
    #[error("{}: {error}", .path.display())]
    LegacyDecode {
        /// The file.
        path: PathBuf,
        /// Why.
        error: DurableError,
    },
    /// A value in the journal is of a format this build does not read.
    #[error("journal {}: format {found} (this build reads {JOURNAL_FORMAT})", .path.display())]
    Format {
        /// The journal file.
        path: PathBuf,
        /// The format found.
        found: u32,
    },
}

/// Where the state a start begins from came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// First start: nothing was there.
    Fresh,
    /// The journal.
    Journal,
    /// The legacy TOML state file (now renamed).
    Imported(PathBuf),
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
    /// Opens (creating on first start) and verifies `<dir>/journal.redb`, and reads the
    /// durable state from it — or, when it was never initialised, from the legacy state
    /// file, which is then imported. Blocking: call before serving, or off the runtime.
    pub fn open(dir: &Path) -> Result<(CoordJournal, Durable, Origin), CoordJournalError> {
        let path = dir.join(JOURNAL_FILE);
        let journal = Journal::open(&path)?;
        let initialised = match journal.meta(FORMAT_META)? {
            None => false,
            Some(bytes) => {
                let found = le_u32(&bytes).unwrap_or(u32::MAX);
                if found != JOURNAL_FORMAT {
                    return Err(CoordJournalError::Format { path, found });
                }
                true
            }
        };
        let (durable, node_keys) = if initialised {
            read_state(&journal)?
        } else {
            (Durable::default(), HashMap::new())
        };
        let next_node_key = node_keys.values().max().map_or(0, |k| k + 1);
        let committer = Committer::start(journal)?;
        let mut this = CoordJournal {
            committer,
            node_keys,
            next_node_key,
        };
        if initialised {
            return Ok((this, durable, Origin::Journal));
        }
        let legacy = dir.join(LEGACY_STATE_FILE);
        let (durable, origin) = match std::fs::read_to_string(&legacy) {
            Ok(text) => {
                let durable =
                    Durable::from_toml(&text).map_err(|error| CoordJournalError::LegacyDecode {
                        path: legacy.clone(),
                        error,
                    })?;
                (durable, Origin::Imported(legacy.clone()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (Durable::default(), Origin::Fresh)
            }
            Err(e) => {
                return Err(CoordJournalError::Legacy {
                    path: legacy,
                    error: e.to_string(),
                });
            }
        };
        // The format value goes in with the imported state, in one commit: a journal with
        // a format is a journal with its state.
        let delta = durable.diff(&Durable::default());
        let mut batch = this.batch(&delta)?;
        batch.put_meta(FORMAT_META, JOURNAL_FORMAT.to_le_bytes());
        this.committer
            .submit_blocking(batch)?
            .wait_blocking()
            .map_err(CoordJournalError::from)?;
        if let Origin::Imported(from) = &origin {
            let mut to = from.as_os_str().to_owned();
            to.push(LEGACY_IMPORTED_SUFFIX);
            std::fs::rename(from, &to).map_err(|e| CoordJournalError::Legacy {
                path: from.clone(),
                error: format!("imported, but could not be renamed: {e}"),
            })?;
        }
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
    /// Returns once it is on disk. A failed commit stops the journal: every later write
    /// fails too (the file's state after a failed fsync is unknown).
    pub async fn write(&mut self, delta: &DurableDelta) -> Result<(), CoordJournalError> {
        if delta.is_empty() {
            return Ok(());
        }
        let batch = self.batch(delta)?;
        self.committer.commit(batch).await?;
        Ok(())
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
        let encode = |table: &str, key: u64, value: &dyn erased::Encode| {
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
        for (MoveId(id), records) in &delta.moves {
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
        match &delta.queue_table {
            None => {}
            Some(None) => {
                batch.delete_meta(QUEUE_TABLE_META);
            }
            Some(Some(table)) => {
                batch.put_meta(QUEUE_TABLE_META, encode("meta", 0, table)?);
            }
        }
        Ok(batch)
    }
}

/// Reads every record back into a [`Durable`], with the node keys.
fn read_state(journal: &Journal) -> Result<(Durable, HashMap<String, u64>), CoordJournalError> {
    let path = journal.path();
    let mut queues = Vec::new();
    for (key, bytes) in journal.scan(QUEUES_TABLE)? {
        let record: QueueRecord =
            codec::decode(&bytes).map_err(|e| JournalError::decode(path, QUEUES_TABLE, key, e))?;
        let id = u16::try_from(key).map_err(|_| {
            JournalError::decode(path, QUEUES_TABLE, key, "generator id out of range")
        })?;
        queues.push((id, record));
    }
    let mut nodes = Vec::new();
    let mut keys = HashMap::new();
    for (key, bytes) in journal.scan(NODES_TABLE)? {
        let record: NodeRecord =
            codec::decode(&bytes).map_err(|e| JournalError::decode(path, NODES_TABLE, key, e))?;
        if keys.insert(record.name.clone(), key).is_some() {
            return Err(JournalError::decode(
                path,
                NODES_TABLE,
                key,
                format!("node {} has two records", record.name),
            )
            .into());
        }
        nodes.push(record);
    }
    let mut moves = Vec::new();
    for (key, bytes) in journal.scan(MOVES_TABLE)? {
        let records: Vec<MoveRecord> =
            codec::decode(&bytes).map_err(|e| JournalError::decode(path, MOVES_TABLE, key, e))?;
        if records.iter().any(|r| r.move_id() != MoveId(key)) {
            return Err(
                JournalError::decode(path, MOVES_TABLE, key, "a record of another move").into(),
            );
        }
        moves.push((MoveId(key), records));
    }
    let next_move_id = match journal.meta(NEXT_MOVE_ID_META)? {
        None => 0,
        Some(bytes) => le_u64(&bytes)
            .ok_or_else(|| JournalError::decode_meta(path, NEXT_MOVE_ID_META, "not 8 bytes"))?,
    };
    let queue_table = match journal.meta(QUEUE_TABLE_META)? {
        None => None,
        Some(bytes) => Some(
            codec::decode(&bytes)
                .map_err(|e| JournalError::decode_meta(path, QUEUE_TABLE_META, e))?,
        ),
    };
    Ok((
        Durable::from_records(queues, nodes, moves, next_move_id, queue_table),
        keys,
    ))
}

fn le_u32(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

fn le_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Encoding the three record types through one closure.
mod erased {
    use shardsched_proto::codec::{self, CodecError};

    pub(super) trait Encode {
        fn encode(&self) -> Result<Vec<u8>, CodecError>;
    }

    impl<T: serde::Serialize> Encode for T {
        fn encode(&self) -> Result<Vec<u8>, CodecError> {
            codec::encode(self)
        }
    }
}

#[cfg(test)]
mod tests;
