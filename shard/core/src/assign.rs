//! From the coordinator's [`Assignment`] to what the core runs on: the resource graph (only
//! the queue's definition inside it), the queue manager's parameters, and the node index.
//!
//! A shard holds what it may own: the cluster is read, then cut in one pass
//! ([`definition_graph`]) to the queue's definition (its nodes with what they contain, and
//! the racks and root above them) and to the cluster's load allowlist (by default
//! [`SCHEDULER_TYPES`], so that RFC 25 jobspecs, `node → slot → core`, match on graphs with
//! sockets). The whole graph is dropped once cut: a shard's memory follows its definition,
//! not the cluster. Names, ranks and paths stay the whole graph's, so a job's R and the
//! journal's allocations (by path) read the same. A job that could only fit on nodes
//! outside the definition finds no such vertices and is denied at submit. Nodes inside the
//! definition that the queue does not own are merely unavailable (the core marks them down
//! through [`QueueManager::set_availability`]), so a job that needs them waits.
//!
//! [`Assignment`]: shardsched_wire::msg::shard_coord::Assignment
//! [`QueueManager::set_availability`]: shardsched_qmanager::QueueManager::set_availability

use std::collections::{BTreeMap, BTreeSet};

use shardsched_matcher::MatchPolicy;
use shardsched_qmanager::{Params, QueuePolicy};
use shardsched_resource::{
    CheckedSpec, GraphFormat, ResourceGraph, SCHEDULER_TYPES, VertexId, keep_subtrees, keep_types,
    read_graph,
};
use shardsched_wire::msg::{ClusterDescription, ClusterFormat, QueueConfig};

use crate::error::ShardError;

/// Milliseconds in a second: the wire counts in ms, the matcher in whole seconds.
pub const MS_PER_S: u64 = 1000;

/// The whole cluster's resource graph, reduced to the types of its load allowlist.
pub fn cluster_graph(cluster: &ClusterDescription) -> Result<ResourceGraph, ShardError> {
    let full = read_cluster(cluster)?;
    keep_types(&full, &load_types(cluster)).map_err(|e| ShardError::Cluster(e.to_string()))
}

/// The graph a queue schedules on: the cluster cut to the nodes of `definition` (with what
/// they contain and what contains them) and to the load allowlist's types; with the
/// resource types the whole cut-to-types cluster has (see [`types_not_loaded`]). Names in
/// `definition` that are not nodes of the cluster are an error.
///
/// A cluster spec (the format `up` and the coordinator use) is never built whole: only the
/// definition's hosts are ([`CheckedSpec::build_hosts`]), so a shard's memory and start-up
/// follow its definition even while it starts. Other formats are read whole, then cut.
pub fn definition_graph(
    cluster: &ClusterDescription,
    config: &QueueConfig,
    extra: &[&str],
) -> Result<(ResourceGraph, BTreeSet<String>), ShardError> {
    let types = load_types(cluster);
    let (part, definition, all_kinds) = match cluster.format {
        ClusterFormat::Spec => {
            let spec =
                CheckedSpec::read(&cluster.text).map_err(|e| ShardError::Cluster(e.to_string()))?;
            let hosts: BTreeSet<&str> = spec.hosts().map(|(h, _)| h).collect();
            let definition = definition(config, extra, &|n| hosts.contains(n));
            check_known(&|n| hosts.contains(n), &definition)?;
            let part = spec
                .build_hosts(&|h| definition.contains(h))
                .map_err(|e| ShardError::Cluster(e.to_string()))?;
            let kinds = spec.kinds().into_iter().map(str::to_owned).collect();
            (part, definition, kinds)
        }
        _ => {
            let full = read_cluster(cluster)?;
            let nodes = node_index(&full);
            let definition = definition(config, extra, &|n| nodes.contains_key(n));
            let kinds = kinds(&full);
            (full, definition, kinds)
        }
    };
    let graph = cut(&part, &types, &definition)?;
    let root = part.kind_str(part.root()).to_owned();
    let loaded = all_kinds
        .into_iter()
        .filter(|k| *k == root || types.contains(&k.as_str()))
        .collect();
    Ok((graph, loaded))
}

