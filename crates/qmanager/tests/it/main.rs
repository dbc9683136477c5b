//! The integration tests of this crate, as one test binary (`cargo test` links and runs
//! each test binary separately; one binary links the crate once). A module per subject:
//! `cargo test -p shardsched-qmanager --test it MODULE::`.

mod common;

mod depth;
mod differential;
mod policies;
mod properties;
mod whole;
