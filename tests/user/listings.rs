//! Listings: `jobs --format`, `--state`, `--name`; `resource list` with free cores per node,
//! partly used nodes as sinfo's `mix`, grouped by queue and state.

use crate::harness::{System, wait_for};

#[test]
fn jobs_are_listed_in_the_fields_and_states_asked_for() {
    let system = System::start("user-listings-jobs", &[]);
    let running = system.submit(&[
        "-q", "alpha", "-J", "solver", "-N", "4", "-t", "1h", "--", "app",
    ]);
    system.wait_state(&running, "running");
    let pending = system.submit(&[
        "-q", "alpha", "-J", "post", "-N", "1", "-t", "30m", "--", "app",
    ]);
    let done = system.submit(&["-q", "beta", "-t", "1h", "--", "app"]);
    system.wait_state(&done, "running");
    system.ok(&["cancel", &done]);

    let text = system.ok(&[
        "jobs",
        "--format",
        "{id} {name:<8}|{state} {time_limit} {urgency:>3}",
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "ID NAME    |STATE TIME_LIMIT URGENCY", "{text}");
    assert!(
        lines.contains(&format!("{pending} post    |pending 30m00s  16").as_str()),
        "{text}"
    );
    assert_eq!(lines.len(), 3, "active jobs only: {text}");

    let only = system.ok(&[
        "jobs",
        "--state",
        "running",
        "--format",
        "{id}",
        "--no-header",
    ]);
    assert_eq!(only.trim(), running);
    let ended = system.ok(&[
        "jobs",
        "--state",
        "CA",
        "--format",
        "{id} {st}",
        "--no-header",
    ]);
    assert_eq!(
        ended.trim(),
        format!("{done} CA"),
        "an ended state lists ended jobs"
    );
    let named = system.rows(&["jobs", "--name", "post", "--json"]);
    assert_eq!(named.len(), 1);
    assert_eq!(named[0]["id"], pending.as_str());
    let err = system.fails(&["jobs", "--format", "{id} {bogus}"]);
    assert!(err.contains("no field \"bogus\""), "{err}");
    let err = system.fails(&["jobs", "--state", "stuck"]);
    assert!(err.contains("not a job state"), "{err}");
}

#[test]
fn resources_show_free_cores_and_partly_used_nodes() {
    let system = System::start("user-listings-resources", &[]);
    let one_core = system.submit(&[
        "-q", "alpha", "-w", "node0", "-n", "1", "-t", "1h", "--", "app",
    ]);
    let whole = system.submit(&[
        "-q", "alpha", "-w", "node1", "-N", "1", "-t", "1h", "--", "app",
    ]);
    system.wait_state(&one_core, "running");
    system.wait_state(&whole, "running");
    // The coordinator's view comes from the shards' status reports.
    let settled = wait_for(|| {
        system.node_row("node0")["cores_free"] == 3 && system.node_row("node1")["cores_free"] == 0
    });
    assert!(settled, "{:#?}", system.resources());
    let node0 = system.node_row("node0");
    assert_eq!(
        (node0["cores"].as_u64(), node0["usage"].as_str()),
        (Some(4), Some("mix"))
    );
    assert_eq!(system.node_row("node1")["usage"], "allocated");
    assert_eq!(system.node_row("node2")["usage"], "idle");
    assert_eq!(system.node_row("node2")["state"], "up");

    let table = system.ok(&["resource", "list"]);
    let row = |queue: &str, state: &str| {
        table
            .lines()
            .find(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.len() > 2 && c[0] == queue && c[1] == state
            })
            .unwrap_or_else(|| panic!("no {queue} {state} row in {table}"))
            .to_owned()
    };
    assert!(
        row("alpha", "mix").ends_with("3/4    0/0   node0"),
        "{table}"
    );
    assert!(row("alpha", "allocated").contains("node1"), "{table}");
    assert!(row("alpha", "idle").ends_with("node[2-3]"), "{table}");
    assert!(row("beta", "idle").contains("16/16"), "{table}");
    let long = system.ok(&["resource", "list", "-l"]);
    let node0 = long.lines().find(|l| l.starts_with("node0 ")).unwrap();
    assert_eq!(
        node0.split_whitespace().collect::<Vec<_>>(),
        ["node0", "alpha", "mix", "1", "3/4", "0/0"],
        "{long}"
    );
}
