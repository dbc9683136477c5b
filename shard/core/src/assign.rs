//! From the coordinator's [`Assignment`] to what the core runs on: the resource graph (only
//! the queue's definition inside it), the queue manager's parameters, and the node index.
//!
//! The whole cluster is loaded, then reduced to the cluster's load allowlist (by default
//! [`SCHEDULER_TYPES`]) so that RFC 25 jobspecs (`node → slot → core`) match on graphs with
//! sockets. Nodes outside the queue's definition
//! are marked down *before* the queue manager is built: for it they are outside the
//! definition for good, so a job that could only fit with them is denied at submit. Nodes
//! inside the definition that the queue does not own are merely unavailable (the core marks
//! them down through [`QueueManager::set_availability`]), so a job that needs them waits.
//!
//! [`Assignment`]: shardsched_wire::msg::shard_coord::Assignment
//! [`QueueManager::set_availability`]: shardsched_qmanager::QueueManager::set_availability

use std::collections::{BTreeMap, BTreeSet};

use shardsched_matcher::MatchPolicy;
use shardsched_qmanager::{Params, QueuePolicy};
use shardsched_resource::{
    GraphFormat, ResourceGraph, SCHEDULER_TYPES, Status, VertexId, keep_types, read_graph,
};
use shardsched_wire::msg::{ClusterDescription, ClusterFormat, QueueConfig};

use crate::error::ShardError;

/// Milliseconds in a second: the wire counts in ms, the matcher in whole seconds.
pub const MS_PER_S: u64 = 1000;

/// The resource graph the shard schedules on, from the cluster description: only the types
/// of its load allowlist.
pub fn cluster_graph(cluster: &ClusterDescription) -> Result<ResourceGraph, ShardError> {
    let format = match cluster.format {
        ClusterFormat::Grug => GraphFormat::Grug,
        ClusterFormat::Jgf => GraphFormat::Jgf,
        ClusterFormat::Rv1exec => GraphFormat::Rv1exec,
        ClusterFormat::Spec => GraphFormat::Spec,
    };
    let full = read_graph(format, &cluster.text).map_err(|e| ShardError::Cluster(e.to_string()))?;
    let types: Vec<&str> = if cluster.load_allowlist.is_empty() {
        SCHEDULER_TYPES.to_vec()
    } else {
        cluster.load_allowlist.iter().map(String::as_str).collect()
    };
    keep_types(&full, &types).map_err(|e| ShardError::Cluster(e.to_string()))
}

/// The node vertices of a graph, by host name.
pub fn node_index(graph: &ResourceGraph) -> BTreeMap<String, VertexId> {
    let Some(node) = graph.sym("node") else {
        return BTreeMap::new();
    };
    graph
        .vertices()
        .filter(|&v| graph.kind(v) == node)
        .map(|v| (graph.name(v).to_owned(), v))
        .collect()
}

/// Marks every node outside `definition` down in `graph`. Names that are not nodes of the
/// graph are an error: the coordinator and the shard disagree on the cluster.
pub fn restrict_to_definition(
    graph: &mut ResourceGraph,
    nodes: &BTreeMap<String, VertexId>,
    definition: &BTreeSet<String>,
) -> Result<(), ShardError> {
    if let Some(unknown) = definition.iter().find(|n| !nodes.contains_key(*n)) {
        return Err(ShardError::QueueConfig(format!(
            "node {unknown} of the queue's definition is not in the cluster"
        )));
    }
    for (name, &v) in nodes {
        if !definition.contains(name) {
            graph.set_status(v, Status::Down);
        }
    }
    Ok(())
}

/// Why a jobspec can never fit because of the load allowlist, if it can't: the resource
/// types it asks for that the graph has no vertex of, with the types the graph has. A denial
/// otherwise says only "unsatisfiable" about a jobspec that names `socket` on a graph loaded
/// without sockets (docs/examples/one-node.yaml before it dropped its socket level).
pub fn types_not_loaded(
    graph: &ResourceGraph,
    jobspec: &shardsched_jobspec::Jobspec,
) -> Option<String> {
    let loaded: BTreeSet<&str> = graph.vertices().map(|v| graph.kind_str(v)).collect();
    let mut missing: BTreeSet<&str> = BTreeSet::new();
    let mut stack: Vec<&shardsched_jobspec::Resource> = jobspec.resources.iter().collect();
    while let Some(r) = stack.pop() {
        if r.kind != "slot" && !loaded.contains(r.kind.as_str()) {
            missing.insert(&r.kind);
        }
        stack.extend(&r.with);
    }
    if missing.is_empty() {
        return None;
    }
    let list = |set: BTreeSet<&str>| set.into_iter().collect::<Vec<_>>().join(", ");
    Some(format!(
        "the jobspec asks for {}, which the shards do not load: they load only {} (the \
         cluster's load_allowlist in the coordinator's configuration, docs/CONFIG.md)",
        list(missing),
        list(loaded)
    ))
}

