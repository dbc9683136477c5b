//! The driver over real QUIC on 127.0.0.1, with real certificates and a tiny coordinator
//! built from the proto crate: register, submit, run, complete, coordinator commands,
//! reconnection, shutdown.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shardsched_proto::msg::client_shard::{self, CancelResult, IdempotencyKey, Submit};
use shardsched_proto::msg::shard_coord::{self, Assignment, Register, ShardStatus};
use shardsched_proto::msg::{
    ClusterDescription, ClusterFormat, Generation, JobId, JobState, JobsQuery, NodeGen,
    RefusalCode, UserFilter, coord_shard,
};
use shardsched_proto::{Ca, Error, Role, Session, accept, connect, serve, tls};
use shardsched_shard::{DriverError, ShardOptions};
use tokio::sync::{mpsc, oneshot};

const WAIT: Duration = Duration::from_secs(10);

struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "shardsched-shard-{label}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A CA, and a shard state directory for queue `name` signed by it.
fn setup(dir: &TempDir, name: &str) -> (Ca, PathBuf) {
    let ca = Ca::create(&dir.0.join("coordinator")).expect("CA");
    let state = dir.0.join("shard");
    std::fs::create_dir_all(&state).expect("state dir");
    let issued = ca.issue(Role::Shard, name).expect("issue");
    std::fs::write(state.join("cert.pem"), &issued.cert_pem).expect("cert");
    shardsched_proto::ca::write_private(&state.join("key.pem"), &issued.key_pem).expect("key");
    std::fs::write(state.join("ca.pem"), ca.cert_pem()).expect("ca");
    (ca, state)
}

fn assignment() -> Assignment {
    Assignment {
        limits: Default::default(),
        allowances: Vec::new(),
        fairshare: None,
        generator_id: 11,
        cluster: ClusterDescription {
            format: ClusterFormat::Spec,
            text: "name = \"c\"\n[[nodes]]\nhosts = \"n[0-1]\"\ncores_per_socket = 4\n".into(),
            load_allowlist: Vec::new(),
        },
        queue: common::queue(&["n0", "n1"]),
        owned: ["n0", "n1"]
            .into_iter()
            .map(|n| NodeGen {
                node: n.into(),
                generation: Generation(1),
            })
            .collect(),
        incoming: Vec::new(),
        flags: Default::default(),
    }
}

/// What the toy coordinator saw.
enum Seen {
    Registered(Session, Register),
    Status(ShardStatus),
}

/// A toy coordinator: answers Register with [`assignment`] and acks status reports,
/// reporting both to the test.
fn coordinator(ca: &Ca) -> (quinn::Endpoint, mpsc::UnboundedReceiver<Seen>) {
    let creds = ca
        .credentials(Role::Coordinator, "coordinator")
        .expect("creds");
    let endpoint = tls::server_endpoint(&creds, localhost()).expect("endpoint");
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let listener = endpoint.clone();
    tokio::spawn(async move {
        while let Some(incoming) = listener.accept().await {
            let Ok(session) = accept(incoming).await else {
                continue;
            };
            let seen_tx = seen_tx.clone();
            let link = session.clone();
            tokio::spawn(serve(session, move |_peer, req: shard_coord::Request| {
                let seen_tx = seen_tx.clone();
                let link = link.clone();
                async move {
                    match req {
                        shard_coord::Request::Register(register) => {
                            let _ = seen_tx.send(Seen::Registered(link, register));
                            Ok(shard_coord::Response::Registered(Box::new(assignment())))
                        }
                        shard_coord::Request::Status(status) => {
                            let _ = seen_tx.send(Seen::Status(*status));
                            Ok(shard_coord::Response::Ack)
                        }
                        shard_coord::Request::Released(_) => Ok(shard_coord::Response::Ack),
                        shard_coord::Request::Agents { nodes } => {
                            let none = nodes
                                .into_iter()
                                .map(|node| shard_coord::AgentAddress {
                                    node,
                                    address: None,
                                })
                                .collect();
                            Ok(shard_coord::Response::Agents(none))
                        }
                    }
                }
            }));
        }
    });
    (endpoint, seen)
}

async fn next_registration(seen: &mut mpsc::UnboundedReceiver<Seen>) -> (Session, Register) {
    loop {
        match tokio::time::timeout(WAIT, seen.recv()).await {
            Ok(Some(Seen::Registered(session, register))) => return (session, register),
            Ok(Some(Seen::Status(_))) => continue,
            other => panic!("no registration: {}", other.is_ok()),
        }
    }
}

