//! What a new user meets, through the `shardsched` commands on a real `up` (issue 11's
//! "found when tried as a new user would"): time limits as Flux and Slurm users type them,
//! pending jobs that show the nodes they ask for, drain reasons that stay, the README's
//! jobspec, job ids that do not expose internals, policy refusals labelled as such, log files
//! without terminal colour codes, and the help that names every queue command.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{System, two_queues_config, wait_for};
use serde_json::Value;

/// The system the tests start: [`harness::two_queues_config`] (alpha on node[0-3], beta on
/// node[4-7], 1 socket × 4 cores per node).
fn start(name: &str) -> System {
    System::start(name, &[])
}

fn node<'a>(nodes: &'a [Value], name: &str) -> &'a Value {
    nodes
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {nodes:#?}"))
}

#[test]
fn a_bare_time_limit_is_minutes_and_units_work_everywhere() {
    let system = start("new-user-durations");
    let minutes = system.submit(&["-q", "beta", "-t", "2", "--", "app"]);
    let seconds = system.submit(&["-q", "beta", "-t", "90s", "--", "app"]);
    let hours = system.submit(&["-q", "beta", "-t", "1.5h", "--", "app"]);
    assert_eq!(system.job(&minutes)["duration_ms"], 120_000);
    assert_eq!(system.job(&seconds)["duration_ms"], 90_000);
    assert_eq!(system.job(&hours)["duration_ms"], 5_400_000);

    // Below 1 ms a duration would round to 0, which means "unlimited" or "the default".
    let err = system.fails(&["submit", "-t", "0.4ms", "--", "app"]);
    assert!(err.contains("shorter than 1ms"), "{err}");
    let err = system.fails(&["queue", "update", "beta", "--max-duration", "0.4ms"]);
    assert!(err.contains("shorter than 1ms"), "{err}");
}

