//! The world of one seed: the processes, the network, the clients, the clock, the faults,
//! and the loop that steps them and checks after every step (see the crate
//! documentation). Everything random comes from one ChaCha8 generator seeded with the
//! seed, and every collection iterated is ordered, so a seed is one run.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shardsched_coordinator_core::core::ConnId;
use shardsched_coordinator_core::moves::MoveStatus;
use shardsched_shard_core::journal::MemJournal;
use shardsched_shard_core::{CoreExecutor, CoreOptions};
use shardsched_wire::identity::Role;
use shardsched_wire::msg::client_shard;
use shardsched_wire::msg::{Refusal, RefusalCode};

use crate::agent::{AgentEvent, AgentProcess};
use crate::check::{self, Checker, Invariant, View, Violation, broken};
use crate::client::{self, CANCEL_TICKET, Clients};
use crate::coord::{CoordEvent, Coordinator};
use crate::net::{Body, Net, Packet, Weather};
use crate::setup::{self, Setup};
use crate::shard::{Crash, ShardEvent, ShardProcess};
use crate::trace::Trace;
use crate::{Outcome, SimOptions};

mod agents;
mod heal;
mod processes;
mod route;

use route::Receiver;

/// Virtual time at a seed's start: a plausible wall clock, ms since the Unix epoch.
const START_MS: u64 = 1_800_000_000_000;
/// Chance that a batch, while faults are on, ends in a crash of its process.
const CRASH_IN_BATCH: f64 = 0.01;
/// How long a crashed process stays down (its supervisor's backoff), ms.
const RESTART_DELAY_MS: std::ops::RangeInclusive<u64> = 100..=3_000;
/// How long the other end takes to notice a connection is gone, ms.
const NOTICE_DELAY_MS: std::ops::RangeInclusive<u64> = 0..=3_000;
/// Longest a node agent is cut off from everyone (a partition), ms: past the lease (half
/// the heartbeat timeout, 15 s) and the timeout (30 s) at times.
const PARTITION_MS: std::ops::RangeInclusive<u64> = 1_000..=40_000;
/// Healing rounds before a seed that has not settled is declared stuck.
const HEAL_ROUNDS_MAX: u64 = 5_000;
/// Virtual time healing may take before a seed that has not settled is declared stuck.
const HEAL_MS_MAX: u64 = 2 * 3_600_000;
/// One seed in this many (among those with node agents: even seeds) loses a machine for
/// good: its agent and its tasks die at a random step and never come back.
const MACHINE_DIES_EVERY: u64 = 5;

/// What the seeds exercised, so that a run that tests nothing is noticed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Moves completed and cancelled (as the coordinator has them at the end).
    pub moves_completed: u64,
    pub moves_cancelled: u64,
    /// Jobs acknowledged to clients, and jobs that ended by a move's deadline.
    pub jobs_acked: u64,
    pub deadline_cancels: u64,
    /// Crashes of the coordinator and of shards, of which between a journal write and
    /// its answers.
    pub coordinator_crashes: u64,
    pub shard_crashes: u64,
    pub crashes_after_write: u64,
    /// Crashes (of either kind) while the coordinator had a move unfinished.
    pub crashes_mid_move: u64,
    /// Connections cut, messages dropped and duplicated.
    pub cuts: u64,
    pub dropped: u64,
    pub duplicated: u64,
    /// Admin requests the coordinator accepted.
    pub admin_accepted: u64,
    /// `queue remove` and `reload` runs that ended with the change made, and refused
    /// (jobs, owned nodes, a shard lost on the way, …), and queues whose shard was stopped
    /// as the coordinator's table lost them.
    pub removals_done: u64,
    pub removals_refused: u64,
    pub queues_removed: u64,
    /// Seeds whose shards ran jobs through node agents; tasks those agents started;
    /// crashes of agents; agents cut off from everyone for a while.
    pub agent_seeds: u64,
    pub tasks_spawned: u64,
    /// Tasks that ran past their allocation's span; tasks their supervisor stopped at the
    /// end of their lease (their agent away).
    pub tasks_overran: u64,
    pub tasks_lease_stopped: u64,
    pub agent_crashes: u64,
    pub partitions: u64,
    /// Machines (a node agent and its tasks) gone for good.
    pub machines_died: u64,
    /// `Reconfigure`s a shard took in place (a new definition), and those it restarted
    /// for (any other change).
    pub reconfigured_in_place: u64,
    pub reconfig_restarts: u64,
}

