//! The status snapshot: an immutable view of the job table that `jobs` and `job info` are
//! served from, so that reads never wait for (or slow down) scheduling.
//!
//! The core task publishes one after every batch, before it answers the batch's requests
//! (so a client that got `Submitted` and then asks `job info` finds its job). It costs
//! [`BUCKETS`](crate::table::BUCKETS) pointer copies: see [`crate::table`].

use std::sync::Arc;

use shardsched_wire::limits::JOBS_PER_RESPONSE_MAX;
use shardsched_wire::msg::deps::{Fact, JobFact};
use shardsched_wire::msg::{JobId, JobInfo, JobList, JobsQuery, UserFilter, bounds};

use crate::job::JobRecord;
use crate::table::{Buckets, bucket_of};

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Snapshot {
    queue: Arc<str>,
    enabled: bool,
    started: bool,
    time_ms: u64,
    jobs: Buckets,
}

impl Snapshot {
    /// A snapshot of `jobs` for `queue` taken at `time_ms`.
    pub fn new(queue: Arc<str>, enabled: bool, started: bool, time_ms: u64, jobs: Buckets) -> Self {
        Snapshot {
            queue,
            enabled,
            started,
            time_ms,
            jobs,
        }
    }

    /// An empty snapshot (before registration).
    pub fn empty(queue: &str) -> Self {
        Snapshot::new(Arc::from(queue), false, false, 0, Arc::from(Vec::new()))
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Whether the queue accepted submissions when the snapshot was taken.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the queue was scheduling when the snapshot was taken.
    pub fn started(&self) -> bool {
        self.started
    }

    /// When the snapshot was taken, ms since the Unix epoch.
    pub fn time_ms(&self) -> u64 {
        self.time_ms
    }

    /// The job `id` as recorded.
    pub fn job(&self, id: JobId) -> Option<&JobRecord> {
        self.jobs.get(bucket_of(id))?.get(&id).map(|j| &**j)
    }

    /// Every job, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.iter().flat_map(|b| b.values().map(|j| &**j))
    }

    /// What the snapshot knows of jobs `ids` (`NotFound` for one it does not have), for
    /// the dependencies of other queues' jobs.
    pub fn job_facts(&self, ids: &[JobId]) -> Vec<JobFact> {
        ids.iter()
            .map(|&id| JobFact {
                id,
                fact: self.job(id).map_or(Fact::NotFound, JobRecord::fact),
            })
            .collect()
    }

    /// One job in full, for `job info`.
    pub fn job_info(&self, id: JobId) -> Option<JobInfo> {
        self.job(id).map(|j| j.info(&self.queue, self.started))
    }

    /// The jobs matching `query`, newest first. `requester` is the asking certificate's
    /// name, for [`UserFilter::Mine`]. A limit of 0 means the wire's maximum
    /// ([`JOBS_PER_RESPONSE_MAX`]), which also caps any larger limit.
    pub fn jobs(&self, requester: &str, query: &JobsQuery) -> JobList {
        if query.queue.as_deref().is_some_and(|q| q != &*self.queue) {
            return JobList::default();
        }
        let owner = match &query.user {
            UserFilter::Mine => Some(requester),
            UserFilter::All => None,
            UserFilter::Named(name) => Some(name.as_str()),
        };
        let mut rows: Vec<&JobRecord> = self
            .iter()
            .filter(|j| owner.is_none_or(|o| j.owner == o))
            .filter(|j| query.matches(j.state, &j.name))
            .collect();
        rows.sort_unstable_by_key(|j| std::cmp::Reverse(j.id));
        let limit = match usize::try_from(query.limit) {
            Ok(0) | Err(_) => JOBS_PER_RESPONSE_MAX,
            Ok(n) => n.min(JOBS_PER_RESPONSE_MAX),
        };
        let mut truncated = rows.len() > limit;
        rows.truncate(limit);
        // Each row is bounded, but many of them may not fit one frame.
        let (jobs, cut) = bounds::fit_reply(
            rows.into_iter()
                .map(|j| j.summary(&self.queue, self.started)),
        );
        truncated |= cut;
        JobList { jobs, truncated }
    }
}
