//! `shardsched up --agents`: one node agent per node, each on a loopback address of its
//! own; the shards launch every job on its nodes' agents, as the user who submitted it.
//! The agents run as whoever runs the test (as root: jobs run as root, the admin
//! certificate being named after root; otherwise as the test's user).

mod harness;

use std::path::PathBuf;

use harness::{
    System, agents_config, parent_of, read_pid_file, spares_of, unified_cgroup_of, wait_for,
};
use shardsched_node::spares::SPARE_SUPERVISORS;

/// A 10 s heartbeat timeout (a 5 s lease): with 4 s, a 2 s lease was seen to run out
/// under two test suites at once, the shard's renewals coming late.
fn config() -> String {
    agents_config("heartbeat_timeout = \"10s\"")
}

#[test]
fn a_four_node_job_runs_one_task_on_each_node_under_that_nodes_agent() {
    let sys = System::start_with("agents-four", &config(), &["--agents"]);
    // Each task says where it is, who it runs as, its pid's parent (its node's supervisor)
    // and that one's parent (the agent, which started the supervisor).
    let script = "echo $SHARDSCHED_NODE $SHARDSCHED_TASK_RANK $SHARDSCHED_NTASKS $(id -un) \
                  $PPID $(cut -d' ' -f4 /proc/$PPID/stat); sleep 1";
    let id = sys.submit(&["-N", "4", "-t", "1m", "--", "sh", "-c", script]);
    let row = sys.wait_state(&id, "completed");
    assert_eq!(row["nodes"], "node[0-3]");
    let id_un = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id -un");
    let me = String::from_utf8_lossy(&id_un.stdout).trim().to_owned();
    for (rank, node) in ["node0", "node1", "node2", "node3"].iter().enumerate() {
        let words = sys.task_words(node, &id, rank as u32);
        assert_eq!(words[0], *node, "SHARDSCHED_NODE of rank {rank}: {words:?}");
        assert_eq!(words[1], rank.to_string());
        assert_eq!(words[2], "4", "SHARDSCHED_NTASKS");
        assert_eq!(words[3], me, "the task runs as the submitting user");
        let supervisor = read_pid_file(&sys.node_job_dir(node, &id).join("supervisor.pid"));
        assert_eq!(
            words[4],
            supervisor.to_string(),
            "{node}'s task is its supervisor's child"
        );
        let agent = sys.agent_pid(node).expect("agent");
        assert_eq!(
            words[5],
            agent.to_string(),
            "{node}'s supervisor was started by {node}'s agent"
        );
        assert_eq!(
            parent_of(agent),
            Some(sys.up_pid()),
            "up supervises the agents"
        );
    }
    // Each agent listens on its own loopback address, written to its state directory.
    let mut addresses: Vec<String> = (0..8)
        .map(|n| {
            let file = sys.layout().node_dir(&format!("node{n}")).join("address");
            std::fs::read_to_string(file)
                .expect("address")
                .trim()
                .to_owned()
        })
        .collect();
    assert!(
        addresses.iter().all(|a| a.starts_with("127.0.1.")),
        "{addresses:?}"
    );
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), 8);
}

#[test]
fn a_jobs_exit_status_is_its_highest_tasks() {
    let sys = System::start_with("agents-status", &config(), &["--agents"]);
    let id = sys.submit(&[
        "-N",
        "2",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        "exit $SHARDSCHED_TASK_RANK",
    ]);
    let row = sys.wait_state(&id, "failed");
    let info = sys.ok(&["job", "info", &id]);
    assert!(info.contains("exit code 1"), "{row:#}\n{info}");
}

