//! A site's scripts on the nodes of `up --agents` (Slurm's Prolog and HealthCheckProgram):
//! a prolog that fails sends the job back to pending and drains the node; a failing health
//! check drains its node with the program's output as the reason.

mod harness;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use harness::{System, agents_config, wait_for};

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A directory for the scripts, readable by the agents (made before `up` starts).
fn scripts_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shardsched-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scripts dir");
    dir
}

#[test]
fn a_failing_prolog_requeues_the_job_and_drains_its_node() {
    let dir = scripts_dir("prolog");
    let prolog = script(
        &dir,
        "prolog",
        "[ \"$SHARDSCHED_NODE\" = node1 ] || { echo no scratch space; exit 1; }",
    );
    let arg = format!("--agent-arg=--prolog={}", prolog.display());
    let sys = System::start_with("agents-prolog", &agents_config(""), &["--agents", &arg]);
    let id = sys.submit(&["-N", "1", "-t", "1m", "--", "true"]);
    let row = sys.wait_state(&id, "completed");
    assert_eq!(row["nodes"], "node1", "ran on the next node: {row:#}");
    let info = sys.ok(&["job", "info", &id]);
    assert!(
        info.contains("requeue") && info.contains("no scratch space"),
        "{info}"
    );
    // The prolog fails on every node of alpha but node1: whichever the job tried first is
    // drained with the prolog's output, and so is every other it tried.
    let drained: Vec<serde_json::Value> = ["node0", "node2", "node3"]
        .iter()
        .map(|node| sys.node_row(node))
        .filter(|row| row["state"] == "drained")
        .collect();
    assert!(
        !drained.is_empty(),
        "a node the prolog failed on is drained"
    );
    for row in &drained {
        let reason = row["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("prolog failed on") && reason.ends_with("no scratch space"),
            "{row:#}"
        );
    }
    assert_eq!(sys.node_row("node1")["state"], "up");
    // A launch the prolog stopped left no cgroup behind.
    for row in &drained {
        let node = row["name"].as_str().unwrap_or_default();
        if let Some(root) = sys.agent_cgroup_root(node) {
            let left: Vec<_> = std::fs::read_dir(&root)
                .map(|d| d.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            assert!(
                !left.iter().any(|n| n.to_string_lossy().starts_with("job-")),
                "{}: {left:?}",
                root.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_health_check_drains_its_node_with_the_programs_output() {
    let dir = scripts_dir("health");
    let check = script(
        &dir,
        "health",
        "[ \"$SHARDSCHED_NODE\" = node5 ] && { echo disk full; exit 1; }; exit 0",
    );
    let sys = System::start_with(
        "agents-health",
        &agents_config(""),
        &[
            "--agents",
            &format!("--agent-arg=--health-check={}", check.display()),
            "--agent-arg=--health-interval=1s",
        ],
    );
    let drained = wait_for(|| {
        let row = sys.node_row("node5");
        row["state"] == "drained"
            && row["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("health check failed") && r.ends_with("disk full"))
    });
    assert!(drained, "{:#}", sys.node_row("node5"));
    assert_eq!(sys.node_row("node4")["state"], "up", "the others pass");
    let _ = std::fs::remove_dir_all(&dir);
}