fn submit_request(key: u8, duration: u64) -> client_shard::Request {
    let jobspec = shardsched_jobspec::Shorthand {
        tasks: Some(1),
        duration,
        command: vec!["sleep".into()],
        ..Default::default()
    }
    .to_jobspec()
    .expect("jobspec");
    client_shard::Request::Submit(Submit {
        idempotency_key: IdempotencyKey([key; 16]),
        jobspec_json: jobspec.to_json().to_string(),
        urgency: None,
        array: None,
        signature: None,
    })
}

async fn submitted(session: &Session, key: u8, duration: u64) -> (JobId, bool) {
    match session.request(&submit_request(key, duration)).await {
        Ok(client_shard::Response::Submitted { id, duplicate }) => (id, duplicate),
        other => panic!("submit: {other:?}"),
    }
}

async fn job_state(session: &Session, id: JobId) -> JobState {
    match session
        .request(&client_shard::Request::JobInfo { id })
        .await
    {
        Ok(client_shard::Response::JobInfo(info)) => info.summary.state,
        other => panic!("job info: {other:?}"),
    }
}

fn options(coordinator: SocketAddr, state_dir: &Path) -> ShardOptions {
    ShardOptions {
        queue: "batch".into(),
        coordinator,
        state_dir: state_dir.to_owned(),
        listen: localhost(),
        time_scale: 20.0,
        executor: Default::default(),
        retention: std::time::Duration::from_secs(3600),
        metrics: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_registers_runs_jobs_and_obeys_its_coordinator() {
    let dir = TempDir::new("driver");
    let (ca, state) = setup(&dir, "batch");
    let (coord, mut seen) = coordinator(&ca);
    let (stop, stopped) = oneshot::channel::<()>();
    let shard = tokio::spawn(shardsched_shard::run(
        options(coord.local_addr().expect("addr"), &state),
        async move {
            let _ = stopped.await;
        },
    ));
    let (link, register) = next_registration(&mut seen).await;
    assert_eq!(register.queue, "batch");
    assert!(register.held.is_empty() && register.last_job_id.is_none());

    let alice_creds = ca.credentials(Role::User, "alice").expect("creds");
    let client = tls::client_endpoint(&alice_creds, localhost()).expect("client");
    let alice = connect(&client, register.listen, Role::Shard, "batch")
        .await
        .expect("connect to the shard");

    // A 2 s job at time scale 20 runs 100 ms; the cluster has room, so it is allocated
    // in the batch that accepted it, before the answer: never pending when asked (it may
    // have completed already on a loaded machine).
    let (id, duplicate) = submitted(&alice, 1, 2).await;
    assert!(!duplicate);
    assert_eq!(id.generator_id(), 11);
    let first_seen = job_state(&alice, id).await;
    assert!(
        matches!(first_seen, JobState::Running | JobState::Completed),
        "allocated before the answer, found {first_seen:?}"
    );
    assert_eq!(
        submitted(&alice, 1, 2).await,
        (id, true),
        "a retry is the same job"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while job_state(&alice, id).await != JobState::Completed {
        assert!(
            tokio::time::Instant::now() < deadline,
            "job never completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Another user may not cancel alice's job.
    let (long, _) = submitted(&alice, 2, 3600).await;
    let bob_creds = ca.credentials(Role::User, "bob").expect("creds");
    let bob = connect(
        &client_with(&bob_creds),
        register.listen,
        Role::Shard,
        "batch",
    )
    .await
    .expect("bob connects");
    let cancel = client_shard::Request::Cancel { ids: vec![long] };
    match bob.request(&cancel).await {
        Ok(client_shard::Response::Cancelled(outcomes)) => {
            assert_eq!(outcomes[0].result, CancelResult::Forbidden);
        }
        other => panic!("cancel: {other:?}"),
    }

    // The coordinator lists jobs through the registration connection.
    let query = JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: true,
        limit: 0,
        states: Vec::new(),
        name: None,
    };
    match link.request(&coord_shard::Request::Jobs(query)).await {
        Ok(coord_shard::Response::Jobs(list)) => {
            let ids: Vec<JobId> = list.jobs.iter().map(|j| j.id).collect();
            assert_eq!(ids, vec![long, id]);
        }
        other => panic!("jobs: {other:?}"),
    }
    // A move takes both nodes: the idle one is released at once, the one the long job
    // holds becomes outgoing (the job keeps running), and the log says so.
    let release = coord_shard::Request::Release(coord_shard::Release {
        move_id: shardsched_proto::msg::MoveId(1),
        nodes: ["n0", "n1"]
            .into_iter()
            .map(|n| NodeGen {
                node: n.into(),
                generation: Generation(2),
            })
            .collect(),
    });
    let (busy, idle) = match link.request(&release).await {
        Ok(coord_shard::Response::Releasing { nodes, stale }) => {
            assert!(stale.is_empty());
            let busy: Vec<_> = nodes
                .iter()
                .filter(|n| matches!(n.free, coord_shard::FreeAt::Expected(_)))
                .collect();
            assert_eq!(busy.len(), 1, "{nodes:?}");
            assert_eq!(busy[0].jobs, vec![long]);
            let idle = nodes
                .iter()
                .find(|n| n.free == coord_shard::FreeAt::Now)
                .expect("one node is idle");
            (busy[0].node.node.clone(), idle.node.node.clone())
        }
        other => panic!("release: {other:?}"),
    };
    assert_eq!(job_state(&alice, long).await, JobState::Running);
    let log = std::fs::read_to_string(
        state.join(shardsched_shard::driver::transitions::TRANSITIONS_FILE),
    )
    .expect("transition log");
    let lines = shardsched_shard::driver::transitions::parse_log(&log).expect("parse");
    let kinds = |node: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.node == node)
            .map(|l| l.kind.clone())
            .collect()
    };
    assert_eq!(kinds(&busy), vec!["up", "down"], "{log}");
    assert_eq!(kinds(&idle), vec!["up", "down", "released"], "{log}");
    // Disabled: submissions are refused.
    let disable = coord_shard::Request::SetQueueState {
        enabled: false,
        started: true,
    };
    assert!(matches!(
        link.request(&disable).await,
        Ok(coord_shard::Response::Ack { .. })
    ));
    match alice.request(&submit_request(3, 1)).await {
        Err(Error::Refused(r)) => assert_eq!(r.code, RefusalCode::Policy),
        other => panic!("submit to a disabled queue: {other:?}"),
    }

    // Status reports arrive.
    let status = match tokio::time::timeout(WAIT, seen.recv()).await {
        Ok(Some(Seen::Status(status))) => status,
        Ok(Some(Seen::Registered(..))) => panic!("registered twice"),
        _ => panic!("no status report"),
    };
    assert_eq!(status.queue.name, "batch");
    assert!(status.nodes.len() <= 2, "{:?}", status.nodes);

    // The coordinator connection breaks: the shard registers again, saying what it holds.
    link.connection().close(0u32.into(), b"coordinator restart");
    let (_link, again) = next_registration(&mut seen).await;
    assert_eq!(again.last_job_id, Some(long));
    assert!(again.held.iter().any(|h| h.allocated), "{:?}", again.held);
    assert_eq!(job_state(&alice, long).await, JobState::Running);

    stop.send(()).expect("shard still running");
    let result = tokio::time::timeout(WAIT, shard)
        .await
        .expect("stops in time");
    assert!(matches!(result, Ok(Ok(()))), "{result:?}");
}

fn client_with(creds: &shardsched_proto::Credentials) -> quinn::Endpoint {
    tls::client_endpoint(creds, localhost()).expect("client")
}

#[tokio::test]
async fn a_certificate_for_another_queue_is_refused_at_start() {
    let dir = TempDir::new("identity");
    let (_ca, state) = setup(&dir, "debug");
    let result = shardsched_shard::run(options(localhost(), &state), std::future::pending()).await;
    match result {
        Err(DriverError::Identity(message)) => {
            assert!(message.contains("shard debug"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let missing = shardsched_shard::run(
        options(localhost(), &dir.0.join("nowhere")),
        std::future::pending(),
    )
    .await;
    assert!(
        matches!(missing, Err(DriverError::Credentials { .. })),
        "{missing:?}"
    );
}

#[tokio::test]
async fn shutdown_while_the_coordinator_is_unreachable_is_prompt() {
    let dir = TempDir::new("unreachable");
    let (_ca, state) = setup(&dir, "batch");
    // Nobody listens there.
    let socket = std::net::UdpSocket::bind(localhost()).expect("socket");
    let nowhere = socket.local_addr().expect("addr");
    drop(socket);
    let started = std::time::Instant::now();
    let result = shardsched_shard::run(
        options(nowhere, &state),
        tokio::time::sleep(Duration::from_millis(300)),
    )
    .await;
    assert!(result.is_ok(), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
