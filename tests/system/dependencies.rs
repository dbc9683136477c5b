//! Dependencies across queues, end to end (issue 18, docs/POLICIES.md): an `afterok` chain
//! across two queues runs in order; an `afterok` on a failed job never runs and says why,
//! or is cancelled under `--dependency-policy cancel`; an id that names no queue is refused;
//! a dependent job waiting across a restart of its shard and of the coordinator loses
//! nothing and is released once. Every wait is on a state, with the harness's generous
//! timeout.

use rustix::process::{Signal, kill_process};
use serde_json::Value;

use crate::harness::{System, pid, wait_for};

fn info(system: &System, id: &str) -> Value {
    system.json(&["job", "info", id, "--json"])
}

fn events(system: &System, id: &str, name: &str) -> usize {
    info(system, id)["events"]
        .as_array()
        .map_or(0, |e| e.iter().filter(|e| e["name"] == name).count())
}

fn ms(row: &Value, field: &str) -> u64 {
    row[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field}: {row:#}"))
}

#[test]
fn an_afterok_chain_across_two_queues_runs_in_order_and_a_failed_target_never_releases() {
    let system = System::start("deps-chain", &["--executor", "exec"]);
    // The first job runs until the test lets it end, so the second is seen waiting however
    // slow the machine is.
    let go = system.dir.join("deps-go");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", go.display());
    let first = system.submit(&["-q", "alpha", "-N", "1", "--", "sh", "-c", &wait]);
    let dep = |on: &str| format!("afterok:{on}");
    let second = system.submit(&["-q", "beta", "-N", "1", "-d", &dep(&first), "--", "true"]);
    let third = system.submit(&["-q", "alpha", "-N", "1", "-d", &dep(&second), "--", "true"]);
    let row = system.job(&second);
    assert_eq!(row["state"], "pending", "{row:#}");
    assert_eq!(row["reason"], format!("dependency: waiting on {first}"));
    std::fs::write(&go, "").expect("letting the first job end");
    let done = system.wait_state(&third, "completed");
    let (a, b) = (system.job(&first), system.job(&second));
    assert_eq!(
        (&a["state"], &b["state"]),
        (&"completed".into(), &"completed".into())
    );
    assert!(ms(&b, "start_ms") >= ms(&a, "end_ms"), "{a:#} {b:#}");
    assert!(ms(&done, "start_ms") >= ms(&b, "end_ms"), "{b:#} {done:#}");

    let failing = system.submit(&["-q", "alpha", "-N", "1", "--", "sh", "-c", "exit 3"]);
    let pends = system.submit(&["-q", "beta", "-N", "1", "-d", &dep(&failing), "--", "true"]);
    let cancels = system.submit(&[
        "-q",
        "beta",
        "-N",
        "1",
        "-d",
        &dep(&failing),
        "--dependency-policy",
        "cancel",
        "--",
        "true",
    ]);
    system.wait_state(&failing, "failed");
    let why = format!("dependency never satisfied: {failing} failed");
    system.wait_jobs("the dependents of a failed job to say why", |jobs| {
        let row = |id: &str| jobs.iter().find(|j| j["id"] == id).cloned();
        row(&pends).is_some_and(|r| r["state"] == "pending" && r["reason"] == why)
            && row(&cancels).is_some_and(|r| r["state"] == "cancelled" && r["reason"] == why)
    });
    assert_eq!(events(&system, &pends, "start"), 0, "it never ran");

    // An id no queue issued is refused before anything is submitted.
    let err = system.fails(&[
        "submit",
        "-q",
        "beta",
        "-d",
        "afterok:ƒzzzzzzzzz",
        "--",
        "true",
    ]);
    assert!(err.contains("names no queue"), "{err}");
    let err = system.fails(&[
        "submit",
        "-q",
        "beta",
        "-d",
        "afterok:nonsense",
        "--",
        "true",
    ]);
    assert!(err.contains("not a job id"), "{err}");
}

#[test]
fn a_dependent_job_survives_its_shard_and_the_coordinator_restarting_and_is_released_once() {
    let system = System::start("deps-restart", &[]);
    // Its target is held: nothing can release the dependent job until the test says so.
    let target = system.submit(&["-q", "alpha", "-N", "1", "--urgency", "hold", "--", "app"]);
    let waiting = system.submit(&[
        "-q",
        "beta",
        "-N",
        "1",
        "-t",
        "1s",
        "-d",
        &format!("afterany:{target}"),
        "--",
        "app",
    ]);
    let why = format!("dependency: waiting on {target}");
    assert_eq!(system.job(&waiting)["reason"], why);

    let shard = system.child_pid("beta");
    kill_process(pid(shard), Signal::KILL).unwrap();
    system.wait_jobs("beta's shard to come back with the waiting job", |jobs| {
        jobs.iter()
            .any(|j| j["id"] == waiting && j["state"] == "pending" && j["reason"] == why)
    });
    assert_ne!(system.child_pid("beta"), shard, "restarted");

    let coordinator = system.child_pid("coordinator");
    kill_process(pid(coordinator), Signal::KILL).unwrap();
    assert!(
        wait_for(|| system.cli(&["queue", "list", "--json"]).status.success()
            && system.child_pid("coordinator") != coordinator
            && system.queue_row("alpha")["online"] == true
            && system.queue_row("beta")["online"] == true),
        "the coordinator or a shard did not come back"
    );
    assert_eq!(system.job(&waiting)["state"], "pending");

    // The target cancelled: `afterany` is met, across the queues, once.
    system.ok(&["cancel", &target]);
    system.wait_state(&waiting, "completed");
    assert_eq!(events(&system, &waiting, "dependency-satisfied"), 1);
    assert_eq!(events(&system, &waiting, "start"), 1);
}
