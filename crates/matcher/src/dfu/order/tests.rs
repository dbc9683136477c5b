//! `first`'s order against its definition: each vertex's children sorted by (weight of the
//! edge into them, uniq_id), both descending.

use proptest::prelude::*;
use shardsched_resource::{CONTAINMENT, GraphBuilder, ResourceGraph, VertexId, VertexSpec};

use super::EdgeOrder;

/// A tree of `parents.len() + 1` vertices: vertex `i + 1`'s parent is `parents[i] % (i + 1)`.
/// Edges are added in `edge_order` (a permutation seed): when an earlier-made child's edge
/// comes later, its parent's list is not by ascending uniq_id, and the order keeps a list
/// for it from the start.
fn tree(parents: &[usize], shuffle: &[usize]) -> ResourceGraph {
    let mut b = GraphBuilder::new();
    let n = parents.len() + 1;
    let v: Vec<VertexId> = (0..n)
        .map(|i| b.add_vertex(VertexSpec::new("v", "v", i as i64)))
        .collect();
    let mut edges: Vec<(usize, usize)> = (1..n).map(|i| (parents[i - 1] % i, i)).collect();
    for (i, &s) in shuffle.iter().enumerate() {
        if !edges.is_empty() {
            let j = s % edges.len();
            let k = i % edges.len();
            edges.swap(j, k);
        }
    }
    for (p, c) in edges {
        b.add_edge(v[p], v[c], CONTAINMENT);
    }
    b.finish().expect("tree")
}

/// The definition: children by (weight, uniq_id), both descending.
fn model(g: &ResourceGraph, weight: &[u64], v: VertexId) -> Vec<u32> {
    let mut kids = g.children(v).to_vec();
    kids.sort_by_key(|&c| std::cmp::Reverse((weight[c as usize], g.uniq_id(VertexId(c)))));
    kids
}

fn read(order: &EdgeOrder, g: &ResourceGraph, v: VertexId) -> Vec<u32> {
    let (list, reversed) = order.children(g.child_lists(), v);
    if reversed {
        list.iter().rev().copied().collect()
    } else {
        list.to_vec()
    }
}

proptest! {
    /// After any weights set (each through the edge from the child's parent, as a match
    /// learns them), every vertex's children read as the definition orders them — those
    /// never reordered from the tree's list, the others from their own — and so does the
    /// order regrown from it.
    #[test]
    fn children_read_in_the_order_weights_and_uniq_ids_define(
        parents in proptest::collection::vec(0usize..64, 1..40),
        shuffle in proptest::collection::vec(0usize..64, 0..8),
        sets in proptest::collection::vec((0usize..64, 0u64..5), 0..30),
    ) {
        let g = tree(&parents, &shuffle);
        let mut order = EdgeOrder::new(&g, &g);
        let mut weight = vec![u64::MAX; g.len()];
        for (child, w) in sets {
            let c = 1 + child % (g.len() - 1);
            let parent = g.parent(VertexId(c as u32)).expect("a parent");
            order.set_weight(&g, parent, c as u32, w);
            weight[c] = w;
            prop_assert_eq!(order.weight(VertexId(c as u32)), w);
        }
        let regrown = order.regrown(&g, &g);
        for v in g.vertices() {
            prop_assert_eq!(read(&order, &g, v), model(&g, &weight, v), "vertex {}", v.0);
            prop_assert_eq!(read(&regrown, &g, v), model(&g, &weight, v), "regrown, vertex {}", v.0);
        }
    }
}
