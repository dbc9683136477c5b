//! The core's side of the `exec` executor, and how running jobs end otherwise than by
//! completing: killed on request (cancel, node down) or requeued.
//!
//! In exec mode the core never ends a job by the clock. A started job becomes an
//! [`ExecAction::Launch`] for the driver; its end comes back as
//! [`ShardCore::handle_job_ended`] with the supervisor's [`JobEnd`]. A running job the core
//! wants stopped (a cancel, its node going down, a move's deadline) becomes an
//! [`ExecAction::Kill`] and stays running, holding its resources, until its processes are
//! gone: only then is it recorded as cancelled, failed or requeued ([`EndAs`]), so that no
//! resource is handed to another job while the first one's processes still use it.
//!
//! The kill request is journaled ([`KillRecord`]) in the batch that answers it, so it is
//! durable before anyone hears that the job is cancelled: a shard restarted before the
//! processes are gone asks for the kill again ([`ShardCore::restore_kill`]) and records
//! the job as the request said, with its reason. The first request for a job wins, except
//! that a cancel replaces a requeue (whoever was told the job is cancelled must not see it
//! run again).
//!
//! In sim mode the same [`EndAs`] is applied at once.

use std::path::PathBuf;

use serde_json::json;
use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_qmanager::JobView;
use shardsched_wire::msg::{JobId, JobState};

use super::ShardCore;
use crate::core::job_span;
use crate::exec::{EndCause, JobEnd, JobFiles};
use crate::job::Reason;
use crate::journal::{JournalRecord, KillPlan, KillRecord};

/// How the core runs a started job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CoreExecutor {
    /// Simulated: the job holds its resources for its duration (divided by the time scale)
    /// and completes.
    #[default]
    Sim,
    /// Really run by the driver (see [`crate::exec`]): the core asks for launches and kills
    /// ([`ShardCore::take_exec_actions`]) and hears of ends
    /// ([`ShardCore::handle_job_ended`]); the clock never ends a job.
    Exec {
        /// `<state-dir>/jobs`: where job directories are (shown in `job info`).
        jobs_dir: PathBuf,
    },
    /// Really run on the nodes allocated, by their node agents, as the user who signed the
    /// submit: like `Exec` for the core (launches, kills, ends come from the driver), and a
    /// submit without a signature is refused. Output is read with `shardsched job output`.
    Agents,
}

/// What the driver must do for the exec executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecAction {
    /// Launch this job (it just started: its record has its R).
    Launch(JobId),
    /// Kill this job's processes, for this reason.
    Kill {
        /// The job.
        id: JobId,
        /// Why (written to its cancel file and its status).
        why: String,
    },
    /// This finished job is forgotten (retention): remove its directory.
    Forget(JobId),
}

/// How a running job is recorded once its resources are given back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EndAs {
    /// Cancelled, with this reason.
    Cancelled(String),
    /// Failed, with this reason and, if any, an exception event of this type.
    Failed {
        /// The `exception` event's type (`timeout`, `node-down`, `exec`).
        exception: Option<&'static str>,
        /// The reason shown.
        why: String,
    },
    /// Back to pending (the job allows requeue), with this reason.
    Requeue(String),
}

/// The `exception` event types a kill's [`EndAs::Failed`] carries: what a journaled
/// [`KillPlan::Fail`] names is one of these (another reads back as none).
const EXCEPTIONS: [&str; 3] = ["timeout", "node-down", "exec"];

impl EndAs {
    fn why(&self) -> &str {
        match self {
            EndAs::Cancelled(why) | EndAs::Requeue(why) | EndAs::Failed { why, .. } => why,
        }
    }

    /// As journaled.
    fn plan(&self) -> KillPlan {
        match self {
            EndAs::Cancelled(reason) => KillPlan::Cancel {
                reason: reason.clone(),
            },
            EndAs::Failed { exception, why } => KillPlan::Fail {
                exception: exception.map(str::to_owned),
                reason: why.clone(),
            },
            EndAs::Requeue(reason) => KillPlan::Requeue {
                reason: reason.clone(),
            },
        }
    }
}

impl From<&KillPlan> for EndAs {
    fn from(plan: &KillPlan) -> EndAs {
        match plan {
            KillPlan::Cancel { reason } => EndAs::Cancelled(reason.clone()),
            KillPlan::Fail { exception, reason } => EndAs::Failed {
                exception: exception
                    .as_deref()
                    .and_then(|e| EXCEPTIONS.into_iter().find(|known| *known == e)),
                why: reason.clone(),
            },
            KillPlan::Requeue { reason } => EndAs::Requeue(reason.clone()),
        }
    }
}

impl ShardCore {
    /// Whether jobs really run (the exec executor, or node agents).
    pub fn is_exec(&self) -> bool {
        !matches!(self.options.executor, CoreExecutor::Sim)
    }

