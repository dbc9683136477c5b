//! The shard's pure core: one queue manager, the job table around it, and the sim executor.
//!
//! No I/O, no clock: every input carries `now_ms` (milliseconds since the Unix epoch), and
//! the core keeps the largest it has seen, so a wall clock that steps back cannot make the
//! queue manager see time run backwards. The matcher counts in whole seconds
//! (`now_ms / 1000`).
//!
//! Inputs: [`ShardCore::handle_submit`], [`ShardCore::handle_cancel`],
//! [`ShardCore::handle_urgency`] (`core/holds.rs`: holds and urgency),
//! [`ShardCore::handle_job_facts`] (`core/deps.rs`: dependencies, with
//! [`ShardCore::dependency_questions`] and [`ShardCore::job_facts`]),
//! [`ShardCore::set_queue_state`], [`ShardCore::set_owned`], the move commands
//! (`core/moving.rs`), node flags (`core/flags.rs`: down, drained), dry runs
//! (`core/dry_run.rs`), and
//! [`ShardCore::tick`], which completes the sim jobs whose run time is over, schedules, and
//! records what the queue manager decided. Reads: [`ShardCore::snapshot`] (and the
//! `handle_jobs` / `handle_job_info` conveniences built on it), [`ShardCore::status`],
//! [`ShardCore::next_wakeup_ms`]. Checks: [`ShardCore::invariants`] (`core/invariants.rs`).
//!
//! The state is split into parts with one owner each (`core/parts.rs`): the node table
//! (every node's holding, generation and flags: nothing else keeps a copy), the job side,
//! the ids, and the outbox the driver empties after every batch.
//!
//! **Denied jobs are refused at submit.** A job that could never fit the queue's definition
//! (or asks for more than its maximum duration, or names another queue) gets a
//! [`RefusalCode::Denied`] refusal carrying the queue manager's reason; no job id is kept
//! and nothing is recorded, so a retry is judged afresh. A job that fits the definition but
//! not the nodes the queue owns now is accepted and waits, with the reason in `job info`.

mod admission;
#[cfg(test)]
mod admission_tests;
mod allowances;
mod arrays;
#[cfg(test)]
mod arrays_tests;
mod deps;
#[cfg(test)]
mod deps_tests;
mod dispatch;
mod dry_run;
mod events;
mod exec;
#[cfg(test)]
mod exec_tests;
mod fairshare;
#[cfg(test)]
mod fairshare_tests;
mod flags;
#[cfg(test)]
mod flags_tests;
#[cfg(test)]
mod graph_tests;
mod holds;
#[cfg(test)]
mod holds_tests;
mod invariants;
#[cfg(test)]
mod kills_tests;
mod moving;
#[cfg(test)]
mod moving_restore_tests;
#[cfg(test)]
mod moving_tests;
mod parts;
mod placement;
#[cfg(test)]
mod queue_tests;
mod redefine;
mod report_clock;
mod restore;
mod status;
mod submit;
mod usage;

pub use invariants::Violation;
pub use moving::{Transition, TransitionKind};
pub use report_clock::ReportClock;
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
use shardsched_qmanager::QueueManager;
use shardsched_resource::ResourceGraph;
use shardsched_wire::FluidGenerator;
use shardsched_wire::msg::{Generation, JobId, JobInfo, JobList, JobsQuery, NodeGen, QueueConfig};

use crate::assign::{self, MS_PER_S};
use crate::error::ShardError;
use crate::job::JobRecord;
use crate::journal::JournalRecord;
use crate::limits::{FINISHED_JOBS_RETAINED, RETENTION_DEFAULT_MS};
use crate::nodes::NodeTable;
use crate::snapshot::Snapshot;

