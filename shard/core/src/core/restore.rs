//! The core's side of durability: the journal records it queues
//! ([`ShardCore::take_journal`]) and the restart that rebuilds it from what the journal
//! remembers ([`ShardCore::restored`]).
//!
//! A restart brings back the node table first (every node's holding, generation and
//! flags; nothing up until the coordinator's assignment confirms it), then the journal's
//! jobs in id (= submission) order:
//! - finished jobs go back into the table (for `jobs -a`), into the retention queue in the
//!   order they ended;
//! - running jobs come back on EXACTLY their allocation (vertex paths resolved in this
//!   graph; a path the cluster no longer has refuses the restart), with their sim end from
//!   the journal, so they end on time; one whose processes were being killed (its `kills`
//!   record: a cancel acknowledged, a node marked down, a move's deadline) is killed again,
//!   to end as that request said (`core/exec.rs`);
//! - pending jobs are submitted again with their original submit times and urgencies, so
//!   they keep their order (held ones held again); the next tick re-plans reservations
//!   around the running ones.
//!
//! Idempotency keys come back with the jobs, and the FLUID generator continues after the
//! last id issued. Nothing restored is journaled again (it is on disk already); what the
//! restore changes (a pending job the queue now denies) is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_jobspec::Jobspec;
use shardsched_qmanager::{JobRequest, JobView};
use shardsched_wire::Fluid;
use shardsched_wire::msg::shard_coord::Assignment;
use shardsched_wire::msg::{JobId, JobState};

use super::exec::EndAs;
use super::{CoreOptions, ShardCore, Transition, TransitionKind};
use crate::assign::MS_PER_S;
use crate::error::ShardError;
use crate::job::{JobRecord, NewJob, Reason};
use crate::journal::{JournalRecord, Restored, RestoredJob};
use crate::nodes::{Holding, NodeTable};

/// What a restore brought back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreSummary {
    /// Jobs pending again.
    pub pending: usize,
    /// Jobs running again on their allocations.
    pub running: usize,
    /// Finished jobs kept for `jobs -a`.
    pub finished: usize,
}

impl ShardCore {
    /// Takes the changes to make durable since the last call, oldest first: the driver
    /// commits them before it publishes the snapshot or answers the batch that made them.
    pub fn take_journal(&mut self) -> Vec<JournalRecord> {
        if self.ids.last != self.outbox.journaled_last_id {
            if let Some(id) = self.ids.last {
                self.journal(JournalRecord::LastId(id));
            }
            self.outbox.journaled_last_id = self.ids.last;
        }
        let records = std::mem::take(&mut self.outbox.journal);
        if mutant::active(Mutant::AckBeforeJournal) {
            // The batch's records are handed out with the next batch's: its answers leave
            // before they are durable.
            return std::mem::replace(&mut self.outbox.deferred, records);
        }
        records
    }

    /// The end of job `id` was just journaled with the queue manager's word for it
    /// ("cancelled"); `reason` says more (who cancelled).
    pub(super) fn journal_end_reason(&mut self, id: JobId, reason: &str) {
        if let Some(JournalRecord::Ended(end)) = self
            .outbox
            .journal
            .iter_mut()
            .rev()
            .find(|r| matches!(r, JournalRecord::Ended(e) if e.id == id.0))
        {
            reason.clone_into(&mut end.reason);
        }
    }

    /// A restarted shard's core: the journal's node table and jobs come back, and nothing
    /// is up but what the coordinator's `assignment` confirms (an outgoing node stays
    /// outgoing and is released if its jobs ended meanwhile). Every node the journal had
    /// owned is logged down first (it stopped being usable when the process did). Errors
    /// name the job: a jobspec that no longer parses, an allocation on a vertex the cluster
    /// does not have, a queue manager that refuses a running job back.
    pub fn restored(
        assignment: &Assignment,
        options: CoreOptions,
        now_ms: u64,
        restored: &Restored,
    ) -> Result<(ShardCore, RestoreSummary), ShardError> {
        let entries: Vec<_> = restored.node_entries().collect();
        // Nodes the journal holds, and those running jobs' allocations are on (whoever
        // owns them now), stay in the graph whatever the definition: the restored jobs
        // are resolved on it by path. (A path's components that are not nodes are left
        // out by the cut.)
        let mut kept: BTreeSet<&str> = entries
            .iter()
            .filter(|(_, e)| e.holding != Holding::NotOwned)
            .map(|(n, _)| n.as_str())
            .collect();
        for job in restored.jobs.iter().filter(|j| j.ended.is_none()) {
            for v in job.started.iter().flat_map(|run| &run.vertices) {
                kept.extend(v.path.split('/').filter(|c| !c.is_empty()));
            }
        }
        let kept: Vec<&str> = kept.into_iter().collect();
        let mut core = ShardCore::build(assignment, options, &kept)?;
        core.quota = super::allowances::Quota::new(assignment.limits.clone(), &restored.allowances);
        core.assign_allowances(&assignment.allowances);
        for (name, e) in &entries {
            if e.holding == Holding::Owned && core.cluster.vertices.contains_key(name) {
                core.outbox.transitions.push(Transition {
                    node: name.clone(),
                    kind: TransitionKind::Down,
                    generation: e.generation,
                    why: "restart",
                });
            }
        }
        core.nodes = NodeTable::restore(entries);
        // Running jobs first: their allocations are facts, holds are planned around them.
        let summary = core.restore_jobs(now_ms, restored)?;
        core.apply_assignment(
            &assignment.owned,
            &assignment.incoming,
            Some(&assignment.flags),
        );
        // Entries the assignment repeated exactly changed nothing in the table, but this
        // queue manager is new: every node the table holds is put in place once.
        let held: Vec<String> = core
            .nodes
            .entries()
            .filter(|(_, e)| e.holding != Holding::NotOwned)
            .map(|(n, _)| n.to_owned())
            .collect();
        for name in held {
            core.refresh_node(&name, "restart");
        }
        core.settle_all_outgoing();
        debug_assert_eq!(core.invariants(), Ok(()), "after a restore");
        Ok((core, summary))
    }

