//! Whole-system tests: real processes on loopback, real QUIC and mutual TLS.
//!
//! Each test starts its own `shardsched up` (a coordinator and one shard per queue, each a
//! separate process) in a fresh directory, with a small cluster of two queues over disjoint
//! halves of 8 nodes and a fast sim clock ([`System::start_fast`]), and drives it the way a
//! user would: through the `shardsched` commands, reading their `--json` output. Tests that
//! must misbehave on the wire are in tests/system/wire.rs.
//!
//! An independent checker ([`Checker`]) polls `jobs --json` and `resource list --json` while
//! jobs run and confirms that no node is ever allocated by two queues' shards, and that
//! every running job sits on nodes its queue owns.
//!
//! Every process is stopped by [`System`]'s `Drop`, even when a test fails: SIGTERM to `up`
//! (which stops its children in order), then SIGKILL to anything left.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{EXE, System, UP_TIMEOUT, children_of, pid};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Signal, kill_process};
use serde_json::Value;

fn definition(queue: &str) -> BTreeSet<String> {
    let range = match queue {
        "alpha" => 0..4,
        "beta" => 4..8,
        other => panic!("no queue {other} in the test config"),
    };
    range.map(|i| format!("node{i}")).collect()
}

/// Polls the system while jobs run and records every violation of "a node is allocated by
/// at most one shard, which owns it".
struct Checker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<CheckerReport>>,
}

#[derive(Debug, Default)]
struct CheckerReport {
    /// Snapshots taken.
    snapshots: usize,
    /// Snapshots in which both queues had running jobs at once.
    both_running: usize,
    violations: Vec<String>,
}

impl Checker {
    fn start(dir: PathBuf) -> Checker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut report = CheckerReport::default();
            let run = |args: &[&str]| -> Option<Vec<Value>> {
                let out = Command::new(EXE)
                    .args(args)
                    .env("SHARDSCHED_DIR", &dir)
                    .output()
                    .ok()?;
                match serde_json::from_slice(&out.stdout) {
                    Ok(Value::Array(rows)) if out.status.success() => Some(rows),
                    _ => None,
                }
            };
            while !flag.load(Ordering::Relaxed) {
                let (Some(nodes), Some(jobs)) = (
                    run(&["resource", "list", "--json"]),
                    run(&["jobs", "-A", "--json"]),
                ) else {
                    report
                        .violations
                        .push("a status command failed while jobs ran".into());
                    continue;
                };
                report.snapshots += 1;
                check_snapshot(&nodes, &jobs, &mut report);
                std::thread::sleep(Duration::from_millis(50));
            }
            report
        });
        Checker {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> CheckerReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One snapshot: every running job's nodes are owned by its queue and inside its
/// definition, and no node carries running jobs of two queues.
fn check_snapshot(nodes: &[Value], jobs: &[Value], report: &mut CheckerReport) {
    let owner: HashMap<&str, Option<&str>> = nodes
        .iter()
        .map(|n| (n["name"].as_str().unwrap_or(""), n["queue"].as_str()))
        .collect();
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut running_queues = BTreeSet::new();
    for job in jobs.iter().filter(|j| j["state"] == "running") {
        let queue = job["queue"].as_str().unwrap_or("");
        running_queues.insert(queue.to_owned());
        let hostlist = job["nodes"].as_str().unwrap_or("");
        let names = expand_hostlist(hostlist);
        if names.is_empty() {
            report
                .violations
                .push(format!("running job {} holds no node", job["id"]));
        }
        for node in names {
            if !definition(queue).contains(&node) {
                report.violations.push(format!(
                    "job {} of {queue} runs on {node}, outside its definition",
                    job["id"]
                ));
            }
            if owner.get(node.as_str()).copied().flatten() != Some(queue) {
                report.violations.push(format!(
                    "job {} of {queue} runs on {node}, owned by {:?}",
                    job["id"],
                    owner.get(node.as_str())
                ));
            }
            users.entry(node).or_default().insert(queue.to_owned());
        }
    }
    for (node, queues) in users {
        if queues.len() > 1 {
            report
                .violations
                .push(format!("{node} is allocated by several shards: {queues:?}"));
        }
    }
    if running_queues.len() >= 2 {
        report.both_running += 1;
    }
}

/// `node[0-2,5]` → node0, node1, node2, node5 (the test's hostnames only need this much).
fn expand_hostlist(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (item, tail) = match rest.find('[') {
            Some(open) if rest[..open].find(',').is_none() => {
                let close = rest.find(']').unwrap();
                let (prefix, ranges) = (&rest[..open], &rest[open + 1..close]);
                for range in ranges.split(',') {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    for i in lo.parse::<u32>().unwrap()..=hi.parse::<u32>().unwrap() {
                        out.push(format!("{prefix}{i}"));
                    }
                }
                ("", rest[close + 1..].trim_start_matches(','))
            }
            _ => match rest.split_once(',') {
                Some((item, tail)) => (item, tail),
                None => (rest, ""),
            },
        };
        if !item.is_empty() {
            out.push(item.to_owned());
        }
        rest = tail;
    }
    out
}

