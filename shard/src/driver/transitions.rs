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
pub use shardsched_proto::state_dir::TRANSITIONS_FILE;

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

/// Checks the move rule over several shards' logs (one host, so their times compare): no
/// node is ever up in two shards at once, and no node comes up in a shard while another
/// shard that gave it up in a `Release` has not logged it `released` (still holds an
/// allocation there). Returns the first violation, naming the lines.
pub fn check_logs(logs: &[Vec<LogLine>]) -> Result<(), String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut lines: Vec<&LogLine> = logs.iter().flatten().collect();
    lines.sort_by_key(|l| l.at_ns);
    let mut up: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut holding: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for l in lines {
        let (node, queue) = (l.node.as_str(), l.queue.as_str());
        let ups = up.entry(node).or_default();
        let holds = holding.entry(node).or_default();
        match l.kind.as_str() {
            "up" => {
                if let Some(other) = ups.iter().find(|q| **q != queue) {
                    return Err(format!(
                        "{node} up in {queue} at {} while up in {other}",
                        l.at_ns
                    ));
                }
                if let Some(other) = holds.iter().find(|q| **q != queue) {
                    return Err(format!(
                        "{node} up in {queue} at {} before {other} released it",
                        l.at_ns
                    ));
                }
                holds.remove(queue);
                ups.insert(queue);
            }
            "down" => {
                ups.remove(queue);
                if l.why == "release" {
                    holds.insert(queue);
                }
            }
            "released" => {
                holds.remove(queue);
            }
            other => {
                return Err(format!(
                    "unknown transition {other:?} for {node} in {queue}"
                ));
            }
        }
    }
    Ok(())
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

    #[test]
    fn the_checker_catches_an_early_up_and_a_double_up() {
        let log = |text: &str| parse_log(text).expect("parse");
        let donor =
            log("1 a n3 up 1 assignment\n5 a n3 down 2 release\n9 a n3 released 2 job-end\n");
        let good = log("10 b n3 up 2 acquire\n");
        assert_eq!(check_logs(&[donor.clone(), good]), Ok(()));
        let early = log("7 b n3 up 2 acquire\n");
        assert!(check_logs(&[donor.clone(), early]).is_err());
        let double = log("3 b n3 up 2 acquire\n");
        assert!(check_logs(&[donor, double]).is_err());
    }
}
