//! Whole-system tests: real processes on loopback, real QUIC and mutual TLS.
//!
//! Each test starts its own `shardsched up` (a coordinator and one shard per queue, each a
//! separate process) in a fresh directory, with a small cluster of two queues over disjoint
//! halves of 8 nodes and a fast sim clock, and drives it the way a user would: through the
//! `shardsched` commands, reading their `--json` output. Tests that must misbehave on the
//! wire (a retried submit, a 4 GiB frame header, garbage bytes, certificates from elsewhere)
//! speak it directly with `shardsched-proto`.
//!
//! An independent checker ([`Checker`]) polls `jobs --json` and `resource list --json` while
//! jobs run and confirms that no node is ever allocated by two queues' shards, and that
//! every running job sits on nodes its queue owns.
//!
//! Every process is stopped by [`System`]'s `Drop`, even when a test fails: SIGTERM to `up`
//! (which stops its children in order), then SIGKILL to anything left.

#![allow(clippy::unwrap_used)]

mod harness;

use harness::{EXE, System, UP_TIMEOUT, alive, children_of, creds_in, mem_kib, pid, two_queues};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Signal, kill_process};
use serde_json::Value;
use shardsched_proto::msg::client_coord::{self, QueueAction};
use shardsched_proto::msg::client_shard::{self, IdempotencyKey, Submit};
use shardsched_proto::msg::{JobsQuery, RefusalCode, RouteTable, UserFilter};
use shardsched_proto::{Ca, Credentials, Error, HandshakeFailure, Role, Session, StreamCode};

/// Sim time runs this much faster than real time: a 10 s job takes 1 s.
const TIME_SCALE: &str = "10";

/// The system the tests start: [`harness::two_queues`] with 10 s default durations.
fn start(name: &str) -> System {
    System::start_with(name, &two_queues("10s"), &["--time-scale", TIME_SCALE])
}

fn definition(queue: &str) -> BTreeSet<String> {
    let range = match queue {
        "alpha" => 0..4,
        "beta" => 4..8,
        other => panic!("no queue {other} in the test config"),
    };
    range.map(|i| format!("node{i}")).collect()
}

/// A memory figure of a process from `/proc/PID/status` (`VmRSS`, `VmSize`), in KiB.
fn endpoint(creds: &Credentials) -> quinn::Endpoint {
    shardsched_proto::tls::client_endpoint(creds, "127.0.0.1:0".parse().unwrap()).unwrap()
}

async fn coordinator(endpoint: &quinn::Endpoint, addr: SocketAddr) -> Session {
    shardsched_proto::connect(endpoint, addr, Role::Coordinator, "coordinator")
        .await
        .unwrap()
}

async fn routes(session: &Session) -> RouteTable {
    match session
        .request(&client_coord::Request::Routes)
        .await
        .unwrap()
    {
        client_coord::Response::Routes(table) => table,
        other => panic!("routes: {other:?}"),
    }
}

async fn shard(endpoint: &quinn::Endpoint, table: &RouteTable, queue: &str) -> Session {
    let route = table.queue(queue).unwrap();
    shardsched_proto::connect(endpoint, route.address, Role::Shard, queue)
        .await
        .unwrap()
}

/// A one-core job for `queue` as canonical jobspec JSON.
fn jobspec(queue: &str, seconds: u64) -> String {
    let mut js = shardsched_jobspec_for_tests(seconds);
    js["attributes"]["system"]["queue"] = Value::String(queue.to_owned());
    js.to_string()
}

/// The jobspec `submit -n 1 -t SECONDS -- sleep` builds (RFC 25 version 1).
fn shardsched_jobspec_for_tests(seconds: u64) -> Value {
    serde_json::json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task",
                       "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["sleep"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": seconds}}
    })
}

