//! Unit tests of node moves, drains and dry runs in the core (moves across a restart are
//! in `moving_restore_tests.rs`, which shares this file's helpers).

use std::collections::BTreeMap;

use shardsched_wire::msg::coord_shard::{
    Acquire, CancelJobs, FreeAt, Incoming, IncomingNode, Reclaim, Release, Response, Withdraw,
};
use shardsched_wire::msg::shard_coord::Released;
use shardsched_wire::msg::{Generation, JobState, MoveId, NodeFlags, NodeGen, NodeState};

use super::tests::{NOW, core_with, jobspec, submit};
use super::{CoreOptions, ShardCore, TransitionKind};
use crate::job::Reason;
use crate::journal::{HoldingRecord, JournalRecord};
use crate::nodes::Flag;

pub(super) fn journaling() -> CoreOptions {
    CoreOptions {
        journal: true,
        ..CoreOptions::default()
    }
}

pub(super) fn ng(node: &str, generation: u64) -> NodeGen {
    NodeGen {
        node: node.into(),
        generation: Generation(generation),
    }
}

pub(super) fn release(move_id: u64, nodes: &[&str], generation: u64) -> Release {
    Release {
        move_id: MoveId(move_id),
        nodes: nodes.iter().map(|n| ng(n, generation)).collect(),
    }
}

pub(super) fn acquire(move_id: u64, nodes: &[&str], generation: u64) -> Acquire {
    Acquire {
        move_id: MoveId(move_id),
        nodes: nodes.iter().map(|n| ng(n, generation)).collect(),
        flags: BTreeMap::new(),
    }
}

pub(super) fn incoming(move_id: u64, node: &str, generation: u64, free: Option<u64>) -> Incoming {
    Incoming {
        move_id: MoveId(move_id),
        nodes: vec![IncomingNode {
            node: ng(node, generation),
            expected_free_ms: free,
        }],
    }
}

pub(super) fn one_node_job(
    core: &mut ShardCore,
    key: u8,
    duration_s: u64,
) -> shardsched_wire::Fluid {
    core.handle_submit(
        NOW,
        "alice",
        &submit(key, jobspec(Some(1), None, duration_s)),
    )
    .expect("accepted")
    .id
}

pub(super) fn state(core: &ShardCore, id: shardsched_wire::Fluid) -> JobState {
    core.job(id).expect("job").state
}

pub(super) fn node_state(core: &ShardCore, node: &str) -> Option<NodeState> {
    core.status(NOW)
        .nodes
        .into_iter()
        .find(|n| n.name == node)
        .map(|n| n.state)
}

fn kinds(core: &mut ShardCore, node: &str) -> Vec<TransitionKind> {
    core.take_transitions()
        .into_iter()
        .filter(|t| t.node == node)
        .map(|t| t.kind)
        .collect()
}

#[test]
fn a_running_job_on_an_outgoing_node_keeps_running_and_the_node_is_released_at_its_end() {
    let mut core = core_with(&["n0", "n1"], &["n0", "n1"], journaling());
    let job = one_node_job(&mut core, 1, 10);
    core.tick(NOW).expect("tick");
    assert_eq!(core.job(job).expect("job").nodes, vec!["n0"]);
    core.take_transitions();
    core.take_journal();

    let answer = core.handle_release(NOW + 1, &release(1, &["n0", "n1"], 2));
    let Response::Releasing { nodes, stale } = answer else {
        panic!("{answer:?}");
    };
    assert!(stale.is_empty());
    assert_eq!(nodes[0].free, FreeAt::Expected(NOW + 10_000));
    assert_eq!(nodes[0].jobs, vec![job]);
    assert_eq!(nodes[1].free, FreeAt::Now);
    assert_eq!(kinds(&mut core, "n0"), vec![TransitionKind::Down]);
    assert_eq!(node_state(&core, "n0"), Some(NodeState::Outgoing));
    assert_eq!(node_state(&core, "n1"), None, "released at once");
    let records = core.take_journal();
    assert!(
        records
            .iter()
            .any(|r| matches!(r, JournalRecord::Node(n, e) if n == "n0" && matches!(e.holding, HoldingRecord::Outgoing { .. }))),
        "{records:?}"
    );

    // No new work on either node; the running job is untouched.
    let waiting = one_node_job(&mut core, 2, 10);
    core.tick(NOW + 2).expect("tick");
    assert_eq!(state(&core, job), JobState::Running);
    assert_eq!(state(&core, waiting), JobState::Pending);
    assert!(core.take_released().is_empty());

    // The job ends: n0 is released, logged, reported.
    core.tick(NOW + 10_000).expect("tick");
    assert_eq!(state(&core, job), JobState::Completed);
    assert_eq!(
        core.take_released(),
        vec![Released {
            move_id: MoveId(1),
            nodes: vec![ng("n0", 2)]
        }]
    );
    assert_eq!(kinds(&mut core, "n0"), vec![TransitionKind::Released]);
    assert_eq!(state(&core, waiting), JobState::Pending);
    assert_eq!(node_state(&core, "n0"), None);

    // A repeat is answered the same way (free now), and reports nothing twice.
    let again = core.handle_release(NOW + 10_001, &release(1, &["n0"], 2));
    assert!(
        matches!(&again, Response::Releasing { nodes, .. } if nodes[0].free == FreeAt::Now),
        "{again:?}"
    );
    core.tick(NOW + 10_001).expect("tick");
    assert!(core.take_released().is_empty());
}

