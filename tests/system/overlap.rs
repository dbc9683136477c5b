//! Moves between two *started* queues whose definitions overlap, end to end (`shardsched
//! up`, real processes, sim executor, the CLI an admin types): once with the overlap in the
//! configuration file, once made at run time by `queue update`. Each time a node busy in
//! the donor moves: it stays outgoing there while its job runs (untouched), the recipient
//! reserves it for a job that needs it, and once the job ends it is released and comes up
//! in the recipient, where the waiting job starts on it. Both shards' transition logs pass
//! the checker (tests/harness/transitions.rs): never up in two shards, never up in the
//! recipient while the donor still held it.
//!
//! Jobs here outlast the test and are ended by `cancel` when the test is ready: nothing
//! depends on how fast the machine is.

#![allow(clippy::unwrap_used)]

use crate::harness;
use crate::transitions;

use harness::{System, wait_for};
use serde_json::Value;

/// alpha (fcfs, node[0-3]) and beta (easy, `beta_nodes`), both started.
fn config(beta_nodes: &str) -> String {
    harness::with_alpha(
        "node[0-7]",
        &format!(
            r#"
[queues.beta]
nodes = "{beta_nodes}"
policy = "easy"
default_duration = "60s"
max_duration = "2h"
"#
        ),
    )
}

/// Fills alpha with four one-node jobs that outlast the test; the id of the one on `busy`.
fn fill_alpha(system: &System, busy: &str) -> String {
    let ids: Vec<String> = (0..4)
        .map(|_| system.submit(&["-q", "alpha", "-N", "1", "-t", "1h", "--", "app"]))
        .collect();
    for id in &ids {
        system.wait_state(id, "running");
    }
    ids.into_iter()
        .find(|id| system.job(id)["nodes"] == busy)
        .unwrap_or_else(|| panic!("no job on {busy}"))
}

/// Both queues started, their definitions overlapping on node3, alpha owning it and
/// running a job on it: `queue move` hands it to beta after that job, as the module
/// documentation says.
fn node3_moves_busy_between_two_started_queues(system: &System) {
    let busy = "node3";
    // A queue's state reaches the coordinator's listing with its shard's registration:
    // wait for it rather than read it once.
    let both_started = || {
        let (alpha, beta) = (system.queue_row("alpha"), system.queue_row("beta"));
        alpha["started"] == true && beta["started"] == true
    };
    wait_for(both_started);
    let (alpha, beta) = (system.queue_row("alpha"), system.queue_row("beta"));
    assert_eq!(
        (&alpha["started"], &beta["started"]),
        (&Value::from(true), &Value::from(true))
    );
    assert_eq!(alpha["owned"], "node[0-3]", "{alpha}");
    assert_eq!(beta["owned"], "node[4-7]", "{beta}");
    let wall_offset = transitions::wall_minus_monotonic_ns();
    let on_busy = fill_alpha(system, busy);

    let out = system.ok(&["queue", "move", busy, "--from", "alpha", "--to", "beta"]);
    assert_eq!(
        out,
        format!(
            "move 1 started: {busy} from alpha to beta (`shardsched queue moves` follows it)\n"
        )
    );
    // Outgoing in alpha while its job runs; beta owns it (intent) and plans on it.
    let row = system.node_row(busy);
    assert_eq!(
        (&row["queue"], &row["state"]),
        (&Value::from("alpha"), &Value::from("outgoing")),
        "{row}"
    );
    assert_eq!(row["jobs_running"], 1, "{row}");
    let wide = system.submit(&["-q", "beta", "-N", "5", "-t", "60s", "--", "app"]);
    assert!(
        wait_for(|| {
            let j = system.job(&wide);
            j["state"] == "pending" && j["reserved_ms"].is_u64()
        }),
        "beta never reserved the incoming node: {}",
        system.job(&wide)
    );
    let moves = system.rows(&["queue", "moves", "--json"]);
    let step = &moves[0]["nodes"][0];
    assert_eq!(step["state"], "outgoing", "{step}");
    assert_eq!(step["jobs"][0], on_busy.as_str(), "{step}");
    assert_eq!(
        system.job(&on_busy)["state"],
        "running",
        "the move touches no job"
    );

    // The job ends: released by alpha, up in beta, where the waiting job starts on it.
    system.ok(&["cancel", &on_busy]);
    let ended = system.wait_state(&on_busy, "cancelled");
    let started = system.wait_state(&wide, "running");
    assert_eq!(
        started["nodes"],
        format!("{busy},node[4-7]").replace("node3,node[4-7]", "node[3-7]")
    );
    assert!(started["start_ms"].as_u64() >= ended["end_ms"].as_u64());
    // The recipient's `up` reaches the coordinator's node table a report later.
    wait_for(|| system.node_row(busy)["state"] == "up");
    let row = system.node_row(busy);
    assert_eq!(
        (&row["queue"], &row["state"]),
        (&Value::from("beta"), &Value::from("up")),
        "{row}"
    );
    assert_eq!(system.queue_row("beta")["nodes_owned"], 5);
    let moves = system.rows(&["queue", "moves", "--json"]);
    assert_eq!(moves[0]["status"], "completed", "{moves:?}");

    // Both shards' logs: no instant with the node up twice, or up in beta while alpha
    // held it.
    let lines = transitions::read_all(&system.state().join("shards")).unwrap();
    let spans = transitions::job_spans(&system.jobs()).unwrap();
    let checked = transitions::check(&lines, &spans, wall_offset)
        .unwrap_or_else(|errors| panic!("transition logs: {}", errors.join("\n")));
    assert!(checked.handovers >= 1, "{checked:?}");
}

#[test]
fn overlapping_definitions_from_the_configuration_file() {
    let system = System::start_with("overlap-file", &config("node[3-7]"), &[]);
    // node3 is in both definitions; alpha (first by name) owns it.
    assert_eq!(system.queue_row("beta")["definition"], "node[3-7]");
    assert_eq!(system.queue_row("alpha")["definition"], "node[0-3]");
    node3_moves_busy_between_two_started_queues(&system);
}

#[test]
fn overlapping_definitions_made_at_run_time() {
    let system = System::start_with("overlap-update", &config("node[4-7]"), &[]);
    let err = system.fails(&["queue", "move", "node3", "--from", "alpha", "--to", "beta"]);
    assert!(
        err.contains(
            "node3 not in queue beta's definition: \
             `shardsched queue update beta --nodes node[3-7]` adds them"
        ),
        "{err}"
    );
    let out = system.ok(&["queue", "update", "beta", "--nodes", "node[3-7]"]);
    assert!(out.contains("beta: configuration changed"), "{out}");
    // beta's shard takes its new definition in place (node3 grafted among its nodes by
    // rank); alpha keeps node3.
    assert!(out.contains("without a restart"), "{out}");
    assert!(
        wait_for(|| {
            let beta = system.queue_row("beta");
            beta["online"] == true && beta["definition"] == "node[3-7]"
        }),
        "{}",
        system.queue_row("beta")
    );
    node3_moves_busy_between_two_started_queues(&system);
}
