//! Jobs coming in and going out at a client's or the coordinator's request: submit (with
//! its retries and refusals; an array's elements in one go), cancel, and disabling an idle
//! queue.

use std::sync::Arc;

use shardsched_jobspec::Jobspec;
use shardsched_qmanager::JobView;
use shardsched_wire::Peer;
use shardsched_wire::array::{ArrayElement, element_id};
use shardsched_wire::limits::{URGENCY_DEFAULT, URGENCY_MAX};
use shardsched_wire::msg::client_shard::{CancelOutcome, CancelResult, Submit};
use shardsched_wire::msg::{JobId, JobState, Refusal, RefusalCode};

use super::deps::Waiting;
use super::exec::EndAs;
use super::{CoreExecutor, ShardCore, Submitted};
use crate::assign;
use crate::core::job_span;
use crate::job::{JobRecord, NewJob, Reason};
use crate::journal::{AcceptedJob, ArrayRecord, JournalRecord, SignatureRecord};
use crate::limits::ACTIVE_JOBS_MAX;

impl ShardCore {
    /// Takes a job in at `now_ms` for `owner` (the submitting certificate's name). See the
    /// module documentation for what is refused.
    pub fn handle_submit(
        &mut self,
        now_ms: u64,
        owner: &str,
        submit: &Submit,
    ) -> Result<Submitted, Refusal> {
        let now_ms = self.observe(now_ms);
        if let Some(id) = self.jobs.table.by_key(owner, &submit.idempotency_key) {
            return Ok(Submitted {
                id,
                duplicate: true,
            });
        }
        if !self.config.enabled {
            return Err(Refusal::new(
                RefusalCode::Policy,
                format!(
                    "queue {} is disabled: it accepts no submissions",
                    self.queue
                ),
            ));
        }
        if self.jobs.live() >= ACTIVE_JOBS_MAX {
            return Err(Refusal::new(
                RefusalCode::Unavailable,
                format!(
                    "queue {} holds {ACTIVE_JOBS_MAX} live jobs, its limit; try later",
                    self.queue
                ),
            ));
        }
        if matches!(self.options.executor, CoreExecutor::Agents) && submit.signature.is_none() {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "queue {} runs jobs through node agents, which run a job only as the user \
                     who signed it: this submit is not signed",
                    self.queue
                ),
            ));
        }
        let jobspec = shardsched_jobspec::parse_json(&submit.jobspec_json)
            .map_err(|e| Refusal::new(RefusalCode::Invalid, format!("invalid jobspec: {e}")))?;
        if let Some(other) = jobspec.attributes.queue.as_deref()
            && other != &*self.queue
        {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "the jobspec names queue {other} but was submitted to queue {}",
                    self.queue
                ),
            ));
        }
        if let Some(spec) = &submit.array {
            spec.check(self.config.array_elements_max)
                .map_err(|e| Refusal::new(RefusalCode::Invalid, format!("array: {e}")))?;
            let live = usize::try_from(spec.len()).unwrap_or(usize::MAX);
            if self.jobs.live().saturating_add(live) > ACTIVE_JOBS_MAX {
                return Err(Refusal::new(
                    RefusalCode::Unavailable,
                    format!(
                        "queue {} would hold more than {ACTIVE_JOBS_MAX} live jobs, its \
                         limit, with this array; try later",
                        self.queue
                    ),
                ));
            }
        }
        let count = submit.array.as_ref().map_or(1, |spec| spec.len());
        self.check_max_pending(owner, count)?;
        let waiting = self.read_dependencies(&jobspec)?;
        self.admit(now_ms, owner, submit, jobspec, waiting.as_ref())
    }

    /// Accepts a job, or an array's elements: each is judged, journaled and queued; the
    /// first one denied refuses the whole (an array's elements share one jobspec).
    fn admit(
        &mut self,
        now_ms: u64,
        owner: &str,
        submit: &Submit,
        jobspec: Jobspec,
        waiting: Option<&Waiting>,
    ) -> Result<Submitted, Refusal> {
        let reserved = submit
            .array
            .as_ref()
            .and_then(|a| a.max_index())
            .map_or(0, |max| u64::from(max) + 1);
        let id = self
            .ids
            .generator
            .next_block(now_ms, reserved)
            .map_err(|e| Refusal::new(RefusalCode::Internal, e.to_string()))?;
        let last = id
            .after(reserved)
            .map_err(|e| Refusal::new(RefusalCode::Internal, e.to_string()))?;
        self.ids.last = self.ids.last.max(Some(last));
        let elements = match &submit.array {
            None => vec![(id, None)],
            Some(spec) => spec
                .indices()
                .map(|index| {
                    let element = element_id(id, index)
                        .map_err(|e| Refusal::new(RefusalCode::Internal, e.to_string()))?;
                    Ok((element, Some(ArrayElement { array: id, index })))
                })
                .collect::<Result<Vec<_>, Refusal>>()?,
        };
        let urgency = submit.urgency.unwrap_or(URGENCY_DEFAULT).min(URGENCY_MAX);
        let duration_ms = self.duration_ms(&jobspec);
        let jobspec_json: Arc<str> = Arc::from(submit.jobspec_json.as_str());
        let signature = submit.signature.clone().map(Arc::new);
        let last = elements.len().saturating_sub(1);
        let mut jobspec = Some(jobspec);
        for (n, &(job_id, array)) in elements.iter().enumerate() {
            let Some(parsed) = jobspec.as_ref() else {
                break;
            };
            let mut job = JobRecord::accepted(&NewJob {
                id: job_id,
                owner,
                key: submit.idempotency_key,
                urgency,
                submit_ms: now_ms,
                duration_ms,
                jobspec: parsed,
                jobspec_json: &jobspec_json,
                array,
                signature: signature.clone(),
            });
            // The last element (a plain job's only one) takes the parsed jobspec: the submit
            // path copies none.
            let spec = if n == last {
                jobspec.take()
            } else {
                jobspec.clone()
            };
            let Some(spec) = spec else {
                break;
            };
            let request = self.queue_request(job_id, spec, urgency, now_ms, owner);
            if let Err(e) = self.qm.submit(request) {
                tracing::error!(parent: &job_span(&self.queue, job_id), error = %e, "queue manager refused a submit");
                return Err(Refusal::new(RefusalCode::Internal, e.to_string()));
            }
            if let Some(denied) = self.drain(Some(job_id.0)) {
                if n > 0 {
                    // Its like were accepted: the queue manager contradicts itself.
                    tracing::error!(parent: &job_span(&self.queue, job_id), reason = %denied, "an array element was denied");
                    continue;
                }
                return Err(self.denial(&denied.to_string(), &submit.jobspec_json));
            }
            if let Some(JobView::Pending { reason }) = self.qm.job(job_id.0) {
                job.reason = Reason::Waiting(reason);
            }
            job.priority = self.priority_of(urgency, owner).1;
            self.jobs.table.insert(job);
            self.jobs.pending.insert(job_id);
            self.limits_pending(job_id);
            self.defer(job_id);
            self.track_dependencies(job_id, waiting);
            debug_assert!(
                matches!(self.qm.job(job_id.0), Some(JobView::Pending { .. })),
                "{job_id}: accepted but the queue manager does not have it pending"
            );
        }
        self.journal(JournalRecord::Accepted(AcceptedJob {
            id: id.0,
            owner: owner.to_owned(),
            key: submit.idempotency_key.0,
            jobspec_json: submit.jobspec_json.clone(),
            urgency: u32::from(urgency),
            submit_ms: now_ms,
        }));
        if let Some(signature) = &submit.signature {
            self.journal(JournalRecord::Signed(SignatureRecord {
                id: id.0,
                cert_pem: signature.cert_pem.clone(),
                signature: signature.signature.clone(),
            }));
        }
        match &submit.array {
            None => self.sync_hold(id),
            Some(spec) => {
                self.journal(JournalRecord::Array(ArrayRecord::new(id, spec)));
                let ids = elements.into_iter().map(|(e, _)| e).collect();
                self.array_accepted(id, spec.max_running, ids);
            }
        }
        self.status_version += 1;
        Ok(Submitted {
            id,
            duplicate: false,
        })
    }

    /// The refusal of a job the queue manager denied for `reason` (its jobspec read again
    /// from `jobspec_json`, to say which types it names that are not loaded).
    fn denial(&self, reason: &str, jobspec_json: &str) -> Refusal {
        tracing::debug!(queue = %self.queue, %reason, "denied");
        let not_loaded = shardsched_jobspec::parse_json(jobspec_json)
            .ok()
            .and_then(|jobspec| assign::types_not_loaded(&self.cluster.loaded, &jobspec));
        let reason = match not_loaded {
            Some(why) => format!("{reason}: {why}"),
            None => reason.to_owned(),
        };
        Refusal::new(
            RefusalCode::Denied,
            format!("denied by queue {}: {reason}", self.queue),
        )
    }

    /// Cancels jobs for `peer`: users only their own ([`Peer::may_cancel`]), admins any.
    /// One outcome per id, in order. Freed resources are used by the next [`Self::tick`].
    pub fn handle_cancel(&mut self, now_ms: u64, peer: &Peer, ids: &[JobId]) -> Vec<CancelOutcome> {
        self.observe(now_ms);
        ids.iter()
            .map(|&id| CancelOutcome {
                id,
                result: self.cancel_one(peer, id),
            })
            .collect()
    }

    pub(super) fn cancel_one(&mut self, peer: &Peer, id: JobId) -> CancelResult {
        let Some(job) = self.jobs.table.get(id) else {
            return match self.array_elements(id) {
                Some(elements) => self.cancel_array(peer, &elements),
                None => CancelResult::NotFound,
            };
        };
        if !peer.may_cancel(&job.owner) {
            return CancelResult::Forbidden;
        }
        if !job.state.is_active() {
            return CancelResult::AlreadyInactive;
        }
        if job.state == JobState::Running && self.is_exec() {
            // Its processes go first; it ends when its supervisor says they are gone.
            self.end_running(id, EndAs::Cancelled(format!("cancelled by {peer}")));
            return CancelResult::Cancelled;
        }
        if self.cancel_pending(id, format!("cancelled by {peer}")) {
            CancelResult::Cancelled
        } else {
            CancelResult::AlreadyInactive
        }
    }

    /// Cancels live job `id` at once (pending, or running under the sim executor),
    /// recording `reason`; false if the queue manager had lost it (it fails instead).
    pub(super) fn cancel_pending(&mut self, id: JobId, reason: String) -> bool {
        if let Err(e) = self.qm.cancel(id.0) {
            tracing::error!(parent: &job_span(&self.queue, id), error = %e, "queue manager lost a live job");
            self.fail(id, format!("internal error: {e}"));
            return false;
        }
        self.drain(None);
        self.journal_end_reason(id, &reason);
        if let Some(job) = self.jobs.table.get_mut(id) {
            job.reason = Reason::Text(reason);
        }
        true
    }

    /// Disables submissions if no job is pending or running, in one step of the event loop
    /// (the coordinator is removing the queue): else refuses, naming the jobs, and changes
    /// nothing.
    pub fn disable_if_idle(&mut self) -> Result<(), Refusal> {
        let (pending, running) = (self.jobs.pending.len(), self.jobs.running.len());
        if pending + running > 0 {
            return Err(Refusal::new(
                RefusalCode::Policy,
                format!(
                    "queue {} has jobs ({pending} pending, {running} running): cancel them or \
                     wait for them to end (jobs cannot move between queues)",
                    self.queue
                ),
            ));
        }
        self.set_queue_state(false, self.config.started);
        Ok(())
    }
}
