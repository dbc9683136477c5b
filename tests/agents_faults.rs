//! `up --agents` when things go wrong: an agent killed mid-job, an agent stopped past the
//! heartbeat timeout, and a move with a deadline of a node whose task ignores SIGTERM.

mod harness;

use harness::{System, agents_config, alive, read_pid_file, spares_of, wait_for};
use rustix::process::{Signal, kill_process};
use shardsched_node::spares::SPARE_SUPERVISORS;

/// Kills a process when dropped: a failing test leaves no `sleep` behind.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = kill_process(harness::pid(self.0), Signal::KILL);
        }
    }
}

/// Sends `signal` to node `node`'s agent.
fn signal_agent(sys: &System, node: &str, signal: Signal) -> u32 {
    let agent = sys.agent_pid(node).expect("the agent runs");
    kill_process(harness::pid(agent), signal).expect("signal");
    agent
}

/// A job that writes its shell's pid to `<dir>/<name>.pid` and waits for `<dir>/go`.
fn waiting_job(sys: &System, name: &str) -> String {
    format!(
        "echo $$ > {d}/{name}.pid; while [ ! -e {d}/go ]; do sleep 0.1; done; exit 3",
        d = sys.dir.display()
    )
}

#[test]
fn a_killed_agent_comes_back_and_reports_the_tasks_it_left_running() {
    // The default timeout: an agent restarted by up is back well within its lease.
    let sys = System::start_with("agents-sigkill", &agents_config(""), &["--agents"]);
    // Every agent has its spare supervisors up: the job goes to one of them.
    let spares_up = |n: usize| {
        sys.agent_pid(&format!("node{n}"))
            .is_some_and(|agent| spares_of(agent).len() == SPARE_SUPERVISORS)
    };
    assert!(wait_for(|| (0..8).all(spares_up)));
    let script = waiting_job(&sys, "task");
    let id = sys.submit(&["-N", "1", "-t", "1m", "--", "sh", "-c", &script]);
    sys.wait_state(&id, "running");
    let task = read_pid_file(&sys.dir.join("task.pid"));
    let _cleanup = KillOnDrop(task);
    let node = sys.job(&id)["nodes"].as_str().expect("nodes").to_owned();
    let first_agent = sys.agent_pid(&node).expect("the agent");
    let supervisor = read_pid_file(&sys.node_job_dir(&node, &id).join("supervisor.pid"));
    let cmdline = std::fs::read(format!("/proc/{supervisor}/cmdline")).expect("cmdline");
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--spare"),
        "the job's supervisor was a spare"
    );
    assert!(wait_for(
        || spares_of(first_agent).len() == SPARE_SUPERVISORS
    ));
    let spares = spares_of(first_agent);
    let agent = signal_agent(&sys, &node, Signal::KILL);
    assert_eq!(agent, first_agent);
    // Its spares, which had no job, go with it; the spare that had one does not.
    assert!(
        wait_for(|| !spares.iter().any(|&s| alive(s))),
        "the killed agent's spares {spares:?} exit"
    );
    assert!(
        wait_for(|| sys.agent_pid(&node).is_some_and(|p| p != agent)),
        "up restarts the agent"
    );
    assert!(alive(task), "the task outlives its agent");
    assert!(alive(supervisor), "so does its supervisor");
    // The restarted agent finds it, and its end reaches the shard.
    std::fs::write(sys.dir.join("go"), "").expect("go");
    let row = sys.wait_state(&id, "failed");
    assert_eq!(row["reason"], "exit code 3", "{row:#}");
    let info = sys.ok(&["job", "info", &id]);
    assert!(!info.contains("requeue"), "it ran once: {info}");
}

