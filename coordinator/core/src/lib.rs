//! shardsched's coordinator core: the pure half of the coordinator.

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
