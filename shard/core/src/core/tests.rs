//! Unit tests of the core: submit, retry, cancel, deny, sim completion, ownership. The
//! helpers here (a four-node cluster, jobspecs, submits) serve the other test files too;
//! queue-wide behaviour (retention, queue state, job lists) is in `queue_tests.rs`.

use std::collections::BTreeMap;

use shardsched_jobspec::Shorthand;
use shardsched_wire::msg::client_shard::{CancelResult, IdempotencyKey, Submit};
use shardsched_wire::msg::coord_shard::IncomingNode;
use shardsched_wire::msg::shard_coord::Assignment;
use shardsched_wire::msg::{
    ClusterDescription, ClusterFormat, Generation, JobState, MoveId, NodeGen, QueueConfig,
    RefusalCode,
};
use shardsched_wire::{Peer, Role};

use super::{CoreOptions, ShardCore};
use crate::job::Reason;

/// Some time in 2027, ms.
pub(super) const NOW: u64 = 1_800_000_000_000;

/// n0..n3, one socket of 4 cores each.
pub(super) const CLUSTER: &str =
    "name = \"c\"\n[[nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 4\n";

/// Queue `batch` over `definition`: easy, lonode, one reservation.
pub(super) fn config(definition: &[&str]) -> QueueConfig {
    QueueConfig {
        name: "batch".into(),
        queue_policy: shardsched_wire::msg::QueuePolicy::Easy,
        match_policy: shardsched_wire::msg::MatchPolicy::LoNode,
        queue_depth: 32,
        reservation_depth: 1,
        default_duration_ms: 60_000,
        max_duration_ms: 3_600_000,
        definition: definition.iter().map(|s| s.to_string()).collect(),
        enabled: true,
        started: true,
        array_elements_max: shardsched_wire::limits::ARRAY_ELEMENTS_DEFAULT,
    }
}

pub(super) fn owned(nodes: &[&str]) -> Vec<NodeGen> {
    nodes
        .iter()
        .map(|n| NodeGen {
            node: n.to_string(),
            generation: Generation(1),
        })
        .collect()
}

pub(super) fn core_with(definition: &[&str], own: &[&str], options: CoreOptions) -> ShardCore {
    core_for(&config(definition), own, options)
}

/// A core of `queue` over [`CLUSTER`], owning `own` at generation 1.
pub(super) fn core_for(queue: &QueueConfig, own: &[&str], options: CoreOptions) -> ShardCore {
    let graph = shardsched_resource::read_cluster_spec(CLUSTER).expect("cluster");
    let graph = shardsched_resource::keep_types(&graph, shardsched_resource::SCHEDULER_TYPES)
        .expect("graph");
    ShardCore::with_graph(graph, queue, 5, &owned(own), options).expect("core")
}

/// The coordinator's answer to a (re)registering shard of `queue` over [`CLUSTER`], with
/// no flags.
pub(super) fn assignment(
    queue: QueueConfig,
    owned: Vec<NodeGen>,
    incoming: Vec<(MoveId, IncomingNode)>,
) -> Assignment {
    Assignment {
        limits: Default::default(),
        allowances: Vec::new(),
        fairshare: None,
        generator_id: 5,
        cluster: ClusterDescription {
            format: ClusterFormat::Spec,
            text: CLUSTER.into(),
            load_allowlist: Vec::new(),
        },
        queue,
        owned,
        incoming,
        flags: BTreeMap::new(),
    }
}

/// Definition n0..n2, owning n0 and n1.
pub(super) fn core() -> ShardCore {
    core_with(&["n0", "n1", "n2"], &["n0", "n1"], CoreOptions::default())
}

