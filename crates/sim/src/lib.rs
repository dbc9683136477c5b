//! shardsched's deterministic simulator: the real coordinator core
//! ([`shardsched_coordinator_core::core::Core`]) and the real shard cores
//! ([`shardsched_shard_core::ShardCore`]), driven through the same entry points as their
//! drivers, under an in-memory network and a virtual clock, all from one seed.
//!
//! FoundationDB and TigerBeetle run their real code under a seeded simulator with thousands
//! of seeds per run; raft-rs's test network drives real `RawNode`s; quinn-proto's `Pair`
//! drives two real endpoints. This is that for shardsched: no sockets, no threads, no
//! clock, no file — `.ci/sans-io` checks that this crate's dependency tree has none.
//!
//! # One seed
//!
//! ```text
//! setup        a random cluster (4–8 nodes) and 2–4 queues with overlapping definitions
//! 300 steps    each one of: deliver a message (any in flight: reordered; some dropped or
//!              duplicated as they are sent) · run a process's batch · let time pass ·
//!              submit or cancel a job · an admin action (moves with and without deadlines,
//!              cancel, queue start/stop/enable/disable with --take / --release-to, node
//!              down/up/drain, queue add/update) · a fault (crash the coordinator or a shard,
//!              also between a batch's journal write and its answers; cut a connection)
//!              → after EVERY step: the checker (I1–I5 of docs/ARCHITECTURE.md and each
//!                core's own invariants())
//! heal         no more faults: every process restarted, every connection allowed, time
//!              runs until the system is quiet → liveness: every move finished or rolled
//!              back, every node up in exactly its owner, every acknowledged job ran, was
//!              cancelled or is still visible
//! ```
//!
//! Each process runs the loop its driver runs: a batch of inputs, each matched once to the
//! core call the driver makes (`Core::register_shard`, `Core::moves_answer`,
//! `ShardCore::handle_coordinator`, `ShardCore::handle_client`, …), one tick, the journal
//! write (in memory: the coordinator's [`Durable`](shardsched_coordinator_core::records::Durable),
//! the shard's [`MemJournal`](shardsched_shard_core::journal::MemJournal)), and only then
//! the answers and commands (write-then-acknowledge). A crash loses everything not written.
//!
//! ```
//! let outcome = shardsched_sim::run_seed(7, &shardsched_sim::SimOptions::default());
//! assert!(outcome.violation.is_none(), "{}", outcome.line());
//! // The same seed is the same run, step for step.
//! assert_eq!(outcome.trace, shardsched_sim::run_seed(7, &Default::default()).trace);
//! ```
//!
//! The trace hash covers what happened (each step's action and its outcome), never how long
//! it took, so `shardsched sim --seed S` prints the same line on every machine.

mod agent;
mod agents_exec;
mod check;
mod check_tasks;
mod check_usage;
mod client;
mod coord;
mod net;
mod setup;
mod shard;
mod trace;
mod world;

pub use check::{Invariant, Violation};
pub use world::Stats;

#[cfg(feature = "mutants")]
pub use shardsched_failpoint::mutant::Mutant;

/// Random steps of a seed before it heals.
pub const STEPS_DEFAULT: usize = 300;

/// How one seed runs.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Random steps before healing.
    pub steps: usize,
    /// Keep the trace's lines (for `--trace`), not only its hash.
    pub keep_trace: bool,
    /// The deliberate bug switched on for this run (cargo feature `mutants`).
    #[cfg(feature = "mutants")]
    pub mutant: Option<Mutant>,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            steps: STEPS_DEFAULT,
            keep_trace: false,
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }
}

/// What one seed did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// The trace's hash: equal for equal runs.
    pub trace: u64,
    /// Steps taken (random steps and healing rounds).
    pub steps: u64,
    /// The first invariant broken, if any (the run stops there).
    pub violation: Option<Violation>,
    /// The trace's lines, with [`SimOptions::keep_trace`].
    pub lines: Vec<String>,
    /// What the run exercised.
    pub stats: Stats,
}

impl Outcome {
    /// `seed S trace <hex> <steps> steps ok` (or `… violated`): nothing in it depends on
    /// time or machine, so the same seed prints the same line.
    pub fn line(&self) -> String {
        format!(
            "seed {} trace {:016x} {} steps {}",
            self.seed,
            self.trace,
            self.steps,
            if self.violation.is_some() {
                "violated"
            } else {
                "ok"
            }
        )
    }
}

/// Runs seed `seed`.
pub fn run_seed(seed: u64, options: &SimOptions) -> Outcome {
    #[cfg(feature = "mutants")]
    let _mutant = shardsched_failpoint::mutant::Active::set(options.mutant);
    let failed = |violation| Outcome {
        seed,
        trace: 0,
        steps: 0,
        violation: Some(violation),
        lines: Vec::new(),
        stats: Stats::default(),
    };
    let world = match world::World::new(seed, options) {
        Ok(world) => world,
        Err(violation) => return failed(violation),
    };
    world.run(options.steps)
}