    /// The jobs running now (in exec mode: those whose processes the driver watches).
    pub fn running_job_ids(&self) -> Vec<JobId> {
        let mut ids: Vec<JobId> = self.jobs.running.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The generation this shard holds each of `job`'s nodes at: what a node agent checks
    /// the job's launch against.
    pub fn generations_of(&self, job: &crate::job::JobRecord) -> crate::agents::Generations {
        job.nodes
            .iter()
            .filter_map(|n| self.nodes.get(n).map(|e| (n.clone(), e.generation)))
            .collect()
    }

    /// The launches and kills asked for since the last call, oldest first.
    pub fn take_exec_actions(&mut self) -> Vec<ExecAction> {
        std::mem::take(&mut self.outbox.exec_actions)
    }

    /// Exec executor: the processes of running job `id` are gone, as `end` says. The job
    /// ends the way a kill request asked (cancelled, failed, requeued), or else by its exit
    /// status: completed on exit code 0, failed otherwise (time limit, signal, a command
    /// that could not start, a lost supervisor), with the status in its reason. A report
    /// about a job that is not running is ignored (a repeat).
    pub fn handle_job_ended(&mut self, now_ms: u64, id: JobId, end: &JobEnd) {
        let now_ms = self.observe(now_ms);
        if !self.jobs.running.contains_key(&id) {
            tracing::debug!(parent: &job_span(&self.queue, id), "end of a job that is not running");
            self.jobs.kill_requested.remove(&id);
            return;
        }
        let plan = self
            .jobs
            .kill_requested
            .remove(&id)
            .or_else(|| plan_for(end));
        if let Some(job) = self.jobs.table.get_mut(id)
            && !end.succeeded()
        {
            let mut context = json!({"cause": end.cause.to_string()});
            if let Some(status) = end.wait_status() {
                context["status"] = json!(status);
            }
            if !end.note.is_empty() {
                context["note"] = json!(end.note);
            }
            job.push_event(now_ms, "finish", context);
        }
        tracing::debug!(parent: &job_span(&self.queue, id), cause = %end.cause, status = %end.status_text(), "processes ended");
        match plan {
            Some(plan) => self.end_running_now(id, plan),
            None => {
                if let Err(e) = self.qm.complete(id.0, self.now_s()) {
                    tracing::error!(parent: &job_span(&self.queue, id), error = %e, "cannot complete a running job");
                    self.fail(id, format!("internal error: {e}"));
                }
                self.drain(None);
            }
        }
    }

    /// Ends running job `id` as `plan` says: in exec mode, once its processes are killed
    /// (a kill request, journaled: see the module documentation for which request wins);
    /// in sim mode, now.
    pub(super) fn end_running(&mut self, id: JobId, plan: EndAs) {
        if !self.is_exec() {
            self.end_running_now(id, plan);
            return;
        }
        let replaces = match self.jobs.kill_requested.get(&id) {
            None => true,
            Some(EndAs::Requeue(_)) => matches!(plan, EndAs::Cancelled(_)),
            Some(_) => false,
        };
        if replaces && !mutant::active(Mutant::KillUnjournaled) {
            self.journal(JournalRecord::KillRequested(KillRecord {
                id: id.0,
                requested_ms: self.now_ms,
                plan: plan.plan(),
            }));
        }
        if replaces {
            self.jobs.kill_requested.insert(id, plan);
        }
        // Asked again (a repeated request reaches processes an earlier one may have
        // missed), for the reason that wins.
        let why = self
            .jobs
            .kill_requested
            .get(&id)
            .map(|winner| winner.why().to_owned())
            .unwrap_or_default();
        self.ask_kill(id, &why);
    }

    /// A restarted shard's job `id` was being killed as `plan` says (its journaled
    /// [`KillRecord`]): the kill is asked for again (nothing journaled: it is on disk); in
    /// sim mode (the executor changed across the restart) it ends now.
    pub(super) fn restore_kill(&mut self, id: JobId, plan: EndAs) {
        if !self.is_exec() {
            self.end_running_now(id, plan);
            return;
        }
        let why = plan.why().to_owned();
        self.jobs.kill_requested.insert(id, plan);
        self.ask_kill(id, &why);
    }

    /// Asks the driver to kill job `id`'s processes for `why`; the job says so meanwhile.
    fn ask_kill(&mut self, id: JobId, why: &str) {
        self.outbox.exec_actions.push(ExecAction::Kill {
            id,
            why: why.to_owned(),
        });
        if let Some(job) = self.jobs.table.get_mut(id) {
            job.reason = Reason::Text(format!("{why}: stopping its processes"));
        }
        self.status_version += 1;
    }

    /// Gives running job `id`'s resources back and records it as `plan` says.
    fn end_running_now(&mut self, id: JobId, plan: EndAs) {
        self.jobs.end_as.insert(id, plan);
        if let Err(e) = self.qm.complete(id.0, self.now_s()) {
            self.jobs.end_as.remove(&id);
            tracing::error!(parent: &job_span(&self.queue, id), error = %e, "cannot end a running job");
            self.fail(id, format!("internal error: {e}"));
        }
        self.drain(None);
    }

    /// The queue manager reported job `id` ended and [`Self::end_as`] says how to record it.
    pub(super) fn end_as_planned(&mut self, id: JobId) {
        let Some(plan) = self.jobs.end_as.remove(&id) else {
            return;
        };
        match plan {
            EndAs::Cancelled(why) => self.ended(id, JobState::Cancelled, Reason::Text(why)),
            EndAs::Failed { exception, why } => {
                if let (Some(kind), Some(job)) = (exception, self.jobs.table.get_mut(id)) {
                    job.push_event(
                        self.now_ms,
                        "exception",
                        json!({"type": kind, "severity": 0, "note": why}),
                    );
                }
                self.ended(id, JobState::Failed, Reason::Text(why));
            }
            EndAs::Requeue(why) => self.requeue(id, why),
        }
    }

    /// Puts a job whose run ended (its resources are already free in the queue manager)
    /// back in the queue with its first submit time, so it keeps its place among jobs of
    /// the same urgency (up to the matcher's one-second resolution).
    fn requeue(&mut self, id: JobId, why: String) {
        let now_ms = self.now_ms;
        let was_running = self.leave_running(id);
        self.limits_stopped(id, was_running, false);
        self.jobs.kill_requested.remove(&id);
        let Some(job) = self.jobs.table.get(id) else {
            return;
        };
        let nodes = job.nodes.clone();
        let (urgency, submit_ms, owner) = (job.urgency, job.submit_ms, job.owner.clone());
        let request = shardsched_jobspec::parse_json(&job.jobspec_json)
            .map(|jobspec| self.queue_request(id, jobspec, urgency, submit_ms, &owner));
        if let Some(job) = self.jobs.table.get_mut(id) {
            job.push_event(now_ms, "free", json!({}));
            job.push_event(now_ms, "requeue", json!({"note": why}));
            job.state = JobState::Pending;
            job.reason = Reason::Text(format!("requeued: {why}"));
            job.start_ms = None;
            job.nodes.clear();
            job.r_json = None;
        }
        self.job_left(&nodes);
        self.jobs.pending.insert(id);
        self.limits_pending(id);
        self.note_priority(id);
        self.status_version += 1;
        self.journal(JournalRecord::Requeued(id));
        let submitted = match request {
            Ok(request) => self.qm.submit(request).map_err(|e| e.to_string()),
            Err(e) => Err(format!("its jobspec no longer parses: {e}")),
        };
        if let Err(e) = submitted {
            self.ended(
                id,
                JobState::Failed,
                Reason::Text(format!("{why}; not requeued: {e}")),
            );
            return;
        }
        if let Some(reason) = self.drain(Some(id.0)) {
            let text = format!("{why}; denied when requeued: {reason}");
            self.ended(id, JobState::Failed, Reason::Text(text));
        } else {
            debug_assert!(
                matches!(self.qm.job(id.0), Some(JobView::Pending { .. })),
                "{id}: requeued but the queue manager does not have it pending"
            );
        }
        tracing::info!(parent: &job_span(&self.queue, id), %why, "requeued");
    }
}

/// How an exec job whose end nobody asked for is recorded: `None` for a success.
fn plan_for(end: &JobEnd) -> Option<EndAs> {
    let status = end.status_text();
    let failed = |exception, why| Some(EndAs::Failed { exception, why });
    match end.cause {
        EndCause::Completed if end.succeeded() => None,
        EndCause::Completed => failed(None, status),
        EndCause::Timeout => failed(Some("timeout"), format!("timeout: {} ({status})", end.note)),
        EndCause::Cancelled => Some(EndAs::Cancelled(format!("cancelled: {}", end.note))),
        EndCause::Error => failed(Some("exec"), format!("could not start: {}", end.note)),
        EndCause::Lost => failed(Some("exec"), format!("lost: {}", end.note)),
        // It never ran: back to pending (a prolog that fails on every node keeps the job
        // going round; the site drains such a node).
        EndCause::Prolog => Some(EndAs::Requeue(end.note.clone())),
    }
}

impl ShardCore {
    /// The `start` event's context: in exec mode, where the job's output goes.
    pub(super) fn start_context(&self, id: JobId) -> serde_json::Value {
        let CoreExecutor::Exec { jobs_dir } = &self.options.executor else {
            // Sim runs nothing; agents' output is read through `job output`.
            return json!({});
        };
        let Some(job) = self.jobs.table.get(id) else {
            return json!({});
        };
        let run = shardsched_jobspec::parse_json(&job.jobspec_json)
            .map_err(|e| e.to_string())
            .and_then(|jobspec| shardsched_jobspec::Execution::of(&jobspec));
        match run {
            Ok(run) => {
                let files = JobFiles::of(jobs_dir, job, &run);
                json!({
                    "stdout": files.stdout.to_string_lossy(),
                    "stderr": files.stderr.to_string_lossy(),
                })
            }
            Err(_) => json!({}),
        }
    }
}
