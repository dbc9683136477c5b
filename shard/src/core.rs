//! The shard's pure core: one queue manager, the job table around it, and the sim executor.
//!
//! No I/O, no clock: every input carries `now_ms` (milliseconds since the Unix epoch), and
//! the core keeps the largest it has seen, so a wall clock that steps back cannot make the
//! queue manager see time run backwards. The matcher counts in whole seconds
//! (`now_ms / 1000`).
//!
//! Inputs: [`ShardCore::handle_submit`], [`ShardCore::handle_cancel`],
//! [`ShardCore::set_queue_state`], [`ShardCore::set_owned`], and [`ShardCore::tick`], which
//! completes the sim jobs whose run time is over, schedules, and records what the queue
//! manager decided. Reads: [`ShardCore::snapshot`] (and the `handle_jobs` /
//! `handle_job_info` conveniences built on it), [`ShardCore::status`],
//! [`ShardCore::next_wakeup_ms`].
//!
//! **Denied jobs are refused at submit.** A job that could never fit the queue's definition
//! (or asks for more than its maximum duration, or names another queue) gets a
//! [`RefusalCode::Denied`] refusal carrying the queue manager's reason; no job id is kept
//! and nothing is recorded, so a retry is judged afresh. A job that fits the definition but
//! not the nodes the queue owns now is accepted and waits, with the reason in `job info`.

mod drain;
mod events;
mod exec;
#[cfg(test)]
mod exec_tests;
mod moving;
#[cfg(test)]
mod moving_tests;
mod nodes;
mod restore;
mod status;

pub use moving::{Transition, TransitionKind};
pub use restore::RestoreSummary;
#[cfg(test)]
mod restore_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timeline_tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use shardsched_jobspec::Jobspec;
use shardsched_proto::msg::client_shard::{CancelOutcome, CancelResult, Submit};
use shardsched_proto::msg::shard_coord::Released;
use shardsched_proto::msg::{
    Generation, JobId, JobInfo, JobList, JobState, JobsQuery, NodeGen, QueueConfig, Refusal,
    RefusalCode,
};
use shardsched_proto::{FluidGenerator, Peer};
use shardsched_qmanager::{JobRequest, JobView, QueueManager};
use shardsched_resource::{ResourceGraph, VertexId};

use crate::assign::{self, MS_PER_S};
use crate::error::ShardError;
use crate::job::{JobRecord, NewJob, Reason};
use crate::journal::{AcceptedJob, JournalRecord};
use crate::limits::{
    ACTIVE_JOBS_MAX, FINISHED_JOBS_RETAINED, PRIORITY_DEFAULT, RETENTION_DEFAULT_MS,
};
use crate::moves::ShardMoves;
use crate::snapshot::Snapshot;
use crate::table::JobTable;

use self::exec::EndAs;
pub use self::exec::{CoreExecutor, ExecAction};

/// How the core runs jobs and how long it remembers them.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreOptions {
    /// The sim executor's speed-up: a job holds its resources for its duration divided by
    /// this. Finite and positive.
    pub time_scale: f64,
    /// Finished jobs kept for `jobs -a` ([`FINISHED_JOBS_RETAINED`] by default).
    pub finished_retained: usize,
    /// How started jobs run.
    pub executor: CoreExecutor,
    /// How long a finished job is kept (in memory and in the journal) after it ended, ms
    /// ([`RETENTION_DEFAULT_MS`] by default); the count above bounds it too.
    pub retention_ms: u64,
    /// Whether the core queues [`JournalRecord`]s for [`ShardCore::take_journal`] (the
    /// driver's journal takes them after every batch). Off, nothing is queued.
    pub journal: bool,
}

/// The answer to an accepted submit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The job's id.
    pub id: JobId,
    /// The same owner had already used this idempotency key: `id` is the earlier job.
    pub duplicate: bool,
}