/// The cluster description's graph, every type.
fn read_cluster(cluster: &ClusterDescription) -> Result<ResourceGraph, ShardError> {
    let format = match cluster.format {
        ClusterFormat::Grug => GraphFormat::Grug,
        ClusterFormat::Jgf => GraphFormat::Jgf,
        ClusterFormat::Rv1exec => GraphFormat::Rv1exec,
        ClusterFormat::Spec => GraphFormat::Spec,
    };
    read_graph(format, &cluster.text).map_err(|e| ShardError::Cluster(e.to_string()))
}

/// The types shards load: the cluster's allowlist, [`SCHEDULER_TYPES`] when it has none.
fn load_types(cluster: &ClusterDescription) -> Vec<&str> {
    if cluster.load_allowlist.is_empty() {
        SCHEDULER_TYPES.to_vec()
    } else {
        cluster.load_allowlist.iter().map(String::as_str).collect()
    }
}

/// The resource types `graph` has vertices of.
pub fn kinds(graph: &ResourceGraph) -> BTreeSet<String> {
    let mut kinds = BTreeSet::new();
    for v in graph.vertices() {
        if !kinds.contains(graph.kind_str(v)) {
            kinds.insert(graph.kind_str(v).to_owned());
        }
    }
    kinds
}

/// The node vertices of a graph, by host name (not those a definition change removed:
/// their rows stay, and a node added again has a new one).
pub fn node_index(graph: &ResourceGraph) -> BTreeMap<String, VertexId> {
    let Some(node) = graph.sym("node") else {
        return BTreeMap::new();
    };
    graph
        .vertices()
        .filter(|&v| graph.kind(v) == node && !graph.is_removed(v))
        .map(|v| (graph.name(v).to_owned(), v))
        .collect()
}

/// The nodes an assignment names: those the queue owns, then those coming to it.
pub fn assigned_nodes(
    assignment: &shardsched_wire::msg::shard_coord::Assignment,
) -> impl Iterator<Item = &str> {
    let owned = assignment.owned.iter().map(|n| n.node.as_str());
    owned.chain(
        assignment
            .incoming
            .iter()
            .map(|(_, n)| n.node.node.as_str()),
    )
}

/// The nodes a queue may own: its configured definition, plus those of `extra` (owned,
/// incoming, held in its journal or by a running job's allocation: the coordinator's
/// word, and facts) that are nodes of the cluster (`is_node`); with an empty configured
/// definition, only those.
pub fn definition(
    config: &QueueConfig,
    extra: &[&str],
    is_node: &dyn Fn(&str) -> bool,
) -> BTreeSet<String> {
    config
        .definition
        .iter()
        .cloned()
        .chain(extra.iter().filter(|n| is_node(n)).map(|n| (*n).to_owned()))
        .collect()
}

/// `graph` cut to the nodes of `definition` (see [`definition_graph`]): the graph itself
/// when it holds no other node. Names that are not nodes of the graph are an error: the
/// coordinator and the shard disagree on the cluster.
pub fn restrict_to_definition(
    graph: ResourceGraph,
    definition: &BTreeSet<String>,
) -> Result<ResourceGraph, ShardError> {
    let nodes = node_index(&graph);
    if nodes.keys().all(|n| definition.contains(n)) {
        check_known(&|n| nodes.contains_key(n), definition)?;
        return Ok(graph);
    }
    let kinds = kinds(&graph);
    let types: Vec<&str> = kinds.iter().map(String::as_str).collect();
    cut(&graph, &types, definition)
}

