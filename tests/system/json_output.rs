//! Every read command's `--json`, parsed: `jobs`, `job info`, `queue list`, `resource list`,
//! `queue moves` and `queue move --dry-run`. Programs read these; a field renamed or a line
//! of text slipped into the output breaks them, and this test.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::System;
use serde_json::Value;

/// The read commands, each with `--json`, and what its JSON must hold.
#[test]
fn every_read_command_prints_json_that_parses() {
    // beta's definition takes in alpha's nodes, so that they may move to it.
    let config = harness::with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[0-7]"
policy = "easy"
default_duration = "60s"
max_duration = "2h"
"#,
    );
    let system = System::start_with("json-output", &config, &[]);
    let id = system.submit(&["-N", "1", "-t", "10m", "--", "sleep", "600"]);
    system.wait_state(&id, "running");

    let jobs = system.rows(&["jobs", "--json"]);
    let job = jobs.iter().find(|j| j["id"] == id.as_str()).unwrap();
    assert_eq!(job["state"], "running");
    assert_eq!(job["queue"], "alpha");
    assert!(job["submit_ms"].is_u64(), "{job}");

    let info = system.json(&["job", "info", &id, "--json"]);
    assert_eq!(info["id"], id.as_str());
    assert!(info["jobspec"].is_object(), "{info}");
    assert!(info["events"].is_array(), "{info}");

    let queues = system.rows(&["queue", "list", "--json"]);
    let names: Vec<&str> = queues.iter().filter_map(|q| q["name"].as_str()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(queues[0]["default"], true);
    assert_eq!(queues[0]["pending_reasons"]["queued"], 0, "{}", queues[0]);

    let nodes = system.rows(&["resource", "list", "--json"]);
    assert_eq!(nodes.len(), 8);
    let alpha_nodes = system.rows(&["resource", "list", "-q", "alpha", "--json"]);
    assert!(alpha_nodes.iter().all(|n| n["queue"] == "alpha"));
    let busy = job["nodes"].as_str().unwrap();
    let idle = alpha_nodes
        .iter()
        .find(|n| n["jobs_running"] == 0 && n["name"] != busy)
        .and_then(|n| n["name"].as_str())
        .unwrap();

    assert_eq!(
        system.rows(&["queue", "moves", "--json"]),
        Vec::<Value>::new()
    );

    // The dry run of moving the busy node: it would be free when the job ends.
    let report = system.json(&[
        "queue",
        "move",
        busy,
        "--from",
        "alpha",
        "--to",
        "beta",
        "--dry-run",
        "--json",
    ]);
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["nodes"][0]["node"], busy);
    assert_eq!(report["nodes"][0]["free_now"], false);
    assert_eq!(report["nodes"][0]["jobs"][0], id.as_str());
    assert!(report["all_free_ms"].is_u64(), "{report}");
    assert!(report["stranded"].is_array(), "{report}");

    // A real move of an idle node, then `queue moves --json` lists it.
    system.ok(&["queue", "move", idle, "--from", "alpha", "--to", "beta"]);
    let moves = system.rows(&["queue", "moves", "--json"]);
    assert_eq!(moves[0]["from"], "alpha");
    assert_eq!(moves[0]["nodes"][0]["node"], idle);

    // `--json` belongs to the dry run: asked of a real move, it is refused before anything
    // is sent.
    let refused = system.fails(&[
        "queue", "move", busy, "--from", "alpha", "--to", "beta", "--json",
    ]);
    assert!(refused.contains("--dry-run"), "{refused}");
}
