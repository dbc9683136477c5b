//! Job dependencies across queues (docs/POLICIES.md): a shard whose pending jobs wait on
//! jobs of other queues lists them in its status reports
//! ([`ShardStatus::waiting_on`](super::shard_coord::ShardStatus::waiting_on)); the
//! coordinator asks each owning shard
//! ([`coord_shard::Request::JobFacts`](super::coord_shard::Request::JobFacts)), falls back
//! on its history store, and tells the waiting shard
//! ([`coord_shard::Request::Facts`](super::coord_shard::Request::Facts)). Every fact is
//! final once known (an ended job stays ended, a started one has started), so a question
//! is safe to repeat and an answer safe to lose or duplicate.

use serde::{Deserialize, Serialize};

use super::common::{JobId, JobState, Refusal, RefusalCode};
use crate::limits::DEPENDENCY_TARGETS_PER_ASK_MAX;

/// What is known of one job, as a dependency reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fact {
    /// Accepted and not started.
    Pending,
    /// Running.
    Running,
    /// Ended: how, and whether it ever started.
    Ended {
        /// Completed, failed or cancelled.
        state: JobState,
        /// Whether it ran before it ended.
        started: bool,
    },
    /// Its queue does not know it (never issued, or forgotten past its history).
    NotFound,
    /// Its FLUID generator id names no queue.
    NoQueue,
    /// Not known now (its shard is not connected): ask again later.
    Unknown,
}

/// A job and its [`Fact`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFact {
    /// The job.
    pub id: JobId,
    /// What is known of it.
    pub fact: Fact,
}

impl Fact {
    /// A job in `state`, started (`start_ms` set) or not.
    pub fn of(state: JobState, started: bool) -> Fact {
        match state {
            JobState::Pending => Fact::Pending,
            JobState::Running => Fact::Running,
            ended => Fact::Ended {
                state: ended,
                started,
            },
        }
    }

    /// Whether the fact can no longer change.
    pub fn is_final(self) -> bool {
        matches!(self, Fact::Ended { .. } | Fact::NotFound | Fact::NoQueue)
    }
}

/// At most [`DEPENDENCY_TARGETS_PER_ASK_MAX`] ids in one question.
pub fn check_ids(ids: &[JobId]) -> Result<(), Refusal> {
    check_len(ids.len())
}

/// At most [`DEPENDENCY_TARGETS_PER_ASK_MAX`] jobs in one question or answer.
pub fn check_len(jobs: usize) -> Result<(), Refusal> {
    if jobs > DEPENDENCY_TARGETS_PER_ASK_MAX {
        return Err(Refusal::new(
            RefusalCode::Invalid,
            format!(
                "{jobs} jobs in one question or answer, more than the limit of \
                 {DEPENDENCY_TARGETS_PER_ASK_MAX}"
            ),
        ));
    }
    Ok(())
}
