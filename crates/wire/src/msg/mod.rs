//! The message catalogue, one module per pair of peers.
//!
//! | module | who opens the stream | who answers | carried on |
//! |---|---|---|---|
//! | [`hello`] | the connecting side, first stream only | the accepting side | every connection |
//! | [`client_coord`] | `shardsched` CLI (user, admin) | coordinator | client's connection to the coordinator |
//! | [`client_shard`] | CLI (user, admin) | shard | client's connection to the shard |
//! | [`shard_coord`] | shard | coordinator | the shard's connection to the coordinator |
//! | [`coord_shard`] | coordinator | shard | the same connection, streams opened by the coordinator |
//! | [`node_coord`] | node agent | coordinator | the agent's connection to the coordinator |
//! | [`coord_node`] | coordinator | node agent | the same connection, streams opened by the coordinator |
//! | [`shard_node`] | shard | node agent | the shard's connection to the agent |
//! | [`node_node`] | node agent | node agent (a job's leader, or back) | a connection between two agents of one job |
//!
//! [`deps`] holds the facts a dependency reads, which `shard_coord` and `coord_shard`
//! carry. [`agent`] holds the types these four share (launches, reports, how a job ended).
//!
//! Each request enum implements [`Rpc`](crate::rpc::Rpc), which names its response type and
//! the authority ([`Op`](crate::identity::Op)) it needs. A response travels as
//! [`Reply<T>`](crate::rpc::Reply) = `Result<T, Refusal>`.
//!
//! Messages never say who sent them: the sender is the connection's certificate
//! ([`Peer`](crate::identity::Peer)). Fields that *filter* by a name (which user's jobs to
//! list) are filters, not claims.

pub mod agent;
pub mod bounds;
pub mod client_coord;
pub mod client_shard;
pub mod common;
pub mod coord_node;
pub mod coord_shard;
pub mod deps;
pub mod fairshare;
pub mod hello;
pub mod history;
pub mod jobs_query;
pub mod node_coord;
pub mod node_node;
pub mod policy;
pub mod quota;
pub mod shard_coord;
pub mod shard_node;

pub use common::*;
pub use policy::{MatchPolicy, QueuePolicy};
