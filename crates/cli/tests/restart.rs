//! Restart acceptance tests of the shard's journal (real processes on loopback):
//! - a shard killed with SIGKILL while it has running and pending sim jobs, restarted by
//!   `up` from the same state directory, loses and duplicates nothing: running jobs keep
//!   their nodes and end on time, pending ones start later, a retried submit with the same
//!   idempotency key returns the same job, new ids do not collide with old ones;
//! - every submit a shard acknowledged before SIGKILL is there after its restart, while
//!   submits were streaming in (the answers wait for their batch's journal commit);
//! - a shard whose journal is damaged refuses to start, exits non-zero, and names the file.
//!
//! The harness is a trimmed copy of tests/system.rs's (`up` in a fresh directory, driven
//! through the `shardsched` commands and their `--json` output).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;
use shardsched_proto::msg::client_coord;
use shardsched_proto::msg::client_shard::{self, IdempotencyKey, Submit};
use shardsched_proto::{Credentials, Role, Session};

const EXE: &str = env!("CARGO_BIN_EXE_shardsched");
/// How long `up` may take to be ready (a debug build, on a loaded 2-core machine).
const UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a test waits for jobs to reach a state.
const JOBS_TIMEOUT: Duration = Duration::from_secs(60);
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

struct System {
    up: Option<Child>,
    dir: PathBuf,
}

impl System {
    fn start(name: &str) -> System {
        let dir = std::env::temp_dir().join(format!(
            "shardsched-restart-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config.toml");
        std::fs::write(&config, CONFIG).unwrap();
        let mut up = Command::new(EXE)
            .args([
                "up",
                "--time-scale",
                &TIME_SCALE.to_string(),
                "--retention",
                "2h",
            ])
            .arg("--config")
            .arg(&config)
            .arg("--dir")
            .arg(dir.join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("up.stderr")).unwrap())
            .spawn()
            .unwrap();
        let stdout = up.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("shardsched is up")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        let system = System { up: Some(up), dir };
        assert!(
            rx.recv_timeout(UP_TIMEOUT).is_ok(),
            "`shardsched up` was not ready; its stderr: {}",
            std::fs::read_to_string(system.dir.join("up.stderr")).unwrap_or_default()
        );
        system
    }

    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn cli(&self, args: &[&str]) -> Output {
        Command::new(EXE)
            .args(args)
            .env("SHARDSCHED_DIR", self.state())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "shardsched {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn submit(&self, args: &[&str]) -> String {
        let mut all = vec!["submit", "-q", "alpha"];
        all.extend_from_slice(args);
        self.ok(&all).trim().to_owned()
    }

