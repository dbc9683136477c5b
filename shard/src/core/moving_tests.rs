//! Unit tests of node moves, drains and dry runs in the core.

use std::collections::BTreeMap;

use shardsched_journal::Write;
use shardsched_proto::msg::coord_shard::{
    Acquire, CancelJobs, FreeAt, Incoming, IncomingNode, Reclaim, Release, Response, Withdraw,
};
use shardsched_proto::msg::shard_coord::{Assignment, Released};
use shardsched_proto::msg::{
    ClusterDescription, ClusterFormat, Generation, JobState, MoveId, NodeFlags, NodeGen, NodeState,
    QueueConfig,
};

use super::tests::{NOW, core_with, jobspec, submit};
use super::{CoreOptions, ShardCore, TransitionKind};
use crate::job::Reason;
use crate::journal::{self, JournalRecord, Tables};
use crate::moves::Holding;

fn journaling() -> CoreOptions {
    CoreOptions {
        journal: true,
        ..CoreOptions::default()
    }
}

fn ng(node: &str, generation: u64) -> NodeGen {
    NodeGen {
        node: node.into(),
        generation: Generation(generation),
    }
}

fn release(move_id: u64, nodes: &[&str], generation: u64) -> Release {
    Release {
        move_id: MoveId(move_id),
        nodes: nodes.iter().map(|n| ng(n, generation)).collect(),
    }
}

fn acquire(move_id: u64, nodes: &[&str], generation: u64) -> Acquire {
    Acquire {
        move_id: MoveId(move_id),
        nodes: nodes.iter().map(|n| ng(n, generation)).collect(),
        flags: BTreeMap::new(),
    }
}

fn incoming(move_id: u64, node: &str, generation: u64, free: Option<u64>) -> Incoming {
    Incoming {
        move_id: MoveId(move_id),
        nodes: vec![IncomingNode {
            node: ng(node, generation),
            expected_free_ms: free,
        }],
    }
}

fn one_node_job(core: &mut ShardCore, key: u8, duration_s: u64) -> shardsched_proto::Fluid {
    core.handle_submit(
        NOW,
        "alice",
        &submit(key, jobspec(Some(1), None, duration_s)),
    )
    .expect("accepted")
    .id
}

fn state(core: &ShardCore, id: shardsched_proto::Fluid) -> JobState {
    core.job(id).expect("job").state
}

fn node_state(core: &ShardCore, node: &str) -> Option<NodeState> {
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
            .any(|r| matches!(r, JournalRecord::Node(n, e) if n == "n0" && matches!(e.holding, Holding::Outgoing { .. }))),
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
        recipient.queue_manager().hold_end(recipient.nodes["n0"]),
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
    let job = one_node_job(&mut core, 1, 100);
    core.tick(NOW).expect("tick");
    assert_eq!(core.job(job).expect("job").nodes, vec!["n0"]);
    core.set_node_drain(NOW, &["n1".into()], true, "new disks")
        .expect("drain");
    let next = one_node_job(&mut core, 2, 100);
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, next), JobState::Pending, "n1 is drained");
    core.set_node_drain(NOW, &["n0".into()], true, "")
        .expect("drain");
    assert_eq!(state(&core, job), JobState::Running);
    let status = core.status(NOW);
    let n1 = status.nodes.iter().find(|n| n.name == "n1").expect("n1");
    assert_eq!(
        (n1.state, n1.reason.as_deref()),
        (NodeState::Drained, Some("new disks"))
    );
    assert_eq!(status.queue.nodes_up, 0);
    assert!(
        core.take_journal()
            .iter()
            .any(|r| matches!(r, JournalRecord::Drained(d) if d.len() == 2))
    );
    core.set_node_drain(NOW + 1, &["n1".into()], false, "")
        .expect("undrain");
    core.tick(NOW + 1).expect("tick");
    assert_eq!(state(&core, next), JobState::Running);
    assert!(core.set_node_drain(NOW, &["n9".into()], true, "").is_err());
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

/// The tables a journal would hold after `records`.
fn journaled(records: &[JournalRecord]) -> journal::Restored {
    let batch = journal::to_batch(records).expect("encode");
    let mut tables: BTreeMap<String, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
    let mut metas = BTreeMap::new();
    for w in batch.writes() {
        match w {
            Write::Put { table, key, value } => {
                tables
                    .entry(table.clone())
                    .or_default()
                    .insert(*key, value.clone());
            }
            Write::Delete { table, key } => {
                tables.entry(table.clone()).or_default().remove(key);
            }
            Write::DeleteBelow { .. } | Write::DeleteMeta { .. } => {}
            Write::PutMeta { name, value } => {
                metas.insert(name.clone(), value.clone());
            }
        }
    }
    let rows = |t: &str| -> Vec<(u64, Vec<u8>)> {
        tables
            .get(t)
            .map(|m| m.iter().map(|(k, v)| (*k, v.clone())).collect())
            .unwrap_or_default()
    };
    let tables = Tables {
        jobs: rows(journal::JOBS_TABLE),
        runs: rows(journal::RUNS_TABLE),
        ends: rows(journal::ENDS_TABLE),
        metas,
    };
    journal::restored(std::path::Path::new("mem.redb"), tables).expect("decode")
}