impl Stats {
    /// Adds `other` to these.
    pub fn add(&mut self, other: &Stats) {
        self.moves_completed += other.moves_completed;
        self.moves_cancelled += other.moves_cancelled;
        self.jobs_acked += other.jobs_acked;
        self.deadline_cancels += other.deadline_cancels;
        self.coordinator_crashes += other.coordinator_crashes;
        self.shard_crashes += other.shard_crashes;
        self.crashes_after_write += other.crashes_after_write;
        self.crashes_mid_move += other.crashes_mid_move;
        self.cuts += other.cuts;
        self.dropped += other.dropped;
        self.duplicated += other.duplicated;
        self.admin_accepted += other.admin_accepted;
        self.removals_done += other.removals_done;
        self.removals_refused += other.removals_refused;
        self.queues_removed += other.queues_removed;
        self.agent_seeds += other.agent_seeds;
        self.tasks_spawned += other.tasks_spawned;
        self.tasks_overran += other.tasks_overran;
        self.tasks_lease_stopped += other.tasks_lease_stopped;
        self.agent_crashes += other.agent_crashes;
        self.partitions += other.partitions;
        self.machines_died += other.machines_died;
        self.reconfigured_in_place += other.reconfigured_in_place;
        self.reconfig_restarts += other.reconfig_restarts;
    }
}

/// Something one end of a connection learns late.
#[derive(Clone, Copy, Debug)]
enum Notice {
    /// The coordinator sees the connection close.
    CoordClosed(ConnId),
    /// The shard on it sees it close.
    ShardLost(ConnId),
}

/// See the module documentation.
pub(crate) struct World {
    seed: u64,
    rng: ChaCha8Rng,
    now: u64,
    steps: u64,
    /// Faults on (off while healing).
    faults: bool,
    weather: Weather,
    setup: Setup,
    coord: Coordinator,
    /// Every shard process ever started, by queue (a removed queue's keeps its journal).
    shards: BTreeMap<String, ShardProcess>,
    /// One node agent per node, by node, in a seed whose shards launch through agents.
    agents: BTreeMap<String, AgentProcess>,
    /// Agents cut off from everyone, until when.
    partitions: BTreeMap<String, u64>,
    /// When each agent cut off or crashed at some time was last reachable again (the end of
    /// its latest cut-off, or its latest restart; a dead machine's: its death), for
    /// healing's deadline check.
    reachable_again: BTreeMap<String, u64>,
    /// The machine that dies in this seed, if one does: at which step, and which node.
    death: Option<(u64, String)>,
    /// Nodes whose machine died: their agent never comes back.
    dead: BTreeSet<String>,
    net: Net,
    next_id: u64,
    clients: Clients,
    checker: Checker,
    trace: Trace,
    notices: Vec<(u64, Notice)>,
    options: CoreOptions,
    stats: Stats,
}