#[test]
fn a_stopped_agents_job_stops_at_the_lease_before_it_is_requeued_and_its_node_is_down_until_back() {
    let sys = System::start_with(
        "agents-sigstop",
        &agents_config("heartbeat_timeout = \"4s\""),
        &["--agents"],
    );
    let script = waiting_job(&sys, "first");
    let id = sys.submit(&[
        "-N",
        "1",
        "--requeue",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    sys.wait_state(&id, "running");
    let first = read_pid_file(&sys.dir.join("first.pid"));
    let _cleanup = KillOnDrop(first);
    let node = sys.job(&id)["nodes"].as_str().expect("nodes").to_owned();
    let agent = signal_agent(&sys, &node, Signal::STOP);
    let resumed = || {
        let _ = kill_process(harness::pid(agent), Signal::CONT);
    };
    let down = wait_for(|| {
        let row = sys.node_row(&node);
        row["state"] == "down"
            && row["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("node agent unreachable since"))
    });
    if !down {
        resumed();
        panic!("{node} not marked down: {:#}", sys.node_row(&node));
    }
    // The job is requeued and runs elsewhere. The stopped agent cannot stop the first run,
    // but the run's supervisor does once the lease is over, before the shard takes the
    // run as gone: the job never runs twice at once.
    let requeued = wait_for(|| {
        let row = sys.job(&id);
        row["state"] == "running" && row["nodes"] != node.as_str()
    });
    let first_alive = alive(first);
    resumed();
    assert!(requeued, "requeued off the down node: {:#}", sys.job(&id));
    assert!(
        !first_alive,
        "the first run still ran when the job was requeued"
    );
    assert_eq!(
        sys.node_row(&node)["state"],
        "down",
        "down until resource up"
    );
    // Refused until the coordinator has heard the resumed agent again: ask until it is.
    let accepted = wait_for(|| sys.cli(&["resource", "up", &node]).status.success());
    assert!(accepted, "resource up {node}: {:#}", sys.node_row(&node));
    assert!(wait_for(|| sys.node_row(&node)["state"] == "up"));
    std::fs::write(sys.dir.join("go"), "").expect("go");
    sys.wait_state(&id, "failed");
}

#[test]
fn a_node_moved_with_a_deadline_comes_up_in_its_recipient_only_once_its_task_is_gone() {
    let sys = System::start_with("agents-move", &agents_config(""), &["--agents"]);
    // Ignores SIGTERM, and so does its sleep: only the SIGKILL after the grace ends it.
    let script = format!(
        "trap '' TERM; sleep 120 & echo $! > {}/sleep-$SHARDSCHED_NODE.pid; wait",
        sys.dir.display()
    );
    let id = sys.submit(&["-N", "4", "-t", "1m", "--", "sh", "-c", &script]);
    sys.wait_state(&id, "running");
    let sleeps: Vec<u32> = (0..4)
        .map(|n| read_pid_file(&sys.dir.join(format!("sleep-node{n}.pid"))))
        .collect();
    let _cleanup: Vec<KillOnDrop> = sleeps.iter().map(|&p| KillOnDrop(p)).collect();
    sys.ok(&[
        "queue",
        "move",
        "node3",
        "--from",
        "alpha",
        "--to",
        "beta",
        "--deadline",
        "1s",
    ]);
    let done = wait_for(|| {
        // The row first, the task after: a task alive *after* the row said up was alive
        // when its node came up. (The other order failed on a loaded machine: the task was
        // alive, then killed, released and up in beta while `resource list` ran.)
        let row = sys.node_row("node3");
        let up_in_beta = row["queue"] == "beta" && row["state"] == "up";
        let sleeping = alive(sleeps[3]);
        assert!(
            !(sleeping && up_in_beta),
            "node3 up in beta while its task still runs: {row:#}"
        );
        up_in_beta
    });
    assert!(done, "node3 comes up in beta: {:#}", sys.node_row("node3"));
    sys.wait_state(&id, "cancelled");
    // The recipient's transition log has node3 up, the donor's has it released first.
    let log = |q: &str| {
        std::fs::read_to_string(sys.shard_dir(q).join("transitions.log")).unwrap_or_default()
    };
    let released = log("alpha")
        .lines()
        .filter(|l| l.contains(" node3 released"))
        .count();
    let up = log("beta")
        .lines()
        .filter(|l| l.contains(" node3 up"))
        .count();
    assert_eq!(
        (released, up),
        (1, 1),
        "alpha:\n{}\nbeta:\n{}",
        log("alpha"),
        log("beta")
    );
}