fn assignment(owned: Vec<NodeGen>, incoming: Vec<(MoveId, IncomingNode)>) -> Assignment {
    Assignment {
        generator_id: 5,
        cluster: ClusterDescription {
            format: ClusterFormat::Spec,
            text: "name = \"c\"\n[[nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 4\n".into(),
            load_allowlist: Vec::new(),
        },
        queue: QueueConfig {
            name: "batch".into(),
            queue_policy: "easy".into(),
            match_policy: "lonode".into(),
            queue_depth: 32,
            reservation_depth: 1,
            default_duration_ms: 60_000,
            max_duration_ms: 3_600_000,
            definition: vec!["n0".into(), "n1".into()],
            enabled: true,
            started: true,
        },
        owned,
        incoming,
        flags: BTreeMap::new(),
    }
}

#[test]
fn a_donor_restarted_mid_move_keeps_the_node_outgoing_and_releases_it_when_its_job_ends() {
    let first = assignment(vec![ng("n0", 1), ng("n1", 1)], Vec::new());
    let mut core = ShardCore::new(&first, journaling()).expect("core");
    let job = one_node_job(&mut core, 1, 10);
    core.tick(NOW).expect("tick");
    core.handle_release(NOW + 1, &release(1, &["n0"], 2));
    core.tick(NOW + 1).expect("tick");
    let mut records = core.take_journal();
    records.extend(core.take_journal());
    let restored = journaled(&records);

    // The coordinator's answer no longer lists n0 (it is the recipient's now).
    let again = assignment(vec![ng("n1", 1)], Vec::new());
    let (mut core, summary) =
        ShardCore::restored(&again, journaling(), NOW + 2, &restored).expect("restored");
    assert_eq!(summary.running, 1);
    assert_eq!(node_state(&core, "n0"), Some(NodeState::Outgoing));
    assert!(!core.owned().contains_key("n0"));
    assert!(core.owned().contains_key("n1"));
    let log = core.take_transitions();
    assert!(
        log.iter()
            .all(|t| !(t.node == "n0" && t.kind == TransitionKind::Up)),
        "{log:?}"
    );
    assert!(
        core.held()
            .iter()
            .any(|h| h.node.node == "n0" && h.allocated)
    );
    core.tick(NOW + 10_000).expect("tick");
    assert_eq!(state(&core, job), JobState::Completed);
    assert_eq!(
        core.take_released(),
        vec![Released {
            move_id: MoveId(1),
            nodes: vec![ng("n0", 2)]
        }]
    );
}

#[test]
fn a_recipient_restarted_mid_move_brings_nothing_up_before_the_acquire() {
    let first = assignment(vec![ng("n0", 1)], Vec::new());
    let mut core = ShardCore::new(&first, journaling()).expect("core");
    core.handle_incoming(NOW, &incoming(3, "n1", 2, Some(NOW + 20_000)));
    let restored = journaled(&core.take_journal());
    let coming = vec![(
        MoveId(3),
        IncomingNode {
            node: ng("n1", 2),
            expected_free_ms: Some(NOW + 20_000),
        },
    )];
    let again = assignment(vec![ng("n0", 1)], coming);
    let (mut core, _) =
        ShardCore::restored(&again, journaling(), NOW + 1, &restored).expect("restored");
    assert_eq!(node_state(&core, "n1"), Some(NodeState::Incoming));
    assert!(!core.owned().contains_key("n1"));
    let wide = core
        .handle_submit(NOW + 1, "alice", &submit(1, jobspec(Some(2), None, 10)))
        .expect("accepted")
        .id;
    core.tick(NOW + 1).expect("tick");
    assert_eq!(state(&core, wide), JobState::Pending);
    core.handle_acquire(NOW + 2, &acquire(3, &["n1"], 2));
    core.tick(NOW + 2).expect("tick");
    assert_eq!(state(&core, wide), JobState::Running);
}

#[test]
fn assignment_flags_are_the_intent_for_every_listed_node_both_ways() {
    let mut core = core_with(
        &["n0", "n1", "n2"],
        &["n0", "n1", "n2"],
        CoreOptions::default(),
    );
    core.set_node_drain(NOW, &["n1".into()], true, "mine")
        .expect("drain");
    core.set_node_drain(NOW, &["n2".into()], true, "not listed")
        .expect("drain");
    let mut flags = BTreeMap::new();
    flags.insert(
        "n0".to_owned(),
        NodeFlags {
            down: Some("coordinator says".into()),
            drained: None,
        },
    );
    // n1's drain was cleared while the shard was away: the assignment does not name it.
    core.apply_assignment(&[ng("n0", 1), ng("n1", 1)], &[], Some(&flags));
    assert_eq!(
        core.down_nodes().get("n0").map(String::as_str),
        Some("coordinator says")
    );
    assert_eq!(core.drained_nodes().get("n1"), None, "cleared: not named");
    assert_eq!(node_state(&core, "n0"), Some(NodeState::Down));
    assert_eq!(node_state(&core, "n1"), Some(NodeState::Up));
    assert_eq!(
        core.drained_nodes().get("n2").map(String::as_str),
        Some("not listed"),
        "a node the assignment does not list keeps its flags"
    );
}
