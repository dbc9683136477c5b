//! A shard holds what it may own: its graph is the cluster cut to its definition.

use std::collections::BTreeSet;

use shardsched_wire::msg::JobState;

use super::tests::{CLUSTER, NOW, assignment, config, core, core_with, jobspec, owned, submit};
use super::{CoreOptions, ShardCore};

/// The node names of the core's graph.
fn graph_nodes(core: &ShardCore) -> BTreeSet<String> {
    let graph = &core.queue_manager().matcher().graph;
    graph
        .vertices()
        .filter(|&v| graph.kind_str(v) == "node")
        .map(|v| graph.name(v).to_owned())
        .collect()
}

#[test]
fn a_shard_graph_holds_only_its_definition() {
    let core = core_with(&["n1", "n2"], &["n1"], CoreOptions::default());
    assert_eq!(
        graph_nodes(&core),
        BTreeSet::from(["n1".into(), "n2".into()])
    );
    let graph = &core.queue_manager().matcher().graph;
    // The cluster, two nodes, four cores each: no other node, nothing of theirs.
    assert_eq!(graph.len(), 1 + 2 * (1 + 4));
    // Names, ranks and paths are the whole cluster's.
    let core3 = graph.find_path("/c0/n2/core3").expect("n2's last core");
    assert_eq!(graph.rank(core3), 2);
}

/// Built from the coordinator's assignment (as a starting or restarted shard is), the
/// graph holds the definition and every node the assignment hands it.
#[test]
fn an_assigned_shard_graph_holds_its_definition_and_what_it_was_handed() {
    let a = assignment(config(&["n0"]), owned(&["n0", "n3"]), Vec::new());
    let core = ShardCore::new(&a, CoreOptions::default()).expect("core");
    assert_eq!(
        graph_nodes(&core),
        BTreeSet::from(["n0".into(), "n3".into()])
    );
    assert!(
        CLUSTER.contains("n[0-3]"),
        "n1 and n2 are in the cluster, not in the graph"
    );
}

/// A node handed at run time outside the definition has no vertex in the shard's graph:
/// it is not used until the shard is rebuilt (a reconfiguration restarts the shard, whose
/// new graph holds it); the nodes it owns keep working.
#[test]
fn a_node_handed_outside_the_graph_is_not_used_until_rebuilt() {
    let mut core = core();
    core.set_owned(&owned(&["n3"])).expect("owned");
    assert!(core.owned().is_empty(), "n3 is not up: no vertex");
    let waiting = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, None, 10)))
        .expect("fits the definition");
    core.tick(NOW).expect("tick");
    assert_eq!(core.job(waiting.id).expect("job").state, JobState::Pending);
    core.set_owned(&owned(&["n0"])).expect("owned");
    core.tick(NOW + 1).expect("tick");
    assert_eq!(core.job(waiting.id).expect("job").nodes, vec!["n0"]);
    assert_eq!(core.invariants(), Ok(()));
}
