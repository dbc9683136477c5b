//! shardsched's coordinator: the queue table, which queue owns which node, which shard serves
//! which queue, and the routing table clients use to reach shards directly.
//!
//! # What it is for
//!
//! Every queue is its own scheduling shard (docs/ARCHITECTURE.md). The coordinator schedules
//! nothing itself: it holds the cluster-wide *intent* — the queues' configuration and flags,
//! each node's owning queue and generation, each queue's FLUID generator id — and it keeps
//! what the shards *observe* (their last status reports) apart from it. Clients ask it where
//! shards are and for cluster-wide views; shards ask it what they own.
//!
//! # The loop to understand
//!
//! ```text
//!  start:  open + verify <state-dir>/journal.redb ──► Durable ──► Core::new(config, Durable)
//!          ──► commit the start's changes ──► bind QUIC, write <state-dir>/address
//!  then, for every connection (role from its certificate):
//!    shard  ──Register──► core.register ──► Assignment (generator id, cluster, queue, owned nodes)
//!           ──Status────► core.status (observation)
//!           ◄─SetQueueState / Jobs── the driver, on the shard's own connection
//!           connection ends ──► core.disconnected (queue offline, routes republished)
//!    client ──Routes──► the published RouteTable (arc-swap, no lock)
//!           ──Queues / Resources──► core views
//!           ──Jobs──► core.jobs_plan ─► ask each shard ─► merge_jobs
//!           ──QueueControl / QueueAdmin (admin)──► core.queue_admin ─► journal ─►
//!                                                   SetQueueState to the shard
//!           ──Move / CancelMove / SetNodeDrain / SetNodeState (admin)──► core ─► journal ─►
//!                                                   commands to the shards
//! ```
//!
//! [`core::Core`] is pure — no tokio, no sockets, no clock — and every decision is made
//! there; [`driver`] only moves bytes between QUIC and the core, and publishes the routing
//! table with arc-swap after each change. The epoch of the table grows on every change a
//! client could see.
//!
//! # Example
//!
//! ```
//! use shardsched_coordinator::config::Config;
//! use shardsched_coordinator::core::Core;
//! use shardsched_coordinator::ownership::Durable;
//!
//! let config = Config::embedded_default().unwrap();
//! let (core, durable) = Core::new(config, &Durable::default(), 1).unwrap();
//! assert_eq!(core.owned_by("batch").len(), 112);
//! assert!(core.owned_by("standby").is_empty()); // stopped, and batch owns its nodes
//! assert_eq!(durable.generators.len(), 3);
//! assert!(core.routes().routes.is_empty()); // no shard has registered yet
//! ```
//!
//! Node moves (`MoveNodes`, `Move`, `queue start --take`, `stop --release-to`) run through
//! the pure [`moves`] machine. Everything acknowledged — generator ids, queue states an admin
//! set, every node's owner, generation and flags, the unfinished moves' records — is in the
//! [`journal`] (redb, one record per key, group commit) before any answer or command leaves.
//! Not here yet: configuration reload.

pub mod config;
pub mod core;
pub mod driver;
pub mod journal;
pub mod moves;
pub mod ownership;

/// Most queues a configuration may define, and so most shards that can be registered at once
/// (one shard per queue). Well inside the FLUID generator ids (14 bits).
pub const QUEUES_MAX: usize = 1024;

pub use config::{Config, ConfigError, DEFAULT_CONFIG_TOML};
pub use driver::{Coordinator, DriverError, Options};