#[test]
fn job_output_brings_a_tasks_output_from_its_node_and_follows_it() {
    let sys = System::start_with("agents-output", &config(), &["--agents"]);
    let go = sys.dir.join("go");
    let script = format!(
        "echo out $SHARDSCHED_TASK_RANK; echo err $SHARDSCHED_TASK_RANK >&2; \
         while [ ! -e {go} ]; do sleep 0.1; done; echo bye $SHARDSCHED_TASK_RANK",
        go = go.display()
    );
    let id = sys.submit(&["-N", "2", "-t", "1m", "--", "sh", "-c", &script]);
    sys.wait_state(&id, "running");
    assert!(
        harness::wait_for(|| sys.ok(&["job", "output", &id, "--task", "1"]) == "out 1\n"),
        "task 1's output so far"
    );
    // --follow prints until the task ends.
    let follow = std::process::Command::new(harness::EXE)
        .env("SHARDSCHED_DIR", sys.state())
        .args(["job", "output", &id, "--task", "1", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("job output --follow");
    std::fs::write(&go, "").expect("go");
    let followed = follow.wait_with_output().expect("it ends with the task");
    assert!(followed.status.success());
    assert_eq!(String::from_utf8_lossy(&followed.stdout), "out 1\nbye 1\n");
    sys.wait_state(&id, "completed");
    assert_eq!(sys.ok(&["job", "output", &id]), "out 0\nbye 0\n");
    assert_eq!(
        sys.ok(&["job", "output", &id, "--task", "1", "--stderr"]),
        "err 1\n"
    );
    let missing = sys.fails(&["job", "output", &id, "--task", "2"]);
    assert!(missing.contains("no task 2"), "{missing}");
}

#[test]
fn tasks_on_two_nodes_exchange_names_through_pmi() {
    let sys = System::start_with("agents-pmi", &config(), &["--agents"]);
    // A small PMI-1 client: each task puts its node under its rank, waits at the barrier
    // (a fence across both nodes' agents), and gets the other rank's.
    let script = r#"
        pmi() { echo "$1" >&$PMI_FD; read -r reply <&$PMI_FD; echo "$reply"; }
        pmi "cmd=init pmi_version=1 pmi_subversion=1" >/dev/null
        kvs=$(pmi cmd=get_my_kvsname | sed 's/.*kvsname=//')
        pmi "cmd=put kvsname=$kvs key=node-$PMI_RANK value=$SHARDSCHED_NODE" >/dev/null
        pmi cmd=barrier_in >/dev/null
        other=$(pmi "cmd=get kvsname=$kvs key=node-$((1 - PMI_RANK))" | sed 's/.*value=//')
        pmi cmd=finalize >/dev/null
        echo "$PMI_SIZE $SHARDSCHED_NODE $other"
    "#;
    let id = sys.submit(&["-N", "2", "-t", "1m", "--", "bash", "-c", script]);
    let row = sys.wait_state(&id, "completed");
    let words = |task: &str| -> Vec<String> {
        sys.ok(&["job", "output", &id, "--task", task])
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let (zero, one) = (words("0"), words("1"));
    assert_eq!(zero.len(), 3, "{zero:?} {row:#}");
    assert_eq!(one.len(), 3, "{one:?}");
    assert_eq!((zero[0].as_str(), one[0].as_str()), ("2", "2"), "PMI_SIZE");
    assert_ne!(zero[1], one[1], "one task per node");
    assert_eq!(zero[2], one[1], "rank 0 got rank 1's node");
    assert_eq!(one[2], zero[1], "rank 1 got rank 0's node");
}

#[test]
fn cancel_kills_a_tasks_setsid_grandchild() {
    // Only a cgroup holds a process that left the task's session; an agent has cgroups as
    // root.
    if !harness::privileged("agents setsid") {
        return;
    }
    let sys = System::start_with("agents-setsid", &config(), &["--agents"]);
    let pid_file = sys.dir.join("grandchild.pid");
    let script = format!(
        "setsid sleep 600 & echo $! > {pids}.tmp && mv {pids}.tmp {pids}; exec sleep 600",
        pids = pid_file.display()
    );
    let id = sys.submit(&["-N", "1", "-t", "1m", "--", "sh", "-c", &script]);
    assert!(
        harness::wait_for(|| pid_file.exists()),
        "the grandchild started: {:#}",
        sys.job(&id)
    );
    let grandchild = read_pid_file(&pid_file);
    assert!(harness::alive(grandchild));
    sys.ok(&["cancel", &id]);
    sys.wait_state(&id, "cancelled");
    assert!(
        harness::wait_for(|| !harness::alive(grandchild)),
        "the setsid grandchild {grandchild} outlived its job's cancel"
    );
}

#[test]
fn a_batch_script_runs_once_on_its_first_node_into_its_named_files() {
    let sys = System::start_with("agents-batch", &config(), &["--agents"]);
    let work = sys.dir.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    std::fs::write(
        work.join("sweep.sh"),
        "#!/bin/sh\n\
         #SBATCH -N 2 -t 1\n\
         #SBATCH --output=out-%j.txt\n\
         #SHARDSCHED -e {{name}}-{{id}}.err\n\
         echo \"$SHARDSCHED_NODE $SHARDSCHED_NTASKS $SHARDSCHED_JOB_NNODES $(basename \"$0\") $1\"\n\
         echo oops >&2\n",
    )
    .expect("script");
    let out = std::process::Command::new(harness::EXE)
        .args(["batch", "sweep.sh", "arg1"])
        .current_dir(&work)
        .env("SHARDSCHED_DIR", sys.state())
        .output()
        .expect("batch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let row = sys.wait_state(&id, "completed");
    assert_eq!(row["nnodes"], 2);
    // One line: the script ran once, on the first node, from the directory the agent
    // wrote it into; both nodes are the job's.
    let nodes = row["nodes"].as_str().expect("nodes");
    let first = match nodes.split_once('[') {
        Some((prefix, range)) => format!(
            "{prefix}{}",
            range.split(['-', ',', ']']).next().unwrap_or_default()
        ),
        None => nodes.to_owned(),
    };
    let text = std::fs::read_to_string(work.join(format!("out-{id}.txt"))).expect("-o file");
    assert_eq!(text, format!("{first} 1 2 script arg1\n"), "nodes {nodes}");
    let err = std::fs::read_to_string(work.join(format!("sweep.sh-{id}.err"))).expect("-e file");
    assert_eq!(err, "oops\n");
    // `job output` reads the named file through the agent.
    assert_eq!(sys.ok(&["job", "output", &id]), text);
}

#[test]
fn a_launch_is_handed_to_a_spare_supervisor_which_runs_the_job_and_is_replaced() {
    let sys = System::start_with("agents-spare", &config(), &["--agents"]);
    let nodes: Vec<String> = (0..8).map(|n| format!("node{n}")).collect();
    let agents: Vec<u32> = nodes
        .iter()
        .map(|node| sys.agent_pid(node).expect("agent"))
        .collect();
    // Each agent starts its spares once up; the launch below is handed to one of them.
    let ready = |agent: u32| spares_of(agent).len() == SPARE_SUPERVISORS;
    assert!(
        wait_for(|| agents.iter().all(|&a| ready(a))),
        "the agents' spares: {:?}",
        agents.iter().map(|&a| spares_of(a)).collect::<Vec<_>>()
    );
    let before: Vec<Vec<u32>> = agents.iter().map(|&a| spares_of(a)).collect();
    // Where the agent makes cgroups, each spare waits in one of its own, made for it.
    let spare_cgroups: Vec<Vec<Option<PathBuf>>> = before
        .iter()
        .map(|spares| spares.iter().map(|&p| unified_cgroup_of(p)).collect())
        .collect();
    // The task says who its parent is and what that one runs, and its CPU priority (a
    // root agent's spares wait at nice 19; a job runs at the agent's), and waits for `go`.
    let script = format!(
        "awk '{{print $19}}' /proc/$$/stat > {d}/nice-$SHARDSCHED_NODE; \
         echo $$ $PPID $(tr '\\0' ' ' < /proc/$PPID/cmdline) > {d}/parent-$SHARDSCHED_NODE; \
         while [ ! -e {d}/go ]; do sleep 0.1; done",
        d = sys.dir.display()
    );
    let id = sys.submit(&["-N", "2", "-t", "1m", "--", "sh", "-c", &script]);
    sys.wait_state(&id, "running");
    let mut ran_on = Vec::new();
    let mut job_cgroups = Vec::new();
    for (n, &agent) in agents.iter().enumerate() {
        let node = &nodes[n];
        let dir = sys.node_job_dir(node, &id);
        if !dir.exists() {
            continue;
        }
        ran_on.push(node.clone());
        let supervisor = read_pid_file(&dir.join("supervisor.pid"));
        assert!(
            before[n].contains(&supervisor),
            "{node}'s job went to one of its spares {:?}, not to {supervisor}",
            before[n]
        );
        let parent = sys.dir.join(format!("parent-{node}"));
        assert!(wait_for(
            || std::fs::read_to_string(&parent).is_ok_and(|t| t.ends_with('\n'))
        ));
        let words = std::fs::read_to_string(&parent).expect("parent");
        let nice_of = |text: &str| text.trim().parse::<i32>().ok();
        let stat = std::fs::read_to_string(format!("/proc/{agent}/stat")).expect("agent stat");
        let agent_nice = stat.rsplit(')').next().and_then(|rest| {
            // Fields after the command: state is field 3, nice field 19.
            rest.split_whitespace().nth(16).and_then(nice_of)
        });
        let task_nice = std::fs::read_to_string(sys.dir.join(format!("nice-{node}")))
            .ok()
            .and_then(|t| nice_of(&t));
        assert!(agent_nice.is_some(), "{stat}");
        assert_eq!(
            task_nice, agent_nice,
            "{node}'s task runs at its agent's priority"
        );
        assert!(
            words.split_whitespace().nth(1) == Some(&supervisor.to_string())
                && words.contains("--spare"),
            "{node}'s task is the spare's child: {words}"
        );
        // The job's cgroup is the one its spare was made and waited in (no move at the
        // launch), and the task is in it.
        if let Some(root) = sys.agent_cgroup_root(node) {
            let spare_index = before[n]
                .iter()
                .position(|&p| p == supervisor)
                .expect("spare");
            let waited_in = spare_cgroups[n][spare_index]
                .clone()
                .expect("the spare's cgroup");
            assert_eq!(
                waited_in.parent(),
                Some(root.as_path()),
                "{}",
                waited_in.display()
            );
            assert!(
                waited_in
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("spare-")),
                "{}",
                waited_in.display()
            );
            assert_eq!(unified_cgroup_of(supervisor), Some(waited_in.clone()));
            let task: u32 = words
                .split_whitespace()
                .next()
                .and_then(|w| w.parse().ok())
                .expect("task pid");
            assert_eq!(
                unified_cgroup_of(task),
                Some(waited_in.clone()),
                "{node}'s task"
            );
            job_cgroups.push(waited_in);
        }
        // It recorded its task's start, logs to the job's directory, and its agent has
        // started a replacement.
        let started = std::fs::read_to_string(dir.join("started")).expect("started");
        let rank = ran_on.len() - 1;
        assert!(started.starts_with(&format!("{rank} ")), "{started:?}");
        assert!(dir.join("supervisor.log").is_file());
        assert!(
            wait_for(|| {
                let now = spares_of(agent);
                now.len() == SPARE_SUPERVISORS && !now.contains(&supervisor)
            }),
            "{node}'s agent replaces the spare it used: {:?}",
            spares_of(agent)
        );
    }
    assert_eq!(ran_on.len(), 2, "the job's nodes");
    std::fs::write(sys.dir.join("go"), "").expect("go");
    sys.wait_state(&id, "completed");
    let log = std::fs::read_to_string(sys.node_job_dir(&ran_on[0], &id).join("supervisor.log"))
        .expect("supervisor.log");
    assert!(log.contains("job ended: completed"), "{log}");
    // The job's cgroups go with it; a stopping agent removes its spares' and its root.
    for cgroup in &job_cgroups {
        assert!(wait_for(|| !cgroup.exists()), "{}", cgroup.display());
    }
    let roots: Vec<PathBuf> = nodes
        .iter()
        .filter_map(|n| sys.agent_cgroup_root(n))
        .collect();
    let mut sys = sys;
    sys.stop();
    for root in &roots {
        assert!(wait_for(|| !root.exists()), "{} is left", root.display());
    }
}

#[test]
fn a_spare_supervisor_whose_agent_is_gone_exits_having_run_nothing() {
    let work = tempfile::tempdir().expect("temp dir");
    let spare = |input: &[u8]| {
        let mut child = std::process::Command::new(harness::SUPERVISOR_EXE)
            .arg("--spare")
            .current_dir(work.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spare");
        let mut stdin = child.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut stdin, input).expect("write");
        drop(stdin);
        child.wait_with_output().expect("wait")
    };
    // Its agent gone before a whole line, or without a word: it exits, successfully, having
    // said it was ready.
    for input in [&b""[..], &b"{\"dir\":\"/tmp\""[..]] {
        let out = spare(input);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"ready\n");
    }
    // A line that is not a handoff (or names relative paths): refused, nothing run.
    for input in [
        &b"not json\n"[..],
        &b"{\"dir\":\"jobs/1\",\"plan\":\"plans/1.json\"}\n"[..],
    ] {
        let out = spare(input);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no job run"),
            "{out:?}"
        );
    }
    assert_eq!(
        std::fs::read_dir(work.path()).expect("dir").count(),
        0,
        "a spare made nothing"
    );
}

/// Nodes no queue owned that `queue update --nodes` gives alpha run their share of alpha's
/// next job through their agents: the coordinator tells each agent its new owner
/// (`Owner`, `Granted`) as it tells alpha's shard (`Reconfigure.granted`), which takes the
/// new definition without a restart.
#[test]
fn nodes_a_definition_change_grants_run_their_tasks_through_their_agents() {
    let config = harness::with_alpha("node[0-5]", "[agents]\nheartbeat_timeout = \"10s\"\n");
    let sys = System::start_with("agents-granted", &config, &["--agents"]);
    let shard = sys.child_pid("alpha");
    let out = sys.ok(&["queue", "update", "alpha", "--nodes", "node[0-5]"]);
    assert!(out.contains("alpha owns node[4-5] now"), "{out}");
    assert!(out.contains("without a restart"), "{out}");
    let id = sys.submit(&[
        "-N",
        "6",
        "-t",
        "1m",
        "--",
        "sh",
        "-c",
        "echo $SHARDSCHED_NODE",
    ]);
    let row = sys.wait_state(&id, "completed");
    assert_eq!(row["nodes"], "node[0-5]");
    for (rank, node) in ["node4", "node5"].iter().enumerate() {
        let words = sys.task_words(node, &id, rank as u32 + 4);
        assert_eq!(words, [*node], "{node}'s task ran there");
    }
    assert_eq!(sys.child_pid("alpha"), shard, "no restart");
}
