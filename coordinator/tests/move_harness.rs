//! The in-memory move harness: the coordinator's move machine and 2–4 shard machines wired
//! by a network that drops, duplicates, reorders and delays messages, with crashes and
//! restarts of every process, all from one seed. No sockets, no clock, no threads.
//!
//! Each schedule runs random steps (moves, cancels, jobs, time, faults), checking the
//! invariants of docs/ARCHITECTURE.md after every one ([`checker`]), then heals (no more
//! faults, everything restarted, every message delivered, time runs until jobs end) and
//! checks that every move completed or was cleanly returned and every node is up in exactly
//! its owner.
//!
//! `MOVE_HARNESS_SEEDS=N` runs N schedules (default [`SEEDS_DEFAULT`]), from seed
//! `MOVE_HARNESS_FIRST_SEED` (default 0);
//! `MOVE_HARNESS_SEED=S` runs only schedule S, and prints its trace. A failing schedule
//! prints its seed and its whole step trace.

#[path = "move_harness/checker.rs"]
mod checker;
#[path = "move_harness/schedule.rs"]
mod schedule;

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shardsched_coordinator::moves::limits::RESEND_INTERVAL_MS;
use shardsched_coordinator::moves::{MoveMachine, MoveRecord, MoveStatus, NodeIntent};
use shardsched_proto::fluid::Fluid;
use shardsched_proto::msg::coord_shard::{Request, Response};
use shardsched_proto::msg::shard_coord::{HeldNode, Released};
use shardsched_proto::msg::{Generation, JobId};
use shardsched_shard::nodes::{Effect, Holding, NodeTable as ShardMoves};

use checker::{Checker, JobEnd, Observation, ShardView};

/// Schedules run by a plain `cargo test`.
const SEEDS_DEFAULT: u64 = 1000;
/// Random steps per schedule before healing.
const STEPS: usize = 250;
/// Heal rounds before a schedule that has not settled is declared stuck.
const HEAL_ROUNDS_MAX: usize = 2000;
/// Jobs one node holds at once in one shard (jobs share nodes, as core-level jobs do).
const NODE_SLOTS: usize = checker::NODE_SLOTS;
/// Messages in flight at most; a send beyond it is dropped (a lossy network).
const IN_FLIGHT_MAX: usize = 400;

/// A message on the wire.
#[derive(Clone, Debug)]
enum Envelope {
    /// Coordinator → shard command.
    Command { shard: usize, request: Request },
    /// Shard → coordinator: the answer to a command.
    Answer {
        shard: usize,
        request: Request,
        response: Response,
    },
    /// Shard → coordinator: nodes released after the answer.
    Released { shard: usize, released: Released },
}

/// What the schedules exercised, so a run that tests nothing is noticed.
#[derive(Debug, Default)]
struct Stats {
    moves_completed: u64,
    moves_cancelled: u64,
    nodes_moved: u64,
    jobs: u64,
    deadline_cancels: u64,
    coordinator_crashes: u64,
    shard_crashes: u64,
    drops: u64,
    duplicates: u64,
}

struct Job {
    id: u64,
    nodes: Vec<String>,
    end_ms: u64,
}

struct Shard {
    queue: String,
    alive: bool,
    /// `None` while crashed (the entries are kept in `journal`).
    moves: Option<ShardMoves>,
    /// What the shard journaled: its node entries (written before every answer).
    journal: Vec<(String, shardsched_shard::nodes::NodeEntry)>,
    /// Running jobs: they survive a shard crash (each runs under its own supervisor).
    jobs: Vec<Job>,
}

struct Coordinator {
    machine: Option<MoveMachine>,
    /// Records on disk.
    disk: Vec<MoveRecord>,
    /// Records handed out, not yet on disk.
    unsynced: Vec<(shardsched_coordinator::moves::JournalToken, MoveRecord)>,
}

struct World {
    rng: ChaCha8Rng,
    now: u64,
    /// The ownership the coordinator's disk starts from (replaced by compaction).
    base: Vec<(String, NodeIntent)>,
    /// The first move id after the base.
    first_move_id: u64,
    definitions: Vec<(String, Vec<String>)>,
    coord: Coordinator,
    shards: Vec<Shard>,
    net: Vec<Envelope>,
    checker: Checker,
    durable_generation: BTreeMap<String, u64>,
    next_job: u64,
    faults: bool,
    trace: Option<Vec<String>>,
    stats: Stats,
}