#[test]
fn pending_jobs_show_the_nodes_they_ask_for() {
    let system = start("new-user-nnodes");
    let fill = system.submit(&["-q", "alpha", "-N", "4", "-t", "1h", "--", "app"]);
    system.wait_state(&fill, "running");
    let two = system.submit(&["-q", "alpha", "-N", "2", "-t", "1h", "--", "app"]);
    let slots = system.submit(&["-q", "alpha", "-n", "2", "-t", "1h", "--", "app"]);
    assert_eq!(system.job(&two)["state"], "pending");
    assert_eq!(system.job(&two)["nnodes"], 2);
    assert_eq!(
        system.job(&slots)["nnodes"],
        Value::Null,
        "slots only: not known yet"
    );
    assert_eq!(system.job(&fill)["nnodes"], 4);
    let table = system.ok(&["jobs", "-A"]);
    let row = table
        .lines()
        .find(|l| l.starts_with(&two))
        .unwrap_or_else(|| panic!("{two} not in {table}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns[4..6], ["PD", "2"], "{table}");
}

#[test]
fn a_drain_without_a_reason_keeps_the_earlier_one_and_a_busy_drained_node_is_draining() {
    let system = start("new-user-drain");
    system.ok(&["resource", "drain", "node4", "--reason", "bad dimm"]);
    system.ok(&["resource", "drain", "node[4-5]"]);
    let nodes = system.resources();
    assert_eq!(node(&nodes, "node4")["reason"], "bad dimm");
    assert_eq!(node(&nodes, "node4")["state"], "drained");

    let busy = system.submit(&["-q", "alpha", "-N", "1", "-t", "1h", "--", "app"]);
    let row = system.wait_state(&busy, "running");
    let host = row["nodes"].as_str().unwrap().to_owned();
    system.ok(&["resource", "drain", &host, "--reason", "swap fan"]);
    let mut nodes = Vec::new();
    assert!(
        wait_for(|| {
            nodes = system.resources();
            node(&nodes, &host)["state"] == "draining"
        }),
        "{host} runs a job and is drained: {nodes:#?}"
    );
    assert!(
        system
            .ok(&["resource", "list"])
            .contains("draining (swap fan)")
    );
}

#[test]
fn the_readme_jobspec_runs_and_an_unloaded_type_is_denied_saying_why() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/examples/one-node.yaml");
    let sockets = r#"version: 9999
resources:
  - type: node
    count: 1
    with:
      - type: slot
        label: task
        count: 1
        with:
          - type: socket
            count: 1
            with: [{type: core, count: 4}]
tasks: [{command: [app], slot: task, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
"#;
    let system = start("new-user-allowlist");
    let job = system.submit(&["-q", "alpha", "--jobspec", example]);
    system.wait_state(&job, "running");
    let file = system.dir.join("sockets.yaml");
    std::fs::write(&file, sockets).unwrap();
    let err = system.fails(&["submit", "-q", "alpha", "--jobspec", file.to_str().unwrap()]);
    assert!(
        err.contains("asks for socket, which the shards do not load")
            && err.contains("load_allowlist"),
        "{err}"
    );
    drop(system);

    // With sockets in the cluster's allowlist, the same jobspec runs.
    let config = two_queues_config().replace(
        "[cluster.inline]",
        "[cluster]\nload_allowlist = [\"node\", \"socket\", \"core\"]\n\n[cluster.inline]",
    );
    let system = System::start_with("new-user-allowlist-sockets", &config, &[]);
    let file = system.dir.join("sockets.yaml");
    std::fs::write(&file, sockets).unwrap();
    let job = system.submit(&["-q", "alpha", "--jobspec", file.to_str().unwrap()]);
    system.wait_state(&job, "running");
}

#[test]
fn job_ids_name_the_job_and_the_ascii_f_form_works() {
    let system = start("new-user-ids");
    for args in [&["cancel", "12345"][..], &["job", "info", "12345"]] {
        let err = system.fails(args);
        assert!(err.contains("no job 12345"), "{err}");
        assert!(!err.contains("generator"), "internals: {err}");
    }
    let err = system.fails(&["cancel", "xyz"]);
    assert!(
        err.contains("f2KEkBMqV"),
        "the hint shows the ASCII form: {err}"
    );
    let id = system.submit(&["-q", "alpha", "-N", "1", "-t", "1h", "--", "app"]);
    let ascii = id.replacen('ƒ', "f", 1);
    assert_ne!(ascii, id);
    system.ok(&["job", "info", &ascii]);
    system.ok(&["cancel", &ascii]);
    system.wait_state(&id, "cancelled");
}

#[test]
fn policy_refusals_say_so_and_logs_carry_no_colour_codes() {
    let system = start("new-user-policy");
    system.ok(&["queue", "disable", "beta", "--reason", "maintenance"]);
    let err = system.fails(&["submit", "-q", "beta", "--", "app"]);
    assert!(err.contains("refused by policy:"), "{err}");
    assert!(!err.contains("unavailable"), "{err}");

    let logs = std::fs::read_dir(system.state().join("logs")).unwrap();
    let mut read = 0;
    for log in logs {
        let path = log.unwrap().path();
        let text = std::fs::read(&path).unwrap();
        assert!(!text.contains(&0x1b), "{} has escape codes", path.display());
        read += 1;
    }
    assert_eq!(read, 3, "coordinator, alpha and beta");
}

#[test]
fn queue_help_names_every_queue_command() {
    let out = std::process::Command::new(harness::EXE)
        .args(["queue", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let summary = help.lines().next().unwrap_or_default();
    assert!(summary.contains("`queue list`"), "{summary}");
    for command in ["add", "remove", "update", "start", "stop", "move"] {
        assert!(
            summary.contains(&format!("`{command}`")),
            "{command}: {summary}"
        );
    }
}

/// The README's recipe for a second user, step by step.
#[test]
fn a_second_user_gets_access_as_the_readme_says() {
    let system = start("new-user-second");
    let bob = system.dir.join("bob");
    let client = bob.join("client");
    system.ok(&[
        "cert",
        "issue",
        "--role",
        "user",
        "--name",
        "bob",
        "--out",
        client.to_str().unwrap(),
    ]);
    std::fs::create_dir_all(bob.join("coordinator")).unwrap();
    std::fs::copy(
        system.state().join("coordinator/address"),
        bob.join("coordinator/address"),
    )
    .unwrap();
    let out = system.cli_in(
        &bob,
        &["submit", "-N", "1", "-t", "10m", "--", "sleep", "600"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(system.job(&id)["owner"], "bob");
    let out = system.cli_in(&bob, &["jobs"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    let out = system.cli_in(&bob, &["resource", "drain", "node0"]);
    assert!(!out.status.success(), "a user is no admin");
}
