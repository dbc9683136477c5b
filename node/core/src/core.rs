//! [`AgentCore`]: the owner, the job table, the leases, and the actions for the driver.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};

use shardsched_wire::limits::{AGENT_JOBS_MAX, REASON_BYTES_MAX};
use shardsched_wire::msg::agent::{
    AgentReport, EndCause, JobEnd, JobOnNode, JobReport, NodeLaunch, NodeOwner, OwnerChange,
};
use shardsched_wire::msg::{Generation, JobId};

use shardsched_failpoint::mutant::{self, Mutant};

use crate::lease::Lease;
use crate::refused::Refused;

/// What the driver must do for the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start the job's supervisor on this node with this launch (signature, user, cgroup,
    /// prolog: the driver's checks; a failure comes back as an end).
    Spawn {
        /// The queue whose shard launched it.
        queue: String,
        /// The launch.
        launch: Box<NodeLaunch>,
    },
    /// Stop the job's processes (SIGTERM, grace, SIGKILL); the end comes back through
    /// [`AgentCore::handle_ended`] once every process is gone.
    Kill {
        /// The job.
        job: JobId,
        /// Why.
        why: String,
    },
    /// Remove the job's files (its shard forgot it, or the table made room).
    RemoveFiles(JobId),
    /// Write down that `queue` was heard from at `heard_ms` (see [`crate::lease`]).
    PersistLease {
        /// The shard's queue.
        queue: String,
        /// When it was last heard from, ms.
        heard_ms: u64,
    },
}

/// A job a restarted agent found in its state directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The job.
    pub job: JobId,
    /// The queue that launched it.
    pub queue: String,
    /// The generation it was launched at.
    pub generation: Generation,
    /// Running (its supervisor lives) or ended.
    pub state: JobOnNode,
}

/// One job on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    queue: String,
    generation: Generation,
    state: JobOnNode,
    /// Its shard has recorded its end: no longer reported.
    seen: bool,
    /// The [`fingerprint`] of the launch that started its last run here (none: found by a
    /// restart), to know a repeat of it.
    launch: Option<u64>,
}

/// The node agent's state: see the crate documentation.
#[derive(Clone, Debug)]
pub struct AgentCore {
    node: String,
    /// Half the heartbeat timeout, ms.
    lease_ms: u64,
    owner: Option<NodeOwner>,
    jobs: BTreeMap<JobId, Entry>,
    /// Per queue that has or had jobs here.
    leases: BTreeMap<String, Lease>,
    actions: VecDeque<Action>,
    /// Why the node should take no new work (its health check failed, or a prolog did).
    unhealthy: Option<String>,
}

impl AgentCore {
    /// A core for `node`, whose coordinator marks silent nodes down after
    /// `heartbeat_timeout_ms` (the lease is half of it).
    pub fn new(node: &str, heartbeat_timeout_ms: u64) -> AgentCore {
        AgentCore {
            node: node.to_owned(),
            lease_ms: heartbeat_timeout_ms / 2,
            owner: None,
            jobs: BTreeMap::new(),
            leases: BTreeMap::new(),
            actions: VecDeque::new(),
            unhealthy: None,
        }
    }

    /// A restarted agent's core: the jobs it found (running or ended) and the persisted
    /// lease renewals. A queue with a running job and no persisted renewal is taken as heard
    /// from at `now_ms` less a whole lease, so its jobs are killed at the first tick unless
    /// its shard speaks first.
    pub fn recover(
        node: &str,
        heartbeat_timeout_ms: u64,
        now_ms: u64,
        found: Vec<Recovered>,
        leases: &BTreeMap<String, u64>,
    ) -> AgentCore {
        let mut core = AgentCore::new(node, heartbeat_timeout_ms);
        for job in found {
            let heard = leases
                .get(&job.queue)
                .copied()
                .unwrap_or(now_ms.saturating_sub(core.lease_ms));
            core.leases
                .entry(job.queue.clone())
                .or_insert_with(|| Lease::new(heard, heard));
            core.jobs.insert(
                job.job,
                Entry {
                    queue: job.queue,
                    generation: job.generation,
                    state: job.state,
                    seen: false,
                    launch: None,
                },
            );
        }
        core.debug_check();
        core
    }

