//! Job history: finished jobs outlive their shard's retention, a shard restart and their
//! queue's removal (the coordinator's history store), and `usage` sums cores and GPUs held
//! (counted from each job's R) times its run time.

use serde_json::Value;
use shardsched_resource::parse_idset;

use rustix::process::{Signal, kill_process};

use crate::harness::{System, pid, wait_for, with_alpha};

/// Cores an R holds, counted from its `R_lite`.
fn cores_in(r: &Value) -> u64 {
    let mut cores = 0;
    for entry in r["execution"]["R_lite"].as_array().unwrap() {
        let ranks = parse_idset(entry["rank"].as_str().unwrap(), 1 << 20).unwrap();
        let each = parse_idset(entry["children"]["core"].as_str().unwrap(), 1 << 20).unwrap();
        cores += (ranks.len() * each.len()) as u64;
    }
    cores
}

/// Kills `up`'s child `word` and waits until `up` has started another.
fn restart(system: &System, word: &str) {
    let old = system.child_pid(word);
    kill_process(pid(old), Signal::KILL).unwrap();
    assert!(
        wait_for(|| system.try_child_pid(word).is_some_and(|p| p != old)),
        "{word} did not come back"
    );
}

#[test]
fn finished_jobs_outlive_retention_restarts_and_their_queue() {
    let config = with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[4-7]"
policy = "easy"
max_duration = "2h"

[queues.wide]
nodes = "node[0-7]"
policy = "easy"
max_duration = "2h"
"#,
    );
    // Shards forget a finished job 20 s after it ends; the history keeps it.
    let system = System::start_with("user-history", &config, &["--retention", "20s"]);
    let jobs = [
        system.submit(&["-q", "beta", "-n", "3", "-t", "2s", "--", "app"]),
        system.submit(&["-q", "beta", "-N", "1", "-t", "3s", "--", "app"]),
        system.submit(&["-q", "alpha", "-n", "1", "-t", "1s", "--", "app"]),
    ];
    let held = system.submit(&["-q", "beta", "--urgency", "0", "--", "app"]);
    system.ok(&["cancel", &held]);
    // Expected usage, from each job's R and times as the shards report them.
    let mut core_ms = 0;
    for id in &jobs {
        system.wait_state(id, "completed");
        let info = system.json(&["job", "info", id, "--json"]);
        let run = info["end_ms"].as_u64().unwrap() - info["start_ms"].as_u64().unwrap();
        core_ms += cores_in(&info["R"]) * run;
    }
    assert_eq!(
        cores_in(&system.json(&["job", "info", &jobs[1], "--json"])["R"]),
        4,
        "-N 1 holds a whole node"
    );

    // The coordinator pulls ended jobs into its history; then the shards forget them.
    let usage = || system.rows(&["usage", "--json"]);
    assert!(
        wait_for(|| usage().first().is_some_and(|u| u["jobs"] == 4)),
        "the history did not get the four jobs: {:?}",
        usage()
    );
    let forgotten = wait_for(|| system.rows(&["jobs", "-a", "--json"]).is_empty());
    assert!(
        forgotten,
        "the shards kept their finished jobs past retention"
    );

    // A shard restart, beta's removal, and a coordinator restart (the store is a file).
    restart(&system, "beta");
    let out = system.ok(&["queue", "remove", "beta", "--give-to", "wide"]);
    assert!(out.contains("removed queue beta"), "{out}");
    restart(&system, "coordinator");

    let rows = system.rows(&["jobs", "--since", "1d", "--json"]);
    let state_of = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == id)
            .map(|r| (r["queue"].clone(), r["state"].clone()))
    };
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert_eq!(
        state_of(&jobs[0]),
        Some(("beta".into(), "completed".into()))
    );
    assert_eq!(state_of(&held), Some(("beta".into(), "cancelled".into())));
    let removed = system.rows(&["jobs", "--since", "1d", "-q", "beta", "--json"]);
    assert_eq!(
        removed.len(),
        3,
        "a removed queue's jobs, by its name: {removed:#?}"
    );
    let cancelled = system.ok(&[
        "jobs",
        "--since",
        "1d",
        "--state",
        "CA",
        "--format",
        "{id}",
        "--no-header",
    ]);
    assert_eq!(cancelled.trim(), held);

    let sums = usage();
    assert_eq!(sums.len(), 1, "{sums:?}");
    let seconds = sums[0]["core_seconds"].as_f64().unwrap();
    assert!(
        (seconds - core_ms as f64 / 1000.0).abs() < 1e-6,
        "usage {seconds} core-seconds, the jobs' R and times say {} ms",
        core_ms
    );
    assert_eq!(sums[0]["gpu_seconds"], 0.0);
    let none = system.rows(&["usage", "--user", "nobody", "--json"]);
    assert!(none.is_empty(), "{none:?}");
}
