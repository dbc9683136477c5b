//! Time passing and the queue manager's decisions: [`ShardCore::tick`] completes the sim
//! jobs whose run time is over and schedules; every [`Event`] the queue
//! manager emits is recorded in the job table here, and nowhere else.

use std::sync::Arc;

use shardsched_matcher::{Allocation, StoredAllocation, writer};
use shardsched_qmanager::{CycleKind, DenyReason, Event, JobView, WaitReason};
use shardsched_resource::encode_hostlist;
use shardsched_wire::Fluid;
use shardsched_wire::msg::JobState;

use super::{CoreExecutor, ExecAction, ShardCore};
use crate::assign::MS_PER_S;
use crate::core::job_span;
use crate::error::ShardError;
use crate::job::{JobRecord, Reason};
use crate::journal::{EndState, EndedJob, JournalRecord, StartedJob};
use crate::limits::{REASON_REFRESH_MAX, SCHEDULE_PASSES_MAX};

impl ShardCore {
    /// Time is `now_ms`: completes the sim jobs whose run time is over, then (if the queue
    /// is started) schedules — one pass, or more while passes keep starting jobs with room
    /// left (the queue depth bounds each pass) — and records the decisions. The driver calls
    /// it once after every batch of requests and when [`Self::next_wakeup_ms`] comes.
    pub fn tick(&mut self, now_ms: u64) -> Result<(), ShardError> {
        let now_ms = self.observe(now_ms);
        let now_s = self.now_s();
        while let Some(&(end, id)) = self.jobs.sim_ends.first() {
            if end > now_ms {
                break;
            }
            self.jobs.sim_ends.pop_first();
            if let Err(e) = self.qm.complete(id.0, now_s) {
                tracing::error!(parent: &job_span(&self.queue, id), error = %e, "cannot complete a running job");
                self.fail(id, format!("internal error: {e}"));
            }
        }
        self.drain(None);
        self.begin_due();
        self.settle_local_dependencies();
        self.settle_moves();
        self.extend_holds();
        let forgotten = self
            .jobs
            .table
            .expire(now_ms.saturating_sub(self.options.retention_ms));
        self.forget(forgotten);
        self.backlog = false;
        self.admit_limited();
        self.refresh_completing();
        if self.config.started {
            self.schedule(now_s)?;
        }
        self.seal_usage();
        // Jobs that started or ended in this tick may meet dependencies: those let in are
        // scheduled by the next tick, at once.
        if self.settle_local_dependencies() {
            self.backlog = true;
        }
        self.settle_moves();
        debug_assert_eq!(
            (self.jobs.pending.len(), self.jobs.running.len()),
            (
                self.qm.pending_len() + self.qm.waiting_len() + self.qm.held_len(),
                self.qm.running_len()
            ),
            "the job table's live jobs are not the queue manager's"
        );
        Ok(())
    }

    /// Scheduling passes at `now_s` until one starts nothing, at most
    /// [`SCHEDULE_PASSES_MAX`].
    ///
    /// A pass looks at no more than the queue depth of pending jobs; when it started jobs at
    /// that depth, the queue manager's next pass walks again from the head to consider the
    /// jobs behind them (Fluxion re-runs its loop the same way). Passes left over when the
    /// bound is hit are taken at once by the next tick ([`Self::next_wakeup_ms`] says now).
    fn schedule(&mut self, now_s: i64) -> Result<(), ShardError> {
        let mut cycled = false;
        for pass in 1..=SCHEDULE_PASSES_MAX {
            let started = self.qm.stats().started;
            let kind = self.qm.schedule(now_s)?;
            self.drain(None);
            if kind == CycleKind::Idle {
                break;
            }
            cycled = true;
            let progressed = self.qm.stats().started > started;
            if !(progressed && self.qm.pending_len() > 0) {
                break;
            }
            self.backlog = pass == SCHEDULE_PASSES_MAX;
        }
        if cycled {
            let depth = match self.qm.params().queue_depth {
                0 => REASON_REFRESH_MAX,
                d => d.min(REASON_REFRESH_MAX),
            };
            self.refresh_reasons(depth);
        }
        Ok(())
    }

