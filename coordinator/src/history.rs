//! The job history store: finished jobs, pulled from the shards, kept `history_days` in
//! their own redb file (`history.redb` in the coordinator's state directory), apart from
//! the hot journals, so that they outlive shard restarts, a shard's one-hour retention and
//! queue removals.
//!
//! Tables: records by `(end_ms, id)` (JSON of [`HistoryRecord`]), each job's end time by id
//! (so a job pulled twice, or requeued and ended again, is one record), and each queue's
//! pull cursor. Every insert is one transaction with the cursor, so a crash repeats a pull
//! and never skips one. Blocking: callers run it off the async runtime.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use shardsched_proto::Fluid;
use shardsched_proto::limits::JOBS_PER_RESPONSE_MAX;
use shardsched_proto::msg::deps::Fact;
use shardsched_proto::msg::history::{
    HistoryCursor, HistoryList, HistoryQuery, HistoryRecord, UsageQuery, UsageRow,
};
use shardsched_proto::msg::{UserFilter, bounds};

/// The store's file in the coordinator's state directory.
pub const HISTORY_FILE: &str = "history.redb";

const RECORDS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("records");
const END_OF: TableDefinition<u64, u64> = TableDefinition::new("end_of");
const CURSORS: TableDefinition<&str, (u64, u64)> = TableDefinition::new("cursors");

const MS_PER_DAY: u64 = 86_400_000;

/// A history store failure.
#[derive(Debug, thiserror::Error)]
#[error("job history {path}: {message}")]
pub struct HistoryError {
    path: PathBuf,
    message: String,
}

/// See the module documentation.
pub struct HistoryStore {
    db: Database,
    path: PathBuf,
    keep_ms: u64,
}