#[test]
fn hostlists_expand() {
    assert_eq!(
        expand_hostlist("node[0-2,5],node7"),
        ["node0", "node1", "node2", "node5", "node7"]
    );
    assert_eq!(expand_hostlist("node4"), ["node4"]);
    assert!(expand_hostlist("").is_empty());
}

// ---------------------------------------------------------------------------------------
// Acceptance: scheduling.

#[test]
fn jobs_in_two_queues_run_in_parallel_on_their_own_nodes_complete_and_free() {
    let mut system = System::start_fast("parallel");
    let checker = Checker::start(system.state());
    // Each queue gets whole-node jobs (two waves on its 4 nodes) and core-sized ones.
    let submit_all = |queue: &'static str| {
        let system = &system;
        move || {
            let mut ids = Vec::new();
            for i in 0..8 {
                let id = if i % 2 == 0 {
                    system.submit(&["-q", queue, "-N", "1", "-t", "10s", "--", "sleep", "10"])
                } else {
                    system.submit(&["-q", queue, "-n", "2", "-t", "5s", "--", "true"])
                };
                ids.push(id);
            }
            ids
        }
    };
    let (alpha, beta) = std::thread::scope(|s| {
        let a = s.spawn(submit_all("alpha"));
        let b = s.spawn(submit_all("beta"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let ours: BTreeSet<&String> = alpha.iter().chain(&beta).collect();
    assert_eq!(ours.len(), 16, "16 distinct job ids");

    let jobs = system.wait_jobs("all 16 jobs to complete", |jobs| {
        jobs.iter()
            .filter(|j| ours.contains(&j["id"].as_str().unwrap_or("").to_owned()))
            .filter(|j| j["state"] == "completed")
            .count()
            == 16
    });
    let report = checker.finish();

    for job in jobs
        .iter()
        .filter(|j| ours.contains(&j["id"].as_str().unwrap().to_owned()))
    {
        let queue = job["queue"].as_str().unwrap();
        let expected = if alpha.contains(&job["id"].as_str().unwrap().to_owned()) {
            "alpha"
        } else {
            "beta"
        };
        assert_eq!(queue, expected, "job {} is in its queue", job["id"]);
        let nodes = expand_hostlist(job["nodes"].as_str().unwrap());
        assert!(!nodes.is_empty(), "job {} ran somewhere", job["id"]);
        for node in nodes {
            assert!(
                definition(queue).contains(&node),
                "job {} of {queue} ran on {node}",
                job["id"]
            );
        }
    }
    assert!(
        report.violations.is_empty(),
        "the checker saw: {:#?}",
        report.violations
    );
    assert!(report.snapshots > 0, "the checker took no snapshot");
    assert!(
        report.both_running > 0,
        "the checker never saw both queues running at once ({} snapshots)",
        report.snapshots
    );

    // Everything is free again, and ownership is what the configuration says.
    for node in system.resources() {
        let name = node["name"].as_str().unwrap();
        assert_eq!(node["state"], "up", "{name}");
        assert_eq!(node["jobs_running"], 0, "{name} is free");
        let owner = if definition("alpha").contains(name) {
            "alpha"
        } else {
            "beta"
        };
        assert_eq!(node["queue"], owner, "{name}'s owner");
    }

    // `up` stops cleanly on SIGTERM and leaves no process behind.
    let (clean, survivors) = system.stop();
    assert!(clean, "up exits 0 on SIGTERM");
    assert!(survivors.is_empty(), "children left running: {survivors:?}");
}

#[test]
fn cancelling_a_running_job_frees_its_nodes() {
    let system = System::start_fast("cancel");
    let big = system.submit(&["-q", "alpha", "-N", "4", "-t", "1h", "--", "sleep", "3600"]);
    let running = system.wait_state(&big, "running");
    assert_eq!(running["nodes"], "node[0-3]");
    let waiting = system.submit(&["-q", "alpha", "-N", "2", "-t", "10s", "--", "sleep", "10"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        system.job(&waiting)["state"],
        "pending",
        "no node is free for it"
    );

    system.ok(&["cancel", &big]);
    let cancelled = system.wait_state(&big, "cancelled");
    assert!(cancelled["end_ms"].is_u64());
    // The freed nodes go to the waiting job, which runs and completes (its 10 s pass in
    // about one under the fast clock: a poll may see it only once completed).
    let completed = system.wait_state(&waiting, "completed");
    assert!(completed["start_ms"].is_u64(), "it ran: {completed:#}");
    assert_eq!(
        expand_hostlist(completed["nodes"].as_str().unwrap()).len(),
        2
    );
    for node in system.resources() {
        assert_eq!(node["jobs_running"], 0, "{} is free", node["name"]);
    }

    // `job info` shows the story; cancelling an ended job is reported, not an error.
    let info = system.ok(&["job", "info", &big]);
    assert!(info.contains("cancel"), "{info}");
    let again = system.cli(&["cancel", &big]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already ended"));
}

#[test]
fn a_job_that_can_never_fit_its_queue_is_denied_with_the_reason() {
    let system = System::start_fast("deny");
    // beta has 4 nodes; the cluster has 8.
    let out = system.cli(&["submit", "-q", "beta", "-N", "5", "--", "hostname"]);
    assert!(!out.status.success(), "submit must fail");
    assert!(out.stdout.is_empty(), "no job id printed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("denied"), "says it is denied: {stderr}");
    assert!(stderr.contains("beta"), "names the queue: {stderr}");
    // 5 cores per task on 4-core nodes can never fit either.
    let out = system.cli(&["submit", "-q", "alpha", "-c", "5", "--", "hostname"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("denied"));
    // Nothing was queued.
    assert!(system.jobs().is_empty(), "{:?}", system.jobs());
    // A job that fits is accepted in the same queue.
    let id = system.submit(&["-q", "beta", "-N", "4", "-t", "1s", "--", "true"]);
    system.wait_state(&id, "completed");
}

#[test]
fn up_restarts_a_shard_that_dies() {
    let system = System::start_fast("restart");
    let before = system.child_pid("beta");
    kill_process(pid(before), Signal::KILL).unwrap();
    // A new shard for beta comes back and registers; submits reach it.
    let deadline = Instant::now() + UP_TIMEOUT;
    loop {
        let after = children_of(system.up_pid())
            .into_iter()
            .find(|(_, args)| args.iter().any(|a| a == "beta"));
        if let Some((after, _)) = after
            && after != before
        {
            break;
        }
        assert!(Instant::now() < deadline, "beta's shard was not restarted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + UP_TIMEOUT;
    let id = loop {
        let out = system.cli(&["submit", "-q", "beta", "-t", "1s", "--", "true"]);
        if out.status.success() {
            break String::from_utf8(out.stdout).unwrap().trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "beta never took a job again: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    system.wait_state(&id, "completed");
}

#[test]
fn a_coordinator_killed_and_restarted_loses_nothing_and_submits_wait_it_out() {
    let system = System::start_fast("coordinator-restart");
    // alpha (fcfs): one job holding every node, one waiting behind it.
    let running = system.submit(&["-q", "alpha", "-N", "4", "-t", "30s", "--", "sleep", "30"]);
    system.wait_state(&running, "running");
    let waiting = system.submit(&["-q", "alpha", "-N", "1", "-t", "5s", "--", "true"]);
    let before = system.child_pid("coordinator");
    kill_process(pid(before), Signal::KILL).unwrap();

    // A submit during the outage waits for the coordinator (restarted by `up`) and succeeds.
    // Without the routing table the last command cached: with it, the submit goes straight
    // to the shard and needs no coordinator (crates/client's tests cover that path).
    system.forget_cached_routes();
    let during = system.cli(&["submit", "-q", "beta", "-t", "5s", "--", "true"]);
    assert!(
        during.status.success(),
        "a submit during the outage failed: {}",
        String::from_utf8_lossy(&during.stderr)
    );
    let during = String::from_utf8(during.stdout).unwrap().trim().to_owned();
    assert_ne!(system.child_pid("coordinator"), before, "up restarted it");

    // The shards re-registered: both queues are online again, and no job was lost.
    let deadline = Instant::now() + UP_TIMEOUT;
    loop {
        let queues = system.rows(&["queue", "list", "--json"]);
        if queues.iter().all(|q| q["online"] == true) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "shards did not come back: {queues:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for id in [&running, &waiting, &during] {
        system.wait_state(id, "completed");
    }
    let jobs = system.jobs();
    assert_eq!(jobs.len(), 3, "exactly the three jobs: {jobs:#?}");
    // The running job kept its allocation through the outage.
    assert_eq!(system.job(&running)["nodes"], "node[0-3]");
}

#[test]
fn client_commands_say_when_no_system_is_running() {
    let dir = std::env::temp_dir().join(format!("shardsched-system-none-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    for args in [
        &["jobs"][..],
        &["submit", "--", "true"],
        &["queue", "list"],
        &["resource", "list", "--json"],
    ] {
        let out = Command::new(EXE)
            .args(args)
            .env("SHARDSCHED_DIR", &dir)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no coordinator address in")
                && stderr.contains("is `shardsched up` running?"),
            "{}: {stderr}",
            args.join(" ")
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