impl World {
    fn new(seed: u64, traced: bool) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let queues = rng.random_range(2..=4usize);
        let nodes = rng.random_range(4..=10usize);
        let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
        let queue_names: Vec<String> = (0..queues).map(|q| format!("q{q}")).collect();
        // Each node is in its owner's definition and, by chance, in others'.
        let mut defs: Vec<Vec<String>> = vec![Vec::new(); queues];
        let mut base = Vec::new();
        for n in &names {
            let owner = rng.random_range(0..queues);
            for (q, def) in defs.iter_mut().enumerate() {
                if q == owner || rng.random_bool(0.6) {
                    def.push(n.clone());
                }
            }
            base.push((
                n.clone(),
                NodeIntent {
                    owner: Some(queue_names[owner].clone()),
                    generation: Generation(1),
                    ..NodeIntent::default()
                },
            ));
        }
        let definitions: Vec<(String, Vec<String>)> =
            queue_names.iter().cloned().zip(defs).collect();
        let machine = MoveMachine::new(base.clone(), definitions.clone(), 1);
        let mut world = World {
            rng,
            now: 1_000_000,
            first_move_id: 1,
            durable_generation: names.iter().map(|n| (n.clone(), 1)).collect(),
            base,
            definitions,
            coord: Coordinator {
                machine: Some(machine),
                disk: Vec::new(),
                unsynced: Vec::new(),
            },
            shards: queue_names
                .iter()
                .map(|q| Shard {
                    queue: q.clone(),
                    alive: true,
                    moves: Some(ShardMoves::new()),
                    journal: Vec::new(),
                    jobs: Vec::new(),
                })
                .collect(),
            net: Vec::new(),
            checker: Checker::default(),
            next_job: 1,
            faults: true,
            trace: traced.then(Vec::new),
            stats: Stats::default(),
        };
        for s in 0..queues {
            world.register(s);
        }
        world
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if let Some(trace) = &mut self.trace {
            trace.push(format!("t={} {}", self.now, line()));
        }
    }

    // ---- the coordinator's driver ----

    /// Takes the machine's outputs: records to the unsynced journal, commands to the wire.
    fn pump(&mut self) {
        let Some(m) = &mut self.coord.machine else {
            return;
        };
        while let Some(r) = m.poll_journal() {
            self.coord.unsynced.push(r);
        }
        let mut assignments = Vec::new();
        while let Some(a) = m.poll_assignment() {
            assignments.push(a);
        }
        let mut sent = Vec::new();
        while let Some(t) = m.poll_transmit() {
            sent.push(t);
        }
        // The registration answer travels on the shard's own request: it arrives (if the
        // shard is still up) before the commands queued after it.
        for a in assignments {
            let Some(s) = self.shards.iter().position(|s| s.queue == a.queue) else {
                continue;
            };
            let shard = &mut self.shards[s];
            let Some(moves) = shard.moves.as_mut().filter(|_| shard.alive) else {
                continue;
            };
            let effects = moves.apply_assignment(&a.owned, &a.incoming);
            self.persist(s, &effects);
            self.log(|| {
                format!(
                    "{} assigned: owns {:?}, incoming {:?}",
                    a.queue, a.owned, a.incoming
                )
            });
        }
        for t in sent {
            let Some(shard) = self.shards.iter().position(|s| s.queue == t.queue) else {
                continue;
            };
            self.log(|| format!("coord → {}: {:?}", t.queue, t.request));
            self.send(Envelope::Command {
                shard,
                request: t.request,
            });
        }
    }

    /// Group commit: every handed-out record reaches the disk.
    fn sync(&mut self) {
        let records = std::mem::take(&mut self.coord.unsynced);
        let Some(last) = records.last().map(|(t, _)| *t) else {
            return;
        };
        for (_, r) in records {
            self.write_to_disk(r);
        }
        if let Some(m) = &mut self.coord.machine {
            m.journaled(last);
        }
        self.log(|| format!("coord journal synced up to {last:?}"));
        // Sometimes compact: the disk becomes the intent plus the unfinished moves' records.
        if self.rng.random_bool(0.2)
            && let Some(m) = &self.coord.machine
        {
            self.base = m.intent();
            self.first_move_id = m.next_move_id();
            self.coord.disk = m.active_records();
            let kept = self.coord.disk.len();
            self.log(|| format!("coord journal compacted to {kept} records"));
        }
        self.pump();
    }

    fn write_to_disk(&mut self, record: MoveRecord) {
        let nodes = match &record {
            MoveRecord::Started { nodes, .. } | MoveRecord::Cancelled { nodes, .. } => {
                nodes.clone()
            }
            _ => Vec::new(),
        };
        for ng in nodes {
            let g = self.durable_generation.entry(ng.node).or_default();
            *g = (*g).max(ng.generation.0);
        }
        self.coord.disk.push(record);
    }

    fn crash_coordinator(&mut self) {
        // Part of what was handed out may have reached the disk, never acknowledged.
        let unsynced = std::mem::take(&mut self.coord.unsynced);
        let kept = self.rng.random_range(0..=unsynced.len());
        for (_, r) in unsynced.into_iter().take(kept) {
            self.write_to_disk(r);
        }
        self.coord.machine = None;
        self.stats.coordinator_crashes += 1;
        self.log(|| format!("coord CRASH ({kept} unacknowledged records kept)"));
    }

    fn restart_coordinator(&mut self) -> Result<(), String> {
        let m = MoveMachine::recover(
            self.base.clone(),
            self.definitions.clone(),
            self.first_move_id,
            self.coord.disk.clone(),
        )
        .map_err(|e| format!("coordinator recovery failed: {e}"))?;
        self.coord.machine = Some(m);
        self.log(|| "coord RESTART".into());
        for s in 0..self.shards.len() {
            self.register(s);
        }
        if let Some(m) = &mut self.coord.machine {
            m.tick(self.now);
        }
        self.pump();
        Ok(())
    }

    /// A live shard (re)connects to a live coordinator: the assignment, then re-sends.
    fn register(&mut self, s: usize) {
        let now = self.now;
        if !self.shards[s].alive {
            return;
        }
        let queue = self.shards[s].queue.clone();
        let (Some(m), Some(moves)) = (&mut self.coord.machine, &self.shards[s].moves) else {
            return;
        };
        let held: Vec<HeldNode> = moves
            .entries()
            .filter(|(_, e)| e.holding != Holding::NotOwned)
            .map(|(n, e)| HeldNode {
                node: shardsched_proto::msg::NodeGen {
                    node: n.to_owned(),
                    generation: e.generation,
                },
                allocated: false,
            })
            .collect();
        m.shard_registered(now, &queue, &held);
        self.log(|| format!("{queue} registers"));
        self.pump();
    }

    // ---- the network ----

    fn send(&mut self, e: Envelope) {
        if self.net.len() < IN_FLIGHT_MAX {
            self.net.push(e);
        }
    }

    fn deliver(&mut self, i: usize) -> Result<(), String> {
        let e = self.net.swap_remove(i);
        match e {
            Envelope::Command { shard, request } => self.shard_command(shard, request),
            Envelope::Answer {
                shard,
                request,
                response,
            } => {
                let now = self.now;
                let queue = self.shards[shard].queue.clone();
                let Some(m) = &mut self.coord.machine else {
                    return Ok(());
                };
                match &response {
                    Response::Releasing { nodes, stale } => {
                        m.handle_releasing(now, &queue, nodes, stale);
                    }
                    Response::Ack { stale } => m.handle_ack(now, &queue, &request, stale),
                    Response::Jobs(_) | Response::History(_) | Response::DryRun(_) => {}
                }
                self.log(|| format!("coord ← {queue}: {response:?}"));
                self.pump();
                Ok(())
            }
            Envelope::Released { shard, released } => {
                let now = self.now;
                let queue = self.shards[shard].queue.clone();
                let Some(m) = &mut self.coord.machine else {
                    return Ok(());
                };
                m.handle_released(now, &queue, &released);
                self.log(|| format!("coord ← {queue}: {released:?}"));
                self.pump();
                Ok(())
            }
        }
    }

    // ---- the shards ----

    fn jobs_on(jobs: &[Job], node: &str) -> Vec<(JobId, u64)> {
        jobs.iter()
            .filter(|j| j.nodes.iter().any(|n| n == node))
            .map(|j| (Fluid(j.id), j.end_ms))
            .collect()
    }

    fn shard_command(&mut self, s: usize, request: Request) -> Result<(), String> {
        let shard = &mut self.shards[s];
        let Some(moves) = shard.moves.as_mut().filter(|_| shard.alive) else {
            return Ok(());
        };
        let jobs = &shard.jobs;
        let query = |n: &str| World::jobs_on(jobs, n);
        let (response, effects) = match &request {
            Request::Release(r) => moves.handle_release(r, &query),
            Request::Incoming(r) => moves.handle_incoming(r),
            Request::Acquire(r) => moves.handle_acquire(r),
            Request::Reclaim(r) => moves.handle_reclaim(r),
            Request::Withdraw(r) => moves.handle_withdraw(r),
            Request::CancelJobs(r) => moves.handle_cancel_jobs(r, &query),
            Request::SetQueueState { .. }
            | Request::SetNodeState { .. }
            | Request::SetNodeDrain { .. }
            | Request::DryRunRelease { .. }
            | Request::Reconfigure(_)
            | Request::DisableIfIdle
            | Request::Jobs(_)
            | Request::History(_) => {
                return Ok(());
            }
        };
        self.persist(s, &effects);
        let queue = self.shards[s].queue.clone();
        self.log(|| format!("{queue} ← {request:?} → {response:?}"));
        for effect in &effects {
            if let Effect::CancelJobs { jobs, .. } = effect {
                let move_id = match &request {
                    Request::CancelJobs(c) => c.move_id.0,
                    _ => return Err("CancelJobs effect from another command".into()),
                };
                let ids: BTreeSet<u64> = jobs.iter().map(|j| j.0).collect();
                self.stats.deadline_cancels += ids.len() as u64;
                self.end_jobs(s, |j| ids.contains(&j.id), JobEnd::Deadline { move_id })?;
            }
        }
        self.send(Envelope::Answer {
            shard: s,
            request,
            response,
        });
        Ok(())
    }

    /// The shard journals its changed entries (before answering).
    fn persist(&mut self, s: usize, effects: &[Effect]) {
        let shard = &mut self.shards[s];
        for effect in effects {
            if let Effect::Persist(node, entry) = effect {
                shard.journal.retain(|(n, _)| n != node);
                shard.journal.push((node.clone(), entry.clone()));
            }
        }
    }

    /// Ends the jobs of shard `s` that `which` selects; a live shard reports nodes released.
    fn end_jobs(
        &mut self,
        s: usize,
        which: impl Fn(&Job) -> bool,
        how: JobEnd,
    ) -> Result<(), String> {
        let now = self.now;
        let shard = &mut self.shards[s];
        let (ended, kept): (Vec<Job>, Vec<Job>) = std::mem::take(&mut shard.jobs)
            .into_iter()
            .partition(|j| which(j));
        shard.jobs = kept;
        if ended.is_empty() {
            return Ok(());
        }
        let mut nodes = Vec::new();
        for j in &ended {
            self.checker.job_ended(j.id, how, now)?;
            nodes.extend(j.nodes.iter().cloned());
        }
        let shard = &mut self.shards[s];
        let Some(moves) = shard.moves.as_mut().filter(|_| shard.alive) else {
            return Ok(());
        };
        let jobs = &shard.jobs;
        let (released, effects) =
            moves.allocations_gone(&nodes, &|n: &str| World::jobs_on(jobs, n));
        self.persist(s, &effects);
        for r in released {
            self.log(|| format!("shard {s} → coord: {r:?}"));
            self.send(Envelope::Released {
                shard: s,
                released: r,
            });
        }
        Ok(())
    }

    fn start_job(&mut self, s: usize) {
        let shard = &self.shards[s];
        let Some(moves) = shard.moves.as_ref().filter(|_| shard.alive) else {
            return;
        };
        let mut load: BTreeMap<&str, usize> = BTreeMap::new();
        for n in shard.jobs.iter().flat_map(|j| j.nodes.iter()) {
            *load.entry(n.as_str()).or_default() += 1;
        }
        let free: Vec<String> = moves
            .entries()
            .map(|(n, _)| n)
            .filter(|n| moves.is_schedulable(n) && load.get(n).copied().unwrap_or(0) < NODE_SLOTS)
            .map(str::to_owned)
            .collect();
        if free.is_empty() {
            return;
        }
        let count = self.rng.random_range(1..=free.len().min(2));
        let first = self.rng.random_range(0..free.len());
        let nodes: Vec<String> = (0..count)
            .map(|k| free[(first + k) % free.len()].clone())
            .collect();
        let end_ms = self.now + self.rng.random_range(500..20_000);
        let id = self.next_job;
        self.next_job += 1;
        self.checker.job_started(id, s, &nodes, end_ms);
        self.log(|| format!("job {id} starts in shard {s} on {nodes:?} until {end_ms}"));
        self.shards[s].jobs.push(Job { id, nodes, end_ms });
    }

    fn crash_shard(&mut self, s: usize) {
        self.shards[s].alive = false;
        self.shards[s].moves = None;
        self.stats.shard_crashes += 1;
        self.log(|| format!("shard {s} CRASH"));
    }

    fn restart_shard(&mut self, s: usize) {
        let journal = self.shards[s].journal.clone();
        self.shards[s].moves = Some(ShardMoves::restore(journal));
        self.shards[s].alive = true;
        self.log(|| format!("shard {s} RESTART"));
        self.register(s);
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs one schedule; on failure, runs it again with its trace and panics with both.
fn run_seed(seed: u64, always_trace: bool, total: &mut Stats) {
    let mut world = World::new(seed, always_trace);
    let outcome = world.run();
    if always_trace && let Some(trace) = &world.trace {
        println!("{}", trace.join("\n"));
    }
    if let Err(e) = outcome {
        let mut traced = World::new(seed, true);
        let again = traced.run();
        let trace = traced.trace.unwrap_or_default().join("\n");
        panic!(
            "move harness: seed {seed} failed: {e}\n(replayed with trace: {again:?}; rerun with \
             MOVE_HARNESS_SEED={seed})\n--- trace ---\n{trace}",
        );
    }
    let s = &world.stats;
    for v in world.coord.machine.iter().flat_map(MoveMachine::moves) {
        match v.status {
            MoveStatus::Completed => total.moves_completed += 1,
            MoveStatus::Cancelled => total.moves_cancelled += 1,
            MoveStatus::Active => {}
        }
        total.nodes_moved += v
            .nodes
            .iter()
            .filter(|n| n.state == shardsched_coordinator::moves::MoveNodeState::Up)
            .count() as u64;
    }
    total.jobs += world.next_job - 1;
    total.deadline_cancels += s.deadline_cancels;
    total.coordinator_crashes += s.coordinator_crashes;
    total.shard_crashes += s.shard_crashes;
    total.drops += s.drops;
    total.duplicates += s.duplicates;
}

#[test]
fn seeded_schedules_of_concurrent_moves_keep_every_invariant() {
    let mut total = Stats::default();
    if let Some(seed) = env_u64("MOVE_HARNESS_SEED") {
        run_seed(seed, true, &mut total);
        println!("{total:?}");
        return;
    }
    let seeds = env_u64("MOVE_HARNESS_SEEDS").unwrap_or(SEEDS_DEFAULT);
    let first = env_u64("MOVE_HARNESS_FIRST_SEED").unwrap_or(0);
    for seed in first..first.saturating_add(seeds) {
        run_seed(seed, false, &mut total);
    }
    println!("{seeds} schedules: {total:?}");
    // The schedules must exercise every path, or passing proves little.
    let t = &total;
    let exercised = [
        ("completed moves", t.moves_completed),
        ("cancelled moves", t.moves_cancelled),
        ("deadline cancellations", t.deadline_cancels),
        ("coordinator crashes", t.coordinator_crashes),
        ("shard crashes", t.shard_crashes),
        ("dropped messages", t.drops),
        ("duplicated messages", t.duplicates),
    ];
    for (what, count) in exercised {
        assert!(
            count * 10 >= seeds.min(100),
            "only {count} {what} in {seeds} schedules"
        );
    }
    assert!(
        t.nodes_moved >= seeds && t.jobs >= seeds,
        "too few nodes moved or jobs run: {t:?}"
    );
}
