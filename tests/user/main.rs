//! What HPC users reach for first (issue 17), through the `shardsched` commands on a real
//! `up`: holds and urgency, arrays, submit options, batch scripts, listings and job history.
//! One test binary, one file per feature.

#![allow(clippy::unwrap_used)]

#[path = "../harness/mod.rs"]
mod harness;

mod arrays;
mod batch;
mod history;
mod holds;
mod listings;
mod options;
