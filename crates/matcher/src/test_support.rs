//! Fixtures shared by the unit tests of this crate's modules.

use shardsched_resource::{CONTAINMENT, GraphBuilder, ResourceGraph, VertexSpec};

use crate::{MatchPolicy, Matcher, PruneFilters};

/// A matcher (policy low) over [`two_node_graph`].
pub fn two_node_matcher() -> Matcher {
    Matcher::new(
        two_node_graph(),
        MatchPolicy::parse("low").expect("policy"),
        &PruneFilters::default_filters(),
    )
}

/// A cluster of two nodes with two cores each (core ids 0 and 1 under each node).
pub fn two_node_graph() -> ResourceGraph {
    let mut b = GraphBuilder::new();
    let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
    for i in 0..2 {
        let n = b.add_vertex(VertexSpec::new("node", "node", i));
        b.add_edge(c, n, CONTAINMENT);
        for k in 0..2 {
            let core = b.add_vertex(VertexSpec::new("core", "core", k));
            b.add_edge(n, core, CONTAINMENT);
        }
    }
    b.finish().expect("graph")
}

/// A jobspec of one slot with `n` nodes, for 60 seconds.
pub fn nodes(n: u64) -> shardsched_jobspec::Jobspec {
    shardsched_jobspec::parse(&format!(
        "version: 9999\nresources: [{{type: slot, count: 1, label: s, with: [{{type: node, count: {n}}}]}}]\ntasks: [{{command: [app], slot: s, count: {{per_slot: 1}}}}]\nattributes: {{system: {{duration: 60}}}}"
    ))
    .expect("jobspec")
}
