//! The transition-log checker: the move invariants I1 and I2 (docs/ARCHITECTURE.md), checked
//! from outside over what the shards wrote, so a fault test can tell whether a crash at some
//! step of a move ever let a node be up in two places.
//!
//! Every shard appends each node transition to `<shard-state-dir>/transitions.log`
//! (`<CLOCK_MONOTONIC ns> <queue> <node> <up|down|released> <generation> <why>`,
//! docs/MOVES.md). All shards run on one host, so their monotonic clocks compare: the
//! checker merges the logs into one timeline and replays it.
//!
//! - **I1** a node is up in at most one shard at any instant. A node is taken as up in a
//!   shard from its `up` line until its next `down` or `released` line there. A shard that
//!   crashes writes nothing, so a node stays "up" in a dead shard until that shard's next
//!   line about it: this over-approximates, which is the safe side (the protocol makes the
//!   donor write `released` before the recipient can hear `Acquire`, crash or not).
//! - **I2** no node is up in the recipient while the donor still held an allocation on it.
//!   Two witnesses: (a) the shard's own word: when a node comes up in shard S, every other
//!   shard that had it up before must have written `released` for it since (`released` is
//!   written when its last allocation there is gone); (b) the jobs: every job of another
//!   queue that started on the node before that instant must have ended by then
//!   (`jobs -a --json` end times are wall-clock ms, turned into the monotonic timeline with
//!   an offset the caller measured, allowing [`JOB_END_SLACK_NS`] for the ms rounding).
//!
//! Independent of the shard's own parser on purpose: a checker that shared the code it checks
//! would share its mistakes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Tolerance when comparing a job's wall-clock end (ms resolution) with a monotonic line.
pub const JOB_END_SLACK_NS: i128 = 2_000_000;

/// What a line says happened to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Up,
    Down,
    Released,
}

/// One line of a transition log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub at_ns: u128,
    pub queue: String,
    pub node: String,
    pub kind: Kind,
    pub generation: u64,
    pub why: String,
}

/// A job as `jobs -a --json` shows it: its queue, nodes, and wall-clock start and end (ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpan {
    pub id: String,
    pub queue: String,
    pub nodes: Vec<String>,
    pub start_ms: u64,
    pub end_ms: Option<u64>,
}

/// What a clean check saw (so a test can assert it checked something).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Lines replayed.
    pub lines: usize,
    /// `up` lines of a node that had been up in another shard before (a move's arrival).
    pub handovers: usize,
}

/// Parses one log; a malformed line is an error naming the file and line.
pub fn parse(origin: &str, text: &str) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |what: &str| format!("{origin} line {}: {what}: {raw:?}", i + 1);
        let f: Vec<&str> = raw.split_whitespace().collect();
        if f.len() < 5 {
            return Err(bad(
                "expected `NS QUEUE NODE up|down|released GENERATION WHY`",
            ));
        }
        let kind = match f[3] {
            "up" => Kind::Up,
            "down" => Kind::Down,
            "released" => Kind::Released,
            _ => return Err(bad("unknown transition")),
        };
        lines.push(Line {
            at_ns: f[0].parse().map_err(|_| bad("bad timestamp"))?,
            queue: f[1].to_owned(),
            node: f[2].to_owned(),
            kind,
            generation: f[4].parse().map_err(|_| bad("bad generation"))?,
            why: f[5..].join(" "),
        });
    }
    Ok(lines)
}

