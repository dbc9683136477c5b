//! Run-time queue configuration, end to end (`shardsched up`, real processes, sim
//! executor): `queue add` gets a shard started by `up` and takes submissions; `queue
//! update` of the queue policy or of the definition is taken by the running shard, and one
//! of the match policy restarts only that queue's shard and loses no job (pending and
//! running ones come back as they were); `queue remove` is refused while the queue has
//! jobs, and stops the shard of a removed queue; `reload` re-reads an edited file.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{System, alive, pid, wait_for};
use rustix::process::{Signal, kill_process};
use serde_json::Value;

/// alpha and beta as in the harness, on a 14-node cluster whose node[8-13] no queue
/// defines.
fn config() -> String {
    harness::with_alpha(
        "node[0-13]",
        r#"
[queues.beta]
nodes = "node[4-7]"
policy = "easy"
default_duration = "60s"
max_duration = "2h"
"#,
    )
}

fn queue(system: &System, name: &str) -> Option<Value> {
    row_named(system.json(&["queue", "list", "--json"]), name)
}

/// Like [`queue`], but `None` when the command fails: while `up` restarts a killed
/// coordinator, its address file names the dead one's port until the new one writes its
/// own, and another process (another test's) may hold that port by then.
fn queue_if_reachable(system: &System, name: &str) -> Option<Value> {
    let out = system.cli(&["queue", "list", "--json"]);
    if !out.status.success() {
        return None;
    }
    row_named(serde_json::from_slice(&out.stdout).ok()?, name)
}

/// The row of queue `name` in `queue list --json`'s output.
fn row_named(list: Value, name: &str) -> Option<Value> {
    match list {
        Value::Array(rows) => rows.into_iter().find(|q| q["name"] == name),
        other => panic!("queue list printed {other:?}"),
    }
}

/// Waits until `name` is listed and its shard is online.
fn wait_online(system: &System, name: &str) -> Value {
    let mut last = None;
    let online = wait_for(|| {
        last = queue(system, name);
        last.as_ref().is_some_and(|q| q["online"] == true)
    });
    assert!(online, "queue {name} never came online: {last:?}");
    last.unwrap()
}

