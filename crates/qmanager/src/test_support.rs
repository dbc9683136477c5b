//! Fixtures shared by the unit tests of this crate's modules (the integration tests have
//! their own in tests/common).

use shardsched_jobspec::Shorthand;
use shardsched_resource::VertexId;

use crate::{JobRequest, Params, QueueManager, QueuePolicy};

/// A job of `nodes` whole nodes for `duration` seconds, priority 0, submitted at 0.
pub fn job(id: u64, nodes: u64, duration: u64) -> JobRequest {
    JobRequest {
        id,
        jobspec: Shorthand {
            nodes: Some(nodes),
            duration,
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec"),
        priority: 0,
        submit_time: 0,
        user: 1,
    }
}

/// An easy queue over a generated cluster of `nodes` nodes.
pub fn easy_queue(nodes: usize) -> QueueManager {
    let graph = shardsched_resource::generated_cluster(nodes)
        .build()
        .expect("graph");
    QueueManager::new(graph, Params::with_policy(QueuePolicy::Easy)).expect("queue")
}

/// The first node vertex of the queue's graph.
pub fn first_node(qm: &QueueManager) -> VertexId {
    let node = qm.matcher().graph.sym("node").expect("node type");
    (0..qm.matcher().graph.len())
        .map(|i| VertexId(i as u32))
        .find(|&v| qm.matcher().graph.kind(v) == node)
        .expect("a node")
}
