//! The shard's journal on disk: the core's records ([`shardsched_shard_core::journal`],
//! re-exported here) encoded with the journal's own format
//! ([`shardsched_journal::format`]), stamped `shardsched-shard-journal v3`.
//!
//! [`open`] checks the stamp before reading anything: a fresh journal is stamped at once; a
//! v1 or v2 journal is upgraded (restamped: v2 and v3 only added tables); a
//! journal written before format v1 (by the wire codec), one of another kind, or one of a
//! newer version is refused by name (the error names the file, and a restart would fail the
//! same way). [`to_batch`] encodes a batch of records for the committer; [`load`] reads a
//! journal back into a [`Restored`], checking that every record decodes, is keyed by its
//! own job id, and belongs to a job the journal has (errors name the file, table and key).

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::DeserializeOwned;
use shardsched_journal::format::{self, FormatError, Stamp};
use shardsched_journal::{Batch, ErrorKind, Journal, JournalError};

pub use shardsched_shard_core::journal::*;

/// Opens (or creates) the journal at `path`, verified (see [`Journal::open`]), and checks
/// its format stamp; a fresh one is stamped now.
pub fn open(path: &Path) -> Result<Journal, JournalError> {
    let journal = Journal::open(path)?;
    match format::check(&journal, FORMAT_KIND, FORMAT_VERSION)? {
        Stamp::Current => {}
        Stamp::Fresh => stamp(&journal)?,
        Stamp::Older(version) if version >= FORMAT_VERSION_UPGRADED => {
            // Every record of the older format is one of this format's: restamp it.
            stamp(&journal)?;
            tracing::info!(path = %journal.path().display(), from = version, to = FORMAT_VERSION, "journal format upgraded");
        }
        Stamp::Older(version) => {
            return Err(JournalError::new(
                journal.path(),
                ErrorKind::Format(format!(
                    "{FORMAT_KIND} journal format v{version}, which this build does not \
                     upgrade (it reads v{FORMAT_VERSION})"
                )),
            ));
        }
    }
    Ok(journal)
}

/// Stamps `journal` with this build's format.
fn stamp(journal: &Journal) -> Result<(), JournalError> {
    let mut stamp = Batch::new();
    stamp.put_meta(
        format::FORMAT_META,
        format::stamp_value(FORMAT_KIND, FORMAT_VERSION),
    );
    journal.commit(&stamp).map(drop)
}

/// The journal writes for `records`, in order.
pub fn to_batch(records: &[JournalRecord]) -> Result<Batch, FormatError> {
    let mut batch = Batch::new();
    for r in records {
        match r {
            JournalRecord::Accepted(job) => {
                batch.put(JOBS_TABLE, job.id, format::encode(job)?);
            }
            JournalRecord::Signed(signature) => {
                batch.put(SIGNATURES_TABLE, signature.id, format::encode(signature)?);
            }
            JournalRecord::Started(run) => {
                batch.put(RUNS_TABLE, run.id, format::encode(run)?);
            }
            JournalRecord::Ended(end) => {
                batch
                    .put(ENDS_TABLE, end.id, format::encode(end)?)
                    .delete(KILLS_TABLE, end.id);
            }
            JournalRecord::KillRequested(kill) => {
                batch.put(KILLS_TABLE, kill.id, format::encode(kill)?);
            }
            JournalRecord::Forgotten(id) => {
                batch
                    .delete(KILLS_TABLE, id.0)
                    .delete(JOBS_TABLE, id.0)
                    .delete(RUNS_TABLE, id.0)
                    .delete(ENDS_TABLE, id.0)
                    .delete(URGENCY_TABLE, id.0)
                    .delete(SIGNATURES_TABLE, id.0);
            }
            JournalRecord::Urgency(id, urgency) => {
                batch.put(URGENCY_TABLE, id.0, format::encode(urgency)?);
            }
            JournalRecord::Array(array) => {
                batch.put(ARRAYS_TABLE, array.id, format::encode(array)?);
            }
            JournalRecord::ArrayForgotten { id, elements } => {
                batch
                    .delete(JOBS_TABLE, id.0)
                    .delete(ARRAYS_TABLE, id.0)
                    .delete(SIGNATURES_TABLE, id.0);
                for e in elements {
                    batch
                        .delete(KILLS_TABLE, e.0)
                        .delete(RUNS_TABLE, e.0)
                        .delete(ENDS_TABLE, e.0)
                        .delete(URGENCY_TABLE, e.0);
                }
            }
            JournalRecord::LastId(id) => {
                batch.put_meta(LAST_ID_META, format::encode(&id.0)?);
            }
            JournalRecord::Requeued(id) => {
                batch.delete(RUNS_TABLE, id.0).delete(KILLS_TABLE, id.0);
            }
            JournalRecord::Node(name, node) => {
                batch.put_meta(&format!("{NODE_META_PREFIX}{name}"), format::encode(node)?);
            }
            JournalRecord::Allowance(user, record) => {
                batch.put_meta(
                    &format!("{ALLOWANCE_META_PREFIX}{user}"),
                    format::encode(record)?,
                );
            }
        }
    }
    Ok(batch)
}

/// Reads everything back (the journal was verified and its stamp checked by [`open`]).
pub fn load(journal: &Journal) -> Result<Restored, JournalError> {
    let tables = Tables {
        jobs: journal.scan(JOBS_TABLE)?,
        arrays: journal.scan(ARRAYS_TABLE)?,
        runs: journal.scan(RUNS_TABLE)?,
        ends: journal.scan(ENDS_TABLE)?,
        urgency: journal.scan(URGENCY_TABLE)?,
        signatures: journal.scan(SIGNATURES_TABLE)?,
        kills: journal.scan(KILLS_TABLE)?,
        metas: journal.metas()?,
    };
    restored(journal.path(), tables)
}

