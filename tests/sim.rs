//! `shardsched sim` end to end: one seed prints one line, the same on every run; many seeds
//! print their rate; an unknown or unavailable mutant is a usage error (exit status 2).

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardsched"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn one_seed_ends_with_the_same_line_on_every_run() {
    let first = sim(&["--seed", "3"]);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let line = stdout(&first).lines().last().unwrap().to_owned();
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(
        (words[0], words[1], words[2], words[5], words[6]),
        ("seed", "3", "trace", "steps", "ok"),
        "{line}"
    );
    assert_eq!(words[3].len(), 16, "a 64-bit hex trace: {line}");
    assert!(words[4].parse::<u64>().unwrap() > 0, "{line}");
    let again = sim(&["--seed", "3"]);
    assert_eq!(stdout(&again).lines().last(), Some(line.as_str()));
    // With --trace the steps come first, and the line is still last and the same.
    let traced = sim(&["--seed", "3", "--trace"]);
    let traced = stdout(&traced);
    assert!(traced.lines().count() > 100, "{traced}");
    assert_eq!(traced.lines().last(), Some(line.as_str()));
}

#[test]
fn many_seeds_print_their_rate() {
    let out = sim(&["--seeds", "4", "--threads", "2"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("4 seeds ok in") && text.contains("seeds/s"),
        "{text}"
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["--seeds", "3", "--mutant", "no-such-bug"][..],
        &[][..],
        &["--seed", "1", "--seeds", "2"][..],
    ] {
        let out = sim(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    // A default build has no mutants: naming a real one is a usage error too.
    if !cfg!(feature = "mutants") {
        let out = sim(&["--seeds", "3", "--mutant", "ack-before-journal"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--features mutants"));
    }
}
