//! The journal as the committer would leave it on disk, kept in memory.

use std::collections::BTreeMap;

use shardsched_journal::{Batch, Write};
use shardsched_shard::journal::{self, JournalRecord, Tables};

/// The journal as the committer would leave it, in memory: table → key → encoded value,
/// beside the core's typed model of the same journal.
#[derive(Default)]
pub(crate) struct DiskImage {
    pub(crate) tables: BTreeMap<String, BTreeMap<u64, Vec<u8>>>,
    pub(crate) metas: BTreeMap<String, Vec<u8>>,
    pub(crate) model: journal::MemJournal,
}

impl DiskImage {
    pub(crate) fn commit(&mut self, records: &[JournalRecord]) {
        self.model.commit(records);
        let batch: Batch = journal::to_batch(records).expect("encode");
        for w in batch.writes() {
            match w {
                Write::Put { table, key, value } => {
                    self.tables
                        .entry(table.clone())
                        .or_default()
                        .insert(*key, value.clone());
                }
                Write::Delete { table, key } => {
                    self.tables.entry(table.clone()).or_default().remove(key);
                }
                Write::DeleteBelow { table, below } => {
                    self.tables
                        .entry(table.clone())
                        .or_default()
                        .retain(|k, _| k >= below);
                }
                Write::PutMeta { name, value } => {
                    self.metas.insert(name.clone(), value.clone());
                }
                Write::DeleteMeta { name } => {
                    self.metas.remove(name);
                }
            }
        }
    }

    pub(crate) fn restored(&self) -> journal::Restored {
        let rows = |t: &str| -> Vec<(u64, Vec<u8>)> {
            self.tables
                .get(t)
                .map(|m| m.iter().map(|(k, v)| (*k, v.clone())).collect())
                .unwrap_or_default()
        };
        let tables = Tables {
            jobs: rows(journal::JOBS_TABLE),
            arrays: rows(journal::ARRAYS_TABLE),
            runs: rows(journal::RUNS_TABLE),
            ends: rows(journal::ENDS_TABLE),
            urgency: rows(journal::URGENCY_TABLE),
            signatures: rows(journal::SIGNATURES_TABLE),
            kills: rows(journal::KILLS_TABLE),
            metas: self.metas.clone(),
        };
        let restored = journal::restored(std::path::Path::new("mem.redb"), tables).expect("decode");
        assert_eq!(
            Ok(&restored),
            self.model.restored().as_ref(),
            "the bytes read back are what the journal model holds"
        );
        restored
    }
}
