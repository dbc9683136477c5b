//! shardsched's coordinator core: the pure half of the coordinator. No tokio, no sockets,
//! no files, no clock (`.ci/sans-io` fails CI if its dependency tree grows one): the
//! driver (`shardsched-coordinator`) feeds it events and the time, and carries out what it
//! answers.
//!
//! # Who owns what
//!
//! Every fact has one home; everything else is computed from it when asked.
//!
//! | fact | its one home |
//! |---|---|
//! | the cluster and the queues' definitions, policies, limits | [`config::Config`], in [`core::Core`] (the move machine keeps the definitions' node names to check moves against; [`core::Core::invariants`] checks they are the configuration's) |
//! | each node's owner, generation, `kept`, down and drained flags, and the move it is in | the node table ([`moves::NodeTable`]) inside the [`moves::MoveMachine`], the only code that changes owners and generations |
//! | each move's nodes and their steps | the [`moves::MoveMachine`] |
//! | each queue's run-time flags (enabled, started, an admin's reason) and generator id | [`core::Core`] |
//! | which shard serves each queue, and its last report (observation, never durable) | [`core::Core`]'s shard registry |
//! | what the journal must hold | nobody: [`core::Core::durable_state`] computes it; each record marks itself changed for the next write ([`core::Core::journal_take`]) |
//!
//! The routing table, `queue list`, `resource list`, a shard's registration answer and the
//! journal's records are views over these, built when asked.

pub mod config;
pub mod core;
pub mod moves;
pub mod ownership;
pub mod queue_table;
pub mod records;

/// Most queues a configuration may define, and so most shards that can be registered at once
/// (one shard per queue). Well inside the FLUID generator ids (14 bits).
pub const QUEUES_MAX: usize = 1024;

pub use config::{Config, ConfigError, DEFAULT_CONFIG_TOML};
