//! Unit tests of node moves across a restart: a donor or recipient restarted mid-move
//! gets its node table back from the journal and the coordinator's assignment, and the
//! assignment's flags are the coordinator's intent.

use std::collections::BTreeMap;

use shardsched_wire::msg::coord_shard::IncomingNode;
use shardsched_wire::msg::shard_coord::{Assignment, Released};
use shardsched_wire::msg::{JobState, MoveId, NodeFlags, NodeGen, NodeState};

use super::moving_tests::{
    acquire, incoming, journaling, ng, node_state, one_node_job, release, state,
};
use super::tests::{self, NOW, core_with, jobspec, submit};
use super::{CoreOptions, ShardCore, TransitionKind};
use crate::journal::{self, HoldingRecord, JournalRecord, MemJournal};
use crate::nodes::Flag;

/// What a journal holding `records` reads back.
fn journaled(records: &[JournalRecord]) -> journal::Restored {
    let mut journal = MemJournal::default();
    journal.commit(records);
    journal.restored().expect("no orphan")
}

/// The coordinator's answer: queue `batch` over n0 and n1.
fn assignment(owned: Vec<NodeGen>, incoming: Vec<(MoveId, IncomingNode)>) -> Assignment {
    tests::assignment(tests::config(&["n0", "n1"]), owned, incoming)
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
    core.set_node_flag(NOW, &["n1".into()], Flag::Drained, Some("mine"))
        .expect("drain");
    core.set_node_flag(NOW, &["n2".into()], Flag::Drained, Some("not listed"))
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

/// The flags an `Acquire` brings replace the node's own, in the journal too: its last
/// record of the node is the entry as the node table has it (once, the entry the move step
/// produced was journaled after the flags changed it, and a restart brought back a flag
/// the coordinator had cleared).
#[test]
fn an_acquired_nodes_journal_record_has_the_coordinators_flags() {
    let mut core = core_with(&["n0", "n1"], &["n0"], journaling());
    core.set_node_flag(NOW, &["n1".into()], Flag::Down, Some("psu"))
        .expect("down");
    let mut records = core.take_journal();
    core.handle_acquire(NOW + 1, &acquire(1, &["n1"], 2));
    records.extend(core.take_journal());
    assert_eq!(
        core.down_nodes().get("n1"),
        None,
        "cleared by the coordinator"
    );
    let restored = journaled(&records);
    let (_, n1) = restored
        .nodes
        .iter()
        .find(|(n, _)| n == "n1")
        .expect("n1 journaled");
    assert_eq!(
        (n1.holding.clone(), n1.down.clone()),
        (HoldingRecord::Owned, None)
    );
}
