//! Smoke tests of node moves under crashes, driven by the failpoints (docs/MOVES.md, "Fault
//! tests"): for one step of each scenario, in the coordinator, the donor and the recipient,
//! a whole system (`shardsched up`: real processes, real QUIC) moves one busy and one idle
//! node and the failpoint kills the process at that step (`exit`, fired once across
//! restarts); `up` restarts it. Every other step is the simulator's (crates/sim), which
//! crashes the real cores at random points of thousands of moves. Each time:
//!
//! - the move completes, or (cancel) its nodes are cleanly split between donor and recipient
//!   as the move's node states say;
//! - no job is lost or disturbed: the busy node's job keeps running, with its start time,
//!   through the crash and the restart, until it is ended (by `cancel` once the fault has
//!   happened, or by the move's deadline), and `jobs -a` lists it;
//! - ownership is consistent: `resource list` shows every node once, up, in the queue the
//!   outcome says;
//! - the transition logs pass the checker (tests/harness/transitions.rs): no instant at which
//!   a node was up in two shards, or up in the recipient while the donor still held it;
//! - the failpoint did fire (its once-marker exists): a case that injects nothing fails.
//!
//! Each case runs its own system; a test runs a few cases at once and reports all the
//! failures together (each with its state directory kept).

#![allow(clippy::unwrap_used)]

use crate::harness;
use crate::transitions;

use std::collections::BTreeMap;
use std::path::PathBuf;

use harness::{System, wait_for};
use serde_json::Value;

/// alpha owns node[0-3]; beta, stopped, is defined over all eight nodes and owns node[4-7]
/// (the rest are alpha's, first by name), so alpha's nodes can move to beta.
fn config() -> String {
    harness::with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[0-7]"
policy = "easy"
started = false
default_duration = "60s"
max_duration = "2h"
"#,
    )
}

/// Simulated time runs this much faster than real time (the deadline scenario's job).
const TIME_SCALE: &str = "20";
/// The busy node's job outlasts the test: the test ends it (`cancel`) once the fault has
/// happened and the system is back, so that the busy node's path (outgoing, then released
/// when its last job ends) is always taken, however long a restart takes on a loaded machine.
const JOB_TIME: &str = "2h";
/// The deadline scenario's move deadline (real time): the donor cancels the job. Short, so
/// the case is quick; nothing races it: the checks accept the job running, or cancelled by
/// the deadline (not before it), whenever they look.
const DEADLINE: &str = "1s";

/// What the test does around the failpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// Move the busy and the idle node; the move completes when the job ends.
    Move,
    /// The same, then cancel the move while the busy node is still outgoing.
    Cancel,
    /// Move with a deadline shorter than the job: the donor cancels the job.
    Deadline,
}

/// One fault: a failpoint `SCOPE/NAME` armed to `exit` once, in a scenario that reaches it.
struct Case {
    scope: &'static str,
    point: &'static str,
    scenario: Scenario,
}

const fn case(scope: &'static str, point: &'static str, scenario: Scenario) -> Case {
    Case {
        scope,
        point,
        scenario,
    }
}

const COORDINATOR: &str = "coordinator";
const DONOR: &str = "alpha";
const RECIPIENT: &str = "beta";

/// Systems one test runs at once. The processes mostly wait (restart backoff, polling), so
/// a few at a time keep the file's wall time low without starving a 2-core machine.
const CASES_AT_ONCE: usize = 3;

