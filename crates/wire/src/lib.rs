//! shardsched's wire: the messages clients, shards and the coordinator exchange, their
//! encoding, job ids and every bound on them — and nothing that does I/O.
//!
//! This crate is what a pure core may depend on: serde, bincode and thiserror only, no tokio,
//! no QUIC, no TLS, no clock. The transport that carries these messages (QUIC streams,
//! mutual TLS, frames, the certificate authority) is `shardsched-proto`.
//!
//! * **What** is asked is a request enum from [`msg`], one module per pair of peers. Each
//!   implements [`Rpc`], which names its response type and the [`Op`] it needs.
//! * **Who** may ask is a [`Role`], read by the transport from the peer's certificate
//!   ([`identity`]); no message names its sender.
//! * **How** it is encoded is [`codec`] (bincode 2, the only module that touches it); every
//!   bound is a named constant in [`limits`].
//! * Job ids are Flux FLUIDs ([`fluid`]): unique across shards without a round trip.
//! * Untrusted text reaches terminals and logs through [`text::escape_control`].
//!
//! ```
//! use shardsched_wire::codec;
//! use shardsched_wire::msg::client_coord::Request;
//! let bytes = codec::encode(&Request::Routes).unwrap();
//! assert_eq!(codec::decode::<Request>(&bytes).unwrap(), Request::Routes);
//! ```

pub mod array;
pub mod codec;
pub mod fluid;
pub mod identity;
pub mod limits;
pub mod msg;
pub mod rpc;
pub mod text;

pub use fluid::{Fluid, FluidGenerator};
pub use identity::{COORDINATOR_NAME, Op, Peer, Role};
pub use rpc::{Reply, Rpc};

/// The ALPN protocol id: wire generation 1. A peer that does not offer it fails the TLS
/// handshake.
pub const ALPN: &[u8] = ALPN_STR.as_bytes();
/// [`ALPN`] as text.
pub const ALPN_STR: &str = "shardsched/1";
/// The protocol version this build speaks, sent in the hello. 2: `resource list` is paged
/// (`Resources { start }` / `{ nodes, next }`), `JobInfo.jobspec_json` is optional (a
/// job's jobspec is private to its owner and admins), jobs carry the nodes they ask for,
/// policy refusals have their own code and shards answer `DisableIfIdle`. 3: queue and
/// match policies are typed ([`msg::QueuePolicy`], [`msg::MatchPolicy`]) in `QueueConfig`,
/// `QueueStatus` and `QueueSpec`. 4: `QueueStatus` counts its pending jobs by reason
/// ([`msg::PendingReasons`]). 5: not used (a branch's number that landed as 7). 6: the role
/// `node` (node agents) and its messages (`node_coord`, `coord_node`, `shard_node`,
/// `node_node`), signed submits, `job output`, an agent's health in its report. 7: a match
/// policy may be `variation` or knobs spelled out ([`msg::MatchPolicy::Variation`],
/// [`msg::MatchPolicy::Knobs`]). 8: jobs have an urgency (0..=31, Flux's) instead of a
/// priority, shards answer `Urgency` (hold, release, set), a submit may be a job array
/// (`Submit.array`, `JobSummary.array`, `QueueConfig.array_elements_max`) and carries
/// Flux's submit options in its jobspec, a job may have a begin time
/// (`JobSummary.begin_ms`); job lists filter by state and name (`JobsQuery.states`,
/// `.name`), nodes report their free cores and GPUs (`NodeStatus.usage`), and the
/// coordinator keeps a job history (`coord_shard::History`, `client_coord::History` and
/// `Usage`). 12: job dependencies across queues: a shard's status lists the jobs its
/// pending jobs wait on (`ShardStatus.waiting_on`), the coordinator asks their shards
/// (`coord_shard::JobFacts`) and tells the waiting shard (`coord_shard::Facts`,
/// [`msg::deps`]); `PendingReasons.dependency`. 13: per-user and per-queue limits
/// ([`msg::quota`]): `Assignment.limits`, `coord_shard::SetLimits`, allowances
/// (`ShardStatus.allowances`, `coord_shard::Allowances`), `client_coord::SetLimit` and
/// `Limits`. 14: a node agent may hold a shard's renewal until its report changes
/// (`shard_node::Request::Renew.since`, `.hold_ms`), so that a job's end reaches its shard
/// at once. 15: fair-share ([`msg::fairshare`]): usage batches on the status report
/// (`ShardStatus.usage`, `.factors_version`), `coord_shard::FairShare`,
/// `Assignment.fairshare`, and a pending job's priority (`JobSummary.priority`). 16: a
/// shard asks for allowance ahead of need (`AllowanceReport.ahead`). 17: a status report
/// lists only the node rows that changed since the previous one on its connection
/// (`ShardStatus.nodes_complete`, `.nodes_gone`), and a client may ask for one move
/// (`client_coord::MoveOf`). 18: `coord_shard::Reconfigure` carries the nodes a change
/// granted (`Reconfigure.granted`, `.flags`), for a shard that applies a new definition in
/// place (its nodes' agents hear of it: `OwnerChange::Granted`), and status reports are
/// numbered on their connection (`ShardStatus.seq`), so that a late one is dropped.
pub const PROTOCOL_VERSION: u32 = 18;
/// The oldest protocol version this build still accepts in a hello (a version 13 peer could
/// not decode version 14's renewals, a version 14 one neither version 15's fair-share, a
/// version 15 one neither version 16's allowance reports, a version 16 one neither version
/// 17's partial status reports, a version 17 one neither version 18's `Reconfigure`).
pub const PROTOCOL_VERSION_MIN: u32 = 18;
/// This build's software string, sent in the hello for logs.
pub const SOFTWARE: &str = concat!("shardsched ", env!("CARGO_PKG_VERSION"));

/// A certificate's identity could not be read or is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The connection has no verified peer certificate.
    #[error("peer presented no client certificate")]
    NoPeerCertificate,
    /// The certificate has no `shardsched://` SAN URI.
    #[error("certificate carries no shardsched identity (SAN URI shardsched://<role>/<name>)")]
    NoIdentity,
    /// The certificate has more than one `shardsched://` SAN URI.
    #[error("certificate carries more than one shardsched identity")]
    AmbiguousIdentity,
    /// The identity URI is not `shardsched://<role>/<name>`.
    #[error("identity URI {0:?} is not shardsched://<role>/<name>")]
    BadUri(String),
    /// Unknown role word.
    #[error("unknown role {0:?} (expected coordinator, shard, admin, user or node)")]
    BadRole(String),
    /// The name is empty, too long or has characters outside `[A-Za-z0-9_-]`.
    #[error(
        "name {0:?} is invalid (1 to 63 letters, digits, '-' or '_', starting with a letter or digit)"
    )]
    BadName(String),
    /// A user's or an admin's name is not a POSIX user name.
    #[error(
        "user name {0:?} is invalid (1 to 63 letters, digits, '.', '-' or '_', starting with a \
         letter or digit)"
    )]
    BadUserName(String),
    /// The certificate could not be parsed.
    #[error("unreadable certificate: {0}")]
    BadCertificate(String),
    /// The server is not the peer the client asked for.
    #[error("expected to reach {expected} but its certificate says {got}")]
    WrongPeer {
        /// Who the client asked for.
        expected: String,
        /// Who answered.
        got: String,
    },
}
