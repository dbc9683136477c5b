//! The integration tests of this crate, as one test binary (`cargo test` links and runs
//! each test binary separately; one binary links the crate once). A module per subject:
//! `cargo test -p shardsched-journal --test it MODULE::`.

mod corruption;
mod retention;
