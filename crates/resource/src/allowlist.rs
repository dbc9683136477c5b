//! Keeping only some resource types: Fluxion's `load-allowlist`.
//!
//! A jobspec's shape must match the graph's: RFC 25 jobspecs (`node → slot → core`) name no
//! sockets, so on a graph with sockets their slot finds no node whose children are cores.
//! flux-core solves this by loading only `node,core,gpu` into Fluxion; we do the same by
//! rebuilding the graph without the other types, each kept vertex hanging from its nearest
//! kept ancestor. Ids, names, sizes, ranks, properties and status are kept as they were.

use crate::graph::{CONTAINMENT, GraphBuilder, GraphError, ResourceGraph, VertexId};

/// The types flux-core keeps by default, plus the levels above nodes and memory.
pub const SCHEDULER_TYPES: &[&str] = &["cluster", "rack", "node", "core", "gpu", "memory"];

/// A copy of `g` with only the vertices whose type is in `types` (the root is always kept).
/// Only the containment tree is kept.
pub fn keep_types(g: &ResourceGraph, types: &[&str]) -> Result<ResourceGraph, GraphError> {
    copy_where(g, |v| types.contains(&g.kind_str(v)))
}

/// A copy of `g` with only the vertices whose type is in `types` that lie on the way to a
/// node `keep_node` accepts (by name) or below one: the subgraph a queue whose definition
/// is those nodes schedules on. Racks and other levels above nodes survive only where they
/// lead to a kept node. Names, ids, ranks and paths are those of `g`, so what a job is given
/// (its R, its vertices' paths) reads the same in the subgraph as in the whole graph.
pub fn keep_subtrees(
    g: &ResourceGraph,
    types: &[&str],
    keep_node: &dyn Fn(&str) -> bool,
) -> Result<ResourceGraph, GraphError> {
    // On the way to a kept node (the node itself included)...
    let mut above = vec![false; g.len()];
    if let Some(node) = g.sym("node") {
        for v in g
            .vertices()
            .filter(|&v| g.kind(v) == node && keep_node(g.name(v)))
        {
            let mut up = Some(v);
            while let Some(u) = up.filter(|u| !above[u.index()]) {
                above[u.index()] = true;
                up = g.parent(u);
            }
        }
    }
    // ... or below one (preorder: a parent is decided before its children).
    let mut below = vec![false; g.len()];
    for v in g.preorder(g.root()) {
        if let Some(p) = g.parent(v) {
            below[v.index()] = below[p.index()] || (above[p.index()] && g.kind_str(p) == "node");
        }
    }
    copy_where(g, |v| {
        (above[v.index()] || below[v.index()]) && types.contains(&g.kind_str(v))
    })
}

/// A copy of `g`'s containment tree with the root and the vertices `keep` accepts, each
/// hanging from its nearest kept ancestor.
fn copy_where(
    g: &ResourceGraph,
    keep: impl Fn(VertexId) -> bool,
) -> Result<ResourceGraph, GraphError> {
    let mut b = GraphBuilder::new();
    let mut new_id: Vec<Option<VertexId>> = vec![None; g.len()];
    // Preorder: a vertex's nearest kept ancestor is already placed when it is reached.
    for v in g.preorder(g.root()) {
        if v != g.root() && !keep(v) {
            continue;
        }
        let id = b.add_vertex(g.spec_of(v));
        new_id[v.index()] = Some(id);
        let mut up = g.parent(v);
        while let Some(p) = up {
            if let Some(pid) = new_id[p.index()] {
                b.add_edge(pid, id, CONTAINMENT);
                break;
            }
            up = g.parent(p);
        }
    }
    b.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::read_cluster_spec;

    #[test]
    fn sockets_go_and_cores_hang_from_their_node() {
        let g = read_cluster_spec(crate::DEFAULT_CLUSTER_TOML).unwrap();
        let f = keep_types(&g, SCHEDULER_TYPES).unwrap();
        let sockets = g.vertices().filter(|&v| g.kind_str(v) == "socket").count();
        assert_eq!(f.len(), g.len() - sockets);
        let core = f.find_path("/cluster0/rack1/node127/core43").unwrap();
        assert_eq!(f.kind_str(core), "core");
        assert_eq!(f.rank(core), 127);
        let node = f.parent(core).unwrap();
        assert_eq!(f.name(node), "node127");
        assert_eq!(f.children(node).len(), 44 + 4 + 8);
    }

    /// A queue's subgraph: its nodes with what they hold, the racks and root above them,
    /// nothing else; names, ranks and paths as in the whole graph.
    #[test]
    fn subtrees_keep_the_nodes_below_and_above_and_nothing_else() {
        let g = read_cluster_spec(crate::DEFAULT_CLUSTER_TOML).unwrap();
        let wanted = ["node3", "node70", "node71"];
        let f = keep_subtrees(&g, SCHEDULER_TYPES, &|n| wanted.contains(&n)).unwrap();
        let count = |kind: &str| f.vertices().filter(|&v| f.kind_str(v) == kind).count();
        assert_eq!(count("cluster"), 1);
        assert_eq!(count("rack"), 2, "rack0 (node3) and rack1 (node70, node71)");
        assert_eq!(count("node"), 3);
        assert_eq!(count("core"), 3 * 44);
        assert_eq!(count("socket"), 0, "not a scheduler type");
        assert_eq!(f.len(), 1 + 2 + 3 * (1 + 44 + 4 + 8));
        let core = f.find_path("/cluster0/rack1/node71/core43").unwrap();
        assert_eq!(f.rank(core), 71);
        assert!(f.find_path("/cluster0/rack0/node4").is_none());
        let all = keep_subtrees(&g, SCHEDULER_TYPES, &|_| true).unwrap();
        assert_eq!(all.len(), keep_types(&g, SCHEDULER_TYPES).unwrap().len());
    }
}
