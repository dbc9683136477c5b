//! A client across a coordinator restart, in one process: a real coordinator (the library,
//! on loopback), a toy shard, and the [`Client`] the commands use.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use shardsched_coordinator::{Config, Coordinator, Options};
use shardsched_proto::ca::{CA_CERT_FILE, CA_KEY_FILE};
use shardsched_proto::msg::client_shard::{self, IdempotencyKey};
use shardsched_proto::msg::shard_coord::{self, Register};
use shardsched_proto::msg::{Refusal, RefusalCode, coord_shard};
use shardsched_proto::{Ca, Fluid, Role, accept, connect, serve, tls};
use tokio::sync::oneshot;

use super::Client;
use super::route_cache::RouteCache;
use super::submit::{Known, plain, submit};
use shardsched_proto::StateDir;
use shardsched_proto::state_dir::{CERT_FILE, KEY_FILE};

/// How long a test waits for something that must happen.
const WAIT: Duration = Duration::from_secs(60);

/// A directory of its own, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "shardsched-client-{label}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running coordinator (the embedded default configuration) until `stop` is sent.
struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts a coordinator on `listen` with its state in `dir` (whose CA it uses), trying again
/// while the address is still held by a coordinator that just stopped.
async fn coordinator(dir: &Path, listen: SocketAddr) -> Running {
    let deadline = Instant::now() + WAIT;
    let coordinator = loop {
        let options = Options {
            listen,
            state_dir: dir.to_owned(),
        };
        let config = Config::embedded_default().expect("config");
        match Coordinator::bind(config, &options) {
            Ok(coordinator) => break coordinator,
            Err(e) if Instant::now() < deadline => {
                eprintln!("binding {listen}: {e}; again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("cannot bind {listen}: {e}"),
        }
    };
    let addr = coordinator.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = coordinator
            .run(async move {
                let _ = stopped.await;
            })
            .await;
    });
    Running { addr, stop, task }
}

