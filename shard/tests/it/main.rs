//! The integration tests of this crate, as one test binary (`cargo test` links and runs
//! each test binary separately; one binary links the crate once). A module per subject:
//! `cargo test -p shardsched-shard --test it MODULE::`.

mod common;

mod driver;
mod golden;
mod golden_v3;
mod policies;
mod throughput;
