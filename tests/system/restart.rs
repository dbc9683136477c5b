//! Restart acceptance tests of the shard's journal (real processes on loopback):
//! - a shard killed with SIGKILL while it has running and pending sim jobs, restarted by
//!   `up` from the same state directory, loses and duplicates nothing: running jobs keep
//!   their nodes and end on time, pending ones start later, a retried submit with the same
//!   idempotency key returns the same job, new ids do not collide with old ones;
//! - every submit a shard acknowledged before SIGKILL is there after its restart, while
//!   submits were streaming in (the answers wait for their batch's journal commit);
//! - a shard whose journal is damaged refuses to start, exits non-zero, and names the file.
//!
//! They use the whole-system harness (tests/harness), with a one-queue cluster of their own.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{EXE, System, UP_TIMEOUT, WAIT_TIMEOUT, now_ms, pid, wait_for};

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Signal, kill_process};
use serde_json::Value;
use shardsched_proto::msg::client_coord;
use shardsched_proto::msg::client_shard::{self, IdempotencyKey, Submit};
use shardsched_proto::{Role, Session};

/// Sim time runs this much faster than real time.
const TIME_SCALE: u64 = 10;

/// One queue over 4 nodes (1 socket × 4 cores each), fcfs, so that pending jobs wait
/// behind the running ones in a known order.
const CONFIG: &str = r#"
default_queue = "alpha"

[cluster.inline]
name = "tiny"

[[cluster.inline.nodes]]
hosts = "node[0-3]"
sockets = 1
cores_per_socket = 4

[queues.alpha]
nodes = "node[0-3]"
policy = "fcfs"
default_duration = "10s"
max_duration = "2h"
"#;

/// Starts `up` over [`CONFIG`], with a fast sim clock and finished jobs kept 2 h.
fn start(name: &str) -> System {
    let scale = TIME_SCALE.to_string();
    System::start_with(name, CONFIG, &["--time-scale", &scale, "--retention", "2h"])
}

/// Submits to alpha; returns the id.
fn submit(system: &System, args: &[&str]) -> String {
    let mut all = vec!["-q", "alpha"];
    all.extend_from_slice(args);
    system.submit(&all)
}

/// Every job of alpha (finished ones too), by id; `None` while alpha's shard does not
/// answer.
fn try_jobs(system: &System) -> Option<BTreeMap<String, Value>> {
    let out = system.cli(&["jobs", "-A", "-a", "-q", "alpha", "--json"]);
    if !out.status.success() {
        return None;
    }
    match serde_json::from_slice(&out.stdout) {
        Ok(Value::Array(rows)) => Some(
            rows.into_iter()
                .map(|j| (j["id"].as_str().unwrap().to_owned(), j))
                .collect(),
        ),
        _ => None,
    }
}

/// Waits until `done` holds for alpha's jobs (riding out the shard's restart).
fn wait_jobs(
    system: &System,
    what: &str,
    done: impl Fn(&BTreeMap<String, Value>) -> bool,
) -> BTreeMap<String, Value> {
    let mut jobs = None;
    let found = wait_for(|| {
        jobs = try_jobs(system);
        jobs.as_ref().is_some_and(&done)
    });
    assert!(found, "timed out waiting for {what}; jobs: {jobs:#?}");
    jobs.unwrap()
}

/// A session with alpha's shard (and its endpoint, which must outlive it).
async fn alpha_session(system: &System) -> (quinn::Endpoint, Session) {
    let (endpoint, coord) = system.admin_session().await;
    let table = match coord.request(&client_coord::Request::Routes).await.unwrap() {
        client_coord::Response::Routes(table) => table,
        other => panic!("routes: {other:?}"),
    };
    let route = table.queue("alpha").unwrap();
    let shard = shardsched_proto::connect(&endpoint, route.address, Role::Shard, "alpha")
        .await
        .unwrap();
    coord.close();
    (endpoint, shard)
}

