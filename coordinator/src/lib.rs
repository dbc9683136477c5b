//! shardsched's coordinator process: the QUIC driver and the journal around the pure
//! [`shardsched_coordinator_core`].

pub mod driver;
pub mod history;
pub mod journal;

pub use shardsched_coordinator_core::{
    QUEUES_MAX, config, core, moves, ownership, queue_table, records,
};

pub use config::{Config, ConfigError, DEFAULT_CONFIG_TOML};
pub use driver::{Coordinator, DriverError, Options};
