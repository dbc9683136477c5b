//! [`Journal`]: the redb file, its checksummed records, and the check made on every open.
//!
//! # Format
//!
//! ```text
//! table <name>   (caller's, key u64)  value = crc32 (4 bytes LE) ‖ payload
//! table __meta   (key = name)         value = crc32 ‖ payload
//! table __journal  "state"            records u64 LE ‖ last_seq u64 LE ‖ crc32 of those 16
//! ```
//!
//! Each checksum covers the table name, the key and the payload, so a value that moved to
//! another key, or a key whose bytes flipped, fails it as surely as a flipped value. The
//! state record counts the records of every table and numbers the transactions; it is
//! rewritten in the same transaction as the records it counts. On open every record is read
//! and checked and the count compared: a record that disappeared, appeared, or changed makes
//! the open fail with the file, table and key named.
//!
//! Commits are `Durability::Immediate` with redb's two-phase commit: a commit slot that is
//! corrupted afterwards is then reported by redb as corruption, instead of being silently
//! replaced by the previous commit (which, with the one-phase checksummed commit, would lose
//! the last acknowledged transaction without a word).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Durability, ReadableTable, TableDefinition};

use crate::batch::{Batch, Write};
use crate::error::{ErrorKind, JournalError};
use crate::limits::CACHE_BYTES;

mod read;

/// The journal's own table: the state record.
const STATE_TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("__journal");
const STATE_KEY: &str = "state";
/// Named values.
const META_TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("__meta");
/// How the meta table is named in errors and checksums.
const META_NAME: &str = "meta";
/// A caller's table open in a write transaction, with its name.
type OpenTable<'t> = (String, redb::Table<'t, u64, &'static [u8]>);
/// Bytes of a checksum at the head of each value.
const CRC_BYTES: usize = 4;

/// What the state record says: records stored and the last transaction's number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalState {
    /// Records in every table, named values included.
    pub records: u64,
    /// Sequence number of the last committed transaction (0: none yet).
    pub last_seq: u64,
}

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    /// The transaction's sequence number.
    pub seq: u64,
    /// Writes in the transaction (all the batches of a group commit).
    pub writes: usize,
    /// How long redb's commit (its fsyncs) took.
    pub fsync: Duration,
}

/// An open journal file. Cheap to clone (the database is shared); reads may run on any
/// thread while a commit is in progress.
#[derive(Clone)]
pub struct Journal {
    db: Arc<Db>,
    path: Arc<Path>,
}

/// The database, closed under a panic guard: redb commits its allocator state when a
/// database is dropped, and on a damaged file that can panic.
struct Db {
    db: Option<redb::Database>,
    path: Arc<Path>,
}

