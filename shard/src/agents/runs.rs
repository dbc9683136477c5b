//! The agents executor's bookkeeping lives in the shard core
//! ([`shardsched_shard_core::agents`]), so that the simulator drives the same code; the
//! agents task ([`super::task`]) runs it with [`super::launch::node_launches`].

pub use shardsched_shard_core::agents::{RENEW_MAX_MS, Runs, Send};

#[cfg(test)]
mod tests;
