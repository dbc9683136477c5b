//! A whole's shape — what its cover records, and what taking it whole adds to its
//! parents' sums — is learned once per listing layout (`state::shape`): nodes alike share
//! it. Nodes that differ only in their vertices' types must not. Debug builds (as `cargo
//! test` runs) learn every whole's shape as well and compare: a shared shape that is not
//! the whole's own fails there with "the shape of its layout is not its own" (checked to
//! fail so with the types left out of the layout).
#![allow(clippy::unwrap_used)]

mod fixtures;

use fixtures::spec;
use shardsched_matcher::{MatchOp, MatchPolicy, Matcher, Placement, PruneFilters};
use shardsched_resource::{CONTAINMENT, GraphBuilder, VertexSpec};

/// A cluster of two nodes of one socket of three leaves each, alike but for one leaf's
/// type: node0 has two cores and a gpu, node1 a core and two gpus.
fn cores_and_gpus() -> Matcher {
    let mut b = GraphBuilder::new();
    let c = b.add_vertex(VertexSpec::new("cluster", "cluster", 0));
    for (i, leaves) in [["core", "core", "gpu"], ["core", "gpu", "gpu"]]
        .into_iter()
        .enumerate()
    {
        let n = b.add_vertex(VertexSpec::new("node", "node", i as i64));
        let s = b.add_vertex(VertexSpec::new("socket", "socket", 0));
        b.add_edge(c, n, CONTAINMENT);
        b.add_edge(n, s, CONTAINMENT);
        for (k, leaf) in leaves.into_iter().enumerate() {
            let l = b.add_vertex(VertexSpec::new(leaf, leaf, k as i64));
            b.add_edge(s, l, CONTAINMENT);
        }
    }
    Matcher::new(
        b.finish().unwrap(),
        MatchPolicy::parse("low").unwrap(),
        &PruneFilters::default_filters(),
    )
}

#[test]
fn nodes_alike_but_for_their_types_do_not_share_a_shape() {
    let mut m = cores_and_gpus();
    let node = spec(Some(1), None, 100);
    // Each node taken whole, node0 first: node1's listing has node0's units and depths, but
    // a gpu where node0 has its second core.
    for id in [1, 2] {
        let placed = m.place(MatchOp::Allocate, &node, id, 0).unwrap();
        assert_eq!(placed, Placement::Allocated { at: 0 });
    }
    m.cancel(1).unwrap();
    // node0's two cores are free again.
    let core = spec(None, Some(2), 100);
    let placed = m.place(MatchOp::Allocate, &core, 3, 0).unwrap();
    assert_eq!(placed, Placement::Allocated { at: 0 });
}