    /// The node.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The owner known, if any.
    pub fn owner(&self) -> Option<&NodeOwner> {
        self.owner.as_ref()
    }

    /// The coordinator's heartbeat timeout (from its registration answer): the lease is
    /// half of it.
    pub fn set_heartbeat_timeout(&mut self, heartbeat_timeout_ms: u64) {
        self.lease_ms = heartbeat_timeout_ms / 2;
    }

    /// The lease, ms (half the heartbeat timeout).
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// When `queue`'s lease runs out, ms (its shard last heard from plus the lease).
    pub fn lease_deadline_ms(&self, queue: &str) -> Option<u64> {
        self.leases
            .get(queue)
            .map(|lease| lease.deadline_ms(self.lease_ms))
    }

    /// The coordinator names the node's owner. Accepted at a newer generation than the one
    /// known, or the same owner again; a restarted agent accepts the first it hears.
    pub fn handle_owner(
        &mut self,
        now_ms: u64,
        owner: NodeOwner,
        change: OwnerChange,
    ) -> Result<(), Refused> {
        let _ = (now_ms, change);
        if let Some(known) = &self.owner {
            if owner.generation < known.generation {
                return Err(Refused::StaleOwner {
                    node: self.node.clone(),
                    queue: owner.queue,
                    ours: known.generation,
                    theirs: owner.generation,
                });
            }
            if owner.generation == known.generation && owner.queue != known.queue {
                return Err(Refused::ConflictingOwner {
                    node: self.node.clone(),
                    owner: known.queue.clone(),
                    queue: owner.queue,
                    generation: owner.generation,
                });
            }
        }
        self.owner = Some(owner);
        self.debug_check();
        Ok(())
    }

    /// Shard `from` asks to start its share of a job here.
    pub fn handle_launch(
        &mut self,
        now_ms: u64,
        from: &str,
        launch: Box<NodeLaunch>,
    ) -> Result<(), Refused> {
        self.renew(now_ms, from);
        let result = self.admit(from, &launch);
        if result.is_ok() {
            self.start(from, launch);
        }
        self.debug_check();
        result
    }

    /// The checks of a launch, in the order a person would want to hear them.
    fn admit(&mut self, from: &str, launch: &NodeLaunch) -> Result<(), Refused> {
        let named = launch.this_node().map(|n| n.node.as_str()).unwrap_or("");
        if named != self.node {
            return Err(Refused::WrongNode {
                ours: self.node.clone(),
                theirs: named.to_owned(),
            });
        }
        let Some(owner) = &self.owner else {
            return Err(Refused::NoOwner {
                node: self.node.clone(),
            });
        };
        // The mutant: a launch at a generation older than the owner's is let through the
        // fence, whoever sent it.
        let unfenced = mutant::active(Mutant::AgentNoFence) && launch.generation < owner.generation;
        if owner.queue != from && !unfenced {
            return Err(Refused::NotOwner {
                node: self.node.clone(),
                owner: owner.queue.clone(),
                from: from.to_owned(),
            });
        }
        if owner.generation != launch.generation && !unfenced {
            return Err(Refused::WrongGeneration {
                node: self.node.clone(),
                queue: owner.queue.clone(),
                ours: owner.generation,
                theirs: launch.generation,
            });
        }
        if let Some((&job, entry)) = self
            .jobs
            .iter()
            .find(|(_, e)| e.queue != from && e.state.is_live())
        {
            return Err(Refused::OtherQueueRuns {
                node: self.node.clone(),
                queue: entry.queue.clone(),
                job,
            });
        }
        let known = self.jobs.contains_key(&launch.job);
        if !known && self.jobs.len() >= AGENT_JOBS_MAX && !self.evict_one() {
            return Err(Refused::TableFull {
                node: self.node.clone(),
                max: AGENT_JOBS_MAX,
            });
        }
        Ok(())
    }