pub(super) fn jobspec(nodes: Option<u64>, tasks: Option<u64>, duration: u64) -> String {
    Shorthand {
        nodes,
        tasks,
        duration,
        command: vec!["/bin/app".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .expect("jobspec")
    .to_json()
    .to_string()
}

pub(super) fn submit(key: u8, jobspec_json: String) -> Submit {
    Submit {
        idempotency_key: IdempotencyKey([key; 16]),
        jobspec_json,
        urgency: None,
        array: None,
        signature: None,
    }
}

pub(super) fn user(name: &str) -> Peer {
    Peer::new(Role::User, name).expect("peer")
}

pub(super) fn state(core: &ShardCore, id: shardsched_wire::Fluid) -> JobState {
    core.job(id).expect("job").state
}

#[test]
fn a_job_runs_on_an_owned_node_and_completes_after_its_duration() {
    let mut core = core();
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, Some(2), 10)))
        .expect("accepted");
    assert!(!job.duplicate);
    assert_eq!(job.id.generator_id(), 5);
    assert_eq!(state(&core, job.id), JobState::Pending);
    core.tick(NOW + 3).expect("tick");
    let record = core.job(job.id).expect("job");
    assert_eq!(record.state, JobState::Running);
    assert_eq!(record.start_ms, Some(NOW + 3));
    assert_eq!(record.nodes, vec!["n0"]);
    assert_eq!(record.name, "app");
    assert_eq!(record.duration_ms, 10_000);
    let r: serde_json::Value =
        serde_json::from_str(record.r_json.as_deref().expect("R")).expect("R is JSON");
    assert_eq!(r["execution"]["nodelist"][0], "n0");
    // Its allocation holds n0 for 10 s from the second it started in (the queue manager's
    // seconds): the sim run ends with that span, 3 ms short of start + duration.
    assert_eq!(core.next_wakeup_ms(), Some(NOW + 10_000));

    core.tick(NOW + 9_999).expect("tick");
    assert_eq!(state(&core, job.id), JobState::Running, "not over yet");
    core.tick(NOW + 10_000).expect("tick");
    let record = core.job(job.id).expect("job");
    assert_eq!(record.state, JobState::Completed);
    assert_eq!(record.end_ms, Some(NOW + 10_000));
    let events: Vec<&str> = record.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        events,
        ["submit", "alloc", "start", "finish", "free", "clean"]
    );
    assert_eq!(core.queue_manager().running_len(), 0);
    assert_eq!(core.next_wakeup_ms(), None);
}

#[test]
fn a_retried_submit_returns_the_same_job() {
    let mut core = core();
    let first = core
        .handle_submit(NOW, "alice", &submit(9, jobspec(None, None, 5)))
        .expect("accepted");
    let again = core
        .handle_submit(NOW + 50, "alice", &submit(9, jobspec(None, None, 5)))
        .expect("accepted");
    assert_eq!(again.id, first.id);
    assert!(again.duplicate);
    // Another owner's identical key is another job.
    let bob = core
        .handle_submit(NOW + 60, "bob", &submit(9, jobspec(None, None, 5)))
        .expect("accepted");
    assert_ne!(bob.id, first.id);
    assert!(!bob.duplicate);
    assert_eq!(core.jobs().count(), 2);
}

#[test]
fn users_cancel_only_their_own_jobs() {
    let mut core = core();
    let a = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, None, 100)))
        .expect("a");
    let b = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(None, None, 100)))
        .expect("b");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, a.id), JobState::Running);

    let refused = core.handle_cancel(NOW + 1, &user("bob"), &[a.id]);
    assert_eq!(refused[0].result, CancelResult::Forbidden);
    assert_eq!(state(&core, a.id), JobState::Running);

    let ids = [a.id, shardsched_wire::Fluid(12345)];
    let done = core.handle_cancel(NOW + 2, &user("alice"), &ids);
    assert_eq!(done[0].result, CancelResult::Cancelled);
    assert_eq!(done[1].result, CancelResult::NotFound);
    let record = core.job(a.id).expect("job");
    assert_eq!(record.state, JobState::Cancelled);
    assert_eq!(
        record.reason,
        Reason::Text("cancelled by user alice".into())
    );
    assert!(record.events.iter().any(|e| e.name == "free"));

    let admin = Peer::new(Role::Admin, "root").expect("peer");
    let done = core.handle_cancel(NOW + 3, &admin, &[b.id, a.id]);
    assert_eq!(done[0].result, CancelResult::Cancelled);
    assert_eq!(done[1].result, CancelResult::AlreadyInactive);
    assert_eq!(core.queue_manager().running_len(), 0);
}

#[test]
fn jobs_that_can_never_fit_are_denied_with_the_reason() {
    let mut core = core();
    // Four nodes: the definition has three.
    let refusal = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(4), None, 10)))
        .expect_err("denied");
    assert_eq!(refusal.code, RefusalCode::Denied);
    assert!(refusal.message.contains("unsatisfiable"), "{refusal}");
    assert!(refusal.message.contains("batch"), "{refusal}");
    // Longer than the queue's maximum.
    let refusal = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(None, None, 7200)))
        .expect_err("denied");
    assert_eq!(refusal.code, RefusalCode::Denied);
    assert!(refusal.message.contains("maximum"), "{refusal}");
    // Not a jobspec.
    let refusal = core
        .handle_submit(NOW, "alice", &submit(3, "{\"version\": 1}".into()))
        .expect_err("invalid");
    assert_eq!(refusal.code, RefusalCode::Invalid);
    // Nothing was recorded, and a retry is judged again.
    assert_eq!(core.jobs().count(), 0);
    assert!(
        core.handle_submit(NOW, "alice", &submit(1, jobspec(Some(4), None, 10)))
            .is_err()
    );
}

