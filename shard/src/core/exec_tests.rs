//! Unit tests of the core's exec side and of node failure: launches and kills asked of the
//! driver, ends reported back, nodes marked down under running jobs (failed or requeued),
//! and nodes out of scheduling until marked up.

use std::path::PathBuf;

use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_shard::{CancelResult, IdempotencyKey, Submit};
use shardsched_proto::msg::{Generation, JobId, JobState, NodeGen, NodeState, QueueConfig};
use shardsched_proto::{Peer, Role};

use super::{CoreExecutor, CoreOptions, ExecAction, ShardCore};
use crate::exec::{EndCause, JobEnd};

/// Some time in 2027, ms.
const NOW: u64 = 1_800_000_000_000;

/// n0..n3, one socket of 4 cores each.
const CLUSTER: &str = "name = \"c\"\n[[nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 4\n";

fn core(executor: CoreExecutor) -> ShardCore {
    core_with(CoreOptions {
        executor,
        ..CoreOptions::default()
    })
}

fn core_with(options: CoreOptions) -> ShardCore {
    let graph = shardsched_resource::read_cluster_spec(CLUSTER).expect("cluster");
    let graph = shardsched_resource::keep_types(&graph, shardsched_resource::SCHEDULER_TYPES)
        .expect("graph");
    let names = ["n0", "n1"];
    let config = QueueConfig {
        name: "batch".into(),
        queue_policy: shardsched_proto::msg::QueuePolicy::Fcfs,
        match_policy: shardsched_proto::msg::MatchPolicy::LoNode,
        queue_depth: 32,
        reservation_depth: 1,
        default_duration_ms: 60_000,
        max_duration_ms: 3_600_000,
        definition: names.iter().map(|s| s.to_string()).collect(),
        enabled: true,
        started: true,
    };
    let owned: Vec<NodeGen> = names
        .iter()
        .map(|n| NodeGen {
            node: n.to_string(),
            generation: Generation(1),
        })
        .collect();
    ShardCore::with_graph(graph, &config, 5, &owned, options).expect("core")
}

fn exec_core() -> ShardCore {
    core(CoreExecutor::Exec {
        jobs_dir: PathBuf::from("/state/jobs"),
    })
}