    /// Records an admitted launch. A launch of a live job changes nothing, and neither does
    /// a repeat of the launch that started a run ended here: a launch the network delivers
    /// again after the job was killed must not start it again. A job that ended here
    /// before and is launched anew (requeued: its new run has its own R) starts a new run.
    fn start(&mut self, from: &str, launch: Box<NodeLaunch>) {
        let print = fingerprint(&launch);
        if self
            .jobs
            .get(&launch.job)
            .is_some_and(|e| e.state.is_live() || (e.queue == from && e.launch == Some(print)))
        {
            return;
        }
        self.jobs.insert(
            launch.job,
            Entry {
                queue: from.to_owned(),
                generation: launch.generation,
                state: JobOnNode::Launching,
                seen: false,
                launch: Some(print),
            },
        );
        self.actions.push_back(Action::Spawn {
            queue: from.to_owned(),
            launch,
        });
    }

    /// Makes room by dropping the oldest ended job its shard has seen; false if none.
    fn evict_one(&mut self) -> bool {
        let Some(job) = self
            .jobs
            .iter()
            .find(|(_, e)| e.seen && !e.state.is_live())
            .map(|(&job, _)| job)
        else {
            return false;
        };
        self.jobs.remove(&job);
        self.actions.push_back(Action::RemoveFiles(job));
        true
    }

    /// Shard `from` asks to stop a job's processes here.
    pub fn handle_kill(
        &mut self,
        now_ms: u64,
        from: &str,
        job: JobId,
        why: &str,
    ) -> Result<(), Refused> {
        self.renew(now_ms, from);
        let result = match self.jobs.get(&job) {
            None => Ok(()),
            Some(entry) if entry.queue != from => Err(Refused::NotLauncher {
                job,
                launcher: entry.queue.clone(),
                from: from.to_owned(),
            }),
            Some(_) => {
                self.stop(job, why);
                Ok(())
            }
        };
        self.debug_check();
        result
    }

    /// Marks a live job stopping and asks the driver to kill it (once).
    fn stop(&mut self, job: JobId, why: &str) {
        let Some(entry) = self.jobs.get_mut(&job) else {
            return;
        };
        if matches!(
            entry.state,
            JobOnNode::Launching | JobOnNode::Running { .. }
        ) {
            entry.state = JobOnNode::Stopping {
                why: why.to_owned(),
            };
            self.actions.push_back(Action::Kill {
                job,
                why: why.to_owned(),
            });
        }
    }

    /// Shard `from` renews its lease and says which ended jobs it has recorded; the answer
    /// is the report.
    pub fn handle_renew(&mut self, now_ms: u64, from: &str, seen: &[JobId]) -> AgentReport {
        self.renew(now_ms, from);
        for job in seen {
            if let Some(entry) = self.jobs.get_mut(job)
                && entry.queue == from
                && !entry.state.is_live()
            {
                entry.seen = true;
            }
        }
        self.debug_check();
        self.report()
    }

    /// Shard `from` forgot these jobs: their files go. Live jobs and other queues' are left.
    pub fn handle_forget(&mut self, now_ms: u64, from: &str, jobs: &[JobId]) {
        self.renew(now_ms, from);
        for job in jobs {
            if self
                .jobs
                .get(job)
                .is_some_and(|e| e.queue == from && !e.state.is_live())
            {
                self.jobs.remove(job);
                self.actions.push_back(Action::RemoveFiles(*job));
            }
        }
        self.debug_check();
    }

    /// The job's supervisor runs, with this pid.
    pub fn handle_spawned(&mut self, now_ms: u64, job: JobId, supervisor_pid: u32) {
        let _ = now_ms;
        if let Some(entry) = self.jobs.get_mut(&job)
            && entry.state == JobOnNode::Launching
        {
            entry.state = JobOnNode::Running { supervisor_pid };
        }
        self.debug_check();
    }

