//! Keeping only some resource types: Fluxion's `load-allowlist`.
//!
//! A jobspec's shape must match the graph's: RFC 25 jobspecs (`node → slot → core`) name no
//! sockets, so on a graph with sockets their slot finds no node whose children are cores.
//! flux-core solves this by loading only `node,core,gpu` into Fluxion; we do the same by
//! rebuilding the graph without the other types, each kept vertex hanging from its nearest
//! kept ancestor. Ids, names, sizes, ranks, properties and status are kept as they were.

use crate::graph::{CONTAINMENT, GraphBuilder, GraphError, ResourceGraph, VertexId, VertexSpec};

/// The types flux-core keeps by default, plus the levels above nodes and memory.
pub const SCHEDULER_TYPES: &[&str] = &["cluster", "rack", "node", "core", "gpu", "memory"];

/// A copy of `g` with only the vertices whose type is in `types` (the root is always kept).
/// Only the containment tree is kept.
pub fn keep_types(g: &ResourceGraph, types: &[&str]) -> Result<ResourceGraph, GraphError> {
    let mut b = GraphBuilder::new();
    let mut new_id: Vec<Option<VertexId>> = vec![None; g.len()];
    // Preorder: a vertex's nearest kept ancestor is already placed when it is reached.
    for v in g.preorder(g.root()) {
        let keep = v == g.root() || types.contains(&g.kind_str(v));
        if !keep {
            continue;
        }
        let mut spec = VertexSpec::new(g.kind_str(v), g.basename(v), g.id(v));
        spec.name = Some(g.name(v).to_string());
        spec.rank = g.rank(v);
        spec.size = g.size(v);
        spec.unit = g.unit(v).to_string();
        spec.status = g.status(v);
        spec.exclusive = g.marked_exclusive(v);
        if let Some(p) = g.properties(v) {
            spec.properties = p.clone();
        }
        let id = b.add_vertex(spec);
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
}