impl std::ops::Deref for Db {
    type Target = redb::Database;
    fn deref(&self) -> &redb::Database {
        // Only `drop` takes the database out.
        self.db
            .as_ref()
            .unwrap_or_else(|| unreachable!("database used after close"))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let db = self.db.take();
        if let Err(e) = guarded(&self.path, move || {
            drop(db);
            Ok(())
        }) {
            tracing::error!(error = %e, "closing the journal");
        }
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

impl Journal {
    /// Opens the journal at `path`, creating it if there is no file there, and verifies
    /// every record against its checksum and the state record's count. Any failure —
    /// redb's own (truncated or empty file, bad header, corrupted page, even a panic) or
    /// ours — is an error naming the file.
    ///
    /// A new journal is made under a temporary name and renamed into place once it holds
    /// its state record, so an existing file at `path` is always one that was complete: an
    /// empty or short file there is damage, never a journal that was being created.
    pub fn open(path: impl AsRef<Path>) -> Result<Journal, JournalError> {
        let path: Arc<Path> = Arc::from(path.as_ref());
        if !path.exists() {
            create(&path)?;
        }
        guarded(&path, || {
            let db = redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .open(&path)
                .map_err(|e| JournalError::new(&path, ErrorKind::Open(e.to_string())))?;
            let journal = Journal {
                db: Arc::new(Db {
                    db: Some(db),
                    path: Arc::clone(&path),
                }),
                path: Arc::clone(&path),
            };
            let state = journal.verify()?;
            tracing::debug!(path = %path.display(), records = state.records, last_seq = state.last_seq, "journal verified");
            Ok(journal)
        })
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes now.
    pub fn file_bytes(&self) -> Result<u64, JournalError> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| JournalError::storage(&self.path, "file size", e))
    }

    /// Commits one batch durably (fsync) before returning. For many small batches from
    /// many callers, use a [`Committer`](crate::Committer) instead.
    pub fn commit(&self, batch: &Batch) -> Result<CommitInfo, JournalError> {
        batch.validate(&self.path)?;
        self.commit_all(&[batch])
    }

    /// Convenience: commits a single put.
    pub fn put(&self, table: &str, key: u64, value: &[u8]) -> Result<CommitInfo, JournalError> {
        let mut batch = Batch::new();
        batch.put(table, key, value);
        self.commit(&batch)
    }

    /// Convenience: commits a single delete.
    pub fn delete(&self, table: &str, key: u64) -> Result<CommitInfo, JournalError> {
        let mut batch = Batch::new();
        batch.delete(table, key);
        self.commit(&batch)
    }

    /// Reads every record and checks it; compares the count with the state record (which
    /// must be there: it is written when the journal is created).
    fn verify(&self) -> Result<JournalState, JournalError> {
        let state = self.state_record()?.ok_or_else(|| {
            JournalError::new(
                &self.path,
                ErrorKind::State("the state record is missing".into()),
            )
        })?;
        let mut found = 0u64;
        for table in self.tables()? {
            found += self.scan(&table)?.len() as u64;
        }
        found += self.metas()?.len() as u64;
        if found != state.records {
            return Err(JournalError::new(
                &self.path,
                ErrorKind::State(format!(
                    "{found} records found where the state record counts {} (after transaction {}): records were lost or added outside the journal",
                    state.records, state.last_seq
                )),
            ));
        }
        Ok(state)
    }

    /// Applies `batches` in one write transaction, durably. Batches are validated by the
    /// caller.
    pub(crate) fn commit_all(&self, batches: &[&Batch]) -> Result<CommitInfo, JournalError> {
        guarded(&self.path, || {
            let mut txn = self.db.begin_write().map_err(|e| self.err("begin", e))?;
            txn.set_durability(Durability::Immediate)
                .map_err(|e| self.err("durability", e))?;
            txn.set_two_phase_commit(true);
            let mut writes = 0;
            let state = {
                let mut state_table = txn
                    .open_table(STATE_TABLE)
                    .map_err(|e| self.err("open state", e))?;
                let old = state_table
                    .get(STATE_KEY)
                    .map_err(|e| self.err("state", e))?
                    .map(|g| g.value().to_vec());
                let mut state = read_state(&self.path, old)?;
                let mut records = i128::from(state.records);
                for batch in batches {
                    writes += batch.len();
                    records += self.apply(&txn, batch)?;
                }
                state.records = u64::try_from(records).map_err(|_| {
                    JournalError::new(
                        &self.path,
                        ErrorKind::State(format!("record count went to {records}")),
                    )
                })?;
                state.last_seq += 1;
                state_table
                    .insert(STATE_KEY, state_bytes(state).as_slice())
                    .map_err(|e| self.err("state", e))?;
                state
            };
            let started = Instant::now();
            txn.commit().map_err(|e| self.err("commit", e))?;
            Ok(CommitInfo {
                seq: state.last_seq,
                writes,
                fsync: started.elapsed(),
            })
        })
    }

    /// Applies one batch inside `txn`; returns the change in the record count. A caller's
    /// table stays open across consecutive writes to it.
    fn apply(&self, txn: &redb::WriteTransaction, batch: &Batch) -> Result<i128, JournalError> {
        let mut delta = 0i128;
        let mut open: Option<OpenTable<'_>> = None;
        for w in batch.writes() {
            match w {
                Write::Put { table, key, value } => {
                    let t = self.user_table(txn, &mut open, table)?;
                    let stored = with_crc(table, &key.to_le_bytes(), value);
                    let old = t
                        .insert(*key, stored.as_slice())
                        .map_err(|e| self.err("put", e))?;
                    if old.is_none() {
                        delta += 1;
                    }
                }
                Write::Delete { table, key } => {
                    let t = self.user_table(txn, &mut open, table)?;
                    if t.remove(*key).map_err(|e| self.err("delete", e))?.is_some() {
                        delta -= 1;
                    }
                }
                Write::DeleteBelow { table, below } => {
                    let t = self.user_table(txn, &mut open, table)?;
                    let mut keys = Vec::new();
                    for entry in t.range(..*below).map_err(|e| self.err("delete below", e))? {
                        let (k, _) = entry.map_err(|e| self.err("delete below", e))?;
                        keys.push(k.value());
                    }
                    for k in keys {
                        if t.remove(k)
                            .map_err(|e| self.err("delete below", e))?
                            .is_some()
                        {
                            delta -= 1;
                        }
                    }
                }
                Write::PutMeta { name, value } => {
                    let mut t = txn
                        .open_table(META_TABLE)
                        .map_err(|e| self.err("open meta", e))?;
                    let stored = with_crc(META_NAME, name.as_bytes(), value);
                    if t.insert(name.as_str(), stored.as_slice())
                        .map_err(|e| self.err("put meta", e))?
                        .is_none()
                    {
                        delta += 1;
                    }
                }
                Write::DeleteMeta { name } => {
                    let mut t = txn
                        .open_table(META_TABLE)
                        .map_err(|e| self.err("open meta", e))?;
                    if t.remove(name.as_str())
                        .map_err(|e| self.err("delete meta", e))?
                        .is_some()
                    {
                        delta -= 1;
                    }
                }
            }
        }
        Ok(delta)
    }

    /// The caller's table `name`, opened in `txn` unless it is the one already open.
    fn user_table<'t, 'o>(
        &self,
        txn: &'t redb::WriteTransaction,
        open: &'o mut Option<OpenTable<'t>>,
        name: &str,
    ) -> Result<&'o mut redb::Table<'t, u64, &'static [u8]>, JournalError> {
        if open.as_ref().is_none_or(|(n, _)| n != name) {
            // Close the previous table before opening another.
            *open = None;
            let t = txn
                .open_table(TableDefinition::<u64, &[u8]>::new(name))
                .map_err(|e| self.err("open table", e))?;
            *open = Some((name.to_owned(), t));
        }
        match open {
            Some((_, t)) => Ok(t),
            None => unreachable!("a table was just opened"),
        }
    }