/// `graph` cut to `types` and the nodes of `definition`.
fn cut(
    graph: &ResourceGraph,
    types: &[&str],
    definition: &BTreeSet<String>,
) -> Result<ResourceGraph, ShardError> {
    let nodes = node_index(graph);
    check_known(&|n| nodes.contains_key(n), definition)?;
    keep_subtrees(graph, types, &|n| definition.contains(n))
        .map_err(|e| ShardError::Cluster(e.to_string()))
}

/// Refuses a definition naming a node that is not one of the cluster's (`is_node`).
fn check_known(
    is_node: &dyn Fn(&str) -> bool,
    definition: &BTreeSet<String>,
) -> Result<(), ShardError> {
    match definition.iter().find(|n| !is_node(n)) {
        Some(unknown) => Err(ShardError::QueueConfig(format!(
            "node {unknown} of the queue's definition is not in the cluster"
        ))),
        None => Ok(()),
    }
}

/// Why a jobspec can never fit because of the load allowlist, if it can't: the resource
/// types it asks for that are not `loaded` (the types of the whole cluster cut to the
/// allowlist, not only of the queue's definition), with those that are. A denial
/// otherwise says only "unsatisfiable" about a jobspec that names `socket` on a graph loaded
/// without sockets (docs/examples/one-node.yaml before it dropped its socket level).
pub fn types_not_loaded(
    loaded: &BTreeSet<String>,
    jobspec: &shardsched_jobspec::Jobspec,
) -> Option<String> {
    let loaded: BTreeSet<&str> = loaded.iter().map(String::as_str).collect();
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

    /// Every vertex in order: path, type, id, rank, size, parent's path.
    fn listing(g: &ResourceGraph) -> Vec<String> {
        g.vertices()
            .map(|v| {
                let parent = g.parent(v).map(|p| g.path(p));
                let (kind, id, rank, size) = (g.kind_str(v), g.id(v), g.rank(v), g.size(v));
                format!("{} {kind} {id} {rank} {size} {parent:?}", g.path(v))
            })
            .collect()
    }

    /// A spec cluster is never built whole for a shard, and the part it builds is what
    /// cutting the whole graph gave: the same vertices in the same order, the same loaded
    /// types (the whole cluster's), the same refusal of a node the cluster does not have.
    #[test]
    fn a_spec_shard_builds_only_its_part_and_it_is_the_cut_of_the_whole() {
        let spec = shardsched_resource::generated_cluster(200);
        let mut text = spec.to_toml();
        // A second class without gpus or racks: the loaded types are the whole cluster's.
        text.push_str("\n[[nodes]]\nhosts = \"cpu[0-9]\"\ncores_per_socket = 4\n");
        let cluster = ClusterDescription {
            format: ClusterFormat::Spec,
            text,
            load_allowlist: Vec::new(),
        };
        let full = read_cluster(&cluster).expect("whole");
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        for (defined, extra) in [
            (names(&["cpu3", "cpu4"]), vec![]),
            (
                names(&["node0", "node64", "node199"]),
                vec!["node70", "nosuch"],
            ),
            (vec![], vec!["node5"]),
        ] {
            let config = QueueConfig {
                definition: defined,
                ..config()
            };
            let (graph, loaded) = definition_graph(&cluster, &config, &extra).expect("part");
            let nodes = node_index(&full);
            let wanted = definition(&config, &extra, &|n| nodes.contains_key(n));
            let cut = cut(&full, &load_types(&cluster), &wanted).expect("cut");
            assert_eq!(listing(&graph), listing(&cut), "{wanted:?}");
            assert_eq!(
                loaded,
                kinds(&keep_types(&full, SCHEDULER_TYPES).expect("types"))
            );
        }
        let unknown = QueueConfig {
            definition: names(&["node1", "node200"]),
            ..config()
        };
        let refused = definition_graph(&cluster, &unknown, &[]).map(|_| ());
        assert!(
            matches!(&refused, Err(ShardError::QueueConfig(m)) if m.contains("node200")),
            "{refused:?}"
        );
    }
}
