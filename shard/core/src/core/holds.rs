//! Holds and urgency: which pending jobs the queue manager may consider, and in what order.
//!
//! A job's urgency (0..=31, Flux's) is the queue manager's priority: pending jobs run by
//! urgency, then by submit time. Urgency 0 holds a job: it stays pending, with reason
//! `held`, out of the queue manager's pending order (`QueueManager::hold`: it keeps its key,
//! so released it comes back to its place by submit time). Holding is eligibility only:
//! the queue policies and their re-plans never see a held job.
//!
//! Every hold the shard applies is decided in one place, [`ShardCore::hold_of`] (urgency
//! 0, an array's limit: `core/arrays.rs`), and put in force in one place,
//! [`ShardCore::sync_hold`], called whenever something it reads changes. `invariants()`
//! checks that the queue manager holds exactly those jobs.

use shardsched_jobspec::Jobspec;
use shardsched_qmanager::{JobRequest, JobView, WaitReason};
use shardsched_wire::Peer;
use shardsched_wire::limits::{URGENCY_DEFAULT, URGENCY_HOLD};
use shardsched_wire::msg::client_shard::{UrgencyChange, UrgencyOutcome, UrgencyResult};
use shardsched_wire::msg::{JobId, JobState};

use super::ShardCore;
use crate::assign::MS_PER_S;
use crate::core::job_span;
use crate::job::{Hold, JobRecord, Reason};
use crate::journal::JournalRecord;

impl ShardCore {
    /// Changes the urgency of pending jobs for `peer`: users only their own, admins any
    /// (an urgency above 16 was checked on the wire: admins only). One outcome per id, in
    /// order.
    pub fn handle_urgency(
        &mut self,
        now_ms: u64,
        peer: &Peer,
        ids: &[JobId],
        change: UrgencyChange,
    ) -> Vec<UrgencyOutcome> {
        self.observe(now_ms);
        ids.iter()
            .map(|&id| UrgencyOutcome {
                id,
                result: self.urgency_one(peer, id, change),
            })
            .collect()
    }

    pub(super) fn urgency_one(
        &mut self,
        peer: &Peer,
        id: JobId,
        change: UrgencyChange,
    ) -> UrgencyResult {
        let Some(job) = self.jobs.table.get(id) else {
            return match self.array_elements(id) {
                Some(elements) => self.urgency_array(peer, &elements, change),
                None => UrgencyResult::NotFound,
            };
        };
        if !peer.may_cancel(&job.owner) {
            return UrgencyResult::Forbidden;
        }
        if job.state != JobState::Pending {
            return UrgencyResult::NotPending;
        }
        let old = job.urgency;
        let new = match change {
            UrgencyChange::Set(urgency) => urgency,
            UrgencyChange::Hold => URGENCY_HOLD,
            UrgencyChange::Release if old == URGENCY_HOLD => URGENCY_DEFAULT,
            UrgencyChange::Release => old,
        };
        if new == old {
            return UrgencyResult::Set(new);
        }
        let (priority, parts) = self.priority_of(new, &job.owner);
        if let Err(e) = self.qm.set_priority(id.0, priority) {
            tracing::error!(parent: &job_span(&self.queue, id), error = %e, "queue manager lost a pending job");
            return UrgencyResult::NotPending;
        }
        let now_ms = self.now_ms;
        if let Some(job) = self.jobs.table.get_mut(id) {
            job.urgency = new;
            job.priority = parts;
            job.push_event(
                now_ms,
                "urgency",
                serde_json::json!({"urgency": new, "by": peer.to_string()}),
            );
        }
        self.journal(JournalRecord::Urgency(id, new));
        self.holds_changed(id);
        self.status_version += 1;
        UrgencyResult::Set(new)
    }

    /// Records pending job `id`'s priority parts, as [`Self::queue_request`] gave them to
    /// the queue manager (what `jobs` shows).
    pub(super) fn note_priority(&mut self, id: JobId) {
        let Some(job) = self.jobs.table.get(id) else {
            return;
        };
        let parts = self.priority_of(job.urgency, &job.owner).1;
        if let Some(job) = self.jobs.table.get_mut(id) {
            job.priority = parts;
        }
    }

    /// Why the shard holds pending job `job` out of the queue manager's pending order, if
    /// it does: the one place every hold is decided.
    pub(super) fn hold_of(&self, job: &JobRecord) -> Option<Hold> {
        if job.urgency == URGENCY_HOLD {
            Some(Hold::User)
        } else if let Some(hold) = self.dependency_hold(job) {
            Some(hold)
        } else if job.begin_ms.is_some_and(|t| t > self.now_ms) {
            Some(Hold::BeginTime)
        } else if self.array_limited(job) {
            Some(Hold::ArrayLimit)
        } else {
            self.limit_hold(job)
        }
    }

    /// Puts pending job `id` in force as [`Self::hold_of`] says: held in the queue manager
    /// with its reason, or let back into the pending order (where the queue manager says
    /// why it waits).
    pub(super) fn sync_hold(&mut self, id: JobId) {
        let Some(job) = self.jobs.table.get(id) else {
            return;
        };
        if job.state != JobState::Pending {
            return;
        }
        let hold = self.hold_of(job);
        let result = match hold {
            Some(_) => self.qm.hold(id.0),
            None => self.qm.release(id.0, self.now_s()),
        };
        if let Err(e) = result {
            tracing::error!(parent: &job_span(&self.queue, id), error = %e, "queue manager lost a pending job");
            return;
        }
        let reason = match (hold, self.qm.job(id.0)) {
            (Some(hold), _) => Reason::Held(hold),
            (None, Some(JobView::Pending { reason })) => Reason::Waiting(reason),
            (None, _) => Reason::Waiting(WaitReason::Queued),
        };
        if let Some(job) = self.jobs.table.get_mut(id) {
            job.reason = reason;
        }
    }

    /// A job just accepted (or restored) pending: if its begin time is still to come, the
    /// tick that reaches it lets it in ([`Self::begin_due`]).
    pub(super) fn defer(&mut self, id: JobId) {
        if let Some(at) = self.jobs.table.get(id).and_then(|j| j.begin_ms)
            && at > self.now_ms
        {
            self.jobs.deferred.insert((at, id));
        }
    }

    /// Lets in the jobs whose begin time has come by now (a job that ended meanwhile is
    /// left alone: `sync_hold` looks at pending jobs only).
    pub(super) fn begin_due(&mut self) {
        while let Some(&(at, id)) = self.jobs.deferred.first() {
            if at > self.now_ms {
                break;
            }
            self.jobs.deferred.pop_first();
            self.holds_changed(id);
        }
    }

    /// When the earliest deferred job's begin time comes.
    pub(super) fn next_begin_ms(&self) -> Option<u64> {
        self.jobs.deferred.first().map(|&(at, _)| at)
    }

    /// The queue manager's request for a job: its priority (the urgency, with fair-share
    /// its weighted sum with the owner's factor), then its submit time (whole seconds)
    /// and owner break ties.
    pub(super) fn queue_request(
        &mut self,
        id: JobId,
        jobspec: Jobspec,
        urgency: u8,
        submit_ms: u64,
        owner: &str,
    ) -> JobRequest {
        JobRequest {
            id: id.0,
            jobspec,
            priority: self.priority_of(urgency, owner).0,
            submit_time: i64::try_from(submit_ms / MS_PER_S).unwrap_or(i64::MAX),
            user: self.ids.user(owner),
        }
    }
}