/// Writes `bytes` on a fresh stream, finishes it, and reads what comes back.
async fn raw(session: &Session, bytes: &[u8]) -> Result<Vec<u8>, quinn::ReadToEndError> {
    let (mut send, mut recv) = session.connection().open_bi().await.unwrap();
    let _ = send.write_all(bytes).await;
    let _ = send.finish();
    tokio::time::timeout(Duration::from_secs(15), recv.read_to_end(1 << 20))
        .await
        .expect("an answer (or a reset) in time")
}

fn reset_code(result: Result<Vec<u8>, quinn::ReadToEndError>) -> Option<StreamCode> {
    match result {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
            StreamCode::from_u64(code.into_inner())
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// The independent checker.

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
    let mut system = start("parallel");
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
    let system = start("cancel");
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
    // The freed nodes go to the waiting job, which runs and completes.
    let now_running = system.wait_state(&waiting, "running");
    assert_eq!(
        expand_hostlist(now_running["nodes"].as_str().unwrap()).len(),
        2
    );
    system.wait_state(&waiting, "completed");
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
    let system = start("deny");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_submit_with_the_same_key_makes_one_job() {
    let system = start("idempotent");
    let creds = system.admin();
    let endpoint = endpoint(&creds);
    let coord = coordinator(&endpoint, system.address()).await;
    let table = routes(&coord).await;
    let submit = Submit {
        idempotency_key: IdempotencyKey([7; 16]),
        jobspec_json: jobspec("alpha", 60),
        priority: None,
    };
    let request = client_shard::Request::Submit(submit.clone());

    let first = shard(&endpoint, &table, "alpha").await;
    let (id, duplicate) = match first.request(&request).await.unwrap() {
        client_shard::Response::Submitted { id, duplicate } => (id, duplicate),
        other => panic!("{other:?}"),
    };
    assert!(!duplicate);
    // The retry comes on a new connection, as after a broken one; and several at once.
    first.close();
    let mut retries = Vec::new();
    for _ in 0..4 {
        let endpoint = endpoint.clone();
        let table = table.clone();
        let request = request.clone();
        retries.push(tokio::spawn(async move {
            let session = shard(&endpoint, &table, "alpha").await;
            session.request(&request).await.unwrap()
        }));
    }
    for retry in retries {
        assert_eq!(
            retry.await.unwrap(),
            client_shard::Response::Submitted {
                id,
                duplicate: true
            }
        );
    }
    // One job.
    let session = shard(&endpoint, &table, "alpha").await;
    let list = match session
        .request(&client_shard::Request::Jobs(JobsQuery {
            queue: None,
            user: UserFilter::All,
            include_inactive: true,
            limit: 100,
        }))
        .await
        .unwrap()
    {
        client_shard::Response::Jobs(list) => list,
        other => panic!("{other:?}"),
    };
    assert_eq!(list.jobs.len(), 1, "{:?}", list.jobs);
    assert_eq!(list.jobs[0].id, id);
    // Another key is another job.
    let other = client_shard::Request::Submit(Submit {
        idempotency_key: IdempotencyKey([8; 16]),
        ..submit
    });
    match session.request(&other).await.unwrap() {
        client_shard::Response::Submitted {
            id: other_id,
            duplicate: false,
        } => assert_ne!(other_id, id),
        answer => panic!("{answer:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Acceptance: security and robustness.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_the_right_certificate_or_authority_are_refused() {
    let system = start("security");
    let addr = system.address();
    let admin = system.admin();

    // 1. No client certificate at all.
    let ca_pem = std::fs::read_to_string(system.state().join("client/ca.pem")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![shardsched_proto::ALPN.to_vec()];
    let mut anonymous = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    anonymous.set_default_client_config(shardsched_proto::tls::quic_client_config(tls).unwrap());
    let err = shardsched_proto::connect(&anonymous, addr, Role::Coordinator, "coordinator")
        .await
        .expect_err("no certificate, no connection");
    assert!(
        matches!(err, Error::Handshake(HandshakeFailure::CertificateRequired)),
        "{err}"
    );
    assert!(err.to_string().contains("client certificate"), "{err}");

    // ... and the CLI says so before trying, when the certificate file is missing.
    let no_cert = system.dir.join("no-cert");
    std::fs::create_dir_all(no_cert.join("coordinator")).unwrap();
    std::fs::copy(
        system.state().join("coordinator/address"),
        no_cert.join("coordinator/address"),
    )
    .unwrap();
    let out = system.cli_in(&no_cert, &["jobs"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no client certificate"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // 2. A certificate from another CA: refused by the coordinator and by a shard.
    let other_ca = Ca::create(&system.dir.join("other-ca")).unwrap();
    let stranger = other_ca.credentials(Role::Admin, "mallory").unwrap();
    let stranger_endpoint = endpoint(&stranger);
    let err = shardsched_proto::connect(&stranger_endpoint, addr, Role::Coordinator, "coordinator")
        .await
        .expect_err("a stranger's certificate is refused");
    assert!(err.to_string().contains("CA"), "{err}");
    // Through the CLI, with the stranger's certificate in a client directory.
    let stranger_dir = system.dir.join("stranger");
    std::fs::create_dir_all(stranger_dir.join("coordinator")).unwrap();
    std::fs::copy(
        system.state().join("coordinator/address"),
        stranger_dir.join("coordinator/address"),
    )
    .unwrap();
    let issued = other_ca.issue(Role::Admin, "mallory").unwrap();
    std::fs::create_dir_all(stranger_dir.join("client")).unwrap();
    std::fs::write(stranger_dir.join("client/cert.pem"), &issued.cert_pem).unwrap();
    shardsched_proto::ca::write_private(&stranger_dir.join("client/key.pem"), &issued.key_pem)
        .unwrap();
    std::fs::write(stranger_dir.join("client/ca.pem"), other_ca.cert_pem()).unwrap();
    let out = system.cli_in(&stranger_dir, &["queue", "list"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CA"), "{stderr}");

    let admin_endpoint = endpoint(&admin);
    let coord = coordinator(&admin_endpoint, addr).await;
    let table = routes(&coord).await;
    let route = table.queue("alpha").unwrap();
    let err = shardsched_proto::connect(&stranger_endpoint, route.address, Role::Shard, "alpha")
        .await
        .expect_err("shards refuse strangers too");
    assert!(err.to_string().contains("CA"), "{err}");

    // 3. A user asking for an admin operation.
    let alice_dir = system.user_dir("alice");
    let alice = creds_in(&alice_dir.join("client"));
    let alice_endpoint = endpoint(&alice);
    let alice_coord = coordinator(&alice_endpoint, addr).await;
    let stop = client_coord::Request::QueueControl {
        queue: "alpha".into(),
        action: QueueAction::Stop,
    };
    match alice_coord.request(&stop).await {
        Err(Error::Refused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Forbidden);
            assert!(refusal.message.contains("alice"), "{}", refusal.message);
            assert!(refusal.message.contains("may not"), "{}", refusal.message);
        }
        other => panic!("a user stopped a queue: {other:?}"),
    }
    // Users may read status and submit.
    routes(&alice_coord).await;
    // ... but not cancel someone else's job (the admin's here), through the CLI.
    let admins_job = system.submit(&["-q", "alpha", "-t", "1h", "--", "sleep", "3600"]);
    let out = system.cli_in(&alice_dir, &["cancel", &admins_job]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not your job"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(system.job(&admins_job)["state"], "cancelled");
    // The admin may stop a queue.
    assert!(coord.request(&stop).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_gib_frame_header_is_refused_without_the_coordinator_growing() {
    let system = start("bigframe");
    let coordinator_pid = system.child_pid("coordinator");
    let endpoint = endpoint(&system.admin());
    let session = coordinator(&endpoint, system.address()).await;
    routes(&session).await;
    let rss_before = mem_kib(coordinator_pid, "VmRSS");
    let size_before = mem_kib(coordinator_pid, "VmSize");
    // Sixteen streams each announcing 4 GiB − 1 (the most a u32 header can say), each
    // followed by 1 MiB of payload that a reader believing the header would buffer (16 MiB
    // in all), and whose reservation of the announced size would show in the address space.
    let mut frame = vec![0xFF, 0xFF, 0xFF, 0xFF];
    frame.extend(std::iter::repeat_n(0xAB, 1024 * 1024));
    for _ in 0..16 {
        assert_eq!(
            reset_code(raw(&session, &frame).await),
            Some(StreamCode::FrameTooLarge)
        );
    }
    let rss_after = mem_kib(coordinator_pid, "VmRSS");
    let size_after = mem_kib(coordinator_pid, "VmSize");
    assert!(
        rss_after < rss_before + 8 * 1024,
        "the coordinator's resident memory grew from {rss_before} KiB to {rss_after} KiB"
    );
    assert!(
        size_after < size_before + 1024 * 1024,
        "the coordinator's address space grew from {size_before} KiB to {size_after} KiB"
    );
    // Still serving, on the same connection and for others.
    routes(&session).await;
    system.ok(&["queue", "list"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_a_stream_resets_that_stream_and_the_processes_keep_serving() {
    let system = start("garbage");
    let coordinator_pid = system.child_pid("coordinator");
    let shard_pid = system.child_pid("alpha");
    let endpoint = endpoint(&system.admin());
    let coord = coordinator(&endpoint, system.address()).await;
    let table = routes(&coord).await;
    let alpha = shard(&endpoint, &table, "alpha").await;

    for session in [&coord, &alpha] {
        // A well-framed payload that is no request.
        let garbage = [0, 0, 0, 8, 0xEE, 0xFF, 0x13, 0x37, 0xDE, 0xAD, 0xBE, 0xEF];
        assert_eq!(
            reset_code(raw(session, &garbage).await),
            Some(StreamCode::Malformed)
        );
        // A frame cut short.
        assert_eq!(
            reset_code(raw(session, &[0, 0, 0, 100, 1, 2, 3]).await),
            Some(StreamCode::Malformed)
        );
        // HTTP, whose first four bytes read as a 1.2 GB header.
        assert_eq!(
            reset_code(raw(session, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await),
            Some(StreamCode::FrameTooLarge)
        );
    }
    // The same connections still answer, and the processes are the same ones.
    routes(&coord).await;
    let answer = alpha
        .request(&client_shard::Request::Submit(Submit {
            idempotency_key: IdempotencyKey([1; 16]),
            jobspec_json: jobspec("alpha", 1),
            priority: None,
        }))
        .await
        .unwrap();
    assert!(matches!(answer, client_shard::Response::Submitted { .. }));
    assert!(alive(coordinator_pid) && alive(shard_pid));
    assert_eq!(system.child_pid("coordinator"), coordinator_pid);
    assert_eq!(system.child_pid("alpha"), shard_pid);
    system.ok(&["jobs", "-A"]);
}

// ---------------------------------------------------------------------------------------
// Supervision and the client's errors.

#[test]
fn up_restarts_a_shard_that_dies() {
    let system = start("restart");
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
    let system = start("coordinator-restart");
    // alpha (fcfs): one job holding every node, one waiting behind it.
    let running = system.submit(&["-q", "alpha", "-N", "4", "-t", "30s", "--", "sleep", "30"]);
    system.wait_state(&running, "running");
    let waiting = system.submit(&["-q", "alpha", "-N", "1", "-t", "5s", "--", "true"]);
    let before = system.child_pid("coordinator");
    kill_process(pid(before), Signal::KILL).unwrap();

    // A submit during the outage waits for the coordinator (restarted by `up`) and succeeds.
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