/// A toy shard for queue `batch`: registers with the coordinator at `coordinator` and
/// accepts every submit as job `id`.
async fn toy_shard(ca: &Ca, coordinator: SocketAddr, id: Fluid) -> quinn::Endpoint {
    let creds = ca.credentials(Role::Shard, "batch").expect("shard creds");
    let endpoint =
        tls::server_endpoint(&creds, "127.0.0.1:0".parse().expect("addr")).expect("shard endpoint");
    let listen = endpoint.local_addr().expect("shard address");
    let clients = endpoint.clone();
    tokio::spawn(async move {
        while let Some(incoming) = clients.accept().await {
            let Ok(session) = accept(incoming).await else {
                continue;
            };
            tokio::spawn(serve(
                session,
                move |_peer, req: client_shard::Request| async move {
                    match req {
                        client_shard::Request::Submit(s) if s.jobspec_json.contains("deny") => Err(
                            Refusal::new(RefusalCode::Denied, "queue batch cannot run it"),
                        ),
                        client_shard::Request::Submit(_) => Ok(client_shard::Response::Submitted {
                            id,
                            duplicate: false,
                        }),
                        _ => Err(Refusal::new(RefusalCode::Unavailable, "toy shard")),
                    }
                },
            ));
        }
    });
    let session = connect(&endpoint, coordinator, Role::Coordinator, "coordinator")
        .await
        .expect("shard connects");
    tokio::spawn(serve(
        session.clone(),
        |_peer, _req: coord_shard::Request| async {
            Ok(coord_shard::Response::Ack { stale: Vec::new() })
        },
    ));
    let register = shard_coord::Request::Register(Register {
        queue: "batch".into(),
        listen,
        held: Vec::new(),
        last_job_id: None,
    });
    let answer = session.request(&register).await.expect("registered");
    assert!(matches!(answer, shard_coord::Response::Registered(_)));
    endpoint
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_routes_to_known_shards_while_the_coordinator_is_away_and_reconnects() {
    let first = Scratch::new("first");
    let second = Scratch::new("second");
    let ca = Ca::create(first.path()).expect("CA");
    for file in [CA_CERT_FILE, CA_KEY_FILE] {
        std::fs::copy(first.path().join(file), second.path().join(file)).expect("copy CA");
    }
    let a = coordinator(first.path(), "127.0.0.1:0".parse().expect("addr")).await;
    let _shard = toy_shard(&ca, a.addr, Fluid(4242)).await;
    let admin = ca.credentials(Role::Admin, "tester").expect("admin creds");
    let client = Client::connect_with(a.addr, &admin).await.expect("client");
    let routes = client.routes().await.expect("routes");
    assert!(routes.queue("batch").is_some(), "{routes:?}");

    // The coordinator goes away (its connections close with it).
    let _ = a.stop.send(());
    a.task.await.expect("coordinator stopped");

    // A submit still reaches the shard the last routing table named, with its key.
    let submit = shardsched_proto::msg::client_shard::Submit {
        idempotency_key: IdempotencyKey([7; 16]),
        ..crate::submit::plain("{}".to_owned())
    };
    let (id, duplicate) = crate::submit::submit(&client, None, "batch", submit)
        .await
        .expect("submitted while the coordinator is away");
    assert_eq!((id, duplicate), (Fluid(4242), false));

    // A coordinator at the same address again: the client's next request dials it anew.
    let b = coordinator(second.path(), a.addr).await;
    let routes = client
        .routes()
        .await
        .expect("routes from the new coordinator");
    assert_eq!(routes.default_queue.as_deref(), Some("batch"));
    client.close().await;
    let _ = b.stop.send(());
    let _ = b.task.await;
}

/// A state directory naming the coordinator at `addr`, with an admin's credentials from `ca`.
fn state_dir(root: &Path, ca: &Ca, addr: SocketAddr) -> StateDir {
    let dir = StateDir::at(root.to_owned());
    std::fs::create_dir_all(dir.coordinator_dir()).expect("coordinator dir");
    std::fs::write(dir.address_file(), format!("{addr}\n")).expect("address file");
    let client = dir.client_dir();
    std::fs::create_dir_all(&client).expect("client dir");
    let issued = ca.issue(Role::Admin, "tester").expect("admin cert");
    std::fs::write(client.join(CERT_FILE), &issued.cert_pem).expect("cert");
    shardsched_proto::ca::write_private(&client.join(KEY_FILE), &issued.key_pem).expect("key");
    std::fs::write(client.join(CA_CERT_FILE), ca.cert_pem()).expect("CA cert");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_on_a_cached_table_needs_no_coordinator_and_asks_it_when_the_table_is_wrong() {
    let scratch = Scratch::new("cache");
    let coordinator_dir = scratch.path().join("coordinator");
    std::fs::create_dir_all(&coordinator_dir).expect("coordinator state dir");
    let ca = Ca::create(&coordinator_dir).expect("CA");
    let a = coordinator(&coordinator_dir, "127.0.0.1:0".parse().expect("addr")).await;
    let _shard = toy_shard(&ca, a.addr, Fluid(4242)).await;
    let dir = state_dir(scratch.path(), &ca, a.addr);
    let cache = RouteCache::new(&dir.client_dir(), a.addr);

    // A command that asks the coordinator for the table leaves it in the cache.
    let client = Client::open(&dir).expect("client");
    let fresh = client.routes().await.expect("routes");
    client.close().await;
    assert_eq!(cache.table_of_any_age(), Some(fresh.clone()));

    // A cached table naming a wrong address for the queue (here the coordinator's, whose
    // certificate is not queue batch's shard's): the submit asks the coordinator and
    // reaches the shard.
    let mut wrong = fresh.clone();
    for route in &mut wrong.routes {
        route.address = a.addr;
    }
    let client = Client::open(&dir).expect("client");
    let (id, _) = submit(
        &client,
        Some(Known::Cached(wrong)),
        "batch",
        plain("{}".to_owned()),
    )
    .await
    .expect("submitted after asking the coordinator");
    assert_eq!(id, Fluid(4242));
    assert_eq!(
        cache.table_of_any_age(),
        Some(fresh.clone()),
        "the cache is mended"
    );
    client.close().await;

    // With the coordinator gone, a client that never dialled it submits on the cached
    // table alone.
    let _ = a.stop.send(());
    a.task.await.expect("coordinator stopped");
    // (A stopped coordinator removes its address file; a crashed one leaves it.)
    std::fs::write(dir.address_file(), format!("{}\n", a.addr)).expect("address file");
    let client = Client::open(&dir).expect("client");
    let (id, _) = submit(
        &client,
        Some(Known::Cached(fresh.clone())),
        "batch",
        plain("{}".to_owned()),
    )
    .await
    .expect("submitted without the coordinator");
    assert_eq!(id, Fluid(4242));
    // The queue's own refusal is the answer, whatever table led to its shard: the
    // coordinator's would lead there again (and here it is gone, so asking it would wait).
    let denied = submit(
        &client,
        Some(Known::Cached(fresh)),
        "batch",
        plain(r#"{"deny": true}"#.to_owned()),
    )
    .await
    .expect_err("denied");
    assert_eq!(denied.to_string(), "queue batch cannot run it");
    assert!(client.me().is_none(), "the coordinator was never dialled");
    client.close().await;
}