/// The states of `ids`, in order; `None` if one is not listed (lost, or its shard is
/// between two runs).
fn try_states(system: &System, ids: &[String]) -> Option<Vec<String>> {
    let jobs = system.jobs();
    ids.iter()
        .map(|id| {
            jobs.iter()
                .find(|j| j["id"] == id.as_str())
                .map(|j| j["state"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn states(system: &System, ids: &[String]) -> Vec<String> {
    try_states(system, ids).unwrap_or_else(|| panic!("a job of {ids:?} is not listed"))
}

/// Waits until every job of `ids` is listed in the state it had in `before`.
fn wait_states(system: &System, ids: &[String], before: &[String]) {
    let mut last = None;
    let same = wait_for(|| {
        last = try_states(system, ids);
        last.as_deref() == Some(before)
    });
    assert!(same, "jobs {ids:?} were {before:?}, now {last:?}");
}

/// Waits until `up` runs a child for `queue` (or `coordinator`) other than `old`; returns
/// its pid.
fn wait_new_shard(system: &System, queue: &str, old: u32) -> u32 {
    let mut pid = None;
    let restarted = wait_for(|| {
        pid = system.try_child_pid(queue).filter(|&p| p != old);
        pid.is_some() && !alive(old)
    });
    assert!(restarted, "queue {queue}'s shard {old} was not replaced");
    pid.unwrap()
}

#[test]
fn queues_are_added_updated_removed_and_reloaded_at_run_time_without_losing_jobs() {
    let system = System::start_with("reconfig", &config(), &[]);

    // Add: up starts the shard; the queue owns its free nodes and takes jobs.
    let out = system.ok(&[
        "queue",
        "add",
        "gamma",
        "--nodes",
        "node[8-11]",
        "--policy",
        "fcfs",
        "--max-duration",
        "2h",
    ]);
    assert!(out.contains("added queue gamma"), "{out}");
    assert!(out.contains("gamma owns node[8-11]"), "{out}");
    let gamma = wait_online(&system, "gamma");
    assert_eq!(gamma["queue_policy"], "fcfs");
    assert_eq!(gamma["nodes_owned"], 4);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(system.submit(&["-q", "gamma", "-N", "1", "-t", "600s", "--", "app"]));
    }
    // Needs the whole queue: waits behind the three.
    ids.push(system.submit(&["-q", "gamma", "-N", "4", "-t", "600s", "--", "app"]));
    for id in &ids[..3] {
        system.wait_state(id, "running");
    }
    assert_eq!(states(&system, &ids)[3], "pending");
    // Under fcfs the whole-queue job blocks everything behind it, even a short job that
    // would fit the free node before the big one could start.
    let small = system.submit(&["-q", "gamma", "-N", "1", "-t", "60s", "--", "app"]);
    assert_eq!(states(&system, std::slice::from_ref(&small)), ["pending"]);
    let before = states(&system, &ids);

    // Update the policy with jobs pending and running: gamma's shard takes it in place.
    let gamma_pid = system.child_pid("gamma");
    let alpha_pid = system.child_pid("alpha");
    let out = system.ok(&[
        "queue",
        "update",
        "gamma",
        "--policy",
        "easy",
        "--queue-depth",
        "8",
    ]);
    assert!(
        out.contains("gamma: its shard applies it without a restart"),
        "{out}"
    );
    let mut row = None;
    assert!(
        wait_for(|| {
            row = queue(&system, "gamma");
            row.as_ref().is_some_and(|q| q["queue_policy"] == "easy")
        }),
        "{row:?}"
    );
    assert_eq!(system.child_pid("gamma"), gamma_pid, "no restart");
    wait_states(&system, &ids, &before);
    // The new policy is in force: EASY backfills the short job onto the free node.
    system.wait_state(&small, "running");
    let before: Vec<String> = states(&system, &ids);

    // A match policy change restarts only gamma's shard, and loses no job.
    let out = system.ok(&["queue", "update", "gamma", "--match-policy", "lonode"]);
    assert!(out.contains("gamma: its shard restarts"), "{out}");
    let gamma_new = wait_new_shard(&system, "gamma", gamma_pid);
    let gamma = wait_online(&system, "gamma");
    assert_eq!(gamma["match_policy"], "lonode");
    assert_eq!(
        system.child_pid("alpha"),
        alpha_pid,
        "alpha's shard untouched"
    );
    // Every job comes back as it was (a lost one never would).
    wait_states(&system, &ids, &before);
    assert_eq!(states(&system, std::slice::from_ref(&small)), ["running"]);

    // The run-time table is durable: a coordinator killed and restarted by up still has
    // gamma with its new policy, and gamma's shard registers with it again.
    let coordinator = system.child_pid("coordinator");
    kill_process(pid(coordinator), Signal::KILL).unwrap();
    wait_new_shard(&system, "coordinator", coordinator);
    let mut last = None;
    assert!(
        wait_for(|| {
            last = queue_if_reachable(&system, "gamma");
            last.as_ref()
                .is_some_and(|q| q["online"] == true && q["queue_policy"] == "easy")
        }),
        "gamma after the coordinator's restart: {last:?}"
    );
    // Every shard registers with the new coordinator (a shard notices the restart when it
    // next talks to it), so that the changes below reach them while connected.
    wait_online(&system, "alpha");
    wait_online(&system, "beta");
    assert_eq!(
        system.child_pid("gamma"),
        gamma_new,
        "no restart: nothing changed"
    );

    // Remove: refused while gamma has jobs; the default queue cannot go.
    let err = system.fails(&["queue", "remove", "gamma"]);
    assert!(err.contains("gamma has jobs"), "{err}");
    let err = system.fails(&["queue", "remove", "alpha"]);
    assert!(err.contains("default queue"), "{err}");
    assert!(queue(&system, "gamma").is_some());

    // A stopped queue over alpha's nodes owns nothing: once its shard is up it can go,
    // and up stops its shard.
    let out = system.ok(&["queue", "add", "spare", "--nodes", "node[0-3]", "--stopped"]);
    assert!(out.contains("added queue spare"), "{out}");
    wait_online(&system, "spare");
    let spare_pid = system.child_pid("spare");
    let out = system.ok(&["queue", "remove", "spare"]);
    assert!(out.contains("removed queue spare"), "{out}");
    assert!(queue(&system, "spare").is_none());
    assert!(
        wait_for(|| !alive(spare_pid)),
        "spare's shard was not stopped"
    );

    // Reload an edited file: beta's policy changes (taken in place), delta is added, gamma
    // (kept in the file as it is now) keeps its jobs; alpha is not restarted.
    let edited = format!(
        "{}\n[queues.gamma]\nnodes = \"node[8-11]\"\npolicy = \"easy\"\nmatch_policy = \"lonode\"\nqueue_depth = 8\nmax_duration = \"2h\"\n\n[queues.delta]\nnodes = \"node[12-13]\"\npolicy = \"conservative\"\n",
        config().replace("policy = \"easy\"", "policy = \"conservative\"")
    );
    std::fs::write(system.config_file(), edited).unwrap();
    let beta_pid = system.child_pid("beta");
    let out = system.ok(&["reload"]);
    assert!(out.contains("added queue delta"), "{out}");
    assert!(
        out.contains("beta: its shard applies it without a restart"),
        "{out}"
    );
    assert!(!out.contains("gamma: configuration changed"), "{out}");
    let mut row = None;
    assert!(
        wait_for(|| {
            row = queue(&system, "beta");
            row.as_ref()
                .is_some_and(|q| q["queue_policy"] == "conservative")
        }),
        "{row:?}"
    );
    assert_eq!(system.child_pid("beta"), beta_pid, "no restart");
    let delta = wait_online(&system, "delta");
    assert_eq!(delta["nodes_owned"], 2);
    let job = system.submit(&["-q", "delta", "-N", "1", "-t", "60s", "--", "app"]);
    system.wait_state(&job, "running");
    assert_eq!(system.child_pid("alpha"), alpha_pid);
    // gamma's jobs survive the reload.
    wait_states(&system, &ids, &before);

    // A reload of a broken file changes nothing and says where the error is.
    std::fs::write(
        system.config_file(),
        "default_queue = \"nope\"\n[queues.alpha]\nnodes = \"node1\"\n",
    )
    .unwrap();
    let err = system.fails(&["reload"]);
    assert!(err.contains("config.toml"), "{err}");
    assert!(queue(&system, "delta").is_some());
}

/// `queue remove Q --give-to R`: Q's nodes move to R (a normal move), then Q is removed,
/// in one command; a definition update that would leave out nodes Q owns says what to type.
#[test]
fn remove_give_to_moves_the_nodes_then_removes_the_queue() {
    let system = System::start_with("remove-give-to", &config(), &[]);
    let out = system.ok(&["queue", "add", "spare", "--nodes", "node[8-9]", "--stopped"]);
    assert!(out.contains("spare owns node[8-9]"), "{out}");
    wait_online(&system, "spare");
    let err = system.fails(&["queue", "update", "spare", "--nodes", "node8"]);
    assert!(
        err.contains("`shardsched queue move node9 --from spare --to QUEUE`"),
        "{err}"
    );
    let err = system.fails(&["queue", "remove", "spare", "--give-to", "alpha"]);
    assert!(
        err.contains("`shardsched queue update alpha --nodes node[0-3,8-9]` adds them"),
        "{err}"
    );
    system.ok(&["queue", "update", "alpha", "--nodes", "node[0-3,8-9]"]);
    wait_online(&system, "alpha");
    let spare_pid = system.child_pid("spare");
    let out = system.ok(&["queue", "remove", "spare", "--give-to", "alpha"]);
    assert!(
        out.contains("spare: its nodes node[8-9] move to alpha"),
        "{out}"
    );
    assert!(out.contains("removed queue spare"), "{out}");
    assert!(queue(&system, "spare").is_none());
    let alpha = queue(&system, "alpha").unwrap();
    assert_eq!(alpha["owned"], "node[0-3,8-9]", "{alpha}");
    assert!(
        wait_for(|| !alive(spare_pid)),
        "spare's shard was not stopped"
    );
}

/// `queue update Q --nodes` that only changes Q's definition is applied by Q's running
/// shard: no restart (same process), its running job untouched, the nodes it gained
/// usable at once; narrowing it again drops nodes it does not hold, and a pending job
/// that no longer fits fails as a restart would fail it.
#[test]
fn a_definition_grows_and_narrows_in_place_without_a_restart() {
    let system = System::start_with("redefine", &config(), &[]);
    wait_online(&system, "alpha");
    let running = system.submit(&["-N", "2", "-t", "1h", "--", "app"]);
    let started_ms = system.wait_state(&running, "running")["start_ms"].clone();
    let alpha_pid = system.child_pid("alpha");

    // Grow over free nodes: alpha owns them now, and its shard takes them in place.
    let out = system.ok(&["queue", "update", "alpha", "--nodes", "node[0-3,8-11]"]);
    assert!(out.contains("alpha owns node[8-11] now"), "{out}");
    assert!(
        out.contains("alpha: its shard applies it without a restart"),
        "{out}"
    );
    let mut row = None;
    let owned = wait_for(|| {
        row = queue(&system, "alpha");
        row.as_ref().is_some_and(|q| q["nodes_up"] == 8)
    });
    assert!(owned, "alpha never had 8 nodes up: {row:?}");
    // Six nodes: the two free old ones and the four new ones, beside the running job.
    let six = system.submit(&["-N", "6", "-t", "1h", "--", "app"]);
    system.wait_state(&six, "running");
    assert_eq!(system.job(&running)["start_ms"], started_ms, "untouched");
    assert_eq!(system.child_pid("alpha"), alpha_pid, "no restart");

    // Widen over beta's nodes (owned by beta): defined, not owned. A job that needs them
    // fits the definition and waits.
    system.ok(&["queue", "update", "alpha", "--nodes", "node[0-11]"]);
    let twelve = system.submit(&["-N", "12", "-t", "1h", "--", "app"]);
    assert_eq!(system.job(&twelve)["state"], "pending");
    // Narrow back: node[4-7] leave alpha's graph; the twelve-node job can never run now.
    let out = system.ok(&["queue", "update", "alpha", "--nodes", "node[0-3,8-11]"]);
    assert!(out.contains("without a restart"), "{out}");
    let failed = system.wait_state(&twelve, "failed");
    assert!(
        failed.to_string().contains("unsatisfiable"),
        "the failure says why: {failed}"
    );
    assert_eq!(system.job(&running)["state"], "running");
    assert_eq!(system.job(&six)["state"], "running");
    assert_eq!(system.child_pid("alpha"), alpha_pid, "still no restart");
    // beta's nodes are beta's, up there.
    let beta = queue(&system, "beta").unwrap();
    assert_eq!(beta["nodes_owned"], 4, "{beta}");
    assert!(alive(alpha_pid));
}