    fn err(&self, op: &'static str, e: impl Into<redb::Error>) -> JournalError {
        JournalError::storage(&self.path, op, e.into())
    }
}

/// Makes a new, empty journal at `path`: built as `<path>.new` with its state record, made
/// durable, then renamed into place (and the directory synced, so the name is durable too).
fn create(path: &Path) -> Result<(), JournalError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let io = |op: &'static str| move |e: std::io::Error| JournalError::storage(path, op, e);
    if tmp.exists() {
        std::fs::remove_file(&tmp).map_err(io("remove a half-made journal"))?;
    }
    guarded(path, || {
        let db = redb::Builder::new()
            .set_cache_size(CACHE_BYTES)
            .create(&tmp)
            .map_err(|e| JournalError::new(path, ErrorKind::Open(e.to_string())))?;
        let commit = || -> Result<(), redb::Error> {
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::Immediate)?;
            txn.set_two_phase_commit(true);
            txn.open_table(STATE_TABLE)?
                .insert(STATE_KEY, state_bytes(JournalState::default()).as_slice())?;
            txn.commit()?;
            Ok(())
        };
        commit().map_err(|e| JournalError::storage(path, "create", e))?;
        drop(db);
        Ok(())
    })?;
    std::fs::rename(&tmp, path).map_err(io("rename the new journal into place"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("sync the journal's directory"))?;
    }
    Ok(())
}

