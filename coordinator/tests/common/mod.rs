//! What the coordinator's loopback tests share: a state directory, and clients with
//! certificates from the coordinator's CA.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use shardsched_proto::{Ca, Role, Session, connect, tls};

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
    connect(&endpoint, addr, Role::Coordinator, "coordinator")
        .await
        .expect("connect")
}
