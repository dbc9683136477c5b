//! What the coordinator's loopback tests share: a state directory, a coordinator running on
//! loopback, clients with certificates from its CA, and test shards that record the
//! coordinator's commands.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use shardsched_coordinator::{Config, Coordinator, DriverError, Options};
use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::msg::coord_shard;
use shardsched_proto::{Ca, Reply, Role, Session, connect, serve, tls};
use tokio::sync::{mpsc, oneshot};

/// A fresh state directory, removed when dropped.
pub fn state_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("shardsched-coordinator-")
        .tempdir()
        .expect("temp dir")
}

/// Any port on loopback.
pub fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Connects to the coordinator as `role`/`name`, with a certificate from its CA in `dir`.
pub async fn connect_as(dir: &Path, addr: SocketAddr, role: Role, name: &str) -> Session {
    let ca = Ca::load(dir).expect("the coordinator made a CA");
    let creds = ca.credentials(role, name).expect("credentials");
    let endpoint = tls::client_endpoint(&creds, localhost()).expect("endpoint");
    connect(&endpoint, addr, Role::Coordinator, COORDINATOR_NAME)
        .await
        .expect("connect")
}

/// A coordinator serving on loopback until [`Running::stop`].
pub struct Running {
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), DriverError>>,
}

/// Starts a coordinator with `config` and its state in `dir`.
pub fn start(dir: &Path, config: Config) -> Running {
    let options = Options {
        listen: localhost(),
        state_dir: dir.to_owned(),
    };
    let coordinator = Coordinator::bind(config, &options).expect("bind");
    let addr = coordinator.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(coordinator.run(async move {
        let _ = stopped.await;
    }));
    Running { addr, stop, task }
}

impl Running {
    /// Stops it and checks that it ran without error.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("joined").expect("ran");
    }
}

/// A shard's answer to `Release`: every node free at `free`, held by `jobs` until then.
pub fn releasing(
    release: coord_shard::Release,
    free: coord_shard::FreeAt,
    jobs: &[shardsched_proto::Fluid],
) -> coord_shard::Response {
    coord_shard::Response::Releasing {
        nodes: release
            .nodes
            .into_iter()
            .map(|node| coord_shard::ReleaseState {
                node,
                free,
                jobs: jobs.to_vec(),
            })
            .collect(),
        stale: Vec::new(),
    }
}

/// A test shard on `session`: every command of the coordinator but history pulls is reported on the returned
/// channel, then answered by `answer`. A command is on the channel before its answer leaves.
pub fn serve_recorded(
    session: &Session,
    answer: impl Fn(coord_shard::Request) -> Reply<coord_shard::Response> + Send + Sync + 'static,
) -> mpsc::UnboundedReceiver<coord_shard::Request> {
    let (tx, rx) = mpsc::unbounded_channel();
    let answer = Arc::new(answer);
    tokio::spawn(serve(
        session.clone(),
        move |_peer, req: coord_shard::Request| {
            let tx = tx.clone();
            let answer = Arc::clone(&answer);
            async move {
                // The coordinator's history pulls (after status reports) are answered
                // "no ended jobs" and not recorded: tests read the commands they caused.
                if let coord_shard::Request::History(_) = req {
                    return Ok(coord_shard::Response::History(Vec::new()));
                }
                let _ = tx.send(req.clone());
                answer(req)
            }
        },
    ));
    rx
}
