//! Node failure, end to end: `shardsched resource down HOSTLIST --reason R` through the
//! coordinator to the owning shard fails the jobs running there (or requeues the ones
//! submitted with `--requeue`), shows the nodes down with the reason, keeps them out of
//! scheduling, and `resource up` brings them back. Real processes (`shardsched up`, sim
//! executor).

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{System, wait_for};
use serde_json::Value;

fn node_row(system: &System, name: &str) -> Value {
    system
        .resources()
        .into_iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name} not listed"))
}

#[test]
fn a_node_marked_down_fails_or_requeues_its_jobs_and_leaves_scheduling_until_up() {
    let system = System::start("node-failure", &[]);
    let plain = system.submit(&["-N", "1", "-t", "600s", "--", "app"]);
    let requeue = system.submit(&["-N", "1", "-t", "600s", "--requeue", "--", "app"]);
    let plain_node = system.wait_state(&plain, "running")["nodes"]
        .as_str()
        .unwrap()
        .to_owned();
    let requeue_node = system.wait_state(&requeue, "running")["nodes"]
        .as_str()
        .unwrap()
        .to_owned();

    let out = system.ok(&["resource", "down", &plain_node, "--reason", "disk failed"]);
    assert_eq!(out.trim(), format!("{plain_node} down"));
    let row = system.wait_state(&plain, "failed");
    assert_eq!(
        row["reason"],
        format!("node {plain_node} went down: disk failed")
    );
    assert!(wait_for(
        || node_row(&system, &plain_node)["state"] == "down"
    ));
    assert_eq!(node_row(&system, &plain_node)["reason"], "disk failed");
    let table = system.ok(&["resource", "list"]);
    assert!(table.contains("down (disk failed)"), "{table}");

    // The requeued job keeps its id and runs again elsewhere.
    system.ok(&["resource", "down", &requeue_node]);
    assert!(wait_for(|| {
        let row = system.job(&requeue);
        row["state"] == "running" && row["nodes"] != requeue_node.as_str()
    }));
    let info = system.json(&["job", "info", &requeue, "--json"]);
    let events: Vec<&str> = info["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"requeue"), "{events:?}");

    // Two of alpha's four nodes are down and one runs the requeued job: one more job
    // fits, the next waits — never on a down node.
    let third = system.submit(&["-N", "1", "-t", "600s", "--", "app"]);
    let fourth = system.submit(&["-N", "1", "-t", "600s", "--", "app"]);
    let third_node = system.wait_state(&third, "running")["nodes"].clone();
    assert!(third_node != plain_node.as_str() && third_node != requeue_node.as_str());
    assert_eq!(system.job(&fourth)["state"], "pending");

    let both = format!("{plain_node},{requeue_node}");
    system.ok(&["resource", "up", &both]);
    system.wait_state(&fourth, "running");
    assert!(wait_for(|| node_row(&system, &plain_node)["state"] == "up"));
    assert_eq!(node_row(&system, &plain_node)["reason"], Value::Null);

    // Only admins mark nodes down.
    let bob = system.user_dir("bob");
    let out = system.cli_in(&bob, &["resource", "down", "node3"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("forbidden"), "{err}");
    assert!(node_row(&system, "node3")["state"] == "up");

    // Names outside the cluster are refused, naming the node; nothing changes.
    let err = system.fails(&["resource", "down", "node[3,99]"]);
    assert!(err.contains("no node node99 in the cluster"), "{err}");
    assert!(node_row(&system, "node3")["state"] == "up");
}