/// Runs `f`, turning a panic inside redb into an error naming the file.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, JournalError>) -> Result<T, JournalError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Err(JournalError::new(path, ErrorKind::Panicked(message)))
    })
}

/// The checksum of a record: table name, key and payload, each length-prefixed.
fn checksum(table: &str, key: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for part in [table.as_bytes(), key, payload] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize()
}

fn with_crc(table: &str, key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CRC_BYTES + payload.len());
    out.extend_from_slice(&checksum(table, key, payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn state_bytes(s: JournalState) -> Vec<u8> {
    let mut body = Vec::with_capacity(16);
    body.extend_from_slice(&s.records.to_le_bytes());
    body.extend_from_slice(&s.last_seq.to_le_bytes());
    with_crc("__journal", STATE_KEY.as_bytes(), &body)
}

/// The state record from its stored bytes (absent: a fresh journal).
fn read_state(path: &Path, stored: Option<Vec<u8>>) -> Result<JournalState, JournalError> {
    let Some(stored) = stored else {
        return Ok(JournalState::default());
    };
    let bad = |why: &str| JournalError::new(path, ErrorKind::State(format!("state record {why}")));
    if stored.len() != CRC_BYTES + 16 {
        return Err(bad(&format!("has {} bytes, not 20", stored.len())));
    }
    let (crc, body) = stored.split_at(CRC_BYTES);
    if crc != checksum("__journal", STATE_KEY.as_bytes(), body).to_le_bytes() {
        return Err(bad("fails its checksum"));
    }
    let (records, seq) = body.split_at(8);
    let word = |b: &[u8]| {
        b.try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| bad("is malformed"))
    };
    Ok(JournalState {
        records: word(records)?,
        last_seq: word(seq)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_puts_deletes_and_cuts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let j = Journal::open(dir.path().join("j.redb")).expect("open");
        let mut b = Batch::new();
        for k in 0..10 {
            b.put("jobs", k, vec![k as u8]);
        }
        b.put("jobs", 3, vec![33])
            .put_meta("a", vec![1])
            .put_meta("a", vec![2]);
        let info = j.commit(&b).expect("commit");
        assert_eq!((info.seq, info.writes), (1, 13));
        assert_eq!(j.state().expect("state").records, 11);
        let mut b = Batch::new();
        b.delete_below("jobs", 4)
            .delete("jobs", 9)
            .delete("jobs", 99)
            .delete_meta("a");
        j.commit(&b).expect("commit");
        assert_eq!(
            j.state().expect("state"),
            JournalState {
                records: 5,
                last_seq: 2
            }
        );
        let keys: Vec<u64> = j
            .scan("jobs")
            .expect("scan")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![4, 5, 6, 7, 8]);
        assert_eq!(j.get("jobs", 5).expect("get"), Some(vec![5]));
        assert_eq!(j.get("nothing", 5).expect("get"), None);
        assert!(j.metas().expect("metas").is_empty());
        assert_eq!(j.tables().expect("tables"), vec!["jobs".to_owned()]);
    }

    #[test]
    fn an_empty_file_is_damage_not_a_new_journal() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("j.redb");
        std::fs::write(&path, b"").expect("write");
        let e = Journal::open(&path).expect_err("an empty file opened");
        assert_eq!(e.path, path);
        assert!(e.to_string().contains("j.redb"), "{e}");
    }

    #[test]
    fn decode_errors_name_file_table_and_key() {
        let e = JournalError::decode(Path::new("/s/journal.redb"), "jobs", 42, "bad tag");
        assert_eq!(
            e.to_string(),
            "journal /s/journal.redb: table jobs, key 42: cannot decode: bad tag"
        );
    }
}