/// The queue manager's parameters from the queue's configuration. Durations go from ms to
/// the matcher's whole seconds: the default rounds up, the maximum down (but not to 0,
/// which would mean "no maximum").
pub fn params(config: &QueueConfig) -> Result<Params, ShardError> {
    let policy: QueuePolicy = config
        .queue_policy
        .as_str()
        .parse()
        .map_err(|e: shardsched_qmanager::QueueError| ShardError::QueueConfig(e.to_string()))?;
    let match_policy = MatchPolicy::parse(config.match_policy.as_str())
        .map_err(|e| ShardError::QueueConfig(e.to_string()))?;
    let max_duration = match config.max_duration_ms {
        0 => 0,
        ms => (ms / MS_PER_S).max(1),
    };
    let mut default_duration = config.default_duration_ms.div_ceil(MS_PER_S);
    if max_duration > 0 {
        default_duration = default_duration.min(max_duration);
    }
    let depth = |d: u32| usize::try_from(d).unwrap_or(usize::MAX);
    let params = Params {
        policy,
        queue_depth: depth(config.queue_depth),
        reservation_depth: depth(config.reservation_depth),
        match_policy,
        default_duration,
        max_duration,
        exhaustive: false,
    };
    params
        .validate()
        .map_err(|e| ShardError::QueueConfig(e.to_string()))?;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> QueueConfig {
        QueueConfig {
            name: "batch".into(),
            queue_policy: shardsched_wire::msg::QueuePolicy::Easy,
            match_policy: shardsched_wire::msg::MatchPolicy::LoNode,
            queue_depth: 32,
            reservation_depth: 1,
            default_duration_ms: 1_500,
            max_duration_ms: 3_600_000,
            definition: vec![],
            enabled: true,
            started: true,
            array_elements_max: shardsched_wire::limits::ARRAY_ELEMENTS_DEFAULT,
        }
    }

    #[test]
    fn params_convert_durations_and_policies() {
        let p = params(&config()).expect("params");
        assert_eq!(p.policy, QueuePolicy::Easy);
        assert_eq!((p.default_duration, p.max_duration), (2, 3600));
        let tiny = QueueConfig {
            default_duration_ms: 0,
            max_duration_ms: 10,
            ..config()
        };
        let p = params(&tiny).expect("params");
        assert_eq!((p.default_duration, p.max_duration), (0, 1));
    }

    /// The wire's policies are the queue manager's and the matcher's by name: every one
    /// the coordinator can send is one the shard runs.
    #[test]
    fn every_policy_on_the_wire_is_one_the_shard_runs() {
        for queue_policy in shardsched_wire::msg::QueuePolicy::ALL {
            for match_policy in shardsched_wire::msg::MatchPolicy::ALL {
                let config = QueueConfig {
                    queue_policy,
                    match_policy,
                    ..config()
                };
                let p = params(&config).expect("params");
                assert_eq!(p.policy.to_string(), queue_policy.as_str());
            }
        }
    }

    #[test]
    fn graph_keeps_scheduler_types_only() {
        let g = cluster_graph(&ClusterDescription {
            format: ClusterFormat::Spec,
            text: shardsched_resource::DEFAULT_CLUSTER_TOML.into(),
            load_allowlist: Vec::new(),
        })
        .expect("graph");
        assert!(g.vertices().all(|v| g.kind_str(v) != "socket"));
        assert_eq!(node_index(&g).len(), 128);
        let bad = ClusterDescription {
            format: ClusterFormat::Spec,
            text: "nodes = 3".into(),
            load_allowlist: Vec::new(),
        };
        assert!(matches!(cluster_graph(&bad), Err(ShardError::Cluster(_))));
    }
}
