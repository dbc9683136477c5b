//! Node agents on hosts of their own: each agent in a network namespace of its own, linked
//! by a veth pair to a bridge in a hub namespace, the coordinator and the shard in another
//! (198.18.0.0/15; harness/netns.rs). Needs root: skipped with a printed reason otherwise
//! (a failure under `SHARDSCHED_REQUIRE_PRIVILEGED=1`).

mod harness;

use std::path::Path;

use harness::{NetCluster, alive, alpha_agents_config, parent_of, privileged, wait_for};

const NODES: [&str; 5] = ["node0", "node1", "node2", "node3", "node4"];

/// One queue, alpha, on the five nodes.
fn config() -> String {
    alpha_agents_config("node[0-4]")
}

/// A task line of `starts`: the node it ran on, its pid, its parent's pid.
#[derive(Debug, Clone)]
struct Start {
    node: String,
    pid: u32,
    parent: u32,
    overlap: bool,
}

fn starts(file: &Path) -> Vec<Start> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            Some(Start {
                node: (*words.first()?).to_owned(),
                pid: words.get(1)?.parse().ok()?,
                parent: words.get(2)?.parse().ok()?,
                overlap: words.get(3) == Some(&"OVERLAP"),
            })
        })
        .collect()
}

#[test]
fn a_four_node_job_runs_on_four_hosts_and_a_cut_link_requeues_it_to_run_once() {
    if !privileged("agents_netns") {
        return;
    }
    let cluster = NetCluster::start("agents-netns", &config(), &NODES);
    let sys = &cluster.sys;
    // Every agent is on its own host's address and has registered.
    for (i, node) in NODES.iter().enumerate() {
        let file = sys.layout().node_dir(node).join("address");
        let written = wait_for(|| std::fs::read_to_string(&file).is_ok());
        assert!(written, "{node}'s agent wrote no address");
        let address = std::fs::read_to_string(&file).expect("address");
        assert!(
            address.starts_with(&format!("198.18.0.{}:", 10 + i)),
            "{address}"
        );
    }
    let work = sys.dir.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let log = work.join("starts");
    let victim_pid = work.join("victim.pid");
    let second = work.join("second");
    // Each task says where it runs, its pid and its parent's. A second run checks that the
    // first run's task on the cut node is gone, then ends; the first waits.
    let script = format!(
        "if [ -e {second} ]; then \
             o=; kill -0 $(cat {victim}) 2>/dev/null && o=OVERLAP; \
             echo $SHARDSCHED_NODE $$ $PPID $o >> {log}; exit 0; \
         fi; echo $SHARDSCHED_NODE $$ $PPID >> {log}; exec sleep 600",
        second = second.display(),
        victim = victim_pid.display(),
        log = log.display(),
    );
    let args = [
        "submit",
        "-N",
        "4",
        "--requeue",
        "-t",
        "10m",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let mut id = String::new();
    let submitted = wait_for(|| {
        let out = sys.cli(&args);
        id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        out.status.success()
    });
    assert!(submitted, "submit: {:?}", sys.cli(&args));
    assert!(
        wait_for(|| starts(&log).len() == 4),
        "four tasks started: {:?} {:#}",
        starts(&log),
        sys.job(&id)
    );
    let first = starts(&log);
    let mut nodes: Vec<&str> = first.iter().map(|s| s.node.as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    assert_eq!(nodes.len(), 4, "one task per node: {first:?}");
    for start in &first {
        // SHARDSCHED_NODE is the node whose agent (in that node's namespace) started the
        // task's supervisor.
        assert_eq!(
            parent_of(start.parent),
            Some(cluster.agent_pid(&start.node)),
            "{start:?}: its supervisor is {}'s agent's child",
            start.node
        );
    }

    // Cut one node's link: its agent hears from no shard, so its lease kills the task; the
    // coordinator hears no heartbeat and marks the node down; the job is requeued and runs
    // on the four others, once its task on the cut node is gone.
    let victim = first[0].clone();
    std::fs::write(&victim_pid, victim.pid.to_string()).expect("victim pid");
    std::fs::write(&second, "").expect("second");
    cluster.set_link(&victim.node, false);
    let down = wait_for(|| {
        let row = sys.node_row(&victim.node);
        row["state"] == "down"
            && row["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("node agent unreachable since"))
    });
    assert!(down, "{:#}", sys.node_row(&victim.node));
    assert!(
        wait_for(|| !alive(victim.pid)),
        "the lease killed {}'s task",
        victim.node
    );
    let row = sys.wait_state(&id, "completed");
    let all = starts(&log);
    let rerun = &all[4..];
    assert_eq!(rerun.len(), 4, "{all:?} {row:#}");
    assert!(
        rerun.iter().all(|s| s.node != victim.node && !s.overlap),
        "the second run ran off the cut node, after its task was gone: {all:?}"
    );
    assert!(
        first.iter().all(|s| !alive(s.pid)),
        "no first-run task left"
    );

    // Healed and brought up, the node takes work again.
    cluster.set_link(&victim.node, true);
    // Refused while the agent is still silent; taken once it registered again.
    let back = wait_for(|| sys.cli(&["resource", "up", &victim.node]).status.success());
    assert!(back, "{:?}", sys.cli(&["resource", "up", &victim.node]));
    assert!(
        wait_for(|| sys.node_row(&victim.node)["state"] == "up"),
        "{:#}",
        sys.node_row(&victim.node)
    );
}