/// Reads `<shards_dir>/*/transitions.log` (a shard that never wrote one has none).
pub fn read_all(shards_dir: &Path) -> Result<Vec<Line>, String> {
    let mut all = Vec::new();
    let entries =
        std::fs::read_dir(shards_dir).map_err(|e| format!("{}: {e}", shards_dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path().join("transitions.log");
        match std::fs::read_to_string(&path) {
            Ok(text) => all.extend(parse(&path.display().to_string(), &text)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(all)
}

/// The jobs of a `jobs -A -a --json` listing (nodes as a hostlist are expanded).
pub fn job_spans(rows: &[serde_json::Value]) -> Result<Vec<JobSpan>, String> {
    rows.iter()
        .filter(|j| j["start_ms"].is_u64())
        .map(|j| {
            let hostlist = j["nodes"].as_str().unwrap_or("");
            let nodes = if hostlist.is_empty() {
                Vec::new()
            } else {
                shardsched_resource::decode_hostlist(hostlist)
                    .map_err(|e| format!("job {}: nodes {hostlist:?}: {e}", j["id"]))?
            };
            Ok(JobSpan {
                id: j["id"].as_str().unwrap_or("?").to_owned(),
                queue: j["queue"].as_str().unwrap_or("?").to_owned(),
                nodes,
                start_ms: j["start_ms"].as_u64().unwrap_or(0),
                end_ms: j["end_ms"].as_u64(),
            })
        })
        .collect()
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, in ns: add it to a monotonic stamp to get wall time.
/// (The monotonic clock is the one the shards stamp their lines with.)
pub fn wall_minus_monotonic_ns() -> i128 {
    let mono = shardsched_shard::driver::transitions::monotonic_ns() as i128;
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    wall - mono
}

/// Checks I1 and I2 over `lines` (any order; merged by time) and `jobs`. `wall_offset_ns`
/// turns a monotonic stamp into wall-clock ns ([`wall_minus_monotonic_ns`]). Returns every
/// violation found, each naming the node, the shards and the instant.
pub fn check(
    lines: &[Line],
    jobs: &[JobSpan],
    wall_offset_ns: i128,
) -> Result<Checked, Vec<String>> {
    let mut timeline: Vec<&Line> = lines.iter().collect();
    timeline.sort_by_key(|l| l.at_ns);
    // node → shards it is up in now; node → shard → whether released since its last up.
    let mut up_in: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut held: BTreeMap<&str, BTreeMap<&str, bool>> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut checked = Checked::default();
    for line in timeline {
        checked.lines += 1;
        let node = line.node.as_str();
        let queue = line.queue.as_str();
        let up = up_in.entry(node).or_default();
        let history = held.entry(node).or_default();
        match line.kind {
            Kind::Up => {
                for other in up.iter().filter(|q| **q != queue) {
                    errors.push(format!(
                        "I1: {node} up in {queue} at {} ns (generation {}, {}) while still up in {other}",
                        line.at_ns, line.generation, line.why
                    ));
                }
                let mut handover = false;
                for (other, released) in history.iter().filter(|(q, _)| **q != queue) {
                    handover = true;
                    if !released {
                        errors.push(format!(
                            "I2: {node} up in {queue} at {} ns (generation {}) but {other} never wrote `released` for it after it was up there",
                            line.at_ns, line.generation
                        ));
                    }
                }
                checked.handovers += usize::from(handover);
                for job in jobs
                    .iter()
                    .filter(|j| j.queue != queue && j.nodes.iter().any(|n| n == node))
                {
                    let up_wall = line.at_ns as i128 + wall_offset_ns;
                    let start = i128::from(job.start_ms) * 1_000_000;
                    if start > up_wall {
                        continue;
                    }
                    let end = job.end_ms.map(|e| i128::from(e) * 1_000_000);
                    if end.is_none_or(|end| end > up_wall + JOB_END_SLACK_NS) {
                        errors.push(format!(
                            "I2: {node} up in {queue} at {} ns while job {} of {} still held it (ends {})",
                            line.at_ns,
                            job.id,
                            job.queue,
                            job.end_ms.map_or("never".to_owned(), |e| format!("at {e} ms"))
                        ));
                    }
                }
                up.insert(queue);
                history.insert(queue, false);
            }
            Kind::Down => {
                up.remove(queue);
            }
            Kind::Released => {
                up.remove(queue);
                history.insert(queue, true);
            }
        }
    }
    if errors.is_empty() {
        Ok(checked)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<Line> {
        parse("test", text).expect("the test log parses")
    }

    const GOOD: &str = "\
        100 alpha node0 up 1 assignment
        110 beta node4 up 1 assignment
        200 alpha node0 down 2 release
        300 alpha node0 released 2 job-end
        400 beta node0 up 2 acquire
    ";

    #[test]
    fn a_clean_handover_passes() {
        let checked = check(&lines(GOOD), &[], 0).expect("a clean move passes");
        assert_eq!(checked.lines, 5);
        assert_eq!(checked.handovers, 1);
    }

    #[test]
    fn up_in_two_shards_is_i1() {
        // beta brings node0 up before alpha took it down (alpha's lines are in another file:
        // the merge must order them).
        let mut all =
            lines("100 alpha node0 up 1 assignment\n300 alpha node0 released 2 release\n");
        all.extend(lines("200 beta node0 up 2 acquire\n"));
        let errors = check(&all, &[], 0).expect_err("overlap is caught");
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("I1: node0 up in beta at 200")),
            "{errors:?}"
        );
    }

    #[test]
    fn down_without_released_is_i2() {
        let log =
            "100 alpha node0 up 1 a\n200 alpha node0 down 2 release\n300 beta node0 up 2 acquire\n";
        let errors = check(&lines(log), &[], 0).expect_err("no release line is caught");
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("I2: node0") && e.contains("alpha never wrote")),
            "{errors:?}"
        );
    }

    #[test]
    fn a_job_still_running_at_the_recipients_up_is_i2() {
        // The donor wrote `released` too early: the job's end says otherwise. Wall = mono +
        // 1_000_000_000 ns; the job started at wall 1_000 ms and ended at 1_400 ms, the node
        // came up in beta at mono 300 ms (wall 1_300 ms).
        let log = "100000000 alpha node0 up 1 a\n250000000 alpha node0 released 2 release\n300000000 beta node0 up 2 acquire\n";
        let job = JobSpan {
            id: "f1".into(),
            queue: "alpha".into(),
            nodes: vec!["node0".into()],
            start_ms: 1_000,
            end_ms: Some(1_400),
        };
        let errors = check(&lines(log), std::slice::from_ref(&job), 1_000_000_000)
            .expect_err("the job's end is caught");
        assert!(
            errors.iter().any(|e| e.contains("job f1 of alpha")),
            "{errors:?}"
        );
        // Ended in time (within the ms slack): clean.
        let ended = JobSpan {
            end_ms: Some(1_301),
            ..job.clone()
        };
        check(&lines(log), &[ended], 1_000_000_000).expect("a job ended by then is fine");
        // Still running (no end): caught.
        let running = JobSpan {
            end_ms: None,
            ..job
        };
        assert!(check(&lines(log), &[running], 1_000_000_000).is_err());
    }

    #[test]
    fn a_crashed_shard_keeps_its_nodes_up_until_it_says_otherwise() {
        // alpha crashed with node0 up (no line), restarted and brought it up again (same
        // shard: fine), then released it; beta's up after that is clean.
        let log = "100 alpha node0 up 1 a\n150 alpha node0 up 1 assignment\n200 alpha node0 released 2 r\n300 beta node0 up 2 acquire\n";
        check(&lines(log), &[], 0).expect("clean");
        // Without the release, beta's up overlaps alpha's.
        let log = "100 alpha node0 up 1 a\n150 alpha node0 up 1 assignment\n300 beta node0 up 2 acquire\n";
        let errors = check(&lines(log), &[], 0).expect_err("caught");
        assert!(errors.iter().any(|e| e.starts_with("I1:")), "{errors:?}");
    }

    #[test]
    fn malformed_lines_are_named() {
        let err = parse("alpha/transitions.log", "1 alpha node0 up 1 x\nfoo bar\n")
            .expect_err("bad line");
        assert!(err.contains("alpha/transitions.log line 2"), "{err}");
        let err = parse("f", "1 alpha node0 sideways 1 x\n").expect_err("bad kind");
        assert!(err.contains("unknown transition"), "{err}");
    }
}