impl HistoryStore {
    /// Opens (or creates) the store in `dir`, keeping records `days` after they ended.
    pub fn open(dir: &Path, days: u32) -> Result<HistoryStore, HistoryError> {
        let path = dir.join(HISTORY_FILE);
        let db = Database::create(&path).map_err(|e| HistoryError {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let store = HistoryStore {
            db,
            path,
            keep_ms: u64::from(days).saturating_mul(MS_PER_DAY),
        };
        // The tables exist from the start, so reads never find them missing.
        store.write(|tx| {
            tx.open_table(RECORDS)?;
            tx.open_table(END_OF)?;
            tx.open_table(CURSORS)?;
            Ok(())
        })?;
        Ok(store)
    }

    fn fail(&self, e: impl std::fmt::Display) -> HistoryError {
        HistoryError {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    fn write<T>(
        &self,
        work: impl FnOnce(&redb::WriteTransaction) -> Result<T, redb::Error>,
    ) -> Result<T, HistoryError> {
        let tx = self.db.begin_write().map_err(|e| self.fail(e))?;
        let out = work(&tx).map_err(|e| self.fail(e))?;
        tx.commit().map_err(|e| self.fail(e))?;
        Ok(out)
    }

    /// Where `queue`'s next pull starts (`None`: from its first ended job).
    pub fn cursor(&self, queue: &str) -> Result<Option<HistoryCursor>, HistoryError> {
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let table = tx.open_table(CURSORS).map_err(|e| self.fail(e))?;
        let found = table.get(queue).map_err(|e| self.fail(e))?;
        Ok(found.map(|v| {
            let (end_ms, id) = v.value();
            HistoryCursor {
                end_ms,
                id: Fluid(id),
            }
        }))
    }

    /// Stores what a pull of `queue` brought (oldest end first) and moves its cursor past
    /// it; forgets records that ended more than the kept days before `now_ms`.
    pub fn insert(
        &self,
        queue: &str,
        records: &[HistoryRecord],
        now_ms: u64,
    ) -> Result<(), HistoryError> {
        let encoded = records
            .iter()
            .map(|r| serde_json::to_vec(r).map(|bytes| (r.cursor(), bytes)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.fail(e))?;
        if !self.has_news(&encoded)? {
            return Ok(());
        }
        let cutoff = now_ms.saturating_sub(self.keep_ms);
        self.write(|tx| {
            let mut rows = tx.open_table(RECORDS)?;
            let mut end_of = tx.open_table(END_OF)?;
            let mut cursors = tx.open_table(CURSORS)?;
            let mut last = cursors.get(queue)?.map(|v| v.value());
            for (at, bytes) in &encoded {
                let previous = end_of.insert(at.id.0, at.end_ms)?.map(|v| v.value());
                if let Some(end) = previous {
                    rows.remove((end, at.id.0))?;
                }
                rows.insert((at.end_ms, at.id.0), bytes.as_slice())?;
                last = last.max(Some((at.end_ms, at.id.0)));
            }
            if let Some(last) = last {
                cursors.insert(queue, last)?;
            }
            let old: Vec<(u64, u64)> = rows
                .range(..(cutoff, 0))?
                .map(|row| row.map(|(k, _)| k.value()))
                .collect::<Result<_, _>>()?;
            for (end, id) in old {
                rows.remove((end, id))?;
                end_of.remove(id)?;
            }
            Ok(())
        })
    }

    /// Whether any of `records` is not stored as it is (a pull repeats its last
    /// millisecond: most pulls bring nothing new, and need no write).
    fn has_news(&self, records: &[(HistoryCursor, Vec<u8>)]) -> Result<bool, HistoryError> {
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let end_of = tx.open_table(END_OF).map_err(|e| self.fail(e))?;
        for (at, _) in records {
            let stored = end_of.get(at.id.0).map_err(|e| self.fail(e))?;
            if stored.map(|v| v.value()) != Some(at.end_ms) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Calls `each` on every record that ended at or after `since_ms`, newest end first,
    /// until it returns `false`. A record that does not read is skipped (and logged).
    fn scan(
        &self,
        since_ms: u64,
        mut each: impl FnMut(HistoryRecord) -> bool,
    ) -> Result<(), HistoryError> {
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let rows = tx.open_table(RECORDS).map_err(|e| self.fail(e))?;
        for row in rows.range((since_ms, 0)..).map_err(|e| self.fail(e))?.rev() {
            let (key, value) = row.map_err(|e| self.fail(e))?;
            match serde_json::from_slice::<HistoryRecord>(value.value()) {
                Ok(record) => {
                    if !each(record) {
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(key = ?key.value(), %error, "a job history record does not read; skipped");
                }
            }
        }
        Ok(())
    }

    /// How each of the jobs `ids` ended, for those the store has (for the dependencies of
    /// jobs of other queues: docs/POLICIES.md).
    pub fn ended(&self, ids: &[Fluid]) -> Result<HashMap<Fluid, Fact>, HistoryError> {
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let end_of = tx.open_table(END_OF).map_err(|e| self.fail(e))?;
        let rows = tx.open_table(RECORDS).map_err(|e| self.fail(e))?;
        let mut found = HashMap::new();
        for &id in ids {
            let Some(end) = end_of.get(id.0).map_err(|e| self.fail(e))? else {
                continue;
            };
            let Some(row) = rows.get((end.value(), id.0)).map_err(|e| self.fail(e))? else {
                continue;
            };
            match serde_json::from_slice::<HistoryRecord>(row.value()) {
                Ok(r) => {
                    found.insert(id, Fact::of(r.job.state, r.job.start_ms.is_some()));
                }
                Err(error) => {
                    tracing::warn!(job = %id, %error, "a job history record does not read; skipped");
                }
            }
        }
        Ok(found)
    }

    /// `jobs --since`: the records matching `query`, newest end first. `requester` is the
    /// asking certificate's name, for [`UserFilter::Mine`].
    pub fn jobs(&self, requester: &str, query: &HistoryQuery) -> Result<HistoryList, HistoryError> {
        let q = &query.jobs;
        let limit = match usize::try_from(q.limit) {
            Ok(0) | Err(_) => JOBS_PER_RESPONSE_MAX,
            Ok(n) => n.min(JOBS_PER_RESPONSE_MAX),
        };
        let mut found = Vec::new();
        let mut truncated = false;
        self.scan(query.since_ms, |record| {
            let job = &record.job;
            let wanted = owner_matches(&q.user, requester, &job.owner)
                && q.queue.as_ref().is_none_or(|queue| *queue == job.queue)
                && (q.states.is_empty() || q.states.contains(&job.state))
                && q.name.as_ref().is_none_or(|name| *name == job.name);
            if wanted {
                if found.len() == limit {
                    truncated = true;
                    return false;
                }
                found.push(record);
            }
            true
        })?;
        let (records, cut) = bounds::fit_reply(found);
        Ok(HistoryList {
            records,
            truncated: truncated || cut,
        })
    }

    /// `shardsched usage`: sums by user of the records matching `query`.
    pub fn usage(
        &self,
        requester: &str,
        query: &UsageQuery,
    ) -> Result<Vec<UsageRow>, HistoryError> {
        let mut by_user: BTreeMap<String, UsageRow> = BTreeMap::new();
        self.scan(query.since_ms, |record| {
            if owner_matches(&query.user, requester, &record.job.owner) {
                by_user
                    .entry(record.job.owner.clone())
                    .or_insert_with(|| UsageRow {
                        user: record.job.owner.clone(),
                        ..UsageRow::default()
                    })
                    .add(&record);
            }
            true
        })?;
        Ok(bounds::fit_reply(by_user.into_values()).0)
    }
}

fn owner_matches(filter: &UserFilter, requester: &str, owner: &str) -> bool {
    match filter {
        UserFilter::Mine => owner == requester,
        UserFilter::All => true,
        UserFilter::Named(name) => owner == name,
    }
}

#[cfg(test)]
mod tests {
    use shardsched_proto::msg::{JobState, JobSummary, JobsQuery};

    use super::*;

    fn record(id: u64, owner: &str, end_ms: u64, cores: u32) -> HistoryRecord {
        HistoryRecord {
            job: JobSummary {
                id: Fluid(id),
                queue: "q".into(),
                owner: owner.into(),
                name: "app".into(),
                state: JobState::Completed,
                urgency: 16,
                nodes: vec!["n0".into()],
                nodes_requested: Some(1),
                submit_ms: end_ms - 2_000,
                start_ms: Some(end_ms - 1_000),
                end_ms: Some(end_ms),
                duration_ms: 60_000,
                reason: String::new(),
                reserved_ms: None,
                array: None,
                begin_ms: None,
                priority: None,
            },
            r_json: None,
            cores,
            gpus: 1,
        }
    }

    fn since(since_ms: u64) -> HistoryQuery {
        HistoryQuery {
            jobs: JobsQuery {
                queue: None,
                user: UserFilter::All,
                include_inactive: true,
                limit: 0,
                states: Vec::new(),
                name: None,
            },
            since_ms,
        }
    }

    #[test]
    fn records_are_kept_once_summed_and_forgotten_after_their_days() {
        let dir = tempfile::tempdir().expect("dir");
        let day = MS_PER_DAY;
        let store = HistoryStore::open(dir.path(), 2).expect("open");
        assert_eq!(store.cursor("q").expect("cursor"), None);
        let batch = [record(1, "alice", day, 4), record(2, "bob", 2 * day, 2)];
        store.insert("q", &batch, 2 * day).expect("insert");
        // A repeated pull (after a crash) changes nothing.
        store.insert("q", &batch[1..], 2 * day).expect("again");
        assert_eq!(store.cursor("q").expect("cursor"), Some(batch[1].cursor()));
        let all = store.jobs("alice", &since(0)).expect("jobs");
        let ids: Vec<u64> = all.records.iter().map(|r| r.job.id.0).collect();
        assert_eq!(ids, [2, 1], "newest end first, once each");
        let usage = store.usage(
            "alice",
            &UsageQuery {
                user: UserFilter::Mine,
                since_ms: 0,
            },
        );
        let alice = UsageRow {
            user: "alice".into(),
            jobs: 1,
            core_ms: 4_000,
            gpu_ms: 1_000,
        };
        assert_eq!(usage.expect("usage"), [alice]);
        // Four days on, with two kept: job 1 (ended on day 1) goes, job 3 comes.
        store
            .insert("q", &[record(3, "bob", 4 * day, 1)], 4 * day)
            .expect("later");
        let ids: Vec<u64> = store
            .jobs("x", &since(0))
            .expect("jobs")
            .records
            .iter()
            .map(|r| r.job.id.0)
            .collect();
        assert_eq!(ids, [3, 2]);
        // The store is a file: a reopened one has the same.
        drop(store);
        let store = HistoryStore::open(dir.path(), 2).expect("reopen");
        assert_eq!(
            store
                .jobs("x", &since(3 * day))
                .expect("jobs")
                .records
                .len(),
            1
        );
    }
}
