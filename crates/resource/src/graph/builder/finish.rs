//! [`GraphBuilder::finish`]: the checks of the containment tree and the freeze.

use super::GraphBuilder;
use super::edges::{BuiltEdges, EdgeError};
use crate::graph::links::{Links, two_parents};
use crate::graph::paths::Paths;
use crate::graph::{GraphError, ResourceGraph, VertexId};
use crate::intern::Sym;

impl GraphBuilder {
    /// Checks the containment tree (one root, one parent each, all reachable) and freezes.
    pub fn finish(mut self) -> Result<ResourceGraph, GraphError> {
        let n = self.columns.kind.len();
        if n == 0 {
            return Err(GraphError::Empty);
        }
        if let Some(v) = self.bad_size {
            let v = v as usize;
            let name = self.column_str(self.columns.name[v]).to_string();
            let size = self.columns.size.get(v);
            return Err(GraphError::BadSize { name, size });
        }
        self.renumber_strings();
        let containment = Sym(0);
        let edges = std::mem::replace(&mut self.edges, BuiltEdges::new(containment));
        let (links, topo) = edges
            .into_links(n, self.shared_children)
            .map_err(|e| match e {
                EdgeError::NoSuchVertex(end) => GraphError::NoSuchVertex(end),
                EdgeError::TwoParents(c) => {
                    let name = self.interner.resolve(self.columns.name[c as usize]);
                    two_parents(c, name)
                }
            })?;
        let outside = std::mem::take(&mut self.outside);
        let is_outside = |v: usize| outside.get(v).copied().unwrap_or(false);
        let mut root = None;
        let mut roots = 0;
        let mut detached = 0;
        for (v, &p) in links.parent.iter().enumerate() {
            if p == u32::MAX {
                if is_outside(v) {
                    detached += 1;
                } else {
                    roots += 1;
                    root.get_or_insert(v);
                }
            }
        }
        let (1, Some(root)) = (roots, root) else {
            return Err(GraphError::Roots(roots));
        };
        let reached_in_order = links.reachable_in_order(root);
        let Links {
            parent,
            child_start,
            child_list,
            shared,
        } = links;
        let mut g = ResourceGraph {
            topo,
            columns: self.columns.shrunk(),
            uniq: Vec::new(),
            parent,
            child_start,
            child_list,
            root: VertexId(root as u32),
            interner: self.interner,
            shared_children: shared,
            paths: Default::default(),
            removed: Default::default(),
            revision: 0,
        };
        if !self.uniq_override.is_empty() {
            g.uniq = (0..n as u32)
                .map(|v| self.uniq_override.get(&v).copied().unwrap_or(i64::from(v)))
                .collect();
        }
        let expected = n - detached;
        let reached = match reached_in_order {
            Some(count) => count,
            None => g.reachable_count()?,
        };
        if reached != expected {
            return Err(GraphError::Unreachable(format!(
                "{reached} of {expected} vertices reachable"
            )));
        }
        g.paths = Paths::new(&mut g, std::mem::take(&mut self.given_paths));
        Ok(g)
    }

    /// Numbers the subsystems that only edges use (after every vertex string, in order of
    /// first use), rewrites the edges' symbols if their numbers differ, and renumbers the
    /// interner to the graph's numbering, dropping strings nothing uses.
    fn renumber_strings(&mut self) {
        if self.final_of.len() < self.interner.len() {
            self.final_of.resize(self.interner.len(), u32::MAX);
        }
        for k in 0..self.edge_subsystems.len() {
            let s = self.edge_subsystems[k];
            self.final_sym(s);
        }
        let final_of = &self.final_of;
        if self
            .edge_subsystems
            .iter()
            .any(|s| final_of[s.index()] != s.0)
        {
            self.edges.renumber(final_of);
        }
        let identity = self.final_order.len() == self.interner.len()
            && self
                .final_order
                .iter()
                .enumerate()
                .all(|(k, &o)| k as u32 == o);
        if !identity {
            self.interner.renumber(&self.final_order);
        }
    }
}