    /// The core before any node is up: the cluster cut to the queue's definition plus the
    /// nodes owned, incoming, and `kept` (the whole graph is dropped once cut).
    pub(super) fn build(
        assignment: &Assignment,
        options: CoreOptions,
        kept: &[&str],
    ) -> Result<ShardCore, ShardError> {
        let extra: Vec<&str> = crate::assign::assigned_nodes(assignment)
            .chain(kept.iter().copied())
            .collect();
        let (graph, loaded) =
            crate::assign::definition_graph(&assignment.cluster, &assignment.queue, &extra)?;
        let mut core = ShardCore::with_graph_only(
            graph,
            loaded,
            &assignment.queue,
            assignment.generator_id,
            &extra,
            options,
        )?;
        core.quota = super::allowances::Quota::new(assignment.limits.clone(), &[]);
        core.fairshare = super::fairshare::FairShare::new(assignment.fairshare.as_ref());
        core.cluster.description = Some(Arc::new(assignment.cluster.clone()));
        Ok(core)
    }

    /// Rebuilds the jobs of `restored` at `now_ms` (see the module documentation), the node
    /// table being back already (a job on a node marked down is ended again).
    pub(super) fn restore_jobs(
        &mut self,
        now_ms: u64,
        restored: &Restored,
    ) -> Result<RestoreSummary, ShardError> {
        let now_ms = self.observe(now_ms);
        let mut summary = RestoreSummary::default();
        let mut finished = Vec::new();
        let mut held = Vec::new();
        let mut limits = BTreeMap::new();
        let mut parsed: Option<Parsed> = None;
        let mut killing = Vec::new();
        for job in &restored.jobs {
            let id = Fluid(job.id);
            // An array's elements share their array's record: parsed once.
            let spec = match parsed.take() {
                Some(p) if p.of == job.accepted.id => p,
                _ => Parsed::new(job, id)?,
            };
            let record = self.restored_record(job, &spec)?;
            if let Some(of) = job.array {
                limits.insert(of.element.array, of.max_running);
            }
            self.ids.last = self.ids.last.max(Some(id));
            match (&job.started, &job.ended) {
                (_, Some(end)) => {
                    finished.push((end.end_ms, id));
                    self.jobs.table.insert(record);
                    summary.finished += 1;
                }
                (Some(run), None) => {
                    let alloc = run
                        .allocation()
                        .resolve(&self.qm.matcher().graph)
                        .map_err(|e| restore_error(id, &format!("its allocation: {e}")))?;
                    let request = self.request(job, &record, &spec);
                    let start_s = i64::try_from(run.start_ms / MS_PER_S).unwrap_or(i64::MAX);
                    self.qm
                        .restore_running(request, start_s, alloc.clone())
                        .map_err(|e| restore_error(id, &e.to_string()))?;
                    self.jobs.table.insert(record);
                    self.mark_running(id, &alloc, run.start_ms, run.sim_end_ms);
                    if let Some(kill) = &job.kill {
                        killing.push((id, EndAs::from(&kill.plan)));
                    }
                    summary.running += 1;
                }
                (None, None) => {
                    let request = self.request(job, &record, &spec);
                    self.jobs.table.insert(record);
                    self.note_priority(id);
                    self.jobs.pending.insert(id);
                    self.limits_pending(id);
                    self.qm
                        .submit(request)
                        .map_err(|e| restore_error(id, &e.to_string()))?;
                    self.defer(id);
                    self.restore_dependencies(id, &spec.jobspec);
                    held.push(id);
                    summary.pending += 1;
                }
            }
            parsed = Some(spec);
        }
        self.usage_restarted(now_ms);
        self.restore_arrays();
        for (array, max_running) in limits {
            self.restore_array_limit(array, max_running);
        }
        // Pending jobs the queue now denies (its definition changed) fail, and say so.
        self.drain(None);
        // Kills asked for before the restart first: they were answered, so they win.
        for (id, plan) in killing {
            self.restore_kill(id, plan);
        }
        self.end_jobs_on_down_nodes();
        finished.sort_unstable();
        for (_, id) in finished {
            let forgotten = self.jobs.table.finished(id);
            self.forget(forgotten);
        }
        self.ids.last = self.ids.last.max(restored.last_id);
        self.outbox.journaled_last_id = self.ids.last;
        if let Some(last) = self.ids.last {
            self.ids.generator.resume_after(last);
        }
        for id in self.jobs.pending.clone() {
            if let Some(JobView::Pending { reason }) = self.qm.job(id.0)
                && let Some(job) = self.jobs.table.get_mut(id)
            {
                job.reason = Reason::Waiting(reason);
            }
        }
        for id in held {
            self.sync_hold(id);
        }
        self.status_version += 1;
        tracing::info!(
            pending = summary.pending,
            running = summary.running,
            finished = summary.finished,
            now_ms,
            "restored from the journal"
        );
        Ok(summary)
    }