/// A one-core job of `seconds`, as a submit with idempotency key `key`.
fn submit_request(key: [u8; 16], seconds: u64) -> client_shard::Request {
    let jobspec = serde_json::json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task",
                       "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["sleep"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": seconds}}
    });
    client_shard::Request::Submit(Submit {
        idempotency_key: IdempotencyKey(key),
        jobspec_json: jobspec.to_string(),
        urgency: None,
        array: None,
        signature: None,
    })
}

/// Submits straight to alpha's shard with idempotency key `[key; 16]` (a one-core job of
/// `seconds`); returns (id as printed, duplicate).
async fn submit_with_key(system: &System, key: u8, seconds: u64) -> (String, bool) {
    let (_endpoint, shard) = alpha_session(system).await;
    let answer = shard
        .request(&submit_request([key; 16], seconds))
        .await
        .unwrap();
    shard.close();
    match answer {
        client_shard::Response::Submitted { id, duplicate } => (id.to_string(), duplicate),
        other => panic!("{other:?}"),
    }
}

fn num(job: &Value, field: &str) -> u64 {
    job[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} of {job}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shard_restarts_from_its_journal_without_losing_or_duplicating_jobs() {
    let system = start("kill");
    // Two 100 s jobs (10 s of real time) fill the 4 nodes; fcfs keeps the rest waiting.
    let running: Vec<String> = (0..2)
        .map(|_| submit(&system, &["-N", "2", "-t", "100s", "--", "sleep"]))
        .collect();
    let pending = [
        submit(&system, &["-N", "4", "-t", "10s", "--", "sleep"]),
        submit(&system, &["-N", "1", "-t", "10s", "--", "sleep"]),
    ];
    let (keyed, duplicate) = submit_with_key(&system, 7, 10).await;
    assert!(!duplicate);
    let before = wait_jobs(&system, "two running jobs", |jobs| {
        running.iter().all(|id| jobs[id]["state"] == "running")
    });
    assert_eq!(before.len(), 5, "{before:#?}");
    for id in pending.iter().chain([&keyed]) {
        assert_eq!(before[id]["state"], "pending", "{id}: {:#?}", before[id]);
    }

    let shard = system.try_child_pid("alpha").expect("alpha's shard");
    kill_process(pid(shard), Signal::KILL).unwrap();
    let killed_ms = now_ms();
    // `up` restarts it from the same state directory; wait for the new process to answer.
    let deadline = Instant::now() + UP_TIMEOUT;
    while system.try_child_pid("alpha").is_none_or(|p| p == shard) {
        assert!(Instant::now() < deadline, "alpha's shard was not restarted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = wait_jobs(&system, "the restarted shard to answer", |jobs| {
        !jobs.is_empty()
    });

    // Nothing lost, nothing duplicated, nothing changed.
    assert_eq!(
        before.keys().collect::<BTreeSet<_>>(),
        after.keys().collect::<BTreeSet<_>>(),
        "the same jobs after the restart"
    );
    for (id, job) in &before {
        let again = &after[id];
        for field in [
            "state",
            "nodes",
            "submit_ms",
            "start_ms",
            "owner",
            "urgency",
        ] {
            assert_eq!(
                job[field], again[field],
                "{id}: {field} changed: {again:#?}"
            );
        }
    }
    // A retried submit after the restart is the same job; a new one gets a new id.
    assert_eq!(submit_with_key(&system, 7, 10).await, (keyed.clone(), true));
    let fresh = submit(&system, &["-n", "1", "-t", "1s", "--", "true"]);
    assert!(!before.contains_key(&fresh), "{fresh} reused an id");

    let done = wait_jobs(&system, "every job to complete", |jobs| {
        jobs.values().all(|j| j["state"] == "completed")
    });
    assert_eq!(done.len(), 6, "{done:#?}");
    let run_ms = 100 * 1000 / TIME_SCALE;
    for id in &running {
        let job = &done[id];
        let (start, end) = (num(job, "start_ms"), num(job, "end_ms"));
        assert_eq!(start, num(&before[id], "start_ms"));
        // On time: not early, and not run again from the restart.
        assert!(end >= start + run_ms, "{id} ended early: {job:#}");
        assert!(
            end < killed_ms + run_ms,
            "{id} ran its whole time again after the restart: {job:#}"
        );
    }
    let first_end = running
        .iter()
        .map(|id| num(&done[id], "end_ms"))
        .min()
        .unwrap();
    for id in pending.iter().chain([&keyed]) {
        assert!(
            num(&done[id], "start_ms") >= first_end,
            "{id} started before the nodes were free: {:#}",
            done[id]
        );
    }
}

#[test]
fn a_shard_with_a_damaged_journal_refuses_to_start_and_names_the_file() {
    let mut system = start("damaged");
    let id = submit(&system, &["-N", "1", "-t", "100s", "--", "sleep"]);
    wait_jobs(&system, "the job to run", |jobs| {
        jobs.get(&id).is_some_and(|j| j["state"] == "running")
    });
    let address = system.address().to_string();
    system.stop();
    let shard_dir = system.state().join("shards/alpha");
    let journal = shard_dir.join("journal.redb");
    let intact = std::fs::read(&journal).unwrap();
    assert!(intact.len() > 8192, "a journal of {} bytes", intact.len());

    let header_garbage = {
        let mut bytes = intact.clone();
        bytes[..4096].fill(0xa5);
        bytes
    };
    let truncated = intact[..1000].to_vec();
    for (what, bytes) in [("garbage header", header_garbage), ("truncated", truncated)] {
        std::fs::write(&journal, &bytes).unwrap();
        let mut shard = Command::new(EXE)
            .args([
                "shard",
                "--queue",
                "alpha",
                "--coordinator",
                &address,
                "--state-dir",
            ])
            .arg(&shard_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = shard.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = shard.kill();
                panic!("{what}: the shard did not refuse to start");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut shard.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(!status.success(), "{what}: exit {status}; stderr: {stderr}");
        assert!(
            stderr.contains(&journal.display().to_string()),
            "{what}: the error does not name {}: {stderr}",
            journal.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_submit_acknowledged_before_a_kill_is_there_after_the_restart() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    let system = start("acked");
    let (_endpoint, session) = alpha_session(&system).await;
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let last_error = Arc::new(Mutex::new(None::<String>));
    let stop = Arc::new(AtomicBool::new(false));
    let next_key = Arc::new(AtomicU64::new(1));
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (session, acked, last_error, stop, next_key) = (
            session.clone(),
            Arc::clone(&acked),
            Arc::clone(&last_error),
            Arc::clone(&stop),
            Arc::clone(&next_key),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&next_key.fetch_add(1, Ordering::Relaxed).to_le_bytes());
                let request = submit_request(key, 3600);
                // A slow answer before the kill (a loaded machine) is retried with the next
                // key, not the end of this worker: an unacknowledged submit may or may not be
                // there after the restart, and only the acknowledged ones are checked.
                match tokio::time::timeout(Duration::from_secs(5), session.request(&request)).await
                {
                    Ok(Ok(client_shard::Response::Submitted { id, .. })) => {
                        acked.lock().unwrap().push(id.to_string());
                    }
                    other => *last_error.lock().unwrap() = Some(format!("{other:?}")),
                }
            }
        }));
    }
    // Kill the shard while the submits stream in.
    let deadline = Instant::now() + WAIT_TIMEOUT;
    while acked.lock().unwrap().len() < 300 {
        assert!(
            Instant::now() < deadline,
            "the shard acknowledged too few submits ({}); the last failure: {:?}",
            acked.lock().unwrap().len(),
            last_error.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shard = system.try_child_pid("alpha").expect("alpha's shard");
    kill_process(pid(shard), Signal::KILL).unwrap();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    let acked: Vec<String> = acked.lock().unwrap().clone();
    let deadline = Instant::now() + UP_TIMEOUT;
    while system.try_child_pid("alpha").is_none_or(|p| p == shard) {
        assert!(Instant::now() < deadline, "alpha's shard was not restarted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let jobs = wait_jobs(&system, "the restarted shard to answer", |jobs| {
        !jobs.is_empty()
    });
    let lost: Vec<&String> = acked.iter().filter(|id| !jobs.contains_key(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged jobs lost by the restart: {lost:?}",
        lost.len(),
        acked.len()
    );
}