#[test]
fn an_incoming_node_is_reserved_from_its_expected_time_and_used_right_after_the_acquire() {
    let mut core = core_with(&["n0", "n1"], &["n0"], CoreOptions::default());
    let two = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(2), None, 10)))
        .expect("accepted")
        .id;
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, two), JobState::Pending);

    core.handle_incoming(NOW, &incoming(7, "n1", 3, Some(NOW + 30_000)));
    core.tick(NOW).expect("tick");
    let at = i64::try_from((NOW + 30_000) / 1000).expect("time");
    assert_eq!(
        core.job(two).expect("job").reason,
        Reason::Waiting(shardsched_qmanager::WaitReason::Reserved { at })
    );
    assert_eq!(node_state(&core, "n1"), Some(NodeState::Incoming));
    assert!(!core.owned().contains_key("n1"));
    // A one-node job may use n0 meanwhile but never n1.
    let small = one_node_job(&mut core, 2, 5);
    core.tick(NOW + 1_000).expect("tick");
    assert_eq!(core.job(small).expect("job").nodes, vec!["n0"]);
    assert_eq!(state(&core, two), JobState::Pending);
    core.tick(NOW + 6_000).expect("tick");
    assert_eq!(state(&core, small), JobState::Completed);
    assert_eq!(state(&core, two), JobState::Pending, "n1 is not here yet");
    core.take_transitions();

    let answer = core.handle_acquire(NOW + 7_000, &acquire(7, &["n1"], 3));
    assert_eq!(answer, Response::Ack { stale: Vec::new() });
    assert_eq!(kinds(&mut core, "n1"), vec![TransitionKind::Up]);
    core.tick(NOW + 7_000).expect("tick");
    let job = core.job(two).expect("job");
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.nodes, vec!["n0", "n1"]);
    assert_eq!(job.start_ms, Some(NOW + 7_000));
}

#[test]
fn a_hold_past_its_time_is_extended_until_the_acquire() {
    let mut core = core_with(&["n0", "n1"], &[], CoreOptions::default());
    core.handle_incoming(NOW, &incoming(1, "n1", 2, Some(NOW + 1_000)));
    let job = one_node_job(&mut core, 1, 5);
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, job), JobState::Pending);
    let wake = core
        .next_wakeup_ms()
        .expect("the hold's end wakes the core");
    assert!(wake <= NOW + 1_000, "{wake}");
    core.tick(NOW + 1_000).expect("tick");
    core.tick(NOW + 9_000).expect("tick");
    assert_eq!(
        state(&core, job),
        JobState::Pending,
        "still not handed over"
    );
    core.handle_acquire(NOW + 9_500, &acquire(1, &["n1"], 2));
    core.tick(NOW + 9_500).expect("tick");
    assert_eq!(state(&core, job), JobState::Running);
}

#[test]
fn stale_generations_are_refused_and_repeats_change_nothing() {
    let mut core = core_with(&["n0", "n1"], &["n0"], journaling());
    core.handle_incoming(NOW, &incoming(1, "n1", 5, None));
    assert_eq!(
        core.handle_acquire(NOW, &acquire(1, &["n1"], 5)),
        Response::Ack { stale: Vec::new() }
    );
    core.take_journal();
    core.take_transitions();
    // The same Acquire again: same answer, nothing journaled, no transition.
    assert_eq!(
        core.handle_acquire(NOW, &acquire(1, &["n1"], 5)),
        Response::Ack { stale: Vec::new() }
    );
    assert!(
        !core
            .take_journal()
            .iter()
            .any(|r| matches!(r, JournalRecord::Node(..)))
    );
    assert!(core.take_transitions().is_empty());
    // Older generations are refused, naming the newer one seen.
    for answer in [
        core.handle_withdraw(
            NOW,
            &Withdraw {
                move_id: MoveId(1),
                nodes: vec![ng("n1", 4)],
            },
        ),
        core.handle_incoming(NOW, &incoming(1, "n1", 4, Some(NOW))),
    ] {
        let Response::Ack { stale } = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].seen, Generation(5));
    }
    let Response::Releasing { stale, nodes } = core.handle_release(NOW, &release(1, &["n1"], 3))
    else {
        panic!("not a release answer");
    };
    assert!(nodes.is_empty() && stale.len() == 1);
    assert!(core.owned().contains_key("n1"), "still up");
}

