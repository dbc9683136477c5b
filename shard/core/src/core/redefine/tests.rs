//! A new definition taken in place; anything else asks for a restart.

use std::collections::BTreeMap;

use shardsched_wire::msg::coord_shard::{Reconfigure, Request, Response};
use shardsched_wire::msg::{Generation, JobState, NodeFlags, NodeGen, QueueConfig};

use super::super::tests::{NOW, assignment, config, core_with, jobspec, owned, state, submit};
use super::super::{CoreOptions, ShardCore};

/// A core of `batch` over `definition` of the test cluster, built as a shard builds it
/// (from the coordinator's assignment: it keeps the cluster description).
fn core(definition: &[&str], own: &[&str]) -> ShardCore {
    ShardCore::new(
        &assignment(config(definition), owned(own), Vec::new()),
        CoreOptions {
            journal: true,
            ..CoreOptions::default()
        },
    )
    .expect("core")
}

fn reconfigure(core: &mut ShardCore, now: u64, config: QueueConfig, granted: &[&str]) {
    let change = Reconfigure {
        config,
        granted: granted
            .iter()
            .map(|n| NodeGen {
                node: n.to_string(),
                generation: Generation(2),
            })
            .collect(),
        flags: BTreeMap::new(),
    };
    let answer = core.handle_coordinator(now, &Request::Reconfigure(Box::new(change)));
    assert_eq!(answer, Ok(Response::Ack { stale: Vec::new() }));
}

fn graph_nodes(core: &ShardCore) -> Vec<String> {
    core.cluster.vertices.keys().cloned().collect()
}

#[test]
fn a_grown_definition_runs_jobs_on_the_granted_nodes_without_a_restart() {
    let mut core = core(&["n0", "n1"], &["n0", "n1"]);
    let running = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(2), None, 100)))
        .expect("two nodes");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, running.id), JobState::Running);
    let refused = core.handle_submit(NOW, "alice", &submit(2, jobspec(Some(3), None, 100)));
    assert!(refused.is_err(), "three nodes never fit two");
    core.take_journal();

    reconfigure(
        &mut core,
        NOW + 1,
        config(&["n0", "n1", "n2", "n3"]),
        &["n2", "n3"],
    );
    assert_eq!(core.take_restart(), None);
    assert_eq!(graph_nodes(&core), ["n0", "n1", "n2", "n3"]);
    assert!(
        !core.take_journal().is_empty(),
        "the granted nodes are journaled"
    );
    let three = core
        .handle_submit(NOW + 2, "alice", &submit(3, jobspec(Some(2), None, 100)))
        .expect("two more nodes");
    let four = core
        .handle_submit(NOW + 2, "alice", &submit(4, jobspec(Some(4), None, 100)))
        .expect("four nodes fit the definition now");
    core.tick(NOW + 2).expect("tick");
    assert_eq!(state(&core, running.id), JobState::Running);
    assert_eq!(state(&core, three.id), JobState::Running);
    let job = core.job(three.id).expect("job");
    assert_eq!(job.nodes, ["n2", "n3"]);
    assert_eq!(state(&core, four.id), JobState::Pending);
    assert_eq!(core.invariants(), Ok(()));
    assert_eq!(core.config().definition.len(), 4);
}

#[test]
fn a_narrowed_definition_fails_what_can_no_longer_fit_and_keeps_held_nodes() {
    // n3 is defined but not owned; n2 is owned.
    let mut core = core(&["n0", "n1", "n2", "n3"], &["n0", "n1", "n2"]);
    let all = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(4), None, 100)))
        .expect("fits the definition");
    let three = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(Some(3), None, 100)))
        .expect("fits");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, all.id), JobState::Pending);
    assert_eq!(state(&core, three.id), JobState::Running);

    // The coordinator never drops an owned node from a definition; were it to, the shard
    // keeps it until a restart.
    reconfigure(&mut core, NOW + 1, config(&["n0", "n1"]), &[]);
    assert_eq!(core.take_restart(), None);
    assert_eq!(
        graph_nodes(&core),
        ["n0", "n1", "n2"],
        "n3 went, n2 is held"
    );
    assert_eq!(state(&core, all.id), JobState::Failed);
    assert_eq!(state(&core, three.id), JobState::Running);
    assert_eq!(core.invariants(), Ok(()));
    assert!(!core.status(NOW + 1).nodes.iter().any(|r| r.name == "n3"));
}

#[test]
fn a_queue_policy_is_taken_in_place_and_its_next_cycle_plans_under_it() {
    // Easy with one reservation: a short job that would delay the reserved one waits.
    let mut core = core(&["n0", "n1"], &["n0", "n1"]);
    let long = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(1), None, 100)))
        .expect("one node");
    let wide = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(Some(2), None, 100)))
        .expect("two nodes");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, long.id), JobState::Running);
    assert_eq!(state(&core, wide.id), JobState::Pending);
    let fcfs = QueueConfig {
        queue_policy: shardsched_wire::msg::QueuePolicy::Fcfs,
        queue_depth: 7,
        ..config(&["n0", "n1"])
    };
    reconfigure(&mut core, NOW + 1, fcfs, &[]);
    assert_eq!(core.take_restart(), None);
    assert_eq!(core.config().queue_depth, 7);
    assert_eq!(
        core.queue_manager().params().policy,
        shardsched_qmanager::QueuePolicy::Fcfs
    );
    // Under fcfs nothing passes the blocked head, however short.
    let short = core
        .handle_submit(NOW + 2, "alice", &submit(3, jobspec(Some(1), None, 10)))
        .expect("one node");
    core.tick(NOW + 2).expect("tick");
    assert_eq!(
        state(&core, short.id),
        JobState::Pending,
        "fcfs: behind the head"
    );
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn a_match_policy_change_or_a_core_without_a_description_asks_for_a_restart() {
    let mut core = core(&["n0", "n1"], &["n0"]);
    let matching = QueueConfig {
        match_policy: shardsched_wire::msg::MatchPolicy::HiNode,
        ..config(&["n0", "n1"])
    };
    reconfigure(&mut core, NOW, matching, &[]);
    assert!(core.take_restart().is_some());
    assert_eq!(
        core.config().match_policy,
        shardsched_wire::msg::MatchPolicy::LoNode,
        "nothing applied"
    );
    assert_eq!(core.take_restart(), None, "asked once");

    let mut on_graph = core_with(&["n0", "n1"], &["n0"], CoreOptions::default());
    reconfigure(&mut on_graph, NOW, config(&["n0", "n1", "n2"]), &["n2"]);
    assert!(on_graph.take_restart().is_some());
}

#[test]
fn granted_nodes_come_up_with_the_coordinators_flags() {
    let mut core = core(&["n0"], &["n0"]);
    let change = Reconfigure {
        config: config(&["n0", "n1"]),
        granted: vec![NodeGen {
            node: "n1".into(),
            generation: Generation(4),
        }],
        flags: BTreeMap::from([(
            "n1".to_string(),
            NodeFlags {
                down: None,
                drained: Some("bad fan".into()),
            },
        )]),
    };
    let answer = core.handle_coordinator(NOW, &Request::Reconfigure(Box::new(change)));
    assert!(answer.is_ok());
    assert_eq!(
        core.drained_nodes().get("n1").map(String::as_str),
        Some("bad fan")
    );
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(2), None, 100)))
        .expect("two nodes fit the definition");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, job.id), JobState::Pending, "n1 is drained");
}