/// See the module documentation.
#[derive(Debug)]
pub struct ShardCore {
    config: QueueConfig,
    queue: Arc<str>,
    qm: QueueManager,
    generator: FluidGenerator,
    table: JobTable,
    options: CoreOptions,
    /// Every node of the cluster, by name.
    nodes: BTreeMap<String, VertexId>,
    /// Nodes the queue may own.
    definition: BTreeSet<String>,
    /// Nodes the queue owns now, with their generations.
    owned: BTreeMap<String, Generation>,
    /// Owner name → the queue manager's numeric user.
    users: HashMap<String, u32>,
    /// The largest time seen, ms.
    now_ms: u64,
    /// Live pending jobs (in the pending order or waiting for nodes).
    pending: BTreeSet<JobId>,
    /// Running jobs → the time their sim run ends, ms.
    running: HashMap<JobId, u64>,
    /// The same, ordered by end.
    sim_ends: BTreeSet<(u64, JobId)>,
    /// Running jobs per node name (for status reports).
    node_jobs: HashMap<String, u32>,
    /// The highest job id issued.
    last_id: Option<JobId>,
    /// Bumped on every change a status report shows.
    status_version: u64,
    /// The last tick hit [`SCHEDULE_PASSES_MAX`](crate::limits::SCHEDULE_PASSES_MAX) with
    /// jobs still starting.
    backlog: bool,
    /// Exec executor: launches and kills for the driver, oldest first.
    exec_actions: Vec<ExecAction>,
    /// Exec executor: running jobs whose processes the core asked to kill, and how each is
    /// recorded once they are gone.
    kill_requested: HashMap<JobId, EndAs>,
    /// Jobs the queue manager is about to report ended that must be recorded otherwise than
    /// completed or cancelled (see `core/exec.rs`).
    end_as: HashMap<JobId, EndAs>,
    /// Nodes an admin marked down, with the reason (see `core/nodes.rs`).
    down: BTreeMap<String, String>,
    /// Nodes an admin drained, with the reason (see `core/moving.rs`).
    drained: BTreeMap<String, String>,
    /// Which nodes this shard owns, gives away or receives, at which generation.
    moves: ShardMoves,
    /// Incoming nodes held in the queue manager until their expected free time.
    incoming_held: BTreeMap<String, VertexId>,
    /// Up/down/released transitions for the driver's log, oldest first.
    transitions: Vec<Transition>,
    /// `Released` reports for the coordinator, oldest first.
    released: Vec<Released>,
    /// Nodes whose last allocation ended since the moves were last settled.
    freed_nodes: BTreeSet<String>,
    /// `owned` changed since the journal was last told.
    owned_changed: bool,
    /// Changes to make durable, oldest first (when `options.journal`).
    journal: Vec<JournalRecord>,
    /// The last id the journal was told of.
    journaled_last_id: Option<JobId>,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            time_scale: 1.0,
            finished_retained: FINISHED_JOBS_RETAINED,
            executor: CoreExecutor::Sim,
            retention_ms: RETENTION_DEFAULT_MS,
            journal: false,
        }
    }
}

impl ShardCore {
    /// A core for the coordinator's assignment: its cluster, queue, generator id and nodes.
    pub fn new(
        assignment: &shardsched_proto::msg::shard_coord::Assignment,
        options: CoreOptions,
    ) -> Result<ShardCore, ShardError> {
        let mut core = ShardCore::build(assignment, options, &[])?;
        core.apply_assignment(
            &assignment.owned,
            &assignment.incoming,
            Some(&assignment.flags),
        );
        Ok(core)
    }

    /// A core over an already built graph (reduced to the scheduler's types). The queue's
    /// definition is `config.definition` plus the owned nodes (all owned nodes when the
    /// definition is empty).
    pub fn with_graph(
        graph: ResourceGraph,
        config: &QueueConfig,
        generator_id: u16,
        owned: &[NodeGen],
        options: CoreOptions,
    ) -> Result<ShardCore, ShardError> {
        let mut core = ShardCore::with_graph_only(graph, config, generator_id, owned, options)?;
        core.set_owned(owned)?;
        Ok(core)
    }

    pub(super) fn with_graph_only(
        mut graph: ResourceGraph,
        config: &QueueConfig,
        generator_id: u16,
        owned: &[NodeGen],
        options: CoreOptions,
    ) -> Result<ShardCore, ShardError> {
        if !(options.time_scale.is_finite() && options.time_scale > 0.0) {
            return Err(ShardError::Option(format!(
                "time scale {} is not a positive number",
                options.time_scale
            )));
        }
        let nodes = assign::node_index(&graph);
        let definition: BTreeSet<String> = config
            .definition
            .iter()
            .cloned()
            .chain(
                owned
                    .iter()
                    .filter(|n| nodes.contains_key(&n.node))
                    .map(|n| n.node.clone()),
            )
            .collect();
        assign::restrict_to_definition(&mut graph, &nodes, &definition)?;
        let qm = QueueManager::new(graph, assign::params(config)?)?;
        let mut core = ShardCore {
            queue: Arc::from(config.name.as_str()),
            config: config.clone(),
            qm,
            generator: FluidGenerator::new(generator_id)?,
            table: JobTable::new(options.finished_retained),
            options,
            nodes,
            definition,
            owned: BTreeMap::new(),
            users: HashMap::new(),
            now_ms: 0,
            pending: BTreeSet::new(),
            running: HashMap::new(),
            sim_ends: BTreeSet::new(),
            node_jobs: HashMap::new(),
            last_id: None,
            status_version: 0,
            backlog: false,
            exec_actions: Vec::new(),
            kill_requested: HashMap::new(),
            end_as: HashMap::new(),
            down: BTreeMap::new(),
            drained: BTreeMap::new(),
            moves: ShardMoves::new(),
            incoming_held: BTreeMap::new(),
            transitions: Vec::new(),
            released: Vec::new(),
            freed_nodes: BTreeSet::new(),
            owned_changed: false,
            journal: Vec::new(),
            journaled_last_id: None,
        };
        // Nothing is up until the move machine says so (`refresh_node`).
        for &v in core.nodes.values() {
            core.qm.set_availability(v, false)?;
        }
        Ok(core)
    }

