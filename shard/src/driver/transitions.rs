//! `<state-dir>/transitions.log`: every node transition of this shard, one line each, for
//! fault tests to check the move protocol from outside (docs/MOVES.md, "Transition log").
//!
//! ```text
//! <CLOCK_MONOTONIC ns> <queue> <node> <up|down|released> <generation> <why>
//! ```
//!
//! The monotonic clock is the host's, so lines of different shards on one host compare.
//! The core task writes a command's transitions right after applying it and before the
//! batch's scheduling pass, so an `up` line is on file before any job can start on the node,
//! and a `down` line after the node stopped taking work; a donor's `released` line is
//! written before the `Released` report can leave (that waits for the batch's commit). Each
//! line is one `write` on an append-mode file (no user-space buffer to lose). A failure to
//! write is logged and does not stop the shard: the log is for tests, not for recovery.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::core::Transition;

/// The log's file name in the state directory.
pub const TRANSITIONS_FILE: &str = "transitions.log";

/// The open log.
pub(crate) struct TransitionLog {
    queue: String,
    path: PathBuf,
    file: Option<File>,
}

impl TransitionLog {
    /// Opens (appends to) the log in `state_dir`; a log that cannot be opened is reported
    /// and skipped.
    pub(crate) fn open(state_dir: &Path, queue: &str) -> TransitionLog {
        let path = state_dir.join(TRANSITIONS_FILE);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| tracing::error!(path = %path.display(), error = %e, "cannot open the transition log"))
            .ok();
        TransitionLog {
            queue: queue.to_owned(),
            path,
            file,
        }
    }

    /// Appends `transitions`, in order, stamped now.
    pub(crate) fn write(&mut self, transitions: &[Transition]) {
        let Some(file) = &mut self.file else {
            return;
        };
        for t in transitions {
            let line = format!(
                "{} {} {} {} {} {}\n",
                monotonic_ns(),
                self.queue,
                t.node,
                t.kind.as_str(),
                t.generation.0,
                t.why
            );
            if let Err(e) = file.write_all(line.as_bytes()) {
                tracing::error!(path = %self.path.display(), error = %e, "cannot write the transition log");
                return;
            }
        }
    }
}

/// CLOCK_MONOTONIC, nanoseconds: comparable between processes of one host.
pub fn monotonic_ns() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u128::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u128::try_from(t.tv_nsec).unwrap_or(0)
}

/// One parsed line of a transition log (for tests and checkers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// CLOCK_MONOTONIC ns.
    pub at_ns: u128,
    /// The shard's queue.
    pub queue: String,
    /// The node.
    pub node: String,
    /// `up`, `down` or `released`.
    pub kind: String,
    /// The node's generation.
    pub generation: u64,
    /// Why.
    pub why: String,
}

/// Parses a transition log; a malformed line is an error naming its number.
pub fn parse_log(text: &str) -> Result<Vec<LogLine>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("{TRANSITIONS_FILE} line {}: malformed: {line:?}", i + 1);
            if f.len() != 6 {
                return Err(bad());
            }
            Ok(LogLine {
                at_ns: f[0].parse().map_err(|_| bad())?,
                queue: f[1].to_owned(),
                node: f[2].to_owned(),
                kind: f[3].to_owned(),
                generation: f[4].parse().map_err(|_| bad())?,
                why: f[5].to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use shardsched_proto::msg::Generation;

    use super::*;
    use crate::core::TransitionKind;

    #[test]
    fn lines_are_written_in_order_and_parse_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = TransitionLog::open(dir.path(), "batch");
        let t = |node: &str, kind| Transition {
            node: node.into(),
            kind,
            generation: Generation(3),
            why: "acquire",
        };
        log.write(&[
            t("n1", TransitionKind::Up),
            t("n2", TransitionKind::Released),
        ]);
        let text = std::fs::read_to_string(dir.path().join(TRANSITIONS_FILE)).expect("read");
        let lines = parse_log(&text).expect("parse");
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (lines[0].node.as_str(), lines[0].kind.as_str()),
            ("n1", "up")
        );
        assert_eq!((lines[1].queue.as_str(), lines[1].generation), ("batch", 3));
        assert!(lines[0].at_ns <= lines[1].at_ns);
        assert!(parse_log("1 q n up x why").is_err());
    }
}
