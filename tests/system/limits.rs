//! Per-user limits across queues, end to end (issue 18, docs/POLICIES.md "Limits"):
//! `limits set max_running 2 --user U` with jobs of U in two queues keeps at most 2 running
//! cluster-wide, holds the others with the limit in their reason, and lets them run as
//! the first ones end. Every wait is on a state (the jobs run until the test lets them
//! end), with the harness's generous timeout.

use serde_json::Value;

use crate::harness::System;

fn ms(row: &Value, field: &str) -> u64 {
    row[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field}: {row:#}"))
}

#[test]
fn max_running_two_for_a_user_keeps_two_running_over_two_queues() {
    let system = System::start("limits", &["--executor", "exec"]);
    // Who the test's submits run as: the owner of a job it submits.
    let probe = system.submit(&["-q", "alpha", "-N", "1", "--urgency", "hold", "--", "true"]);
    let owner = system.job(&probe)["owner"]
        .as_str()
        .expect("an owner")
        .to_owned();
    system.ok(&["cancel", &probe]);
    let said = system.ok(&["limits", "set", "max_running", "2", "--user", &owner]);
    assert!(said.contains("max_running 2 for user"), "{said}");
    let listed = system.ok(&["limits"]);
    assert!(
        listed.contains("max_running") && listed.contains(&owner),
        "{listed}"
    );
    let err = system.fails(&["limits", "set", "max_sandwiches", "2"]);
    assert!(err.contains("no limit named"), "{err}");

    let go = system.dir.join("limits-go");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", go.display());
    let ids: Vec<String> = ["alpha", "beta", "alpha", "beta", "alpha", "beta"]
        .into_iter()
        .map(|q| system.submit(&["-q", q, "-N", "1", "--", "sh", "-c", &wait]))
        .collect();
    let why = format!("limit: max_running 2 for user {owner}");
    let ours = |jobs: &[Value]| -> Vec<Value> {
        jobs.iter()
            .filter(|j| ids.iter().any(|id| j["id"] == id.as_str()))
            .cloned()
            .collect()
    };
    // Nothing ends until the test says: two run, the four others wait on the limit.
    system.wait_jobs("two running and four held by the limit", |jobs| {
        let ours = ours(jobs);
        let running = ours.iter().filter(|j| j["state"] == "running").count();
        let held = ours
            .iter()
            .filter(|j| j["state"] == "pending" && j["reason"] == why.as_str())
            .count();
        running == 2 && held == 4
    });

    std::fs::write(&go, "").expect("letting the jobs end");
    for id in &ids {
        system.wait_state(id, "completed");
    }
    // At no instant did more than two run: every start and end, in time order.
    let rows: Vec<Value> = ids.iter().map(|id| system.job(id)).collect();
    let mut edges: Vec<(u64, i32)> = rows
        .iter()
        .flat_map(|r| [(ms(r, "start_ms"), 1), (ms(r, "end_ms"), -1)])
        .collect();
    // An end and a start at the same millisecond: the end first.
    edges.sort_unstable();
    let mut running = 0;
    for (at, step) in edges {
        running += step;
        assert!(running <= 2, "{running} running at {at}: {rows:#?}");
    }
}