    /// When the core next needs a [`Self::tick`] without any request arriving: the end of
    /// the earliest sim run or incoming node's hold, the earliest begin time, the start of
    /// the earliest reservation, or the end of the window of a user's allowance held ahead
    /// of need (ms since the Unix epoch); now, when the last tick left
    /// startable jobs behind. `None` when nothing is due.
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        if self.backlog {
            return Some(self.now_ms);
        }
        let run_end = self.jobs.sim_ends.first().map(|&(end, _)| end);
        let reservation = if self.config.started {
            self.qm
                .reservations()
                .map(|(_, at)| u64::try_from(at).unwrap_or(0).saturating_mul(MS_PER_S))
                .find(|&t| t > self.now_ms)
        } else {
            None
        };
        [
            run_end,
            self.next_hold_end_ms(),
            self.next_begin_ms(),
            reservation,
            self.allowance_wakeup_ms(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Records every pending event; returns the deny reason of job `watch` if it was denied
    /// (that job is then not in the table: the caller refuses it).
    pub(super) fn drain(&mut self, watch: Option<u64>) -> Option<DenyReason> {
        let mut denied = None;
        while let Some(event) = self.qm.poll_event() {
            match event {
                Event::Denied { id, reason } if Some(id) == watch => denied = Some(reason),
                other => self.apply(other),
            }
        }
        denied
    }

    fn apply(&mut self, event: Event) {
        let id = Fluid(event.id());
        match event {
            Event::Completed { .. } | Event::Cancelled { .. }
                if self.jobs.end_as.contains_key(&id) =>
            {
                self.end_as_planned(id);
            }
            Event::Started { alloc, .. } => self.started(id, &alloc),
            Event::Reserved { at, .. } => {
                self.set_reason(id, Reason::Waiting(WaitReason::Reserved { at }));
            }
            Event::Unreserved { .. } => {
                // Why it waits now, as the queue manager sees it (resources, or unavailable
                // when what it needs went down).
                let why = match self.qm.job(id.0) {
                    Some(JobView::Pending { reason }) => reason,
                    _ => WaitReason::Resources,
                };
                self.set_reason(id, Reason::Waiting(why));
            }
            Event::Denied { reason, .. } => self.fail(id, format!("denied: {reason}")),
            Event::Completed { .. } => self.ended(id, JobState::Completed, Reason::None),
            Event::Cancelled { .. } => {
                self.ended(id, JobState::Cancelled, Reason::Text("cancelled".into()));
            }
        }
    }

    fn started(&mut self, id: Fluid, alloc: &Allocation) {
        let now_ms = self.now_ms;
        // In exec mode, the expected end only: the job ends when its supervisor says so.
        let scale = match self.options.executor {
            CoreExecutor::Sim => self.options.time_scale,
            CoreExecutor::Exec { .. } | CoreExecutor::Agents => 1.0,
        };
        let end = now_ms.saturating_add(sim_run_ms(alloc.duration, scale));
        // The queue manager plans in whole seconds: the allocation holds its nodes from
        // `alloc.at` for `alloc.duration` seconds, and they may be given to the next job at
        // that span's end. A sim run ends by then, or two jobs would share a node for the
        // rest of the second the job started in.
        let end = match self.options.executor {
            CoreExecutor::Sim => end.min(span_end_ms(alloc)),
            CoreExecutor::Exec { .. } | CoreExecutor::Agents => end,
        };
        if self.options.journal {
            let stored = StoredAllocation::from_allocation(&self.qm.matcher().graph, alloc);
            self.journal(JournalRecord::Started(StartedJob::new(
                id, now_ms, end, stored,
            )));
        }
        self.mark_running(id, alloc, now_ms, end);
        debug_assert!(
            self.jobs
                .table
                .get(id)
                .is_some_and(|j| j.nodes.iter().all(|n| self.nodes.is_schedulable(n))),
            "{id} started on a node that is not up here, or is drained or down"
        );
        if self.is_exec() {
            self.outbox.exec_actions.push(ExecAction::Launch(id));
        }
    }

    /// The node names and the R of an allocation. Nodes are in rank order (the cluster's
    /// host order), then vertex order: a node a definition change grafted has a later
    /// vertex id than its neighbours but its place among them by rank.
    pub(super) fn nodes_and_r(&self, alloc: &Allocation) -> (Vec<String>, String) {
        let graph = &self.qm.matcher().graph;
        let node = graph.sym("node");
        let mut vertices: Vec<_> = alloc
            .iter()
            .filter(|a| Some(graph.kind(a.v)) == node)
            .map(|a| a.v)
            .collect();
        vertices.sort_unstable_by_key(|&v| (graph.rank(v), v));
        vertices.dedup();
        let nodes: Vec<String> = vertices.iter().map(|&v| graph.name(v).to_owned()).collect();
        (nodes, writer::rv1(graph, alloc, false).to_string())
    }

    /// Records that job `id` runs on `alloc` since `now_ms` until its sim end `end`: a start
    /// now, or a running job brought back by a restart. (In exec mode nothing ends it but
    /// its supervisor's report: the driver watches every running job.)
    pub(super) fn mark_running(&mut self, id: Fluid, alloc: &Allocation, now_ms: u64, end: u64) {
        let (nodes, r_json) = self.nodes_and_r(alloc);
        let was_pending = self.jobs.pending.remove(&id);
        self.jobs.running.insert(id, end);
        self.limits_started(id, was_pending);
        if !self.is_exec() {
            self.jobs.sim_ends.insert((end, id));
        }
        let start_context = self.start_context(id);
        let cores = self.cores_of(alloc);
        self.usage_started(id, cores, now_ms);
        self.jobs.count_on(&nodes);
        self.status_version += 1;
        debug_assert!(
            matches!(self.qm.job(id.0), Some(JobView::Running { .. })),
            "{id} runs here but not in the queue manager"
        );
        let Some(job) = self.jobs.table.get_mut(id) else {
            tracing::error!(parent: &job_span(&self.queue, id), "started a job the table does not have");
            return;
        };
        job.state = JobState::Running;
        job.reason = Reason::None;
        job.start_ms = Some(now_ms);
        job.push_event(
            now_ms,
            "alloc",
            serde_json::json!({"nodes": encode_hostlist(&nodes)}),
        );
        job.push_event(now_ms, "start", start_context);
        let hosts = encode_hostlist(&nodes);
        job.nodes = nodes;
        job.r_json = Some(r_json.into());
        tracing::debug!(parent: &job_span(&self.queue, id), nodes = %hosts, "started");
    }

    /// Job `id` stops running, if it ran (its run ended, or was requeued): its fair-share
    /// usage is counted and it leaves the running set and the sim executor's ends.
    /// Whether it was running.
    pub(super) fn leave_running(&mut self, id: Fluid) -> bool {
        self.usage_stopped(id);
        match self.jobs.running.remove(&id) {
            Some(end) => {
                self.jobs.sim_ends.remove(&(end, id));
                true
            }
            None => false,
        }
    }

    /// A live job ended: completed or cancelled (its resources are already free in the
    /// queue manager).
    pub(super) fn ended(&mut self, id: Fluid, state: JobState, reason: Reason) {
        let now_ms = self.now_ms;
        let was_running = self.leave_running(id);
        let was_pending = self.jobs.pending.remove(&id);
        self.limits_stopped(id, was_running, was_pending);
        self.jobs.deps.remove(&id);
        let Some(job) = self.jobs.table.get_mut(id) else {
            return;
        };
        if !job.state.is_active() {
            return;
        }
        job.state = state;
        job.reason = reason;
        job.end_ms = Some(now_ms);
        match state {
            JobState::Completed => {
                job.push_event(now_ms, "finish", serde_json::json!({"status": 0}));
            }
            JobState::Cancelled => job.push_event(
                now_ms,
                "exception",
                serde_json::json!({"type": "cancel", "severity": 0}),
            ),
            _ => {}
        }
        let freed = if was_running {
            job.push_event(now_ms, "free", serde_json::json!({}));
            job.nodes.clone()
        } else {
            Vec::new()
        };
        job.push_event(now_ms, "clean", serde_json::json!({}));
        let reason = match &job.reason {
            Reason::Text(text) => text.clone(),
            _ => String::new(),
        };
        let array = job.array;
        self.job_left(&freed);
        if let Some(element) = array {
            self.element_ended(id, element.array);
        }
        if let Some(end_state) = EndState::of(state) {
            self.journal(JournalRecord::Ended(EndedJob {
                id: id.0,
                state: end_state,
                reason,
                end_ms: now_ms,
            }));
        }
        debug_assert!(
            self.qm.job(id.0).is_none(),
            "{id} ended here but the queue manager still holds it"
        );
        let forgotten = self.jobs.table.finished(id);
        self.forget(forgotten);
        self.status_version += 1;
        tracing::debug!(parent: &job_span(&self.queue, id), state = %state, "ended");
    }

    /// Marks a job failed with `why` (the queue manager no longer holds it).
    pub(super) fn fail(&mut self, id: Fluid, why: String) {
        let now_ms = self.now_ms;
        self.ended(id, JobState::Failed, Reason::Text(why.clone()));
        if let Some(job) = self.jobs.table.get_mut(id)
            && job.state == JobState::Failed
        {
            job.push_event(
                now_ms,
                "exception",
                serde_json::json!({"type": "internal", "severity": 0, "note": why}),
            );
        }
    }

    /// Finished jobs past retention left the table: the journal forgets them too (an
    /// array's elements with their array, once none is left), and in exec mode their
    /// directories go.
    pub(super) fn forget(&mut self, forgotten: Vec<Arc<JobRecord>>) {
        if self.is_exec() {
            self.outbox
                .exec_actions
                .extend(forgotten.iter().map(|j| ExecAction::Forget(j.id)));
        }
        let mut elements = false;
        for job in forgotten {
            match job.array {
                None => self.journal(JournalRecord::Forgotten(job.id)),
                Some(_) => elements = true,
            }
        }
        if elements {
            self.forget_arrays();
        }
    }

    fn set_reason(&mut self, id: Fluid, reason: Reason) {
        if self.jobs.table.get(id).is_some_and(|j| j.reason != reason)
            && let Some(job) = self.jobs.table.get_mut(id)
        {
            job.reason = reason;
        }
    }

    /// Re-reads why pending jobs wait: the first `limit` in queue order, or every pending
    /// job (waiting ones included) when `limit` is `usize::MAX`.
    pub(super) fn refresh_reasons(&mut self, limit: usize) {
        let ids: Vec<Fluid> = if limit == usize::MAX {
            self.jobs.pending.iter().copied().collect()
        } else {
            self.qm.pending_order().take(limit).map(Fluid).collect()
        };
        for id in ids {
            // A held job keeps the reason the shard gave it (`core/holds.rs`).
            if let Some(JobView::Pending { reason }) = self.qm.job(id.0)
                && reason != WaitReason::Held
            {
                self.set_reason(id, Reason::Waiting(reason));
            }
        }
    }
}

/// When an allocation's span ends, ms since the Unix epoch (the queue manager's seconds).
fn span_end_ms(alloc: &Allocation) -> u64 {
    u64::try_from(alloc.at)
        .unwrap_or(0)
        .saturating_add(alloc.duration)
        .saturating_mul(MS_PER_S)
}

/// How long the sim executor runs a job of `duration_s` seconds at `time_scale`, in ms
/// (rounded up; saturating for jobs of unlimited duration).
pub fn sim_run_ms(duration_s: u64, time_scale: f64) -> u64 {
    // Float to integer casts saturate, so an unlimited duration gives u64::MAX.
    ((duration_s as f64) * (MS_PER_S as f64) / time_scale).ceil() as u64
}