/// The shard's tables as read from a journal (or kept by a test's in-memory journal).
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// [`JOBS_TABLE`], in key order.
    pub jobs: Vec<(u64, Vec<u8>)>,
    /// [`ARRAYS_TABLE`].
    pub arrays: Vec<(u64, Vec<u8>)>,
    /// [`RUNS_TABLE`].
    pub runs: Vec<(u64, Vec<u8>)>,
    /// [`ENDS_TABLE`].
    pub ends: Vec<(u64, Vec<u8>)>,
    /// [`URGENCY_TABLE`].
    pub urgency: Vec<(u64, Vec<u8>)>,
    /// [`SIGNATURES_TABLE`].
    pub signatures: Vec<(u64, Vec<u8>)>,
    /// [`KILLS_TABLE`] (format v3; empty in older journals).
    pub kills: Vec<(u64, Vec<u8>)>,
    /// Named values.
    pub metas: BTreeMap<String, Vec<u8>>,
}

/// Decodes the tables of the journal at `path` (named in errors) into a [`Restored`].
pub fn restored(path: &Path, tables: Tables) -> Result<Restored, JournalError> {
    let jobs = decode_table::<AcceptedJob>(path, JOBS_TABLE, tables.jobs, |j| j.id)?;
    let arrays = decode_table::<ArrayRecord>(path, ARRAYS_TABLE, tables.arrays, |a| a.id)?;
    let runs = decode_table::<StartedJob>(path, RUNS_TABLE, tables.runs, |r| r.id)?;
    let ends = decode_table::<EndedJob>(path, ENDS_TABLE, tables.ends, |e| e.id)?;
    let urgency = tables
        .urgency
        .into_iter()
        .map(|(key, bytes)| {
            format::decode::<u8>(&bytes)
                .map(|u| (key, u))
                .map_err(|e| JournalError::decode(path, URGENCY_TABLE, key, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let signatures =
        decode_table::<SignatureRecord>(path, SIGNATURES_TABLE, tables.signatures, |s| s.id)?;
    let kills = decode_table::<KillRecord>(path, KILLS_TABLE, tables.kills, |k| k.id)?;
    let last_id = match tables.metas.get(LAST_ID_META) {
        Some(bytes) => Some(
            format::decode::<u64>(bytes)
                .map_err(|e| JournalError::decode_meta(path, LAST_ID_META, e))?,
        ),
        None => None,
    };
    let nodes = decode_metas::<NodeRecord>(path, &tables.metas, NODE_META_PREFIX)?;
    let allowances = decode_metas::<AllowanceRecord>(path, &tables.metas, ALLOWANCE_META_PREFIX)?;
    let tables = JobTables {
        jobs,
        arrays,
        runs,
        ends,
        urgencies: urgency,
        signatures,
        kills,
    };
    let mut restored = Restored::assemble(tables, last_id, nodes).map_err(|o| {
        JournalError::decode(
            path,
            o.table,
            o.key,
            "a record for a job the jobs table does not have",
        )
    })?;
    restored.allowances = allowances;
    Ok(restored)
}

/// Decodes the meta records named `prefix` + something, as (something, record): one per
/// node (`node:`) or per user (`allowance:`).
fn decode_metas<T: DeserializeOwned>(
    path: &Path,
    metas: &BTreeMap<String, Vec<u8>>,
    prefix: &str,
) -> Result<Vec<(String, T)>, JournalError> {
    metas
        .iter()
        .filter_map(|(name, bytes)| Some((name, name.strip_prefix(prefix)?, bytes)))
        .map(|(name, rest, bytes)| {
            let record =
                format::decode(bytes).map_err(|e| JournalError::decode_meta(path, name, e))?;
            Ok((rest.to_owned(), record))
        })
        .collect()
}

/// Decodes a table's records, each of which must be about the job its key names.
fn decode_table<T: DeserializeOwned>(
    path: &Path,
    table: &str,
    rows: Vec<(u64, Vec<u8>)>,
    id: impl Fn(&T) -> u64,
) -> Result<Vec<T>, JournalError> {
    rows.into_iter()
        .map(|(key, bytes)| {
            let value: T =
                format::decode(&bytes).map_err(|e| JournalError::decode(path, table, key, e))?;
            if id(&value) != key {
                let about = shardsched_proto::Fluid(id(&value));
                return Err(JournalError::decode(
                    path,
                    table,
                    key,
                    format!("the record is about job {about}"),
                ));
            }
            Ok(value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_does_not_decode_is_named_by_file_table_and_key() {
        let path = Path::new("/state/journal.redb");
        let mut tables = Tables::default();
        tables.metas.insert("node:n3".into(), vec![0xFF; 3]);
        let e = restored(path, tables).expect_err("garbage meta");
        assert!(e.is_unreadable());
        assert!(
            e.to_string()
                .starts_with("journal /state/journal.redb: table meta, key node:n3: cannot decode"),
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

    #[test]
    fn a_run_without_its_job_is_refused_by_table_and_key() {
        let run = StartedJob {
            id: 9,
            start_ms: 1,
            sim_end_ms: 2,
            vertices: Vec::new(),
            at: 0,
            duration: 1,
        };
        let tables = Tables {
            runs: vec![(9, format::encode(&run).expect("encode"))],
            ..Tables::default()
        };
        let e = restored(Path::new("j.redb"), tables).expect_err("orphan");
        assert!(e.to_string().contains("table runs, key 9"), "{e}");
        assert!(e.is_unreadable());
    }
}
