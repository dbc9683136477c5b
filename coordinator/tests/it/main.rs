//! The integration tests of this crate, as one test binary (`cargo test` links and runs
//! each test binary separately; one binary links the crate once). A module per subject:
//! `cargo test -p shardsched-coordinator --test it MODULE::`.

mod common;

mod admin_requests;
mod golden;
mod loopback;
mod queue_removal;