    /// Whether the node is fit for work, as its health check says (`None`: it is; else
    /// why not). Reported to the coordinator, which drains the node.
    pub fn set_health(&mut self, unhealthy: Option<String>) {
        self.unhealthy = unhealthy.map(|why| reason(&why));
    }

    /// Why the node should take no new work, if it should.
    pub fn unhealthy(&self) -> Option<&str> {
        self.unhealthy.as_deref()
    }

    /// Every process of the job on this node is gone, as `end` says. A job whose prolog
    /// failed makes the node unhealthy: it should take no new work until an admin looks.
    pub fn handle_ended(&mut self, now_ms: u64, job: JobId, end: JobEnd) {
        let _ = now_ms;
        if end.cause == EndCause::Prolog {
            self.unhealthy = Some(reason(&end.note));
        }
        if let Some(entry) = self.jobs.get_mut(&job)
            && entry.state.is_live()
        {
            entry.state = JobOnNode::Ended(end);
            entry.seen = false;
        }
        self.debug_check();
    }

    /// Time passes: leases that ran out have their jobs killed; renewals due are persisted.
    pub fn tick(&mut self, now_ms: u64) {
        // Leases past their deadline whose queue has live jobs (few queues: each looked up
        // without copying the table's queue names, as this runs at every event).
        let ran_out: Vec<String> = self
            .leases
            .iter()
            .filter(|(queue, lease)| {
                !lease.expired
                    && now_ms >= lease.deadline_ms(self.lease_ms)
                    && !self.clean_of(queue)
            })
            .map(|(queue, _)| queue.clone())
            .collect();
        for queue in ran_out {
            let Some(lease) = self.leases.get_mut(&queue) else {
                continue;
            };
            lease.expired = true;
            let why = format!(
                "lease expired: no word from queue {queue}'s shard for {} ms (half the \
                 heartbeat timeout)",
                now_ms.saturating_sub(lease.heard_ms)
            );
            let jobs: Vec<JobId> = self
                .jobs
                .iter()
                .filter(|(_, e)| e.queue == queue)
                .map(|(&job, _)| job)
                .collect();
            for job in jobs {
                self.stop(job, &why);
            }
        }
        for (queue, lease) in &mut self.leases {
            if lease.persist_due(self.lease_ms) {
                lease.persisted_ms = lease.heard_ms;
                self.actions.push_back(Action::PersistLease {
                    queue: queue.clone(),
                    heard_ms: lease.heard_ms,
                });
            }
        }
        self.debug_check();
    }

    /// When [`AgentCore::tick`] next has something to do, if ever: the earliest deadline of
    /// a lease with live jobs, or the next renewal to persist.
    pub fn next_wake_ms(&self) -> Option<u64> {
        self.leases
            .iter()
            .filter(|(queue, lease)| !lease.expired && !self.clean_of(queue))
            .map(|(_, lease)| lease.deadline_ms(self.lease_ms))
            .min()
    }

    /// The actions asked for since the last call, oldest first.
    pub fn take_actions(&mut self) -> Vec<Action> {
        self.actions.drain(..).collect()
    }

    /// The report: the owner, and every job not yet seen ended by its shard.
    pub fn report(&self) -> AgentReport {
        AgentReport {
            node: self.node.clone(),
            owner: self.owner.clone(),
            lease_ms: self.lease_ms,
            unhealthy: self.unhealthy.clone(),
            jobs: self
                .jobs
                .iter()
                .filter(|(_, e)| !e.seen)
                .map(|(&job, e)| JobReport {
                    job,
                    queue: e.queue.clone(),
                    generation: e.generation,
                    state: e.state.clone(),
                })
                .collect(),
        }
    }

    /// Whether no process of a job of `queue` may still run here.
    pub fn clean_of(&self, queue: &str) -> bool {
        !self
            .jobs
            .values()
            .any(|e| e.queue == queue && e.state.is_live())
    }

