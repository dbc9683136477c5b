//! `shardsched demo` against a fresh `up` with the embedded default configuration: the
//! default's `batch` and `debug` are both started with overlapping definitions, and the
//! demo moves a node busy in one to the other and back, narrating it; at its end it counts
//! the nodes running jobs from the shards themselves (none), not from the coordinator's
//! last status reports, which are a moment old.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::System;
use shardsched_coordinator::config::DEFAULT_CONFIG_TOML;

#[test]
fn the_demo_moves_a_busy_node_between_the_defaults_running_queues() {
    let system = System::start_with("demo", DEFAULT_CONFIG_TOML, &[]);
    let queues = system.rows(&["queue", "list", "--json"]);
    let field = |name: &str, key: &str| {
        queues
            .iter()
            .find(|q| q["name"] == name)
            .map(|q| q[key].clone())
            .unwrap()
    };
    assert_eq!(field("batch", "started"), true);
    assert_eq!(field("debug", "started"), true);
    assert_eq!(field("batch", "definition"), "node[0-111]");
    assert_eq!(field("debug", "definition"), "node[96-127]");
    assert_eq!(field("batch", "owned"), "node[0-111]");
    assert_eq!(field("debug", "owned"), "node[112-127]");

    let out = system.ok(&["demo"]);
    for expected in [
        "5. a busy node moves between two running queues:",
        "shardsched queue move node96 --from batch --to debug: move 1",
        "node96 is outgoing in batch: its job runs on, untouched",
        "on node96",
        "released by batch",
        "up in debug",
        "node96 moved back to batch (move 2), idle",
        "every job ran on its own queue's nodes.",
        "nodes running jobs now: 0 of 128.",
    ] {
        assert!(out.contains(expected), "{expected:?} not in:\n{out}");
    }
    // `resource list` shows what the shards last reported (at most every
    // STATUS_INTERVAL_MIN, later on a loaded machine): batch's report of node96 up again
    // may reach the coordinator a moment after the move is done.
    let mut node96 = serde_json::Value::Null;
    let back = harness::wait_for(|| {
        node96 = system.node_row("node96");
        (&node96["queue"], &node96["state"]) == (&"batch".into(), &"up".into())
    });
    assert!(back, "node96 is not up in batch: {node96}");
}
