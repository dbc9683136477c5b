//! Job history: finished jobs as the coordinator's history store keeps them (issue 17),
//! the coordinator's pull of them from a shard, and what clients ask of the store.
//!
//! A shard keeps its finished jobs for an hour (its journal's retention); the coordinator
//! pulls them from each shard ([`HistoryPull`], by `(end_ms, id)` cursor, so a pull that is
//! repeated or lost only repeats work) into a store kept `history_days`, which outlives
//! shard restarts and queue removals.

use serde::{Deserialize, Serialize};

use super::common::{JobId, JobSummary, JobsQuery, UserFilter};

/// Most records one [`HistoryPull`] answer carries (a reply also stops at
/// [`LIST_REPLY_BYTES_MAX`](crate::limits::LIST_REPLY_BYTES_MAX)).
pub const HISTORY_RECORDS_PER_PULL_MAX: u32 = 1_000;

/// Where a history pull resumes: after the job that ended at `end_ms` with id `id`
/// (ended jobs are ordered by end time, then id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HistoryCursor {
    /// End time, ms since the Unix epoch.
    pub end_ms: u64,
    /// The job's id.
    pub id: JobId,
}

/// The coordinator asks a shard for its ended jobs after a cursor (`None`: all it has).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryPull {
    /// Only jobs ordered after this.
    pub after: Option<HistoryCursor>,
    /// At most this many (capped at [`HISTORY_RECORDS_PER_PULL_MAX`]).
    pub limit: u32,
}

/// One finished job: its summary, its R and what it used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// The job as `jobs` lists it (an ended state, with its end time).
    pub job: JobSummary,
    /// Its RFC 20 R (`None` for a job that never got resources).
    pub r_json: Option<String>,
    /// Cores its R holds.
    pub cores: u32,
    /// GPUs its R holds.
    pub gpus: u32,
}

impl HistoryRecord {
    /// Where this record sorts in a pull.
    pub fn cursor(&self) -> HistoryCursor {
        HistoryCursor {
            end_ms: self.job.end_ms.unwrap_or(0),
            id: self.job.id,
        }
    }

    /// How long it ran, ms (0 if it never started).
    pub fn run_ms(&self) -> u64 {
        match (self.job.start_ms, self.job.end_ms) {
            (Some(start), Some(end)) => end.saturating_sub(start),
            _ => 0,
        }
    }
}

/// Finished jobs from the history store, for `jobs --since`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// Queue, user, states and name, as for a live list (`include_inactive` is ignored).
    pub jobs: JobsQuery,
    /// Only jobs that ended at or after this time, ms since the Unix epoch.
    pub since_ms: u64,
}

/// A history answer, newest end first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryList {
    /// The records.
    pub records: Vec<HistoryRecord>,
    /// More matched than the limit (or one reply) holds.
    pub truncated: bool,
}

/// Usage sums from the history store, for `shardsched usage`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageQuery {
    /// Whose jobs.
    pub user: UserFilter,
    /// Only jobs that ended at or after this time, ms since the Unix epoch.
    pub since_ms: u64,
}

/// One user's sums: jobs ended, and cores and GPUs held times run time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The user (the submitting certificate's name).
    pub user: String,
    /// Jobs ended.
    pub jobs: u64,
    /// Σ cores × run time, core-milliseconds.
    pub core_ms: u64,
    /// Σ GPUs × run time, GPU-milliseconds.
    pub gpu_ms: u64,
}

impl UsageRow {
    /// Adds one job.
    pub fn add(&mut self, record: &HistoryRecord) {
        let run = record.run_ms();
        self.jobs += 1;
        self.core_ms = self
            .core_ms
            .saturating_add(u64::from(record.cores).saturating_mul(run));
        self.gpu_ms = self
            .gpu_ms
            .saturating_add(u64::from(record.gpus).saturating_mul(run));
    }
}
