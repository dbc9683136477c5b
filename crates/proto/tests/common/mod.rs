//! Test scaffolding: temporary directories, and a toy coordinator and shard that serve real
//! QUIC on 127.0.0.1.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use shardsched_proto::msg::{
    Refusal, RefusalCode, RouteTable, client_coord, client_shard, coord_shard, shard_coord,
};
use shardsched_proto::{Ca, Credentials, Error, FluidGenerator, Role, Session, accept, serve, tls};
use tokio::sync::{Mutex, mpsc};

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "shardsched-proto-{label}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA in a temporary directory.
pub fn new_ca(label: &str) -> (TempDir, Ca) {
    let dir = TempDir::new(label);
    let ca = Ca::create(dir.path()).expect("create CA");
    (dir, ca)
}

pub fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A running toy server: its address, the errors its accept loop saw, and (for a coordinator)
/// the sessions of shards that connected.
pub struct Server {
    pub addr: SocketAddr,
    pub errors: mpsc::UnboundedReceiver<Error>,
    pub shards: mpsc::UnboundedReceiver<Session>,
    endpoint: quinn::Endpoint,
}

impl Server {
    /// The next error the accept loop reported.
    pub async fn next_error(&mut self) -> Error {
        tokio::time::timeout(std::time::Duration::from_secs(5), self.errors.recv())
            .await
            .expect("server error in time")
            .expect("server still running")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"test over");
    }
}

/// A toy coordinator: users and admins get `client_coord`, shards get `shard_coord` (and
/// their session is handed to the test so it can command them).
pub fn coordinator(creds: &Credentials) -> Server {
    spawn(creds, |session, shards| {
        let role = session.peer().role;
        if role == Role::Shard {
            let _ = shards.send(session.clone());
            tokio::spawn(serve(session, shard_handler));
        } else {
            tokio::spawn(serve(session, client_coord_handler));
        }
    })
}

/// A toy shard serving `client_shard`, issuing real FLUIDs.
pub fn shard(creds: &Credentials, generator_id: u16) -> Server {
    let generator = std::sync::Arc::new(Mutex::new(
        FluidGenerator::new(generator_id).expect("generator"),
    ));
    spawn(creds, move |session, _| {
        let generator = generator.clone();
        tokio::spawn(serve(session, move |peer, req: client_shard::Request| {
            let generator = generator.clone();
            async move {
                match req {
                    client_shard::Request::Submit(submit) => {
                        if submit.jobspec_json == "panic" {
                            panic!("handler failure on purpose");
                        }
                        let now_ms = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_millis() as u64)
                            .unwrap_or(0);
                        let id = generator
                            .lock()
                            .await
                            .next(now_ms)
                            .map_err(|e| Refusal::new(RefusalCode::Internal, e.to_string()))?;
                        let _ = peer;
                        Ok(client_shard::Response::Submitted {
                            id,
                            duplicate: false,
                        })
                    }
                    _ => Err(Refusal::new(RefusalCode::Unavailable, "toy shard")),
                }
            }
        }));
    })
}

fn spawn(
    creds: &Credentials,
    on_session: impl Fn(Session, &mpsc::UnboundedSender<Session>) + Send + Sync + 'static,
) -> Server {
    let endpoint = tls::server_endpoint(creds, localhost()).expect("server endpoint");
    let addr = endpoint.local_addr().expect("local addr");
    let (error_tx, errors) = mpsc::unbounded_channel();
    let (shard_tx, shards) = mpsc::unbounded_channel();
    let listener = endpoint.clone();
    tokio::spawn(async move {
        while let Some(incoming) = listener.accept().await {
            let error_tx = error_tx.clone();
            let shard_tx = shard_tx.clone();
            let on_session = &on_session;
            match accept(incoming).await {
                Ok(session) => on_session(session, &shard_tx),
                Err(e) => {
                    let _ = error_tx.send(e);
                }
            }
        }
    });
    Server {
        addr,
        errors,
        shards,
        endpoint,
    }
}

async fn client_coord_handler(
    _peer: shardsched_proto::Peer,
    req: client_coord::Request,
) -> Result<client_coord::Response, Refusal> {
    match req {
        client_coord::Request::Routes => Ok(client_coord::Response::Routes(RouteTable::default())),
        client_coord::Request::QueueControl { .. } => {
            Ok(client_coord::Response::Done { move_id: None })
        }
        _ => Err(Refusal::new(RefusalCode::Unavailable, "toy coordinator")),
    }
}

async fn shard_handler(
    _peer: shardsched_proto::Peer,
    req: shard_coord::Request,
) -> Result<shard_coord::Response, Refusal> {
    match req {
        shard_coord::Request::Register(_) => {
            Err(Refusal::new(RefusalCode::Unavailable, "toy coordinator"))
        }
        _ => Ok(shard_coord::Response::Ack),
    }
}

/// A shard-side handler for coordinator commands that acknowledges everything.
pub async fn ack_commands(
    _peer: shardsched_proto::Peer,
    req: coord_shard::Request,
) -> Result<coord_shard::Response, Refusal> {
    match req {
        coord_shard::Request::Jobs(_) => Ok(coord_shard::Response::Jobs(Default::default())),
        _ => Ok(coord_shard::Response::Ack { stale: Vec::new() }),
    }
}