/// Runs `cases`, each in a system of its own ([`CASES_AT_ONCE`] at a time); panics listing
/// the ones that failed (their state directories are kept and named on stderr).
fn run_all(cases: &[Case]) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..CASES_AT_ONCE.min(cases.len()) {
            scope.spawn(|| {
                while let Some(c) =
                    cases.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    let name = format!("{}/{}", c.scope, c.point);
                    let began = std::time::Instant::now();
                    let outcome = std::panic::catch_unwind(|| run_case(c));
                    eprintln!(
                        "fault case {name} ({:?}): {} in {:.1} s",
                        c.scenario,
                        if outcome.is_ok() { "ok" } else { "FAILED" },
                        began.elapsed().as_secs_f64()
                    );
                    if let Err(e) = outcome {
                        let why = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default();
                        failed
                            .lock()
                            .unwrap()
                            .push(format!("{name} ({:?}): {why}", c.scenario));
                    }
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap();
    assert!(
        failed.is_empty(),
        "{} of {} fault cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// A fresh directory for the once-markers of one case.
fn once_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "shardsched-once-{label}-{}-{}",
        std::process::id(),
        harness::now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a command that may fail while a process is down; its stdout once it succeeds.
fn retry_ok(system: &System, args: &[&str]) -> String {
    let mut last = String::new();
    let ok = wait_for(|| {
        let out = system.cli(args);
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            last = String::from_utf8_lossy(&out.stdout).into_owned();
        }
        out.status.success()
    });
    assert!(ok, "shardsched {} never succeeded: {last}", args.join(" "));
    last
}

/// A JSON list from a command that may fail while a process is down.
fn retry_rows(system: &System, args: &[&str]) -> Vec<Value> {
    match serde_json::from_str(&retry_ok(system, args)) {
        Ok(Value::Array(rows)) => rows,
        other => panic!("shardsched {} printed {other:?}", args.join(" ")),
    }
}

/// Job `id`'s row once `jobs -A -a` lists it and `done` holds for it.
fn wait_job(system: &System, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let ok = wait_for(|| {
        let out = system.cli(&["jobs", "-A", "-a", "--json"]);
        let Ok(Value::Array(rows)) = serde_json::from_slice::<Value>(&out.stdout) else {
            return false;
        };
        match rows.into_iter().find(|j| j["id"] == id) {
            Some(row) => {
                last = row;
                done(&last)
            }
            None => false,
        }
    });
    assert!(ok, "job {id} never listed as expected; last seen: {last}");
    last
}

/// `(queue, state)` of one node in `resource list`, `None` while it cannot be read.
fn ownership_of(system: &System, node: &str) -> Option<(String, String)> {
    let out = system.cli(&["resource", "list", "--json"]);
    let rows: Value = serde_json::from_slice(&out.stdout).ok()?;
    let row = rows.as_array()?.iter().find(|r| r["name"] == node)?;
    Some((
        row["queue"].as_str()?.to_owned(),
        row["state"].as_str()?.to_owned(),
    ))
}

/// `resource list`, by node name: (queue, state). Each node must be listed once.
fn ownership(system: &System) -> BTreeMap<String, (String, String)> {
    let mut map = BTreeMap::new();
    for row in retry_rows(system, &["resource", "list", "--json"]) {
        let name = row["name"].as_str().unwrap().to_owned();
        let owner = (
            row["queue"].as_str().unwrap_or("").to_owned(),
            row["state"].as_str().unwrap_or("").to_owned(),
        );
        assert!(
            map.insert(name.clone(), owner).is_none(),
            "{name} is listed twice by resource list"
        );
    }
    map
}

/// The move id `queue move` printed (`move 3 started: …`).
fn move_id_of(printed: &str) -> String {
    printed
        .split_whitespace()
        .nth(1)
        .filter(|id| id.parse::<u64>().is_ok())
        .unwrap_or_else(|| panic!("queue move printed {printed:?}"))
        .to_owned()
}

/// The busy job (`row`) was cancelled by the move's deadline: not before it, and saying so.
fn ended_by_the_deadline(system: &System, row: &Value) {
    let moves = retry_rows(system, &["queue", "moves", "--json"]);
    let deadline = moves
        .iter()
        .find_map(|m| m["deadline_ms"].as_u64())
        .expect("the move has a deadline");
    let end = row["end_ms"].as_u64().expect("ended");
    assert!(end >= deadline, "cancelled before the deadline: {row}");
    assert!(
        row["reason"].as_str().unwrap_or("").contains("deadline"),
        "{row}"
    );
}

fn run_case(c: &Case) {
    let label = c.point.replace('.', "-");
    let once = once_dir(&label);
    let spec = format!("{}/{}=exit", c.scope, c.point);
    let once_str = once.display().to_string();
    let system = System::start_with_env(
        &format!("fault-{label}"),
        &config(),
        &["--time-scale", TIME_SCALE],
        &[
            ("SHARDSCHED_FAILPOINTS", spec.as_str()),
            ("SHARDSCHED_FAILPOINTS_ONCE_DIR", once_str.as_str()),
        ],
    );
    let wall_offset = transitions::wall_minus_monotonic_ns();

    // A job on one of alpha's nodes; the move takes that node and an idle one.
    let job = system.submit(&["-q", "alpha", "-N1", "-t", JOB_TIME, "--", "sleep", "1"]);
    let row = system.wait_state(&job, "running");
    let started_ms = row["start_ms"].clone();
    let busy = row["nodes"].as_str().unwrap().to_owned();
    let idle = ["node0", "node1", "node2", "node3"]
        .into_iter()
        .find(|n| *n != busy)
        .unwrap()
        .to_owned();
    let hostlist = format!("{busy},{idle}");
    let mut args = vec![
        "queue",
        "move",
        hostlist.as_str(),
        "--from",
        "alpha",
        "--to",
        "beta",
    ];
    if c.scenario == Scenario::Deadline {
        args.extend(["--deadline", DEADLINE]);
    }
    // The coordinator may die before answering (after journaling, or not): the move is
    // asked again only if the restarted coordinator does not have it.
    let asked = system.cli(&args);
    let move_id = if asked.status.success() {
        move_id_of(&String::from_utf8_lossy(&asked.stdout))
    } else {
        let moves = retry_rows(&system, &["queue", "moves", "--json"]);
        match moves.first() {
            Some(m) => m["id"].to_string(),
            None => move_id_of(&retry_ok(&system, &args)),
        }
    };

    // The idle node is released at once: once it is up in beta, every process killed so
    // far is back and the move runs on (the busy node stays outgoing: its job runs on).
    let idle_in_beta = wait_for(|| {
        let out = system.cli(&["resource", "list", "--json"]);
        serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| {
            v.as_array().is_some_and(|rows| {
                rows.iter().any(|r| {
                    r["name"] == idle.as_str() && r["queue"] == "beta" && r["state"] == "up"
                })
            })
        })
    });
    assert!(idle_in_beta, "the idle node {idle} never came up in beta");
    // The running job was not disturbed by the move or the crash (I5): it runs, or (with
    // a deadline, which may pass at any time on a loaded machine) was cancelled by the
    // deadline and not before it. (While a process restarts, `jobs` may miss a shard: wait
    // for the whole list.)
    let row = wait_job(&system, &job, |j| j["state"] != "pending");
    assert_eq!(row["start_ms"], started_ms, "the busy job restarted: {row}");
    if c.scenario == Scenario::Deadline && row["state"] == "cancelled" {
        ended_by_the_deadline(&system, &row);
    } else {
        assert_eq!(row["state"], "running", "the busy job: {row}");
    }

    match c.scenario {
        Scenario::Cancel => {
            // Cancelled while the busy node still runs its job: that node returns to alpha.
            // A cancel whose answer was lost (the coordinator died) but that took effect is
            // not repeated.
            let cancel = ["queue", "move", "--cancel", move_id.as_str()];
            let done = wait_for(|| {
                if system.cli(&cancel).status.success() {
                    return true;
                }
                let out = system.cli(&["queue", "moves", "--json"]);
                out.status.success()
                    && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| {
                        v.as_array()
                            .is_some_and(|ms| ms.iter().any(|m| m["status"] == "cancelled"))
                    })
            });
            assert!(done, "the cancel of move {move_id} never went through");
            // The busy node back in alpha, then its job may end.
            assert!(
                wait_for(|| ownership_of(&system, &busy) == Some(("alpha".into(), "up".into()))),
                "the busy node {busy} never came back up in alpha"
            );
            retry_ok(&system, &["cancel", job.as_str()]);
        }
        Scenario::Move => {
            // The job ends: the busy node is released, then comes up in beta.
            retry_ok(&system, &["cancel", job.as_str()]);
        }
        Scenario::Deadline => {}
    }

    // Settled: the job is over, and both nodes are up in one queue each.
    let settled = |o: &BTreeMap<String, (String, String)>| {
        [&busy, &idle]
            .iter()
            .all(|n| o.get(*n).is_some_and(|(q, s)| s == "up" && !q.is_empty()))
    };
    let mut last = BTreeMap::new();
    let mut jobs = Vec::new();
    let ok = wait_for(|| {
        let out = system.cli(&["jobs", "-A", "-a", "--json"]);
        let Ok(Value::Array(rows)) = serde_json::from_slice::<Value>(&out.stdout) else {
            return false;
        };
        jobs = rows;
        let over = jobs
            .iter()
            .any(|j| j["id"] == job.as_str() && j["end_ms"].is_u64());
        if !over {
            return false;
        }
        let out = system.cli(&["resource", "list", "--json"]);
        let Ok(Value::Array(rows)) = serde_json::from_slice::<Value>(&out.stdout) else {
            return false;
        };
        last = rows
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or("").to_owned(),
                    (
                        r["queue"].as_str().unwrap_or("").to_owned(),
                        r["state"].as_str().unwrap_or("").to_owned(),
                    ),
                )
            })
            .collect();
        settled(&last)
    });
    assert!(
        ok,
        "the move never settled: resources {last:?}; jobs {jobs:#?}; logs in {}",
        system.state().join("logs").display()
    );

    // The failpoint fired (and so its process was killed and restarted).
    let marker = once.join(format!("{}.{}", c.scope, c.point));
    assert!(
        marker.exists(),
        "failpoint {}/{} never fired",
        c.scope,
        c.point
    );

    // No job lost; the busy job ended as the scenario says.
    let row = jobs.iter().find(|j| j["id"] == job.as_str()).unwrap();
    assert_eq!(row["state"], "cancelled", "the busy node's job: {row}");
    assert_eq!(row["start_ms"], started_ms, "the busy job restarted: {row}");
    if c.scenario == Scenario::Deadline {
        ended_by_the_deadline(&system, row);
    }

    // Ownership: every node once, up; moved nodes where the outcome says.
    let owners = ownership(&system);
    assert_eq!(owners.len(), 8, "{owners:?}");
    for (node, (queue, state)) in &owners {
        assert_eq!(state, "up", "{node} in {queue}: {owners:?}");
        let n: u32 = node.trim_start_matches("node").parse().unwrap();
        // The idle node was up in beta before any cancel; the busy one returns on cancel.
        let to_beta = n >= 4 || *node == idle || (*node == busy && c.scenario != Scenario::Cancel);
        let want = if to_beta { "beta" } else { "alpha" };
        assert_eq!(queue, want, "{node}: {owners:?}");
    }
    if c.scenario == Scenario::Cancel {
        // The busy node was outgoing when cancelled: back in alpha (unless the job ended
        // first, in which case it went on to beta). Each node is where its move state says.
        let moves = retry_rows(&system, &["queue", "moves", "--json"]);
        for m in &moves {
            for n in m["nodes"].as_array().unwrap() {
                let node = n["node"].as_str().unwrap();
                let want = match n["state"].as_str().unwrap() {
                    "up" => "beta",
                    "returned" => "alpha",
                    other => panic!("{node} still {other} in a settled move: {m}"),
                };
                assert_eq!(owners[node].0, want, "{node}: {m}");
            }
        }
    } else {
        let moves = retry_rows(&system, &["queue", "moves", "--json"]);
        for m in &moves {
            assert_eq!(m["status"], "completed", "{m}");
        }
    }

    // The transition logs: I1 and I2 over the merged timeline.
    let lines = transitions::read_all(&system.state().join("shards")).unwrap();
    let spans = transitions::job_spans(&jobs).unwrap();
    let checked = transitions::check(&lines, &spans, wall_offset)
        .unwrap_or_else(|errors| panic!("transition logs: {}", errors.join("\n")));
    let arrived = [&busy, &idle]
        .iter()
        .filter(|n| owners[n.as_str()].0 == "beta")
        .count();
    assert!(
        checked.handovers >= arrived,
        "{arrived} nodes arrived in beta but the logs show {} handovers",
        checked.handovers
    );
    drop(system);
    let _ = std::fs::remove_dir_all(&once);
}

/// One crash at one step of each scenario, in each process: the whole system (real
/// processes, real QUIC, `up` restarting the crashed one) rides it out. Every other step
/// of every scenario, and crashes between a journal write and its answers, are the
/// simulator's (crates/sim: 2,000 seeds under `cargo test`, each crashing the coordinator
/// and the shards at random points of the real cores' moves; docs/SIM.md).
#[test]
fn a_crash_at_a_step_of_each_scenario_is_ridden_out() {
    use Scenario::{Cancel, Deadline, Move};
    run_all(&[
        case(COORDINATOR, "coord.move.after_journal_started", Move),
        case(DONOR, "shard.release.before_answer", Move),
        case(RECIPIENT, "shard.acquire.before_apply", Move),
        case(COORDINATOR, "coord.move.after_journal_cancelled", Cancel),
        case(DONOR, "shard.cancel_jobs.before_apply", Deadline),
    ]);
}
