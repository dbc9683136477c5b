//! Untrusted text in terminals and logs: the escaping lives in [`shardsched_wire::text`]
//! (re-exported here), so that pure crates, terminals and every process's log
//! (`shardsched_telemetry::logs::log_fields`) use the same function.

pub use shardsched_wire::text::*;
