//! Job lists: whose jobs, which states and names (`jobs`, and the shards' and the
//! coordinator's answers to it).

use serde::{Deserialize, Serialize};

use super::common::{JobState, JobSummary};

/// Whose jobs a list asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UserFilter {
    /// The requesting peer's own jobs (the server reads the name from the certificate).
    Mine,
    /// Everyone's.
    All,
    /// One named user's.
    Named(String),
}

/// A job list query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsQuery {
    /// Only this queue's jobs, if given.
    pub queue: Option<String>,
    /// Whose jobs.
    pub user: UserFilter,
    /// Include ended jobs (completed, failed, cancelled), not only pending and running.
    pub include_inactive: bool,
    /// At most this many rows (the server also caps at
    /// [`JOBS_PER_RESPONSE_MAX`](crate::limits::JOBS_PER_RESPONSE_MAX)).
    pub limit: u32,
    /// Only jobs in these states (at most
    /// [`JOB_STATES_PER_QUERY_MAX`](crate::limits::JOB_STATES_PER_QUERY_MAX)); empty: any
    /// (as `include_inactive` says).
    pub states: Vec<JobState>,
    /// Only jobs of this name (at most
    /// [`JOB_NAME_BYTES_MAX`](crate::limits::JOB_NAME_BYTES_MAX) bytes).
    pub name: Option<String>,
}

impl JobsQuery {
    /// Whether a job in `state` named `name` matches the query's states and name (its
    /// queue and user are matched apart).
    pub fn matches(&self, state: JobState, name: &str) -> bool {
        let state_ok = if self.states.is_empty() {
            self.include_inactive || state.is_active()
        } else {
            self.states.contains(&state)
        };
        state_ok && self.name.as_deref().is_none_or(|n| n == name)
    }
}

/// A job list answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobList {
    /// Rows, newest first.
    pub jobs: Vec<JobSummary>,
    /// More rows matched than were sent.
    pub truncated: bool,
}