#[test]
fn a_cancelled_move_gives_the_donor_its_node_back_and_the_recipient_forgets_it() {
    let mut donor = core_with(&["n0"], &["n0"], CoreOptions::default());
    let job = one_node_job(&mut donor, 1, 100);
    donor.tick(NOW).expect("tick");
    donor.handle_release(NOW, &release(1, &["n0"], 2));
    assert!(!donor.owned().contains_key("n0"));
    donor.handle_reclaim(
        NOW + 1,
        &Reclaim {
            move_id: MoveId(1),
            nodes: vec![ng("n0", 3)],
        },
    );
    assert!(donor.owned().contains_key("n0"));
    assert_eq!(state(&donor, job), JobState::Running);

    let mut recipient = core_with(&["n0"], &[], CoreOptions::default());
    recipient.handle_incoming(NOW, &incoming(1, "n0", 2, Some(NOW + 50_000)));
    recipient.handle_withdraw(
        NOW + 1,
        &Withdraw {
            move_id: MoveId(1),
            nodes: vec![ng("n0", 3)],
        },
    );
    assert_eq!(node_state(&recipient, "n0"), None);
    assert_eq!(
        recipient
            .queue_manager()
            .hold_end(recipient.cluster.vertices["n0"]),
        None
    );
}

#[test]
fn past_the_deadline_the_jobs_holding_an_outgoing_node_are_cancelled_and_it_is_released() {
    let mut core = core_with(&["n0"], &["n0"], CoreOptions::default());
    let job = one_node_job(&mut core, 1, 100);
    core.tick(NOW).expect("tick");
    core.handle_release(NOW, &release(4, &["n0"], 2));
    core.handle_cancel_jobs(
        NOW + 5_000,
        &CancelJobs {
            move_id: MoveId(4),
            nodes: vec![ng("n0", 2)],
        },
    );
    core.tick(NOW + 5_000).expect("tick");
    assert_eq!(state(&core, job), JobState::Cancelled);
    assert_eq!(core.take_released().len(), 1);
}

#[test]
fn a_drained_node_takes_no_new_work_its_job_continues_and_it_shows_drained() {
    let mut core = core_with(&["n0", "n1"], &["n0", "n1"], journaling());
    core.take_journal();
    let job = one_node_job(&mut core, 1, 100);
    core.tick(NOW).expect("tick");
    assert_eq!(core.job(job).expect("job").nodes, vec!["n0"]);
    core.set_node_flag(NOW, &["n1".into()], Flag::Drained, Some("new disks"))
        .expect("drain");
    let next = one_node_job(&mut core, 2, 100);
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, next), JobState::Pending, "n1 is drained");
    core.set_node_flag(NOW, &["n0".into()], Flag::Drained, Some(""))
        .expect("drain");
    assert_eq!(state(&core, job), JobState::Running);
    let status = core.status(NOW);
    let n1 = status.nodes.iter().find(|n| n.name == "n1").expect("n1");
    assert_eq!(
        (n1.state, n1.reason.as_deref()),
        (NodeState::Drained, Some("new disks"))
    );
    assert_eq!(status.queue.nodes_up, 0);
    let drained: Vec<(String, Option<String>)> = core
        .take_journal()
        .into_iter()
        .filter_map(|r| match r {
            JournalRecord::Node(n, e) => Some((n, e.drained)),
            _ => None,
        })
        .collect();
    assert_eq!(
        drained,
        [
            ("n1".to_owned(), Some("new disks".to_owned())),
            ("n0".to_owned(), Some(String::new()))
        ],
        "each node journaled once, with its reason"
    );
    core.set_node_flag(NOW + 1, &["n1".into()], Flag::Drained, None)
        .expect("undrain");
    core.tick(NOW + 1).expect("tick");
    assert_eq!(state(&core, next), JobState::Running);
    assert!(
        core.set_node_flag(NOW, &["n9".into()], Flag::Drained, Some(""))
            .is_err()
    );
}

#[test]
fn the_coordinators_flags_come_with_an_acquired_node() {
    let mut core = core_with(&["n0"], &[], CoreOptions::default());
    let mut get = acquire(1, &["n0"], 2);
    get.flags.insert(
        "n0".into(),
        NodeFlags {
            down: None,
            drained: Some("maintenance".into()),
        },
    );
    core.handle_acquire(NOW, &get);
    let job = one_node_job(&mut core, 1, 10);
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, job), JobState::Pending);
    assert_eq!(node_state(&core, "n0"), Some(NodeState::Drained));
}

#[test]
fn a_dry_run_says_when_nodes_would_be_free_and_which_jobs_would_be_stranded() {
    let mut core = core_with(&["n0", "n1"], &["n0", "n1"], CoreOptions::default());
    let job = one_node_job(&mut core, 1, 10);
    let wide = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(Some(2), None, 10)))
        .expect("accepted")
        .id;
    core.tick(NOW).expect("tick");
    let report = core
        .dry_run_release(&["n0".into(), "n1".into()])
        .expect("dry run");
    assert_eq!(report.nodes[0].free, FreeAt::Expected(NOW + 10_000));
    assert_eq!(report.nodes[0].jobs, vec![job]);
    assert_eq!(report.nodes[1].free, FreeAt::Now);
    assert_eq!(report.all_free, FreeAt::Expected(NOW + 10_000));
    assert_eq!(report.stranded, vec![wide]);
    assert!(core.owned().contains_key("n0"), "a dry run changes nothing");
    assert!(core.dry_run_release(&["n7".into()]).is_err());
}
