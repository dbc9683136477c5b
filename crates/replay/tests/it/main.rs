//! The integration tests of this crate, as one test binary (`cargo test` links and runs
//! each test binary separately; one binary links the crate once). A module per subject:
//! `cargo test -p shardsched-replay --test it MODULE::`.

mod properties;
mod replay;
