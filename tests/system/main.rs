//! The whole-system and end-to-end tests of the `shardsched` binary, as one test binary
//! (one link of the tree instead of one per file; `cargo test` runs binaries one after
//! another, so one binary also keeps both cores busy across files). One module per
//! subject; run one with `cargo test --test system MODULE::`, e.g. `moves::`.
//!
//! The tests of agents on hosts of their own (tests/agents*.rs), the user features
//! (tests/user/), `shardsched bench` (tests/bench.rs) and `shardsched sim` (tests/sim.rs)
//! are binaries of their own.

#![allow(clippy::unwrap_used)]

#[path = "../harness/mod.rs"]
mod harness;
#[path = "../harness/transitions.rs"]
mod transitions;

mod query_run;

mod admin;
mod bench_scale;
mod conformance;
mod demo;
mod dependencies;
mod differential;
mod exec;
mod fairshare;
mod fuzz_lock;
mod graph_files;
mod grow;
mod hardening;
mod json_output;
mod limits;
mod logs;
mod metrics;
mod move_faults;
mod moves;
mod new_user;
mod node_agent;
mod node_failure;
mod overlap;
mod query_errors;
mod query_file_errors;
mod query_fluxion_misc;
mod query_reduced;
mod readme_tour;
mod reconfig;
mod replay;
mod restart;
mod status_page;
mod up_lifecycle;
mod whole_system;
mod wire;
