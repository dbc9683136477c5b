//! `shardsched sim`: the deterministic simulator ([`shardsched_sim`]) — the real
//! coordinator and shard cores under a seeded network, crashes and workload, checked after
//! every step (docs/SIM.md).
//!
//! ```text
//! shardsched sim --seeds 2000            seeds 1..=2000 on every core; prints seeds/s
//! shardsched sim --seed 17 [--trace]     one seed; the last line is
//!                                        `seed 17 trace <hex> <steps> steps ok|violated`
//! shardsched sim ... --mutant NAME       with a deliberate bug on (builds with the cargo
//!                                        feature `mutants` only)
//! ```
//!
//! Exit status: 0 every seed kept every invariant, 1 one did not (`violated: I<n> …` and
//! its seed are printed), 2 a usage error (an unknown mutant included). The checker runs in
//! release builds too: it is the simulator's own code, not a debug assertion.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use clap::{ArgGroup, Args};
use shardsched_sim::{Outcome, STEPS_DEFAULT, SimOptions, Stats, run_seed};

/// Exit status of a run in which a seed broke an invariant.
const EXIT_VIOLATED: u8 = 1;
/// Exit status of a usage error (clap's too).
const EXIT_USAGE: u8 = 2;

/// Flags of `shardsched sim`.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("which").required(true).args(["seeds", "seed"])))]
pub struct SimArgs {
    /// Runs seeds 1..=N (on every core) and prints how many per second.
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Runs seed S only; its last line is `seed S trace <hex> <steps> steps ok|violated`.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Random steps per seed before it heals.
    #[arg(long, default_value_t = STEPS_DEFAULT)]
    steps: usize,
    /// With --seed: prints every step of the trace first.
    #[arg(long, requires = "seed")]
    trace: bool,
    /// Threads running seeds [default: the machine's cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Switches on a deliberate bug (up-before-release, no-generation-check,
    /// ack-before-journal, release-while-held): the checker must catch it. Only in a
    /// build with the cargo feature `mutants`.
    #[arg(long, value_name = "NAME", value_parser = mutant_arg)]
    mutant: Option<MutantArg>,
}

/// A mutant named on the command line.
#[derive(Clone, Copy, Debug)]
pub struct MutantArg(#[allow(dead_code)] shardsched_failpoint::mutant::Mutant);

/// Parses `--mutant NAME`: a usage error when unknown, or when this build has none.
fn mutant_arg(name: &str) -> Result<MutantArg, String> {
    use shardsched_failpoint::mutant::Mutant;
    let Some(mutant) = Mutant::from_name(name) else {
        let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
        return Err(format!(
            "unknown mutant {name:?} (mutants: {})",
            names.join(", ")
        ));
    };
    if cfg!(feature = "mutants") {
        Ok(MutantArg(mutant))
    } else {
        Err("this shardsched has no mutants: build it with `--features mutants`".to_owned())
    }
}

/// Runs `shardsched sim`; returns the exit status.
pub fn main(args: &SimArgs) -> ExitCode {
    let options = SimOptions {
        steps: args.steps,
        keep_trace: args.trace,
        #[cfg(feature = "mutants")]
        mutant: args.mutant.map(|m| m.0),
    };
    match (args.seed, args.seeds) {
        (Some(seed), _) => one(seed, &options),
        (None, Some(seeds)) => many(seeds, args.threads, &options),
        (None, None) => ExitCode::from(EXIT_USAGE),
    }
}

/// `--seed S`.
fn one(seed: u64, options: &SimOptions) -> ExitCode {
    let outcome = run_seed(seed, options);
    let mut out = std::io::stdout().lock();
    for line in &outcome.lines {
        let _ = writeln!(out, "{line}");
    }
    if let Some(v) = &outcome.violation {
        let _ = writeln!(out, "violated: {v}");
    }
    let _ = writeln!(out, "{}", outcome.line());
    status(&outcome)
}

/// `--seeds N`: seeds 1..=N on `threads` threads, stopping once one is violated (the
/// lowest violated seed run is reported).
fn many(seeds: u64, threads: Option<usize>, options: &SimOptions) -> ExitCode {
    let threads = threads
        .or_else(|| std::thread::available_parallelism().ok().map(Into::into))
        .unwrap_or(1)
        .max(1);
    let began = Instant::now();
    let next = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let ran = AtomicU64::new(0);
    let worst: Mutex<Option<Outcome>> = Mutex::new(None);
    let total = Mutex::new(Stats::default());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut stats = Stats::default();
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed > seeds {
                        break;
                    }
                    let outcome = run_seed(seed, options);
                    ran.fetch_add(1, Ordering::Relaxed);
                    stats.add(&outcome.stats);
                    if outcome.violation.is_some() {
                        stop.store(true, Ordering::Relaxed);
                        if let Ok(mut worst) = worst.lock()
                            && worst.as_ref().is_none_or(|w| w.seed > seed)
                        {
                            *worst = Some(outcome);
                        }
                    }
                }
                if let Ok(mut total) = total.lock() {
                    total.add(&stats);
                }
            });
        }
    });
    let elapsed = began.elapsed().as_secs_f64();
    let ran = ran.into_inner();
    let mut out = std::io::stdout().lock();
    let worst = worst.into_inner().ok().flatten();
    if let Some(outcome) = &worst {
        if let Some(v) = &outcome.violation {
            let _ = writeln!(out, "violated: {v}");
        }
        let _ = writeln!(out, "{}", outcome.line());
        let _ = writeln!(
            out,
            "replay it: shardsched sim --seed {} --trace{}",
            outcome.seed,
            mutant_flag(options)
        );
        return ExitCode::from(EXIT_VIOLATED);
    }
    let rate = ran as f64 / elapsed.max(f64::EPSILON);
    let _ = writeln!(
        out,
        "{ran} seeds ok in {elapsed:.1} s: {rate:.1} seeds/s on {threads} threads"
    );
    if let Ok(total) = total.into_inner() {
        let _ = writeln!(out, "{total:?}");
    }
    ExitCode::SUCCESS
}

fn status(outcome: &Outcome) -> ExitCode {
    if outcome.violation.is_some() {
        ExitCode::from(EXIT_VIOLATED)
    } else {
        ExitCode::SUCCESS
    }
}

/// ` --mutant NAME` when one is on, for the replay hint.
fn mutant_flag(options: &SimOptions) -> String {
    #[cfg(feature = "mutants")]
    if let Some(m) = options.mutant {
        return format!(" --mutant {}", m.name());
    }
    let _ = options;
    String::new()
}
