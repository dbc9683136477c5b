//! Node moves, end to end (real processes: `shardsched up`, sim executor), through the
//! wire (`client_coord::Request::MoveNodes` with the admin's credentials):
//! - a running job on a moving node keeps running to its end, and the node comes up in the
//!   recipient only after that: the recipient's `up` line in its `transitions.log` is after
//!   the donor's `released` line (CLOCK_MONOTONIC, one host);
//! - a job submitted to the recipient that needs the node is reserved at the expected time
//!   and starts right after the hand-over;
//! - a move of idle nodes completes at once.
//!
//! A crash of a process at a step of a move is tests/system/move_faults.rs' (one per
//! scenario and process, whole system) and the simulator's (every step, crashes between a
//! journal write and its answer, 2,000 seeds: crates/sim).
//!
//! Here the recipient is configured stopped over a definition that overlaps the donor's,
//! and started once the moved node is on its way (it then owns something); moves between
//! two started queues are in tests/system/overlap.rs. Jobs outlast the test and are ended by
//! `cancel` when the test is ready: nothing depends on how fast the machine is.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{System, wait_for};
use shardsched_proto::msg::client_coord::{self, QueueAction};
use shardsched_shard::driver::transitions::{LogLine, TRANSITIONS_FILE, check_logs, parse_log};

/// alpha owns node[0-3]; beta (stopped) defines node[3-7] and so owns node[4-7].
fn config() -> String {
    harness::with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[3-7]"
policy = "easy"
started = false
default_duration = "60s"
max_duration = "2h"
"#,
    )
}

/// Sends one admin request to the coordinator.
fn coordinator(system: &System, request: &client_coord::Request) -> client_coord::Response {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (_endpoint, coord) = system.admin_session().await;
        let answer = coord.request(request).await;
        coord.close();
        answer.unwrap_or_else(|e| panic!("{request:?}: {e}"))
    })
}

fn move_nodes(system: &System, nodes: &[&str], to: &str) {
    let request = client_coord::Request::MoveNodes {
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        to: to.into(),
    };
    let answer = coordinator(system, &request);
    assert!(
        matches!(answer, client_coord::Response::Done { move_id: Some(_) }),
        "{answer:?}"
    );
}

fn start_queue(system: &System, queue: &str) {
    let request = client_coord::Request::QueueControl {
        queue: queue.into(),
        action: QueueAction::Start { take: false },
    };
    let answer = coordinator(system, &request);
    assert!(
        matches!(answer, client_coord::Response::Done { .. }),
        "{answer:?}"
    );
}

/// A shard's transition log.
fn transitions(system: &System, queue: &str) -> Vec<LogLine> {
    let text =
        std::fs::read_to_string(system.shard_dir(queue).join(TRANSITIONS_FILE)).unwrap_or_default();
    parse_log(&text).unwrap()
}

/// The time of the last `kind` line about `node` in `lines`.
fn last(lines: &[LogLine], node: &str, kind: &str) -> Option<u128> {
    lines
        .iter()
        .filter(|l| l.node == node && l.kind == kind)
        .map(|l| l.at_ns)
        .next_back()
}

#[test]
fn a_busy_node_moves_after_its_job_and_a_waiting_job_starts_right_after() {
    let system = System::start_with("moves-busy", &config(), &[]);
    // Four one-node jobs fill alpha; the one on node3 will hold the moving node.
    let ids: Vec<String> = (0..4)
        .map(|_| system.submit(&["-N", "1", "-t", "1h", "--", "app"]))
        .collect();
    for id in &ids {
        system.wait_state(id, "running");
    }
    let on_node3 = ids
        .iter()
        .find(|id| system.job(id)["nodes"] == "node3")
        .cloned()
        .expect("a job on node3");

    move_nodes(&system, &["node3"], "beta");
    // `resource list` shows the node outgoing in its donor until the donor releases it.
    assert!(
        wait_for(|| {
            let row = system.node_row("node3");
            row["queue"] == "alpha" && row["state"] == "outgoing"
        }),
        "{:#}",
        system.node_row("node3")
    );
    start_queue(&system, "beta");
    // beta's five nodes: node3 comes when alpha's job ends, so the job is reserved then.
    let wide = system.submit(&["-q", "beta", "-N", "5", "-t", "5s", "--", "app"]);
    assert!(
        wait_for(|| {
            let row = system.job(&wide);
            row["state"] == "pending" && row["reason"].as_str().unwrap_or("").contains("reserved")
        }),
        "{:#}",
        system.job(&wide)
    );
    assert_eq!(
        system.job(&on_node3)["state"],
        "running",
        "the move touches no job"
    );

    system.ok(&["cancel", &on_node3]);
    let done = system.wait_state(&on_node3, "cancelled");
    let started = system.wait_state(&wide, "running");
    assert_eq!(started["nodes"], "node[3-7]");
    let end_ms = done["end_ms"].as_u64().unwrap();
    let start_ms = started["start_ms"].as_u64().unwrap();
    assert!(
        start_ms >= end_ms,
        "started {start_ms} before node3 was free at {end_ms}"
    );

    let donor = transitions(&system, "alpha");
    let recipient = transitions(&system, "beta");
    check_logs(&[donor.clone(), recipient.clone()]).unwrap();
    let released = last(&donor, "node3", "released").expect("alpha logged the release");
    let down = last(&donor, "node3", "down").expect("alpha logged node3 down");
    let up = last(&recipient, "node3", "up").expect("beta logged node3 up");
    assert!(down < released, "{donor:?}");
    assert!(
        released < up,
        "beta brought node3 up before alpha released it"
    );
    // For the record (not asserted): how long the hand-over took.
    eprintln!(
        "node3: donor released -> recipient up: {:.2} ms",
        (up - released) as f64 / 1e6
    );
    assert!(wait_for(|| system.node_row("node3")["queue"] == "beta"));
}

#[test]
fn a_move_of_idle_nodes_completes_at_once() {
    let system = System::start_with("moves-idle", &config(), &[]);
    move_nodes(&system, &["node3"], "beta");
    assert!(wait_for(|| {
        let row = system.node_row("node3");
        row["queue"] == "beta" && row["state"] == "up"
    }));
    let (donor, recipient) = (transitions(&system, "alpha"), transitions(&system, "beta"));
    check_logs(&[donor.clone(), recipient.clone()]).unwrap();
    let released = last(&donor, "node3", "released").expect("released");
    let up = last(&recipient, "node3", "up").expect("up");
    assert!(released < up);
    // beta schedules on it once started; alpha no longer does.
    start_queue(&system, "beta");
    let job = system.submit(&["-q", "beta", "-N", "5", "-t", "5s", "--", "app"]);
    assert_eq!(system.wait_state(&job, "running")["nodes"], "node[3-7]");
    // alpha has three nodes left: a four-node job fits its definition, not what it owns.
    let alpha = system.submit(&["-N", "4", "-t", "5s", "--", "app"]);
    assert!(
        wait_for(|| system.job(&alpha)["reason"] == "resources it needs are down or not owned"),
        "{}",
        system.job(&alpha)
    );
    assert_eq!(system.job(&alpha)["state"], "pending");
}