pub use self::exec::{CoreExecutor, ExecAction};
use self::parts::{Cluster, Ids, Jobs, Outbox};

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
    /// The queue's name (shared with snapshots).
    queue: Arc<str>,
    /// The queue's configuration as last set.
    config: QueueConfig,
    /// The queue manager: pending order, allocations, reservations.
    qm: QueueManager,
    /// How jobs run and how long they are remembered.
    options: CoreOptions,
    /// The cluster's nodes, and which the queue may own.
    cluster: Cluster,
    /// Every node's holding, generation and flags: the only copy.
    nodes: NodeTable,
    /// The job records and the live sets.
    jobs: Jobs,
    /// Job ids and users.
    ids: Ids,
    /// Records, transitions, reports and exec actions for the driver.
    outbox: Outbox,
    /// The largest time seen, ms.
    now_ms: u64,
    /// The last tick hit [`SCHEDULE_PASSES_MAX`](crate::limits::SCHEDULE_PASSES_MAX) with
    /// jobs still starting.
    backlog: bool,
    /// Bumped on every change a status report shows.
    status_version: u64,
    /// Limits, allowances and the jobs admitted under them (`core/allowances.rs`).
    quota: allowances::Quota,
    /// Fair-share: usage counted, factors (`core/fairshare.rs`); `None` when it is off.
    fairshare: Option<fairshare::FairShare>,
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
        assignment: &shardsched_wire::msg::shard_coord::Assignment,
        options: CoreOptions,
    ) -> Result<ShardCore, ShardError> {
        let mut core = ShardCore::build(assignment, options, &[])?;
        core.assign_allowances(&assignment.allowances);
        core.apply_assignment(
            &assignment.owned,
            &assignment.incoming,
            Some(&assignment.flags),
        );
        Ok(core)
    }

    /// A core over an already built graph (reduced to the scheduler's types), cut to the
    /// queue's definition: `config.definition` plus the owned nodes (all owned nodes when
    /// the definition is empty).
    pub fn with_graph(
        graph: ResourceGraph,
        config: &QueueConfig,
        generator_id: u16,
        owned: &[NodeGen],
        options: CoreOptions,
    ) -> Result<ShardCore, ShardError> {
        let loaded = assign::kinds(&graph);
        let names: Vec<&str> = owned.iter().map(|n| n.node.as_str()).collect();
        let mut core =
            ShardCore::with_graph_only(graph, loaded, config, generator_id, &names, options)?;
        core.set_owned(owned)?;
        Ok(core)
    }

    /// The core before any node is up, over `graph` cut to the definition (`config`'s plus
    /// the nodes of `extra`); `loaded` are the resource types of the whole cluster as loaded.
    pub(super) fn with_graph_only(
        graph: ResourceGraph,
        loaded: BTreeSet<String>,
        config: &QueueConfig,
        generator_id: u16,
        extra: &[&str],
        options: CoreOptions,
    ) -> Result<ShardCore, ShardError> {
        if !(options.time_scale.is_finite() && options.time_scale > 0.0) {
            return Err(ShardError::Option(format!(
                "time scale {} is not a positive number",
                options.time_scale
            )));
        }
        let nodes = assign::node_index(&graph);
        let definition = assign::definition(config, extra, &|n| nodes.contains_key(n));
        let graph = assign::restrict_to_definition(graph, &definition)?;
        let vertices = assign::node_index(&graph);
        let capacity = usage::capacity(&graph, vertices.clone());
        let qm = QueueManager::new(graph, assign::params(config)?)?;
        let mut core = ShardCore {
            queue: Arc::from(config.name.as_str()),
            config: config.clone(),
            qm,
            cluster: Cluster {
                vertices,
                definition,
                capacity,
                loaded,
                description: None,
            },
            nodes: NodeTable::new(),
            jobs: Jobs::new(options.finished_retained),
            ids: Ids {
                generator: FluidGenerator::new(generator_id)?,
                last: None,
                users: HashMap::new(),
            },
            outbox: Outbox::default(),
            options,
            now_ms: 0,
            backlog: false,
            status_version: 0,
            quota: allowances::Quota::default(),
            fairshare: None,
        };
        // Nothing is up until the node table says so (`refresh_node`).
        for &v in core.cluster.vertices.values() {
            core.qm.set_availability(v, false)?;
        }
        Ok(core)
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
            tracing::info!(enabled, started, "queue state");
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

    /// Makes exactly `owned` available (with their generations), as a registration
    /// answer with no incoming node and no flags would: every other owned node goes down
    /// (an outgoing one stays outgoing). Running jobs are never touched; pending ones that
    /// no longer fit wait. Names that are not nodes of the shard's graph are ignored (and
    /// logged).
    pub fn set_owned(&mut self, owned: &[NodeGen]) -> Result<(), ShardError> {
        self.apply_assignment(owned, &[], None);
        self.refresh_reasons(usize::MAX);
        Ok(())
    }

    /// Switches to another FLUID generator id (a re-registration handed back a new one);
    /// ids keep increasing past the ones already issued.
    pub fn set_generator_id(&mut self, generator_id: u16) -> Result<(), ShardError> {
        if generator_id != self.ids.generator.generator_id() {
            let mut generator = FluidGenerator::new(generator_id)?;
            if let Some(last) = self.ids.last {
                generator.resume_after(last);
            }
            self.ids.generator = generator;
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
            self.jobs.table.share(),
        )
    }

    /// The job `id` as the table has it.
    pub fn job(&self, id: JobId) -> Option<&JobRecord> {
        self.jobs.table.get(id)
    }

    /// Every job in the table (live and retained finished), in no particular order.
    pub fn jobs(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.table.iter()
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

    /// The nodes up here now (owned and confirmed, flags aside), with their generations:
    /// a view of the node table.
    pub fn owned(&self) -> BTreeMap<String, Generation> {
        self.up_nodes()
            .map(|(name, generation)| (name.to_owned(), generation))
            .collect()
    }

    /// The node table, for reads and checks.
    pub fn nodes(&self) -> &NodeTable {
        &self.nodes
    }

    /// The highest job id issued so far.
    pub fn last_job_id(&self) -> Option<JobId> {
        self.ids.last
    }

    /// Changes whenever something a status report shows changed.
    pub fn status_version(&self) -> u64 {
        self.status_version
    }

    /// Changes whenever a status report should leave at once, without waiting for the
    /// interval: an allowance asked for or returned ([`ReportClock`]).
    pub fn urgent_reports(&self) -> u64 {
        self.quota.urgent_reports()
    }

    /// Queues `record` for the journal, when journaling (`CoreOptions::journal`).
    fn journal(&mut self, record: JournalRecord) {
        if self.options.journal {
            self.outbox.journal.push(record);
        }
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

/// The span of one job's log lines: its id and queue. Under the driver it sits in the
/// process's span (`shard{queue=…}`), so a job's lines can be found by either field.
pub(crate) fn job_span(queue: &str, id: JobId) -> tracing::Span {
    tracing::info_span!("job", job = %id, queue = %queue)
}