    /// The table's record of a journaled job, as it stood when last journaled (a running
    /// job is recorded pending here; `mark_running` then runs it).
    fn restored_record(&self, job: &RestoredJob, spec: &Parsed) -> Result<JobRecord, ShardError> {
        let a = &job.accepted;
        let id = Fluid(job.id);
        let mut record = JobRecord::accepted(&NewJob {
            id,
            owner: &a.owner,
            key: a.idempotency_key(),
            urgency: job.urgency(),
            submit_ms: a.submit_ms,
            duration_ms: self.duration_ms(&spec.jobspec),
            jobspec: &spec.jobspec,
            jobspec_json: &spec.json,
            array: job.array.map(|of| of.element),
            signature: job.signature.clone(),
        });
        let Some(end) = &job.ended else {
            return Ok(record);
        };
        if let Some(run) = &job.started {
            // A finished job's allocation is history: shown if this graph still has it.
            if let Ok(alloc) = run.allocation().resolve(&self.qm.matcher().graph) {
                let (nodes, r_json) = self.nodes_and_r(&alloc);
                record.push_event(
                    run.start_ms,
                    "alloc",
                    serde_json::json!({"nodes": shardsched_resource::encode_hostlist(&nodes)}),
                );
                record.nodes = nodes;
                record.r_json = Some(r_json.into());
            }
            record.push_event(run.start_ms, "start", self.start_context(id));
            record.start_ms = Some(run.start_ms);
        }
        record.state = JobState::from(end.state);
        record.reason = if end.reason.is_empty() {
            Reason::None
        } else {
            Reason::Text(end.reason.clone())
        };
        record.end_ms = Some(end.end_ms);
        let ending = match record.state {
            JobState::Completed => ("finish", serde_json::json!({"status": 0})),
            JobState::Cancelled => (
                "exception",
                serde_json::json!({"type": "cancel", "severity": 0}),
            ),
            _ => (
                "exception",
                serde_json::json!({"type": "internal", "severity": 0, "note": end.reason}),
            ),
        };
        record.push_event(end.end_ms, ending.0, ending.1);
        if job.started.is_some() {
            record.push_event(end.end_ms, "free", serde_json::json!({}));
        }
        record.push_event(end.end_ms, "clean", serde_json::json!({}));
        Ok(record)
    }

    /// The queue manager's request for a journaled job (its user numbered as at submit).
    fn request(&mut self, job: &RestoredJob, record: &JobRecord, spec: &Parsed) -> JobRequest {
        let a = &job.accepted;
        let jobspec = spec.jobspec.clone();
        self.queue_request(record.id, jobspec, record.urgency, a.submit_ms, &a.owner)
    }
}

/// A journaled jobspec, parsed (once for all the elements of an array).
struct Parsed {
    /// The `jobs` record it is of.
    of: u64,
    jobspec: Jobspec,
    json: Arc<str>,
}

impl Parsed {
    fn new(job: &RestoredJob, id: JobId) -> Result<Parsed, ShardError> {
        let json = job.accepted.jobspec_json.as_str();
        Ok(Parsed {
            of: job.accepted.id,
            jobspec: shardsched_jobspec::parse_json(json)
                .map_err(|e| restore_error(id, &format!("its jobspec: {e}")))?,
            json: Arc::from(json),
        })
    }
}

fn restore_error(id: JobId, what: &str) -> ShardError {
    ShardError::Restore(format!("job {id}: {what}"))
}