#[test]
fn a_job_that_fits_the_definition_but_not_the_owned_nodes_waits() {
    let mut core = core();
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(3), None, 10)))
        .expect("accepted");
    core.tick(NOW).expect("tick");
    let record = core.job(job.id).expect("job");
    assert_eq!(record.state, JobState::Pending);
    let summary = record.summary("batch", true);
    assert!(summary.reason.contains("not owned"), "{}", summary.reason);
    // Owning n2 as well lets it run.
    core.set_owned(&owned(&["n0", "n1", "n2"])).expect("owned");
    core.tick(NOW + 1).expect("tick");
    let record = core.job(job.id).expect("job");
    assert_eq!(record.state, JobState::Running);
    assert_eq!(record.nodes, vec!["n0", "n1", "n2"]);
}

#[test]
fn only_owned_nodes_are_allocated() {
    let mut core = core();
    let ids: Vec<_> = (0..10u8)
        .map(|k| {
            core.handle_submit(NOW, "alice", &submit(k, jobspec(None, None, 100)))
                .expect("accepted")
                .id
        })
        .collect();
    core.tick(NOW).expect("tick");
    let running: Vec<_> = ids
        .iter()
        .filter(|&&id| state(&core, id) == JobState::Running)
        .collect();
    assert_eq!(running.len(), 8, "two owned nodes of four cores");
    for id in &ids {
        let record = core.job(*id).expect("job");
        assert!(record.nodes.iter().all(|n| n == "n0" || n == "n1"));
    }
    let waiting = core.job(ids[9]).expect("job").summary("batch", true);
    assert_eq!(waiting.state, JobState::Pending);
    assert!(!waiting.reason.is_empty());
    let status = core.status(NOW);
    assert_eq!(status.queue.jobs_running, 8);
    assert_eq!(status.queue.jobs_pending, 2);
    assert_eq!(status.queue.nodes_owned, 2);
    assert_eq!(status.queue.nodes_defined, 3);
    assert_eq!(status.nodes.len(), 2);
    assert!(status.nodes.iter().all(|n| n.jobs_running == 4));
    assert!(core.held().iter().all(|h| h.allocated));
}

#[test]
fn sim_completion_frees_nodes_for_the_next_job() {
    let mut core = core();
    let first = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(2), None, 5)))
        .expect("first");
    let second = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(Some(2), None, 5)))
        .expect("second");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, first.id), JobState::Running);
    assert_eq!(state(&core, second.id), JobState::Pending);
    let summary = core.job(second.id).expect("job").summary("batch", true);
    assert_eq!(summary.reason, "reserved to start");
    assert_eq!(
        summary.reserved_ms,
        Some(NOW + 5_000),
        "the time travels apart"
    );
    let wake = core.next_wakeup_ms().expect("a wakeup");
    assert_eq!(wake, NOW + 5_000);
    core.tick(wake).expect("tick");
    assert_eq!(state(&core, first.id), JobState::Completed);
    assert_eq!(state(&core, second.id), JobState::Running);
    assert_eq!(core.job(second.id).expect("job").nodes, vec!["n0", "n1"]);
}

#[test]
fn time_scale_shortens_sim_runs() {
    let options = CoreOptions {
        time_scale: 10.0,
        ..CoreOptions::default()
    };
    let mut core = core_with(&["n0"], &["n0"], options);
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, None, 10)))
        .expect("job");
    core.tick(NOW).expect("tick");
    assert_eq!(core.next_wakeup_ms(), Some(NOW + 1_000));
    core.tick(NOW + 1_000).expect("tick");
    assert_eq!(state(&core, job.id), JobState::Completed);
    let bad = CoreOptions {
        time_scale: 0.0,
        ..CoreOptions::default()
    };
    let graph = shardsched_resource::read_cluster_spec(CLUSTER).expect("cluster");
    assert!(ShardCore::with_graph(graph, &config(&[]), 1, &[], bad).is_err());
}

#[test]
fn losing_a_node_never_touches_its_running_job() {
    let mut core = core();
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(1), None, 10)))
        .expect("job");
    core.tick(NOW).expect("tick");
    let node = core.job(job.id).expect("job").nodes[0].clone();
    let rest: Vec<&str> = ["n0", "n1"].into_iter().filter(|n| *n != node).collect();
    core.set_owned(&owned(&rest)).expect("owned");
    core.tick(NOW + 1).expect("tick");
    assert_eq!(state(&core, job.id), JobState::Running);
    let next = core
        .handle_submit(NOW + 2, "alice", &submit(2, jobspec(Some(2), None, 10)))
        .expect("fits the definition");
    core.tick(NOW + 2).expect("tick");
    assert_eq!(state(&core, next.id), JobState::Pending);
}