impl World {
    /// The world of `seed`.
    pub(crate) fn new(seed: u64, options: &SimOptions) -> Result<World, Violation> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Even seeds run their jobs through node agents; odd ones with the sim executor,
        // per-user limits and fair-share.
        let with_agents = seed.is_multiple_of(2);
        let setup = setup::draw(&mut rng, !with_agents).map_err(|e| broken(Invariant::I3, e))?;
        let weather = Weather {
            drop: rng.random_range(0.0..0.2),
            duplicate: rng.random_range(0.0..0.1),
        };
        let coord = Coordinator::new(setup.config.clone());
        let agents = if with_agents {
            let nodes = setup.nodes.iter().enumerate();
            nodes
                .map(|(i, node)| (node.clone(), AgentProcess::new(node, i)))
                .collect()
        } else {
            BTreeMap::new()
        };
        // Drawn apart from the seed's stream, so that the seeds where no machine dies run
        // exactly as they did before machines could die.
        let death = if with_agents && (seed / 2).is_multiple_of(MACHINE_DIES_EVERY) {
            let mut draw = ChaCha8Rng::seed_from_u64(seed ^ 0xdead_0000_0000_dead);
            let step = draw.random_range(1..=options.steps.max(1) as u64);
            setup.nodes.choose(&mut draw).map(|n| (step, n.clone()))
        } else {
            None
        };
        let mut checker = Checker::default();
        checker.agents = with_agents;
        checker.limits = !with_agents;
        let mut clients = Clients::default();
        clients.signed = with_agents;
        Ok(World {
            seed,
            rng,
            now: START_MS,
            steps: 0,
            faults: true,
            weather,
            setup,
            coord,
            shards: BTreeMap::new(),
            agents,
            partitions: BTreeMap::new(),
            reachable_again: BTreeMap::new(),
            death,
            dead: BTreeSet::new(),
            net: Net::default(),
            next_id: 0,
            clients,
            checker,
            trace: Trace::new(options.keep_trace),
            notices: Vec::new(),
            options: CoreOptions {
                executor: if with_agents {
                    CoreExecutor::Agents
                } else {
                    CoreExecutor::Sim
                },
                // Nothing is forgotten while the checker may look for it.
                retention_ms: u64::MAX / 4,
                journal: true,
                ..CoreOptions::default()
            },
            stats: Stats {
                agent_seeds: u64::from(with_agents),
                ..Stats::default()
            },
        })
    }

    /// Runs `steps` random steps, heals, and checks liveness.
    pub(crate) fn run(mut self, steps: usize) -> Outcome {
        // A core's debug assertion (debug builds) is a violation of that core's invariants.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_checked(steps)))
                .unwrap_or_else(|panic| Err(check::panicked(panic.as_ref())));
        let violation = result.err().map(|mut v| {
            v.at_ms = self.now - START_MS;
            self.trace.line(self.now, &format!("violated: {v}"));
            v
        });
        if let Some(core) = &self.coord.core {
            for m in core.moves() {
                match m.status {
                    MoveStatus::Completed => self.stats.moves_completed += 1,
                    MoveStatus::Cancelled => self.stats.moves_cancelled += 1,
                    MoveStatus::Active => {}
                }
            }
        }
        self.stats.deadline_cancels = self.checker.deadline_cancels;
        self.stats.dropped = self.net.dropped;
        self.stats.duplicated = self.net.duplicated;
        Outcome {
            seed: self.seed,
            trace: self.trace.hash(),
            steps: self.steps,
            violation,
            lines: self.trace.take_lines(),
            stats: self.stats,
        }
    }

    fn run_checked(&mut self, steps: usize) -> Result<(), Violation> {
        check::running(check::Running::Coordinator);
        self.coord
            .start(self.now)
            .map_err(|e| broken(Invariant::I3, e))?;
        for agent in self.agents.values_mut() {
            agent.start(self.now);
        }
        self.supervise()?;
        self.check()?;
        for _ in 0..steps {
            self.steps += 1;
            if let Some((at, node)) = self.death.clone()
                && at == self.steps
            {
                self.machine_dies(&node);
            }
            self.step()?;
            self.housekeeping()?;
            self.check()?;
        }
        self.heal()
    }

    /// One random step.
    fn step(&mut self) -> Result<(), Violation> {
        match self.rng.random_range(0..100) {
            0..36 => self.deliver(),
            36..50 => self.run_one_due(),
            50..62 => self.advance(),
            62..75 => self.submit(),
            75..79 => self.cancel(),
            79..92 => self.admin(),
            _ if self.faults && !self.agents.is_empty() && self.rng.random_bool(0.3) => {
                self.agent_fault()
            }
            _ if self.faults => self.fault(),
            _ => self.advance(),
        }
    }

    // ---- the network ----

    /// Delivers one message in flight (any: the rest are delayed), and half the time lets
    /// its receiver run its batch at once.
    fn deliver(&mut self) -> Result<(), Violation> {
        let Some(packet) = self.net.take(&mut self.rng) else {
            return self.advance();
        };
        let line = format!(
            "deliver conn{} {} {}",
            packet.conn.0,
            if packet.to_coordinator {
                "→coord"
            } else {
                "→shard"
            },
            packet.body.describe()
        );
        self.trace.line(self.now, &line);
        let run_now = self.rng.random_bool(0.5);
        match self.route(packet) {
            Some(Receiver::Coordinator) if run_now => self.run_coordinator(),
            Some(Receiver::Shard(queue)) if run_now => self.run_shard(&queue),
            Some(Receiver::Agent(node)) if run_now => self.run_agent(&node),
            _ => Ok(()),
        }
    }

    /// The queue of the shard whose connection `conn` is.
    fn shard_on(&self, conn: ConnId) -> Option<String> {
        self.shards
            .values()
            .find(|s| s.alive && s.conn() == Some(conn))
            .map(|s| s.queue.clone())
    }

    /// Sends what a batch released (nothing to or from an agent cut off).
    fn send(&mut self, packets: Vec<Packet>) {
        let weather = self.faults.then_some(self.weather);
        for packet in packets {
            if !self.partitions.is_empty() && self.cut_off(&packet) {
                self.net.dropped += 1;
                continue;
            }
            self.net.send(&mut self.rng, weather, packet);
        }
    }

    // ---- processes: world/processes.rs; healing: world/heal.rs ----

    // ---- clients and admins ----

    fn submit(&mut self) -> Result<(), Violation> {
        let queues: Vec<String> = match &self.coord.core {
            Some(core) => core
                .config()
                .queues
                .iter()
                .map(|q| q.name.clone())
                .collect(),
            None => self.shards.keys().cloned().collect(),
        };
        let Some((ticket, submission)) =
            self.clients
                .submit(&mut self.rng, &queues, &self.setup.jobspecs)
        else {
            return Ok(());
        };
        let queue = submission.queue.clone();
        let request = Clients::request(submission);
        let peer = crate::shard::user(submission.owner);
        self.trace
            .line(self.now, &format!("client submits {ticket} to {queue}"));
        match self.shards.get_mut(&queue).filter(|s| s.serving()) {
            Some(shard) => shard.push(ShardEvent::Client {
                ticket,
                peer,
                request,
            }),
            None => {
                let refused = Err(Refusal::new(RefusalCode::Unavailable, "not reached"));
                self.clients.answered(ticket, &refused)?;
                return Ok(());
            }
        }
        if self.rng.random_bool(0.5) {
            return self.run_shard(&queue);
        }
        Ok(())
    }

    fn cancel(&mut self) -> Result<(), Violation> {
        let live = self.checker.live_acked();
        let Some((id, queue)) = live.choose(&mut self.rng).cloned() else {
            return Ok(());
        };
        let Some(shard) = self.shards.get_mut(&queue).filter(|s| s.serving()) else {
            return Ok(());
        };
        self.checker.cancel_asked(id);
        self.trace
            .line(self.now, &format!("client cancels {id} in {queue}"));
        shard.push(ShardEvent::Client {
            ticket: CANCEL_TICKET,
            peer: shardsched_wire::Peer {
                role: Role::Admin,
                name: "admin".to_owned(),
            },
            request: client_shard::Request::Cancel { ids: vec![id] },
        });
        Ok(())
    }

    fn admin(&mut self) -> Result<(), Violation> {
        let Some(core) = &self.coord.core else {
            return self.advance();
        };
        let Some(admin) = client::admin(&mut self.rng, core, &self.setup.nodes) else {
            return Ok(());
        };
        if let crate::coord::Admin::Flag {
            nodes,
            flag: shardsched_coordinator_core::core::NodeFlag::Down,
            on: true,
            ..
        } = &admin
        {
            for node in nodes {
                self.checker.down_asked(node);
            }
        }
        self.trace.line(self.now, &format!("admin asks {admin:?}"));
        self.coord.push(CoordEvent::Admin(admin));
        if self.rng.random_bool(0.5) {
            return self.run_coordinator();
        }
        Ok(())
    }

    // ---- faults ----

    fn fault(&mut self) -> Result<(), Violation> {
        match self.rng.random_range(0..100) {
            0..15 if self.coord.alive() => {
                self.trace.line(self.now, "coord CRASH");
                self.crash_coordinator()
            }
            15..50 => {
                let alive: Vec<String> = self
                    .shards
                    .values()
                    .filter(|s| s.alive)
                    .map(|s| s.queue.clone())
                    .collect();
                if let Some(queue) = alive.choose(&mut self.rng).cloned() {
                    self.trace.line(self.now, &format!("{queue} CRASH"));
                    self.crash_shard(&queue);
                }
                Ok(())
            }
            _ => {
                let Some(conn) = self.net.open_conns().choose(&mut self.rng).copied() else {
                    return Ok(());
                };
                self.stats.cuts += 1;
                self.net.close(conn);
                self.trace.line(self.now, &format!("CUT conn{}", conn.0));
                let (a, b) = (
                    self.rng.random_range(NOTICE_DELAY_MS),
                    self.rng.random_range(NOTICE_DELAY_MS),
                );
                self.notices.push((self.now + a, Notice::CoordClosed(conn)));
                self.notices.push((self.now + b, Notice::ShardLost(conn)));
                Ok(())
            }
        }
    }

    // ---- checks ----

    /// Every check of an instant (see [`check`]).
    fn check(&mut self) -> Result<(), Violation> {
        if let Some(core) = &self.coord.core {
            core.invariants()
                .map_err(|e| broken(Invariant::I3, format!("coordinator core: {e}")))?;
            for m in core.moves() {
                if !self.checker.knows_move(m.move_id.0) {
                    let nodes = m.nodes.iter().map(|n| n.node.clone()).collect();
                    self.checker.move_seen(m.move_id.0, nodes, m.deadline_ms);
                }
            }
        }
        let mut views = BTreeMap::new();
        for (queue, shard) in &self.shards {
            if !self.checker.stale(queue, shard.version) {
                continue;
            }
            let view = match (&shard.core, shard.alive) {
                (Some(core), true) => View::Live(core),
                _ => View::Journal(shard.journal.restored().map_err(|o| {
                    broken(
                        Invariant::I4,
                        format!("{queue}'s journal: {} record {} has no job", o.table, o.key),
                    )
                })?),
            };
            let held = shard
                .journal
                .allowances()
                .map(|(user, r)| (user.to_owned(), r.jobs))
                .collect();
            views.insert(queue.clone(), (shard.version, view, held));
        }
        let journal = &self.coord.journal;
        let durable = |node: &str| journal.nodes.get(node).map_or(0, |n| n.generation.0);
        self.checker.instant(&views, &durable)?;
        if let Some(core) = &self.coord.core {
            self.checker.usage.check(core)?;
        }
        if !self.agents.is_empty() {
            crate::check_tasks::instant(&self.agents, &self.shards)?;
        }
        Ok(())
    }
}

/// A client answer for the trace.
fn describe(answer: &shardsched_wire::rpc::Reply<client_shard::Response>) -> String {
    match answer {
        Ok(client_shard::Response::Submitted { id, duplicate }) => {
            format!("submitted {id} duplicate={duplicate}")
        }
        Ok(client_shard::Response::Cancelled(outcomes)) => format!("cancelled {outcomes:?}"),
        Ok(_) => "ok".to_owned(),
        Err(r) => format!("refused {:?}", r.code),
    }
}
