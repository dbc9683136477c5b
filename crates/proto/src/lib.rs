//! shardsched's wire: the messages that clients, shards and the coordinator exchange, their
//! encoding, and the QUIC + mutual-TLS plumbing that carries them.
//!
//! # The wire in one picture
//!
//! ```text
//! UDP ─ QUIC ─ TLS 1.3, both ends present a certificate from the cluster CA
//!              ALPN "shardsched/1"
//!   stream 0      client: Hello{protocol_version}      server: HelloReply
//!   stream 4, 8…  one request per bidirectional stream:
//!                 [u32 BE length][bincode(Request)]  →  [u32 BE length][bincode(Reply)]
//! ```
//!
//! * **Who** is asking never travels in a message: it is the [`Peer`] (role and name) read
//!   from the certificate the peer proved it holds during the handshake ([`identity`]).
//!   The private CA and the certificate layout live in [`ca`]; endpoint setup in [`tls`].
//! * **What** is asked is a request enum from [`msg`], one module per pair of peers. Each
//!   implements [`Rpc`], which names its response type and the [`Op`] it needs.
//! * **How** it is encoded is [`codec`] (bincode 2, the only module that touches it) inside
//!   [`frame`]s whose length is checked against [`limits::FRAME_BYTES_MAX`] before anything
//!   is allocated. Every bound is a named constant in [`limits`].
//! * Job ids are Flux FLUIDs ([`fluid`]): unique across shards without a round trip.
//! * Where a running system keeps its files (the coordinator's address, certificates,
//!   journals, locks) is named in [`state_dir`]; how a process waits between attempts to
//!   reach another, in [`backoff`]; what it counts of its requests and connections for its
//!   metrics, in [`observe`].
//!
//! # The one loop to understand
//!
//! A server accepts a connection, then serves it: for every bidirectional stream the peer
//! opens, one task reads one frame, decodes it, checks the peer's role may do that
//! ([`Role::may`]), runs the handler, writes one frame back and finishes the stream.
//! Anything wrong with the bytes resets *that stream* with a [`StreamCode`]; the connection
//! and its other streams carry on. A client connects (handshake + hello) and then calls
//! [`request`] as often as it likes, concurrently if it wants.
//!
//! ```
//! use shardsched_proto::{accept, connect, serve, Ca, Role, tls};
//! use shardsched_proto::msg::{client_coord, RouteTable};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("shardsched-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let ca = Ca::create(&dir)?;                      // the coordinator does this once
//! let server_creds = ca.credentials(Role::Coordinator, "coordinator")?;
//! let client_creds = ca.credentials(Role::User, "alice")?;
//!
//! let server = tls::server_endpoint(&server_creds, "127.0.0.1:0".parse()?)?;
//! let addr = server.local_addr()?;
//! tokio::spawn(async move {
//!     while let Some(incoming) = server.accept().await {
//!         let Ok(session) = accept(incoming).await else { continue };
//!         // The handler sees the authenticated peer and the decoded request.
//!         tokio::spawn(serve(session, |peer, req: client_coord::Request| async move {
//!             assert_eq!(peer.name, "alice");
//!             match req {
//!                 client_coord::Request::Routes => Ok(client_coord::Response::Routes(RouteTable::default())),
//!                 _ => Err(shardsched_proto::msg::Refusal::new(
//!                     shardsched_proto::msg::RefusalCode::Unavailable, "not in this example")),
//!             }
//!         }));
//!     }
//! });
//!
//! let client = tls::client_endpoint(&client_creds, "127.0.0.1:0".parse()?)?;
//! let session = connect(&client, addr, Role::Coordinator, "coordinator").await?;
//! let answer = session.request(&client_coord::Request::Routes).await?;
//! assert_eq!(answer, client_coord::Response::Routes(RouteTable::default()));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

pub mod backoff;
pub mod budget;
pub mod ca;
pub mod error;
pub mod frame;
pub mod identity;
pub mod observe;
pub mod rpc;
pub mod sign;
pub mod signal;
pub mod state_dir;
pub mod text;
pub mod tls;

pub use ca::{Ca, IssuedCert};
pub use error::{CloseCode, Error, HandshakeFailure, IdentityError, StreamCode, TlsError};
// The wire's pure parts, re-exported under their old paths (`shardsched_proto::msg`, …).
pub use identity::{Op, Peer, Role, peer_of};
pub use rpc::{Reply, Rpc, Session, accept, connect, request, serve};
pub use shardsched_failpoint as failpoint;
pub use shardsched_wire::{Fluid, FluidGenerator, array, codec, fluid, limits, msg};
pub use tls::Credentials;

pub use shardsched_wire::{ALPN, ALPN_STR, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN, SOFTWARE};
pub use signal::shutdown_signal;
pub use state_dir::StateDir;