#[test]
fn a_jobspec_for_another_queue_is_refused() {
    let mut core = core();
    let jobspec = Shorthand {
        command: vec!["app".into()],
        queue: Some("debug".into()),
        ..Shorthand::default()
    }
    .to_jobspec()
    .expect("jobspec")
    .to_json()
    .to_string();
    let refusal = core
        .handle_submit(NOW, "alice", &submit(1, jobspec))
        .expect_err("wrong queue");
    assert_eq!(refusal.code, RefusalCode::Invalid);
}

#[test]
fn the_clock_stepping_back_does_not_break_scheduling() {
    let mut core = core();
    core.tick(NOW + 10_000).expect("tick");
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, None, 1)))
        .expect("job");
    core.tick(NOW + 5_000).expect("tick earlier than before");
    let record = core.job(job.id).expect("job");
    assert_eq!(record.state, JobState::Running);
    assert_eq!(record.submit_ms, NOW + 10_000);
}

#[test]
fn a_burst_larger_than_the_queue_depth_all_starts_when_there_is_room() {
    let graph = shardsched_resource::read_cluster_spec(CLUSTER).expect("cluster");
    let graph = shardsched_resource::keep_types(&graph, shardsched_resource::SCHEDULER_TYPES)
        .expect("graph");
    let all = ["n0", "n1", "n2", "n3"];
    let shallow = QueueConfig {
        queue_depth: 4,
        ..config(&all)
    };
    let mut core = ShardCore::with_graph(graph, &shallow, 5, &owned(&all), CoreOptions::default())
        .expect("core");
    let burst = |core: &mut ShardCore, keys: std::ops::Range<u8>, at: u64| -> Vec<_> {
        let ids = keys
            .map(|k| {
                core.handle_submit(at, "alice", &submit(k, jobspec(None, None, 100)))
                    .expect("job")
                    .id
            })
            .collect();
        core.tick(at).expect("tick");
        ids
    };
    // Sixteen cores, a queue depth of four: twelve jobs in one batch all start.
    let first = burst(&mut core, 0..12, NOW);
    assert!(
        first
            .iter()
            .all(|&id| state(&core, id) == JobState::Running)
    );
    // The next batch, behind a walk whose depth is spent, starts too.
    let second = burst(&mut core, 12..16, NOW + 1);
    assert!(
        second
            .iter()
            .all(|&id| state(&core, id) == JobState::Running)
    );
    let full = burst(&mut core, 16..17, NOW + 2);
    assert_eq!(state(&core, full[0]), JobState::Pending);
    assert_eq!(core.next_wakeup_ms(), Some(NOW + 100_000));
}

/// A jobspec naming a type the shards do not load (their load allowlist) is denied saying
/// so, not only "unsatisfiable".
#[test]
fn a_jobspec_naming_an_unloaded_type_is_denied_with_the_allowlist() {
    let mut core = core();
    let sockets = r#"{"version": 9999, "resources": [{"type": "node", "count": 1, "with": [
        {"type": "slot", "label": "task", "count": 1, "with": [
          {"type": "socket", "count": 1, "with": [{"type": "core", "count": 1}]}]}]}],
      "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
      "attributes": {"system": {"duration": 10}}}"#;
    let refusal = core
        .handle_submit(NOW, "alice", &submit(1, sockets.into()))
        .expect_err("denied");
    assert_eq!(refusal.code, RefusalCode::Denied);
    assert!(
        refusal
            .message
            .contains("asks for socket, which the shards do not load")
            && refusal.message.contains("load_allowlist"),
        "{refusal}"
    );
}

/// A pending job shows the nodes it asks for (`NNODES`), not 0.
#[test]
fn a_pending_job_carries_the_nodes_it_asks_for() {
    let mut core = core();
    let wide = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(3), None, 10)))
        .expect("fits the definition, waits for n2");
    let slots = core
        .handle_submit(NOW, "alice", &submit(2, jobspec(None, Some(2), 10)))
        .expect("slots");
    let summary = |id| core.job(id).expect("job").summary("batch", true);
    assert_eq!(summary(wide.id).state, JobState::Pending);
    assert_eq!(summary(wide.id).nodes_requested, Some(3));
    assert_eq!(summary(slots.id).nodes_requested, None);
}