    /// The state of job `job` here, if the agent knows it.
    pub fn job(&self, job: JobId) -> Option<&JobOnNode> {
        self.jobs.get(&job).map(|e| &e.state)
    }

    /// The queue that launched `job` here, if the agent knows it.
    pub fn launcher(&self, job: JobId) -> Option<&str> {
        self.jobs.get(&job).map(|e| e.queue.as_str())
    }

    /// The invariants, checked after every transition in debug builds and by the tests:
    /// live jobs belong to one queue; none was launched at a generation newer than the
    /// owner's; a queue whose lease ran out has no job launching or running; every queue
    /// with live jobs has a lease; the table is within its bound.
    pub fn invariants(&self) -> Result<(), String> {
        let live = self.live_queues();
        if live.len() > 1 {
            return Err(format!("live jobs of several queues: {live:?}"));
        }
        for (job, entry) in &self.jobs {
            if let (Some(owner), true) = (&self.owner, entry.state.is_live())
                && entry.generation > owner.generation
            {
                return Err(format!(
                    "job {job} runs at generation {} past the owner's {}",
                    entry.generation.0, owner.generation.0
                ));
            }
            let lease = self.leases.get(&entry.queue);
            if entry.state.is_live() && lease.is_none() {
                return Err(format!("job {job} of {} runs without a lease", entry.queue));
            }
            if lease.is_some_and(|l| l.expired)
                && matches!(
                    entry.state,
                    JobOnNode::Launching | JobOnNode::Running { .. }
                )
            {
                return Err(format!(
                    "job {job} of {} still runs past its lease",
                    entry.queue
                ));
            }
        }
        if self.jobs.len() > AGENT_JOBS_MAX {
            return Err(format!("{} jobs, past {AGENT_JOBS_MAX}", self.jobs.len()));
        }
        Ok(())
    }

    fn debug_check(&self) {
        if cfg!(debug_assertions)
            && let Err(broken) = self.invariants()
        {
            panic!("node agent {}: invariant broken: {broken}", self.node);
        }
    }

    fn renew(&mut self, now_ms: u64, queue: &str) {
        match self.leases.get_mut(queue) {
            Some(lease) => lease.renew(now_ms),
            None => {
                // A new lease is persisted at once: an agent restarted before the next lazy
                // write must find it, or it would kill the shard's first jobs at its first
                // tick.
                self.leases
                    .insert(queue.to_owned(), Lease::new(now_ms, now_ms));
                self.actions.push_back(Action::PersistLease {
                    queue: queue.to_owned(),
                    heard_ms: now_ms,
                });
            }
        }
    }

    fn live_queues(&self) -> Vec<String> {
        let mut queues: Vec<String> = self
            .jobs
            .values()
            .filter(|e| e.state.is_live())
            .map(|e| e.queue.clone())
            .collect();
        queues.dedup();
        queues.sort();
        queues.dedup();
        queues
    }
}

/// What tells one launch of a job from another, hashed (a launch may carry a jobspec of a
/// mebibyte; [`AGENT_JOBS_MAX`] entries keep one each): a new run of a requeued job has its
/// own R (its start), a repeat has everything the same.
fn fingerprint(launch: &NodeLaunch) -> u64 {
    let mut hasher = DefaultHasher::new();
    launch.job.hash(&mut hasher);
    launch.generation.0.hash(&mut hasher);
    launch.r_json.hash(&mut hasher);
    launch.env.hash(&mut hasher);
    launch.node_rank.hash(&mut hasher);
    launch.time_limit_ms.hash(&mut hasher);
    launch.signed.jobspec_json.hash(&mut hasher);
    launch.signed.signature.hash(&mut hasher);
    hasher.finish()
}

/// `why`, cut to a reason's bound ([`REASON_BYTES_MAX`]) at a character boundary.
fn reason(why: &str) -> String {
    let mut end = why.len().min(REASON_BYTES_MAX);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    why[..end].to_owned()
}
