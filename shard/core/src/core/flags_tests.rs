//! Unit tests of node failure: nodes marked down under running jobs (failed or requeued,
//! in exec mode killed first), nodes out of scheduling until marked up, and down flags
//! journaled and back after a restart.

use std::path::PathBuf;

use shardsched_wire::msg::{Generation, JobId, JobState, NodeGen, NodeState};

use super::exec_tests::{core, core_with, exec_core, killed, reason, restarted, state, submit};
use super::tests::NOW;
use super::{CoreExecutor, CoreOptions, ExecAction, ShardCore};
use crate::exec::EndCause;
use crate::journal::{JournalRecord, MemJournal};
use crate::nodes::Flag;

#[test]
fn a_node_down_under_a_running_job_fails_it_and_leaves_scheduling() {
    let mut core = core(CoreExecutor::Sim);
    let job = submit(&mut core, 1, 600, false);
    core.tick(NOW).expect("tick");
    let node = core.job(job).expect("job").nodes[0].clone();
    mark_down(&mut core, NOW + 1_000, &node, Some("fan broken"));
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
    mark_down(&mut core, NOW + 4_000, &node, None);
    core.tick(NOW + 4_000).expect("tick");
    assert_eq!(state(&core, b), JobState::Running);
    assert_eq!(core.job(b).expect("b").nodes, vec![node]);
    assert!(core.down_nodes().is_empty());
    assert!(
        core.set_node_flag(NOW, &["n9".into()], Flag::Down, Some(""))
            .is_err()
    );
}

#[test]
fn a_node_down_requeues_a_job_that_allows_it() {
    let mut core = core(CoreExecutor::Sim);
    let job = submit(&mut core, 1, 600, true);
    core.tick(NOW).expect("tick");
    let first = core.job(job).expect("job").nodes[0].clone();
    mark_down(&mut core, NOW + 1_000, &first, Some(""));
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
    mark_down(&mut core, NOW + 1, "n0", Some("psu"));
    mark_down(&mut core, NOW + 1, "n1", Some("psu"));
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
    mark_down(&mut core, NOW + 4, "n1", None);
    core.tick(NOW + 4).expect("tick");
    assert_eq!(state(&core, requeues), JobState::Running);
    assert_eq!(core.take_exec_actions(), vec![ExecAction::Launch(requeues)]);
}

#[test]
fn down_flags_and_requeues_are_journaled_and_down_flags_come_back() {
    let options = CoreOptions {
        journal: true,
        ..CoreOptions::default()
    };
    let mut core = core_with(options.clone());
    let mut journal = MemJournal::default();
    let job = submit(&mut core, 1, 600, true);
    core.tick(NOW).expect("tick");
    journal.commit(&core.take_journal());
    let node = core.job(job).expect("job").nodes[0].clone();
    mark_down(&mut core, NOW + 1, &node, Some("psu"));
    let records = core.take_journal();
    journal.commit(&records);
    assert!(
        records.contains(&JournalRecord::Requeued(job)),
        "{records:?}"
    );
    assert!(
        records.iter().any(
            |r| matches!(r, JournalRecord::Node(n, e) if *n == node && e.down.as_deref() == Some("psu"))
        ),
        "{records:?}"
    );

    // A restarted core has the node down again: the requeued job and a new one wait for
    // the other node, one at a time.
    let mut again = restarted(options, &journal, NOW + 2, &[&node]);
    assert_eq!(
        again.down_nodes().get(&node).map(String::as_str),
        Some("psu")
    );
    let b = submit(&mut again, 3, 600, false);
    again.tick(NOW + 3).expect("tick");
    assert_ne!(again.job(job).expect("job").nodes, vec![node.clone()]);
    assert_eq!(state(&again, job), JobState::Running);
    assert_eq!(state(&again, b), JobState::Pending);
    assert_eq!(again.invariants(), Ok(()));
}

#[test]
fn a_restart_kills_again_an_exec_job_left_running_on_a_down_node() {
    let options = CoreOptions {
        journal: true,
        executor: CoreExecutor::Exec {
            jobs_dir: PathBuf::from("/state/jobs"),
        },
        ..CoreOptions::default()
    };
    let mut core = core_with(options.clone());
    let job = submit(&mut core, 1, 600, false);
    core.tick(NOW).expect("tick");
    let node = core.job(job).expect("job").nodes[0].clone();
    mark_down(&mut core, NOW + 1, &node, Some("psu"));
    // The shard dies here: the kill may never have reached the supervisor.
    let mut journal = MemJournal::default();
    journal.commit(&core.take_journal());
    let mut again = restarted(options, &journal, NOW + 2, &[&node]);
    assert_eq!(state(&again, job), JobState::Running);
    assert!(matches!(
        again.take_exec_actions().as_slice(),
        [ExecAction::Kill { id, why }] if *id == job && why.contains("went down: psu")
    ));
    again.handle_job_ended(NOW + 3, job, &killed(EndCause::Cancelled, "node went down"));
    assert_eq!(state(&again, job), JobState::Failed);
    assert!(reason(&again, job).contains("went down: psu"));
}

/// Marks `node` down at `at` with `reason`, or up again (`None`).
fn mark_down(core: &mut ShardCore, at: u64, node: &str, reason: Option<&str>) {
    core.set_node_flag(at, &[node.to_owned()], Flag::Down, reason)
        .expect("a node of the cluster");
}
