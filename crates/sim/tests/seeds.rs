//! The simulator's seeds under `cargo test`: 2,000 of them, each checked after every
//! step, on two threads (`shardsched sim --seeds N` runs more on demand).
//!
//! `SIM_SEEDS=N` runs N seeds, from `SIM_FIRST_SEED` (default 1); `SIM_SEED=S` runs seed S
//! alone and prints its trace (`shardsched sim --seed S --trace` does the same).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use shardsched_sim::{SimOptions, Stats, run_seed};

/// Seeds a plain `cargo test` runs.
const SEEDS_DEFAULT: u64 = 2_000;
/// Threads running them.
const THREADS: usize = 2;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn seeds_keep_every_invariant_and_exercise_every_path() {
    if let Some(seed) = env_u64("SIM_SEED") {
        let options = SimOptions {
            keep_trace: true,
            ..SimOptions::default()
        };
        let outcome = run_seed(seed, &options);
        println!("{}", outcome.lines.join("\n"));
        println!("{}", outcome.line());
        assert!(outcome.violation.is_none(), "{}", outcome.line());
        return;
    }
    let seeds = env_u64("SIM_SEEDS").unwrap_or(SEEDS_DEFAULT);
    let first = env_u64("SIM_FIRST_SEED").unwrap_or(1);
    let began = Instant::now();
    let next = AtomicU64::new(first);
    let total = Mutex::new(Stats::default());
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                let mut stats = Stats::default();
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= first + seeds {
                        break;
                    }
                    let outcome = run_seed(seed, &SimOptions::default());
                    stats.add(&outcome.stats);
                    if let Some(v) = &outcome.violation {
                        let report = format!(
                            "violated: {v}\n{}\n(replay it: shardsched sim --seed {seed} --trace)",
                            outcome.line()
                        );
                        failed.lock().expect("lock").push((seed, report));
                    }
                }
                total.lock().expect("lock").add(&stats);
            });
        }
    });
    let total = total.into_inner().expect("lock");
    println!(
        "{seeds} seeds in {:.1} s: {total:?}",
        began.elapsed().as_secs_f64()
    );
    let mut failed = failed.into_inner().expect("lock");
    failed.sort();
    let reports: Vec<&str> = failed.iter().map(|(_, r)| r.as_str()).collect();
    assert!(failed.is_empty(), "{}", reports.join("\n"));
    // The seeds must exercise every path, or passing proves little.
    let t = &total;
    let exercised = [
        ("completed moves", t.moves_completed),
        ("cancelled moves", t.moves_cancelled),
        ("jobs acknowledged", t.jobs_acked),
        ("jobs ended by a move's deadline", t.deadline_cancels),
        ("coordinator crashes", t.coordinator_crashes),
        ("shard crashes", t.shard_crashes),
        (
            "crashes between a journal write and its answers",
            t.crashes_after_write,
        ),
        ("connections cut", t.cuts),
        ("dropped messages", t.dropped),
        ("duplicated messages", t.duplicated),
        ("admin requests accepted", t.admin_accepted),
        ("queue removals and reloads done", t.removals_done),
        ("queue removals and reloads refused", t.removals_refused),
        ("queues removed", t.queues_removed),
        ("seeds with node agents", t.agent_seeds),
        ("tasks started by node agents", t.tasks_spawned),
        ("tasks past their allocation's span", t.tasks_overran),
        (
            "tasks stopped by their supervisor at the end of their lease",
            t.tasks_lease_stopped,
        ),
        ("node agent crashes", t.agent_crashes),
        ("node agents cut off", t.partitions),
        ("machines gone for good", t.machines_died),
    ];
    for (what, count) in exercised {
        assert!(
            count * 20 >= seeds.min(100),
            "only {count} {what} in {seeds} seeds"
        );
    }
}

/// A seed is one run: the same seed gives the same trace, step for step (no clock, no
/// hash order, no thread in the way).
#[test]
fn a_seed_is_one_run() {
    for seed in 1..=10 {
        let a = run_seed(seed, &SimOptions::default());
        let b = run_seed(seed, &SimOptions::default());
        assert_eq!(a.line(), b.line(), "seed {seed}");
        assert_eq!(a.stats, b.stats, "seed {seed}");
    }
}