    /// Takes a job in at `now_ms` for `owner` (the submitting certificate's name). See the
    /// module documentation for what is refused.
    pub fn handle_submit(
        &mut self,
        now_ms: u64,
        owner: &str,
        submit: &Submit,
    ) -> Result<Submitted, Refusal> {
        let now_ms = self.observe(now_ms);
        if let Some(id) = self.table.by_key(owner, &submit.idempotency_key) {
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
        if self.pending.len() + self.running.len() >= ACTIVE_JOBS_MAX {
            return Err(Refusal::new(
                RefusalCode::Unavailable,
                format!(
                    "queue {} holds {ACTIVE_JOBS_MAX} live jobs, its limit; try later",
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
        let id = self
            .generator
            .next(now_ms)
            .map_err(|e| Refusal::new(RefusalCode::Internal, e.to_string()))?;
        self.admit(now_ms, owner, submit, jobspec, id)
    }

    fn admit(
        &mut self,
        now_ms: u64,
        owner: &str,
        submit: &Submit,
        jobspec: Jobspec,
        id: JobId,
    ) -> Result<Submitted, Refusal> {
        let priority = submit.priority.unwrap_or(PRIORITY_DEFAULT);
        let duration_ms = self.duration_ms(&jobspec);
        let mut job = JobRecord::accepted(&NewJob {
            id,
            owner,
            key: submit.idempotency_key,
            priority,
            submit_ms: now_ms,
            duration_ms,
            jobspec: &jobspec,
            jobspec_json: &submit.jobspec_json,
        });
        let next_user = u32::try_from(self.users.len()).unwrap_or(u32::MAX);
        let user = *self.users.entry(owner.to_owned()).or_insert(next_user);
        let request = JobRequest {
            id: id.0,
            jobspec,
            priority: i64::from(priority),
            submit_time: self.now_s(),
            user,
        };
        self.last_id = self.last_id.max(Some(id));
        if let Err(e) = self.qm.submit(request) {
            tracing::error!(queue = %self.queue, job = %id, error = %e, "queue manager refused a submit");
            return Err(Refusal::new(RefusalCode::Internal, e.to_string()));
        }
        if let Some(denied) = self.drain(Some(id.0)) {
            tracing::debug!(queue = %self.queue, job = %id, reason = %denied, "denied");
            let mut reason = denied.to_string();
            if let Ok(jobspec) = shardsched_jobspec::parse_json(&submit.jobspec_json)
                && let Some(why) = assign::types_not_loaded(&self.qm.matcher().graph, &jobspec)
            {
                reason = format!("{reason}: {why}");
            }
            return Err(Refusal::new(
                RefusalCode::Denied,
                format!("denied by queue {}: {reason}", self.queue),
            ));
        }
        if let Some(JobView::Pending { reason }) = self.qm.job(id.0) {
            job.reason = Reason::Waiting(reason);
        }
        if self.options.journal {
            self.journal.push(JournalRecord::Accepted(AcceptedJob {
                id,
                owner: owner.to_owned(),
                key: submit.idempotency_key,
                jobspec_json: submit.jobspec_json.clone(),
                priority,
                submit_ms: now_ms,
            }));
        }
        self.table.insert(job);
        self.pending.insert(id);
        self.status_version += 1;
        Ok(Submitted {
            id,
            duplicate: false,
        })
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

    fn cancel_one(&mut self, peer: &Peer, id: JobId) -> CancelResult {
        let Some(job) = self.table.get(id) else {
            return CancelResult::NotFound;
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
        if let Err(e) = self.qm.cancel(id.0) {
            tracing::error!(queue = %self.queue, job = %id, error = %e, "queue manager lost a live job");
            self.fail(id, format!("internal error: {e}"));
            return CancelResult::AlreadyInactive;
        }
        self.drain(None);
        let reason = format!("cancelled by {peer}");
        self.journal_end_reason(id, &reason);
        if let Some(job) = self.table.get_mut(id) {
            job.reason = Reason::Text(reason);
        }
        CancelResult::Cancelled
    }

    /// The jobs matching `query`, as of now (see [`Snapshot::jobs`]).
    pub fn handle_jobs(&self, requester: &str, query: &JobsQuery) -> JobList {
        self.snapshot().jobs(requester, query)
    }

    /// One job in full, if the shard knows it.
    pub fn handle_job_info(&self, id: JobId) -> Option<JobInfo> {
        self.snapshot().job_info(id)
    }

    /// Enables/disables submissions and starts/stops scheduling. Stopping touches no
    /// running job; pending jobs wait until the queue is started again.
    pub fn set_queue_state(&mut self, enabled: bool, started: bool) {
        if (self.config.enabled, self.config.started) != (enabled, started) {
            tracing::info!(queue = %self.queue, enabled, started, "queue state");
            self.config.enabled = enabled;
            self.config.started = started;
            self.status_version += 1;
        }
    }

    /// A job's duration in ms: what its jobspec asks, the queue's default when it asks
    /// none.
    pub(super) fn duration_ms(&self, jobspec: &Jobspec) -> u64 {
        let asked_s = jobspec.attributes.duration;
        self.qm
            .params()
            .effective_duration(asked_s)
            .unwrap_or(asked_s)
            .saturating_mul(MS_PER_S)
    }

    /// Disables submissions if no job is pending or running, in one step of the event loop
    /// (the coordinator is removing the queue): else refuses, naming the jobs, and changes
    /// nothing.
    pub fn disable_if_idle(&mut self) -> Result<(), Refusal> {
        let (pending, running) = (self.pending.len(), self.running.len());
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

    /// Makes exactly `owned` available (with their generations), as a registration
    /// answer with no incoming node and no flags would: every other owned node goes down
    /// (an outgoing one stays outgoing). Running jobs are never touched; pending ones that
    /// no longer fit wait. Names that are not nodes of the cluster are ignored (and logged).
    pub fn set_owned(&mut self, owned: &[NodeGen]) -> Result<(), ShardError> {
        for n in owned {
            if !self.nodes.contains_key(&n.node) {
                tracing::warn!(queue = %self.queue, node = %n.node, "assigned a node the cluster does not have");
            }
        }
        self.apply_assignment(owned, &[], None);
        self.refresh_reasons(usize::MAX);
        Ok(())
    }

    /// Switches to another FLUID generator id (a re-registration handed back a new one);
    /// ids keep increasing past the ones already issued.
    pub fn set_generator_id(&mut self, generator_id: u16) -> Result<(), ShardError> {
        if generator_id != self.generator.generator_id() {
            let mut generator = FluidGenerator::new(generator_id)?;
            if let Some(last) = self.last_id {
                generator.resume_after(last);
            }
            self.generator = generator;
        }
        Ok(())
    }

    /// An immutable view of the job table for reads, as of the last input.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(
            Arc::clone(&self.queue),
            self.config.enabled,
            self.config.started,
            self.now_ms,
            self.table.share(),
        )
    }

    /// The job `id` as the table has it.
    pub fn job(&self, id: JobId) -> Option<&JobRecord> {
        self.table.get(id)
    }

    /// Every job in the table (live and retained finished), in no particular order.
    pub fn jobs(&self) -> impl Iterator<Item = &JobRecord> {
        self.table.iter()
    }

    /// The queue manager (its matcher holds the allocations), for checks and tests.
    pub fn queue_manager(&self) -> &QueueManager {
        &self.qm
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The queue's configuration as last set.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Nodes owned now, with their generations.
    pub fn owned(&self) -> &BTreeMap<String, Generation> {
        &self.owned
    }

    /// The highest job id issued so far.
    pub fn last_job_id(&self) -> Option<JobId> {
        self.last_id
    }

    /// Changes whenever something a status report shows changed.
    pub fn status_version(&self) -> u64 {
        self.status_version
    }

    /// Records `now_ms` (never going back) and returns the time to use.
    fn observe(&mut self, now_ms: u64) -> u64 {
        self.now_ms = self.now_ms.max(now_ms);
        self.now_ms
    }

    /// The matcher's time: whole seconds.
    fn now_s(&self) -> i64 {
        i64::try_from(self.now_ms / MS_PER_S).unwrap_or(i64::MAX)
    }
}
