//! Whole-system tests of the admin commands (real processes, real QUIC): queue states
//! through the CLI and their effect on jobs, their survival across a coordinator killed
//! with SIGKILL, `start` refused without `--take` with the nodes named, moves as the
//! coordinator decides and reports them (`queue moves --json`), drain/undrain in
//! `resource list`, and refusals for users.
//!
//! They use the whole-system harness (tests/harness) with a three-queue cluster of their own.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{System, pid, wait_for};
use rustix::process::{Signal, kill_process};
use serde_json::Value;

/// alpha and beta over disjoint halves of 8 nodes; standby, stopped, over two of alpha's.
fn config() -> String {
    harness::with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[4-7]"
policy = "easy"
default_duration = "60s"
max_duration = "2h"

[queues.standby]
nodes = "node[0-1]"
started = false
default_duration = "60s"
max_duration = "2h"
"#,
    )
}

fn start(name: &str) -> System {
    System::start_with(name, &config(), &[])
}

fn start_with_env(name: &str, env: &[(&str, &str)]) -> System {
    System::start_with_env(name, &config(), &[], env)
}

fn job_state(system: &System, id: &str) -> String {
    system
        .jobs()
        .into_iter()
        .find(|j| j["id"] == id)
        .map(|j| j["state"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

#[test]
fn queue_states_work_through_the_cli_and_survive_a_coordinator_kill() {
    let system = start("states");

    // Disabled: submits are refused, with the admin's reason, which `queue list` shows
    // too; enabled again: accepted.
    system.ok(&["queue", "disable", "beta", "--reason", "maintenance"]);
    assert_eq!(system.queue_row("beta")["enabled"], false);
    assert_eq!(system.queue_row("beta")["reason"], "maintenance");
    let table = system.ok(&["queue", "list"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("beta") && l.ends_with("maintenance")),
        "{table}"
    );
    let err = system.fails(&["submit", "-q", "beta", "-N", "1", "-t", "60s", "--", "app"]);
    assert!(err.contains("disabled: maintenance"), "{err}");

    // Stopped: a job is accepted and waits; started again, it runs.
    system.ok(&["queue", "stop", "alpha"]);
    assert_eq!(system.queue_row("alpha")["started"], false);
    let waiting = system
        .ok(&[
            "submit", "-q", "alpha", "-N", "1", "-t", "600s", "--", "app",
        ])
        .trim()
        .to_owned();
    assert_eq!(job_state(&system, &waiting), "pending");

    // The coordinator dies (SIGKILL) and `up` restarts it: the admin's states are its
    // journal's, not the configuration's.
    let coordinator = system.child_pid("coordinator");
    kill_process(pid(coordinator), Signal::KILL).unwrap();
    assert!(
        wait_for(|| system.cli(&["queue", "list", "--json"]).status.success()
            && system.child_pid("coordinator") != coordinator),
        "the coordinator did not come back"
    );
    assert_eq!(
        system.queue_row("beta")["enabled"],
        false,
        "disable survived"
    );
    assert!(
        wait_for(|| system.queue_row("alpha")["online"] == true),
        "alpha's shard did not re-register"
    );
    assert_eq!(system.queue_row("alpha")["started"], false, "stop survived");
    assert_eq!(job_state(&system, &waiting), "pending");

    system.ok(&["queue", "start", "alpha"]);
    assert!(
        wait_for(|| job_state(&system, &waiting) == "running"),
        "the waiting job never ran once alpha started"
    );
    system.ok(&["queue", "enable", "beta"]);
    system.ok(&["submit", "-q", "beta", "-N", "1", "-t", "60s", "--", "app"]);

    // Users may read, not change.
    let bob = system.user_dir("bob");
    let out = system.cli_in(&bob, &["queue", "disable", "alpha"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = system.cli_in(&bob, &["queue", "moves", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn moves_drain_and_refusals_name_what_is_wrong() {
    let system = start("moves");

    // Starting standby would share alpha's started nodes: refused, naming them.
    let err = system.fails(&["queue", "start", "standby"]);
    assert!(err.contains("node[0-1]") && err.contains("alpha"), "{err}");
    assert!(err.contains("--take"), "{err}");

    // A move outside the recipient's definition, or of nodes the donor does not own.
    let err = system.fails(&[
        "queue",
        "move",
        "node[2-3]",
        "--from",
        "alpha",
        "--to",
        "standby",
    ]);
    assert!(
        err.contains("node[2-3]") && err.contains("standby"),
        "{err}"
    );
    let err = system.fails(&[
        "queue", "move", "node5", "--from", "alpha", "--to", "standby",
    ]);
    assert!(err.contains("node5"), "{err}");
    let err = system.fails(&["queue", "move", "nodeX", "--from", "alpha", "--to", "beta"]);
    assert!(err.contains("nodeX"), "{err}");

    // A job holds alpha's nodes, so the move --take makes stays outgoing until cancelled.
    let busy = system.submit(&["-q", "alpha", "-N", "4", "-t", "1h", "--", "sleep", "3600"]);
    system.wait_state(&busy, "running");
    // --take moves the shared nodes in: the coordinator reports the move at once.
    let out = system.ok(&["queue", "start", "standby", "--take"]);
    assert!(out.contains("move 1"), "{out}");
    let moves = system.rows(&["queue", "moves", "--json"]);
    assert_eq!(moves.len(), 1);
    let m = &moves[0];
    assert_eq!(
        (m["id"].as_u64(), &m["from"], &m["to"]),
        (Some(1), &Value::from("alpha"), &Value::from("standby"))
    );
    // One move by its id; an id the coordinator never gave, none.
    let one = system.rows(&["queue", "moves", "--id", "1", "--json"]);
    assert_eq!((one.len(), &one[0]["id"]), (1, &m["id"]));
    assert!(
        system
            .rows(&["queue", "moves", "--id", "9", "--json"])
            .is_empty()
    );
    let nodes: Vec<&str> = m["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["node0", "node1"]);
    for n in m["nodes"].as_array().unwrap() {
        assert!(n["requested_ms"].as_u64().unwrap() > 0, "{n}");
        assert_eq!(n["generation"], 2, "{n}");
        let state = n["state"].as_str().unwrap();
        assert_eq!(state, "outgoing", "{n}: its job still runs");
        if let (Some(r), Some(a)) = (n["released_ms"].as_u64(), n["acquired_ms"].as_u64()) {
            assert!(r <= a, "{n}");
        }
    }
    // The nodes are in a move: a second move of them is refused, naming the first.
    let err = system.fails(&[
        "queue", "move", "node0", "--from", "standby", "--to", "alpha",
    ]);
    assert!(err.contains("node0"), "{err}");
    // `resource list` tells where they are: outgoing in alpha.
    let node0 = system.node_row("node0");
    assert!(
        node0["queue"] == "alpha" && node0["state"] == "outgoing",
        "{node0}"
    );

    // Cancel: the nodes were not released, so they go back to alpha, and its job runs on.
    let out = system.ok(&["queue", "move", "--cancel", "1"]);
    assert!(out.contains("move 1 cancelled"), "{out}");
    assert!(
        wait_for(|| {
            let n = system.node_row("node0");
            n["queue"] == "alpha" && n["state"] == "up"
        }),
        "node0 did not come back to alpha: {}",
        system.node_row("node0")
    );
    assert_eq!(job_state(&system, &busy), "running");
    system.ok(&["cancel", &busy]);
    let err = system.fails(&["queue", "move", "--cancel", "99"]);
    assert!(err.contains("99"), "{err}");

    // Drain: the coordinator's flag shows in `resource list` and goes away with undrain.
    system.ok(&["resource", "drain", "node5", "--reason", "bad dimm"]);
    let node5 = system.node_row("node5");
    assert_eq!(node5["state"], "drained", "{node5}");
    assert_eq!(node5["reason"], "bad dimm", "{node5}");
    system.ok(&["resource", "undrain", "node5"]);
    assert!(
        wait_for(|| system.node_row("node5")["state"] == "up"),
        "node5 stayed drained"
    );
    let err = system.fails(&["resource", "drain", "node99"]);
    assert!(err.contains("node99"), "{err}");

    // Stop --release-to hands beta's nodes to a queue whose definition has none: refused.
    let err = system.fails(&["queue", "stop", "beta", "--release-to", "standby"]);
    assert!(err.contains("beta") && err.contains("standby"), "{err}");
    assert_eq!(
        system.queue_row("beta")["started"],
        true,
        "a refused stop changes nothing"
    );
}

/// A panic in the coordinator's core task (here the failpoint `coord.node_flag.before_core`
/// armed to `panic`, standing for a bug in the core) stops the coordinator process, which
/// exits with Rust's panic status; `up` restarts it, and the restart replays the journal:
/// what was acknowledged before the panic is there.
#[test]
fn a_panic_in_the_core_stops_the_coordinator_and_the_restart_replays_its_journal() {
    let once = std::env::temp_dir().join(format!(
        "shardsched-failpoints-once-panic-{}-{}",
        std::process::id(),
        harness::now_ms()
    ));
    std::fs::create_dir_all(&once).unwrap();
    let system = start_with_env(
        "core-panic",
        &[
            (
                "SHARDSCHED_FAILPOINTS",
                "coordinator/coord.node_flag.before_core=2*panic",
            ),
            ("SHARDSCHED_FAILPOINTS_ONCE_DIR", once.to_str().unwrap()),
        ],
    );
    system.ok(&["resource", "drain", "node5", "--reason", "bad dimm"]);
    let before = system.child_pid("coordinator");
    // The second flag change panics in the core task: however the client fares (it may
    // retry once the restarted coordinator answers), the process that took it is gone.
    let _ = system.cli(&["resource", "drain", "node6", "--reason", "fan"]);
    assert!(
        wait_for(|| system
            .try_child_pid("coordinator")
            .is_some_and(|p| p != before)
            && system.cli(&["queue", "list", "--json"]).status.success()),
        "the coordinator was not restarted after its panic"
    );
    let up = std::fs::read_to_string(system.dir.join("up.stderr")).unwrap();
    assert!(
        up.contains("coordinator exited (exit status 101)"),
        "up did not see the coordinator die of a panic: {up}"
    );
    let log = std::fs::read_to_string(system.layout().logs_dir().join("coordinator.log"))
        .unwrap_or_default();
    assert!(
        log.contains("failpoint coord.node_flag.before_core: panic"),
        "the panic is not in the coordinator's log: {log}"
    );
    // node5 reads "down" until beta's shard has registered with the new coordinator.
    assert!(
        wait_for(|| system.node_row("node5")["state"] == "drained"),
        "node5 is not drained after the restart: {}",
        system.node_row("node5")
    );
    let node5 = system.node_row("node5");
    assert_eq!(
        node5["reason"], "bad dimm",
        "replayed from the journal: {node5}"
    );
    let _ = std::fs::remove_dir_all(&once);
}

/// `--dry-run` names when each node would be free, the jobs holding it, and the donor's
/// pending jobs that could never run without the nodes, and changes nothing; `stop
/// --release-to` then hands the stopped queue's nodes that the other queue defines to it,
/// without touching the job still running on them until it ends.
#[test]
fn a_dry_run_changes_nothing_and_stop_release_to_moves_the_nodes() {
    let system = start("dry-run");
    let busy = system.submit(&["-q", "alpha", "-N", "4", "-t", "1h", "--", "sleep", "3600"]);
    system.wait_state(&busy, "running");
    // Needs all four of alpha's nodes: stranded if two of them left.
    let wide = system.submit(&["-q", "alpha", "-N", "4", "-t", "60s", "--", "app"]);
    let out = system.ok(&[
        "queue",
        "move",
        "node[0-1]",
        "--from",
        "alpha",
        "--to",
        "standby",
        "--dry-run",
    ]);
    assert!(out.contains("node0") && out.contains("node1"), "{out}");
    assert!(
        out.contains(&busy),
        "the job holding the nodes is named: {out}"
    );
    assert!(
        out.contains("could never run") && out.contains(&wide),
        "the stranded pending job is named: {out}"
    );
    assert!(out.contains("nothing changed"), "{out}");
    assert!(system.rows(&["queue", "moves", "--json"]).is_empty());
    let node0 = system.node_row("node0");
    assert_eq!(
        (&node0["queue"], &node0["state"]),
        (&Value::from("alpha"), &Value::from("up"))
    );

    // stop --release-to: alpha's nodes that standby defines go to standby, once the job
    // holding them ends (cancelled here); alpha keeps its other nodes and its pending job.
    system.ok(&["queue", "stop", "alpha", "--release-to", "standby"]);
    assert_eq!(system.queue_row("alpha")["started"], false);
    assert_eq!(
        job_state(&system, &busy),
        "running",
        "stopping touches no running job"
    );
    let node0 = system.node_row("node0");
    assert_eq!(
        (&node0["queue"], &node0["state"]),
        (&Value::from("alpha"), &Value::from("outgoing"))
    );
    system.ok(&["cancel", &busy]);
    assert!(
        wait_for(|| {
            let (n0, n1) = (system.node_row("node0"), system.node_row("node1"));
            n0["queue"] == "standby" && n1["queue"] == "standby" && n0["state"] == "up"
        }),
        "node[0-1] never reached standby: {} {}",
        system.node_row("node0"),
        system.node_row("node1")
    );
    assert_eq!(system.node_row("node2")["queue"], "alpha");
    assert_eq!(job_state(&system, &wide), "pending");
}
