//! Each mutant (a deliberate bug in a core's real code path) is caught within 2,000
//! seeds: the checker is not blind to it. Runs only in a build with the cargo feature
//! `mutants` (`.ci/run` runs `cargo test -p shardsched-sim --features mutants --test
//! mutants`). Each is caught in release builds too, without the cores' debug assertions:
//! `no-generation-check` then by liveness (the system never settles).

#![cfg(feature = "mutants")]

use shardsched_sim::{Mutant, SimOptions, run_seed};

/// Seeds a mutant must be caught within.
const SEEDS: u64 = 2_000;

fn first_violation(mutant: Mutant) -> Option<(u64, String)> {
    let options = SimOptions {
        mutant: Some(mutant),
        ..SimOptions::default()
    };
    (1..=SEEDS).find_map(|seed| {
        let outcome = run_seed(seed, &options);
        outcome.violation.map(|v| (seed, v.to_string()))
    })
}

#[test]
fn every_mutant_is_caught_within_2000_seeds() {
    let mut missed = Vec::new();
    for mutant in Mutant::ALL {
        match first_violation(mutant) {
            Some((seed, violation)) => {
                println!("{}: caught at seed {seed}: {violation}", mutant.name());
                assert!(violation.starts_with('I'), "{violation}");
            }
            None => missed.push(mutant.name()),
        }
    }
    assert!(missed.is_empty(), "not caught in {SEEDS} seeds: {missed:?}");
}
