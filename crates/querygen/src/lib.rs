//! Random resource-query cases and a differential runner: the instrument that measures how
//! closely `shardsched query` follows Fluxion's `resource-query`.
//!
//! A case ([`case::generate`], deterministic from a seed) is a folder holding a random graph
//! (a GRUG recipe, or the same graph as JGF: [`graph`]), one to four random jobspecs
//! ([`jobspec`]), a stream of 3–30 commands ending in `quit` ([`commands`]) and the flags
//! of the run: one of Fluxion's eight id policies (or `variation`), one of its eight
//! writers, sometimes `-T flexible` and `--prune-filters`.
//!
//! The loop ([`differential::run_all`]): for each case, run ours on it, get Fluxion's
//! output (by running its binary, or from a stored corpus), compare the `-t` files byte for
//! byte, and tally the agreement overall and per policy, writer and feature
//! ([`report`]). With no oracle, the loop still runs ours on every case and checks that it
//! neither fails nor prints malformed output ([`validate`]).
//!
//! ```
//! let a = shardsched_querygen::case::generate(7);
//! assert_eq!(a, shardsched_querygen::case::generate(7));
//! assert!(a.files.iter().any(|(name, text)| name == "cmds.in" && text.ends_with("quit\n")));
//! ```
//!
//! `shardsched differential` drives it from the command line; docs/MATCHING.md
//! ("How conformance is measured") says how to run it against Fluxion.

pub mod case;
pub mod commands;
pub mod differential;
pub mod graph;
pub mod graph_text;
pub mod jobspec;
pub mod report;
pub mod run;
pub mod validate;

use std::path::{Path, PathBuf};

/// Errors of case generation and of the differential runner.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("case.json: {0}")]
    Json(serde_json::Error),
    #[error("{0}")]
    Usage(String),
}

impl GenError {
    fn io(path: &Path, source: std::io::Error) -> GenError {
        GenError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
