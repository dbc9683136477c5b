//! Helpers shared by the queue manager's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use shardsched_jobspec::Shorthand;
use shardsched_qmanager::{Event, JobId, JobRequest, Params, QueueManager, QueuePolicy};
use shardsched_resource::{ResourceGraph, VertexId};

/// A cluster of `n` nodes (2 sockets × 22 cores each).
pub fn cluster(n: usize) -> ResourceGraph {
    shardsched_resource::generated_cluster(n).build().unwrap()
}

pub fn queue(nodes: usize, policy: QueuePolicy) -> QueueManager {
    QueueManager::new(cluster(nodes), Params::with_policy(policy)).unwrap()
}

/// A job of `nodes` whole nodes for `duration` seconds, submitted at `submit`.
pub fn job(id: JobId, nodes: u64, duration: u64, submit: i64) -> JobRequest {
    JobRequest {
        id,
        jobspec: Shorthand {
            nodes: Some(nodes),
            duration,
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .unwrap(),
        priority: 0,
        submit_time: submit,
        user: 1,
    }
}

pub fn events(qm: &mut QueueManager) -> Vec<Event> {
    std::iter::from_fn(|| qm.poll_event()).collect()
}

pub fn started(events: &[Event]) -> Vec<JobId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Started { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

/// The vertex of node `name` (e.g. `node3`).
pub fn node(qm: &QueueManager, name: &str) -> VertexId {
    let g = &qm.matcher().graph;
    g.vertices().find(|&v| g.name(v) == name).unwrap()
}

/// Every allocation and reservation the matcher holds passes the matcher's own checker.
pub fn assert_matcher_consistent(qm: &QueueManager) {
    let m = qm.matcher();
    let allocs: Vec<(u64, &shardsched_matcher::Allocation)> =
        m.jobs().map(|(id, j)| (id, &j.alloc)).collect();
    let v = shardsched_matcher::checker::check(&m.graph, &allocs);
    assert!(v.is_empty(), "matcher checker: {v:?}");
}