/// Submits a one-node job of `duration` s (with `requeue` set if asked) and returns its id.
fn submit(core: &mut ShardCore, key: u8, duration: u64, requeue: bool) -> JobId {
    let mut jobspec = Shorthand {
        nodes: Some(1),
        duration,
        command: vec!["/bin/app".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .expect("jobspec");
    if requeue {
        jobspec
            .attributes
            .system_other
            .insert("requeue".into(), serde_json::Value::Bool(true));
    }
    let submit = Submit {
        idempotency_key: IdempotencyKey([key; 16]),
        jobspec_json: jobspec.to_json().to_string(),
        priority: None,
    };
    core.handle_submit(NOW, "alice", &submit)
        .expect("accepted")
        .id
}

fn state(core: &ShardCore, id: JobId) -> JobState {
    core.job(id).expect("job").state
}

fn reason(core: &ShardCore, id: JobId) -> String {
    core.job_info_reason(id)
}

fn exited(code: i32) -> JobEnd {
    JobEnd {
        cause: EndCause::Completed,
        exit_code: Some(code),
        signal: None,
        note: String::new(),
    }
}

fn killed(cause: EndCause, note: &str) -> JobEnd {
    JobEnd {
        cause,
        exit_code: None,
        signal: Some(15),
        note: note.into(),
    }
}

impl ShardCore {
    fn job_info_reason(&self, id: JobId) -> String {
        self.handle_job_info(id).expect("job").summary.reason
    }
}

#[test]
fn exec_jobs_are_launched_and_end_only_when_told() {
    let mut core = exec_core();
    let ok = submit(&mut core, 1, 10, false);
    let bad = submit(&mut core, 2, 10, false);
    core.tick(NOW).expect("tick");
    assert_eq!(
        core.take_exec_actions(),
        vec![ExecAction::Launch(ok), ExecAction::Launch(bad)]
    );
    assert!(core.take_exec_actions().is_empty(), "taken once");
    // The clock does not end exec jobs.
    assert_eq!(core.next_wakeup_ms(), None);
    core.tick(NOW + 3_600_000).expect("tick");
    assert_eq!(state(&core, ok), JobState::Running);
    let start = core
        .job(ok)
        .expect("job")
        .events
        .iter()
        .find(|e| e.name == "start")
        .cloned();
    let start = start.expect("start event");
    assert!(
        start.context_json.contains("/state/jobs/"),
        "{}",
        start.context_json
    );
    assert!(
        start.context_json.contains("stdout"),
        "{}",
        start.context_json
    );

    core.handle_job_ended(NOW + 5_000, ok, &exited(0));
    core.handle_job_ended(NOW + 5_000, bad, &exited(3));
    assert_eq!(state(&core, ok), JobState::Completed);
    assert_eq!(state(&core, bad), JobState::Failed);
    assert_eq!(reason(&core, bad), "exit code 3");
    let finish = core
        .job(bad)
        .expect("job")
        .events
        .iter()
        .find(|e| e.name == "finish")
        .cloned();
    assert!(finish.expect("finish").context_json.contains("768"));
    // A repeated report changes nothing.
    core.handle_job_ended(NOW + 6_000, bad, &exited(0));
    assert_eq!(state(&core, bad), JobState::Failed);
    assert_eq!(core.queue_manager().running_len(), 0);
}

#[test]
fn timeouts_and_start_errors_fail_with_their_reason() {
    let mut core = exec_core();
    let slow = submit(&mut core, 1, 2, false);
    let broken = submit(&mut core, 2, 2, false);
    core.tick(NOW).expect("tick");
    core.handle_job_ended(
        NOW + 2_000,
        slow,
        &killed(EndCause::Timeout, "time limit of 2 s reached"),
    );
    let nothing = JobEnd::without_status(EndCause::Error, "cannot start \"/bin/app\"");
    core.handle_job_ended(NOW + 10, broken, &nothing);
    assert_eq!(state(&core, slow), JobState::Failed);
    assert!(reason(&core, slow).starts_with("timeout: time limit of 2 s reached"));
    assert!(reason(&core, slow).contains("signal 15"));
    assert_eq!(state(&core, broken), JobState::Failed);
    assert!(reason(&core, broken).contains("could not start"));
}

#[test]
fn an_exec_cancel_waits_for_the_processes() {
    let mut core = exec_core();
    let job = submit(&mut core, 1, 60, false);
    let waiting = submit(&mut core, 2, 60, false);
    let third = submit(&mut core, 3, 60, false);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    assert_eq!(
        state(&core, third),
        JobState::Pending,
        "two nodes, two jobs"
    );
    let admin = Peer::new(Role::Admin, "root").expect("peer");
    let outcome = core.handle_cancel(NOW + 1, &admin, &[job]);
    assert_eq!(outcome[0].result, CancelResult::Cancelled);
    assert!(matches!(
        core.take_exec_actions().as_slice(),
        [ExecAction::Kill { id, why }] if *id == job && why.contains("cancelled by")
    ));
    // Still holding its node until its processes are gone.
    core.tick(NOW + 2).expect("tick");
    assert_eq!(state(&core, job), JobState::Running);
    assert_eq!(state(&core, third), JobState::Pending);
    core.handle_job_ended(
        NOW + 3,
        job,
        &killed(EndCause::Cancelled, "cancelled by admin root"),
    );
    core.tick(NOW + 3).expect("tick");
    assert_eq!(state(&core, job), JobState::Cancelled);
    assert!(reason(&core, job).contains("cancelled by"));
    assert_eq!(state(&core, waiting), JobState::Running);
    assert_eq!(state(&core, third), JobState::Running);
}

#[test]
fn a_node_down_under_a_running_job_fails_it_and_leaves_scheduling() {
    let mut core = core(CoreExecutor::Sim);
    let job = submit(&mut core, 1, 600, false);
    core.tick(NOW).expect("tick");
    let node = core.job(job).expect("job").nodes[0].clone();
    core.set_node_state(NOW + 1_000, std::slice::from_ref(&node), true, "fan broken")
        .expect("down");
    assert_eq!(state(&core, job), JobState::Failed);
    assert_eq!(
        reason(&core, job),
        format!("node {node} went down: fan broken")
    );
    assert_eq!(
        core.down_nodes().get(&node).map(String::as_str),
        Some("fan broken")
    );
    let status = core.status(NOW + 1_000);
    let row = status.nodes.iter().find(|n| n.name == node).expect("row");
    assert_eq!(
        (row.state, row.reason.as_deref()),
        (NodeState::Down, Some("fan broken"))
    );
    assert_eq!(status.queue.nodes_up, 1);

    // Two jobs, one node left: the second waits until the node is up again.
    let a = submit(&mut core, 2, 600, false);
    let b = submit(&mut core, 3, 600, false);
    core.tick(NOW + 2_000).expect("tick");
    assert_eq!(state(&core, a), JobState::Running);
    assert_ne!(core.job(a).expect("a").nodes[0], node);
    assert_eq!(state(&core, b), JobState::Pending);
    // Ownership changes keep the flag.
    let owned: Vec<NodeGen> = ["n0", "n1"]
        .iter()
        .map(|n| NodeGen {
            node: n.to_string(),
            generation: Generation(2),
        })
        .collect();
    core.set_owned(&owned).expect("owned");
    core.tick(NOW + 3_000).expect("tick");
    assert_eq!(state(&core, b), JobState::Pending);
    core.set_node_state(NOW + 4_000, std::slice::from_ref(&node), false, "")
        .expect("up");
    core.tick(NOW + 4_000).expect("tick");
    assert_eq!(state(&core, b), JobState::Running);
    assert_eq!(core.job(b).expect("b").nodes, vec![node]);
    assert!(core.down_nodes().is_empty());
    assert!(core.set_node_state(NOW, &["n9".into()], true, "").is_err());
}

#[test]
fn a_node_down_requeues_a_job_that_allows_it() {
    let mut core = core(CoreExecutor::Sim);
    let job = submit(&mut core, 1, 600, true);
    core.tick(NOW).expect("tick");
    let first = core.job(job).expect("job").nodes[0].clone();
    core.set_node_state(NOW + 1_000, std::slice::from_ref(&first), true, "")
        .expect("down");
    // Requeued, keeping its id and submit time, and started again on the other node.
    assert!(
        core.job(job)
            .expect("job")
            .events
            .iter()
            .any(|e| e.name == "requeue")
    );
    core.tick(NOW + 1_000).expect("tick");
    let again = core.job(job).expect("job");
    assert_eq!(again.state, JobState::Running);
    assert_eq!(again.submit_ms, NOW);
    assert_ne!(again.nodes[0], first);
    assert_eq!(core.running_job_ids(), vec![job]);
}

#[test]
fn in_exec_mode_a_node_down_kills_first_then_fails_or_requeues() {
    let mut core = exec_core();
    let fails = submit(&mut core, 1, 600, false);
    let requeues = submit(&mut core, 2, 600, true);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    let nodes = ["n0".to_owned(), "n1".to_owned()];
    core.set_node_state(NOW + 1, &nodes[..1], true, "psu")
        .expect("down n0");
    core.set_node_state(NOW + 1, &nodes[1..], true, "psu")
        .expect("down n1");
    let kills: Vec<JobId> = core
        .take_exec_actions()
        .into_iter()
        .map(|a| match a {
            ExecAction::Kill { id, .. } => id,
            other => panic!("expected kills, got {other:?}"),
        })
        .collect();
    assert_eq!(kills.len(), 2);
    assert_eq!(
        state(&core, fails),
        JobState::Running,
        "until its processes are gone"
    );
    core.handle_job_ended(
        NOW + 2,
        fails,
        &killed(EndCause::Cancelled, "node n0 went down"),
    );
    core.handle_job_ended(
        NOW + 2,
        requeues,
        &killed(EndCause::Cancelled, "node n1 went down"),
    );
    assert_eq!(state(&core, fails), JobState::Failed);
    assert!(reason(&core, fails).contains("went down: psu"));
    assert_eq!(state(&core, requeues), JobState::Pending);
    // Both nodes down: it waits; one up: it runs again (a new launch).
    core.tick(NOW + 3).expect("tick");
    assert_eq!(state(&core, requeues), JobState::Pending);
    core.set_node_state(NOW + 4, &nodes[1..], false, "")
        .expect("up");
    core.tick(NOW + 4).expect("tick");
    assert_eq!(state(&core, requeues), JobState::Running);
    assert_eq!(core.take_exec_actions(), vec![ExecAction::Launch(requeues)]);
}

#[test]
fn down_flags_and_requeues_are_journaled_and_down_flags_come_back() {
    use crate::journal::{JournalRecord, Restored};
    let journaled = |executor| {
        let mut core = core(executor);
        let mut options = core.options.clone();
        options.journal = true;
        core.options = options;
        core
    };
    let mut core = journaled(CoreExecutor::Sim);
    let job = submit(&mut core, 1, 600, true);
    core.tick(NOW).expect("tick");
    core.take_journal();
    let node = core.job(job).expect("job").nodes[0].clone();
    core.set_node_state(NOW + 1, std::slice::from_ref(&node), true, "psu")
        .expect("down");
    let records = core.take_journal();
    assert!(
        records.contains(&JournalRecord::Requeued(job)),
        "{records:?}"
    );
    assert!(
        records.contains(&JournalRecord::Down(vec![(node.clone(), "psu".into())])),
        "{records:?}"
    );

    // A restarted core marks the node down again: a job waits for the other node only.
    let mut again = journaled(CoreExecutor::Sim);
    let restored = Restored {
        down: vec![(node.clone(), "psu".into())],
        ..Restored::default()
    };
    again.restore(NOW + 2, &restored).expect("restore");
    assert_eq!(
        again.down_nodes().get(&node).map(String::as_str),
        Some("psu")
    );
    let a = submit(&mut again, 2, 600, false);
    let b = submit(&mut again, 3, 600, false);
    again.tick(NOW + 3).expect("tick");
    assert_ne!(again.job(a).expect("a").nodes, vec![node.clone()]);
    assert_eq!(state(&again, b), JobState::Pending);
}

#[test]
fn a_restart_kills_again_an_exec_job_left_running_on_a_down_node() {
    use crate::journal::{JournalRecord, Restored, RestoredJob};
    let journaled = || {
        let mut core = exec_core();
        core.options.journal = true;
        core
    };
    let mut core = journaled();
    let job = submit(&mut core, 1, 600, false);
    core.tick(NOW).expect("tick");
    let node = core.job(job).expect("job").nodes[0].clone();
    core.set_node_state(NOW + 1, std::slice::from_ref(&node), true, "psu")
        .expect("down");
    // The shard dies here: the kill may never have reached the supervisor.
    let records = core.take_journal();
    let accepted = records.iter().find_map(|r| match r {
        JournalRecord::Accepted(a) => Some(a.clone()),
        _ => None,
    });
    let started = records.iter().find_map(|r| match r {
        JournalRecord::Started(s) => Some(s.clone()),
        _ => None,
    });
    let restored = Restored {
        jobs: vec![RestoredJob {
            accepted: accepted.expect("accepted"),
            started,
            ended: None,
        }],
        last_id: Some(job),
        down: vec![(node, "psu".into())],
        ..Restored::default()
    };
    let mut again = journaled();
    again.restore(NOW + 2, &restored).expect("restore");
    assert_eq!(state(&again, job), JobState::Running);
    assert!(matches!(
        again.take_exec_actions().as_slice(),
        [ExecAction::Kill { id, why }] if *id == job && why.contains("went down: psu")
    ));
    again.handle_job_ended(NOW + 3, job, &killed(EndCause::Cancelled, "node went down"));
    assert_eq!(state(&again, job), JobState::Failed);
    assert!(reason(&again, job).contains("went down: psu"));
}

#[test]
fn forgotten_exec_jobs_have_their_directories_removed() {
    let mut core = core_with(CoreOptions {
        executor: CoreExecutor::Exec {
            jobs_dir: PathBuf::from("/state/jobs"),
        },
        finished_retained: 1,
        ..CoreOptions::default()
    });
    let first = submit(&mut core, 1, 10, false);
    let second = submit(&mut core, 2, 10, false);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    core.handle_job_ended(NOW + 1, first, &exited(0));
    assert!(
        core.take_exec_actions().is_empty(),
        "kept: within the retention"
    );
    core.handle_job_ended(NOW + 2, second, &exited(0));
    assert_eq!(core.take_exec_actions(), vec![ExecAction::Forget(first)]);
    assert!(core.job(first).is_none());
}

#[test]
fn a_moves_deadline_kills_the_processes_before_the_node_is_released() {
    use shardsched_proto::msg::MoveId;
    use shardsched_proto::msg::coord_shard::{CancelJobs, Release};
    let mut core = exec_core();
    let id = submit(&mut core, 1, 600, false);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    let node = core.job(id).expect("job").nodes[0].clone();
    let at = |generation| NodeGen {
        node: node.clone(),
        generation: Generation(generation),
    };
    core.handle_release(
        NOW,
        &Release {
            move_id: MoveId(9),
            nodes: vec![at(2)],
        },
    );
    core.handle_cancel_jobs(
        NOW + 1,
        &CancelJobs {
            move_id: MoveId(9),
            nodes: vec![at(2)],
        },
    );
    core.tick(NOW + 1).expect("tick");
    assert!(
        core.take_exec_actions()
            .iter()
            .any(|a| matches!(a, ExecAction::Kill { id: k, .. } if *k == id))
    );
    assert_eq!(core.job(id).expect("job").state, JobState::Running);
    assert!(core.take_released().is_empty(), "its processes still run");
    core.handle_job_ended(NOW + 2, id, &killed(EndCause::Cancelled, "move deadline"));
    core.tick(NOW + 2).expect("tick");
    assert_eq!(core.job(id).expect("job").state, JobState::Cancelled);
    let released = core.take_released();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].nodes, vec![at(2)]);
}