    /// Every job of alpha (finished ones too), by id; `None` while alpha's shard does not
    /// answer.
    fn try_jobs(&self) -> Option<BTreeMap<String, Value>> {
        let out = self.cli(&["jobs", "-A", "-a", "-q", "alpha", "--json"]);
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

    fn wait_jobs(
        &self,
        what: &str,
        done: impl Fn(&BTreeMap<String, Value>) -> bool,
    ) -> BTreeMap<String, Value> {
        let deadline = Instant::now() + JOBS_TIMEOUT;
        loop {
            if let Some(jobs) = self.try_jobs()
                && done(&jobs)
            {
                return jobs;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; jobs: {:#?}",
                self.try_jobs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn up_pid(&self) -> u32 {
        self.up.as_ref().unwrap().id()
    }

    /// The pid of `up`'s child with `word` in its command line.
    fn child_pid(&self, word: &str) -> Option<u32> {
        children_of(self.up_pid())
            .into_iter()
            .find(|(_, cmdline)| cmdline.iter().any(|a| a == word))
            .map(|(pid, _)| pid)
    }

    fn address(&self) -> SocketAddr {
        std::fs::read_to_string(self.state().join("coordinator/address"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn stop(&mut self) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let children: Vec<u32> = children_of(up.id()).into_iter().map(|(p, _)| p).collect();
        let _ = kill_process(pid(up.id()), Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = up.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = up.kill();
        let _ = up.wait();
        for p in children {
            let _ = kill_process(pid(p), Signal::KILL);
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("test state kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn pid(p: u32) -> Pid {
    Pid::from_raw(p as i32).unwrap()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Live children of `parent`, with their command lines.
fn children_of(parent: u32) -> Vec<(u32, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() < 2 || fields[0] == "Z" || fields[1].parse::<u32>() != Ok(parent) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let args = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.push((p, args));
    }
    out
}

fn creds_in(dir: &Path) -> Credentials {
    Credentials::load(
        &dir.join("ca.pem"),
        &dir.join("cert.pem"),
        &dir.join("key.pem"),
    )
    .unwrap()
}

/// A session with alpha's shard (and its endpoint, which must outlive it).
async fn alpha_session(system: &System) -> (quinn::Endpoint, Session) {
    let creds = creds_in(&system.state().join("client"));
    let endpoint =
        shardsched_proto::tls::client_endpoint(&creds, "127.0.0.1:0".parse().unwrap()).unwrap();
    let coord: Session = shardsched_proto::connect(
        &endpoint,
        system.address(),
        Role::Coordinator,
        "coordinator",
    )
    .await
    .unwrap();
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
        priority: None,
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
    let system = System::start("kill");
    // Two 100 s jobs (10 s of real time) fill the 4 nodes; fcfs keeps the rest waiting.
    let running: Vec<String> = (0..2)
        .map(|_| system.submit(&["-N", "2", "-t", "100", "--", "sleep"]))
        .collect();
    let pending = [
        system.submit(&["-N", "4", "-t", "10", "--", "sleep"]),
        system.submit(&["-N", "1", "-t", "10", "--", "sleep"]),
    ];
    let (keyed, duplicate) = submit_with_key(&system, 7, 10).await;
    assert!(!duplicate);
    let before = system.wait_jobs("two running jobs", |jobs| {
        running.iter().all(|id| jobs[id]["state"] == "running")
    });
    assert_eq!(before.len(), 5, "{before:#?}");
    for id in pending.iter().chain([&keyed]) {
        assert_eq!(before[id]["state"], "pending", "{id}: {:#?}", before[id]);
    }

    let shard = system.child_pid("alpha").expect("alpha's shard");
    kill_process(pid(shard), Signal::KILL).unwrap();
    let killed_ms = now_ms();
    // `up` restarts it from the same state directory; wait for the new process to answer.
    let deadline = Instant::now() + UP_TIMEOUT;
    while system.child_pid("alpha").is_none_or(|p| p == shard) {
        assert!(Instant::now() < deadline, "alpha's shard was not restarted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = system.wait_jobs("the restarted shard to answer", |jobs| !jobs.is_empty());

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
            "priority",
        ] {
            assert_eq!(
                job[field], again[field],
                "{id}: {field} changed: {again:#?}"
            );
        }
    }
    // A retried submit after the restart is the same job; a new one gets a new id.
    assert_eq!(submit_with_key(&system, 7, 10).await, (keyed.clone(), true));
    let fresh = system.submit(&["-n", "1", "-t", "1", "--", "true"]);
    assert!(!before.contains_key(&fresh), "{fresh} reused an id");

    let done = system.wait_jobs("every job to complete", |jobs| {
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
    let mut system = System::start("damaged");
    let id = system.submit(&["-N", "1", "-t", "100", "--", "sleep"]);
    system.wait_jobs("the job to run", |jobs| {
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

    let system = System::start("acked");
    let (_endpoint, session) = alpha_session(&system).await;
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let next_key = Arc::new(AtomicU64::new(1));
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (session, acked, stop, next_key) = (
            session.clone(),
            Arc::clone(&acked),
            Arc::clone(&stop),
            Arc::clone(&next_key),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&next_key.fetch_add(1, Ordering::Relaxed).to_le_bytes());
                let request = submit_request(key, 3600);
                match tokio::time::timeout(Duration::from_secs(5), session.request(&request)).await
                {
                    Ok(Ok(client_shard::Response::Submitted { id, .. })) => {
                        acked.lock().unwrap().push(id.to_string());
                    }
                    _ => break,
                }
            }
        }));
    }
    // Kill the shard while the submits stream in.
    let deadline = Instant::now() + JOBS_TIMEOUT;
    while acked.lock().unwrap().len() < 300 {
        assert!(
            Instant::now() < deadline,
            "the shard acknowledged too few submits"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shard = system.child_pid("alpha").expect("alpha's shard");
    kill_process(pid(shard), Signal::KILL).unwrap();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    let acked: Vec<String> = acked.lock().unwrap().clone();
    let deadline = Instant::now() + UP_TIMEOUT;
    while system.child_pid("alpha").is_none_or(|p| p == shard) {
        assert!(Instant::now() < deadline, "alpha's shard was not restarted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let jobs = system.wait_jobs("the restarted shard to answer", |jobs| !jobs.is_empty());
    let lost: Vec<&String> = acked.iter().filter(|id| !jobs.contains_key(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged jobs lost by the restart: {lost:?}",
        lost.len(),
        acked.len()
    );
}
