//! The graph's edges: where the containment tree is every edge (nearly every graph) they
//! are read from the tree's arrays, else from petgraph (see `ResourceGraph::topo`).

use std::borrow::Cow;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use super::{ResourceGraph, VertexId, links};
use crate::intern::Sym;

impl ResourceGraph {
    /// Children of `v` in `subsystem` (any subsystem, containment included), in the order
    /// their edges were added.
    pub fn subsystem_children(&self, v: VertexId, subsystem: &str) -> Vec<VertexId> {
        let Some(sym) = self.interner.get(subsystem) else {
            return Vec::new();
        };
        if self.is_tree() {
            return match sym == self.containment_sym() {
                true => self.children(v).iter().map(|&c| VertexId(c)).collect(),
                false => Vec::new(),
            };
        }
        let mut out: Vec<VertexId> = self
            .topo
            .edges(NodeIndex::new(v.index()))
            .filter(|e| *e.weight() == sym)
            .map(|e| VertexId(e.target().index() as u32))
            .collect();
        // petgraph lists a vertex's outgoing edges newest first.
        out.reverse();
        out
    }

    /// Number of edges leaving `v`, in every subsystem (Fluxion's `out_degree`: a vertex is a
    /// leaf when it has none).
    pub fn out_degree(&self, v: VertexId) -> usize {
        if self.is_tree() {
            return self.children(v).len();
        }
        self.topo.edges(NodeIndex::new(v.index())).count()
    }

    /// Whether the containment tree is every edge of the graph (one subsystem, one parent
    /// each): `topo` is then left empty, and what reads edges reads the tree.
    fn is_tree(&self) -> bool {
        self.topo.node_count() == 0
    }

    /// Every subsystem's edges as petgraph holds them: `topo`, or where it was left empty
    /// ([`ResourceGraph::is_tree`]) the tree's edges, parent by parent (the order among
    /// parents is nothing the graph keeps: each vertex's children stay in order).
    pub(crate) fn topology(&self) -> Cow<'_, DiGraph<(), Sym, u32>> {
        if !self.is_tree() {
            return Cow::Borrowed(&self.topo);
        }
        let containment = self.containment_sym();
        let edges: Vec<(u32, u32, Sym)> = self
            .vertices()
            .flat_map(|v| self.children(v).iter().map(move |&c| (v.0, c, containment)))
            .collect();
        Cow::Owned(links::topology(self.len(), &edges))
    }

    /// Number of edges of `subsystem` in the topology (all subsystems when `None`).
    pub fn edge_count(&self, subsystem: Option<&str>) -> usize {
        match subsystem {
            None if self.is_tree() => self.child_list.len(),
            None => self.topo.edge_count(),
            Some(s) => match self.interner.get(s) {
                None => 0,
                Some(sym) if self.is_tree() => match sym == self.containment_sym() {
                    true => self.child_list.len(),
                    false => 0,
                },
                Some(sym) => self.topo.edge_weights().filter(|w| **w == sym).count(),
            },
        }
    }
}
