//! The tree of a dominant subsystem other than containment (resource-query's `-S PA`: the
//! power subsystem), for walks that follow its edges instead of containment's.

use shardsched_resource::{GRAPH_DEPTH_MAX, ResourceGraph, VertexId};

use super::Tree;

/// Children (in the order their edges were added), parents and root of one subsystem.
#[derive(Clone, Debug)]
pub struct SubTree {
    pub name: String,
    start: Vec<u32>,
    list: Vec<u32>,
    parent: Vec<u32>,
    root: VertexId,
    /// Some vertex has several parents in the subsystem.
    dag: bool,
}

impl SubTree {
    /// The tree of `subsystem` in `g`: its root is the first vertex with edges of the
    /// subsystem leaving it and none entering. `None` when the graph has no such edges.
    pub fn new(g: &ResourceGraph, subsystem: &str) -> Option<SubTree> {
        let n = g.len();
        let mut start = Vec::with_capacity(n + 1);
        let mut list = Vec::new();
        let mut parent = vec![u32::MAX; n];
        let mut dag = false;
        for v in g.vertices() {
            start.push(list.len() as u32);
            for c in g.subsystem_children(v, subsystem) {
                if parent[c.index()] == u32::MAX {
                    parent[c.index()] = v.0;
                } else {
                    dag = true;
                }
                list.push(c.0);
            }
        }
        start.push(list.len() as u32);
        let root = if subsystem == shardsched_resource::CONTAINMENT {
            g.root()
        } else {
            g.vertices().find(|&v| {
                parent[v.index()] == u32::MAX && start[v.index() + 1] > start[v.index()]
            })?
        };
        if dag && subsystem == shardsched_resource::CONTAINMENT {
            // The tree parent is the graph's (the first edge in).
            for v in g.vertices() {
                parent[v.index()] = g.parent(v).map_or(u32::MAX, |p| p.0);
            }
        }
        Some(SubTree {
            name: subsystem.to_string(),
            start,
            list,
            parent,
            root,
            dag,
        })
    }

    /// The first vertex a walk from the root would enter deeper than [`GRAPH_DEPTH_MAX`],
    /// and its depth: the walks recurse once a level (in a DAG, entering each vertex once,
    /// children in order, as here).
    pub fn too_deep(&self) -> Option<(VertexId, usize)> {
        let mut seen = vec![false; self.parent.len()];
        // (vertex, next child to enter)
        let mut path: Vec<(VertexId, usize)> = vec![(self.root, 0)];
        seen[self.root.index()] = true;
        while let Some(&mut (v, ref mut next)) = path.last_mut() {
            let Some(&c) = self.children(v).get(*next) else {
                path.pop();
                continue;
            };
            *next += 1;
            if std::mem::replace(&mut seen[c as usize], true) {
                continue;
            }
            if path.len() > GRAPH_DEPTH_MAX {
                return Some((VertexId(c), path.len()));
            }
            path.push((VertexId(c), 0));
        }
        None
    }
}

impl Tree for SubTree {
    fn parent(&self, v: VertexId) -> Option<VertexId> {
        let p = self.parent[v.index()];
        (p != u32::MAX).then_some(VertexId(p))
    }

    fn root(&self) -> VertexId {
        self.root
    }

    fn child_lists(&self) -> (&[u32], &[u32]) {
        (&self.start, &self.list)
    }

    fn is_dag(&self) -> bool {
        self.dag
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use shardsched_resource::{CONTAINMENT, GraphBuilder, VertexSpec};

    use super::*;

    /// A cluster holding `n` power vertices, chained one inside the other in the power
    /// subsystem: the containment tree is 1 level deep, the power tree `n - 1`.
    fn power_chain(n: usize) -> ResourceGraph {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        let mut last = None;
        for i in 0..n {
            let p = b.add_vertex(VertexSpec::new("power", "power", i as i64));
            b.add_edge(c, p, CONTAINMENT);
            if let Some(l) = last {
                b.add_edge(l, p, "power");
            }
            last = Some(p);
        }
        b.finish().unwrap()
    }

    #[test]
    fn a_subsystem_tree_deeper_than_the_bound_is_refused() {
        let ok = power_chain(GRAPH_DEPTH_MAX + 1);
        assert_eq!(SubTree::new(&ok, "power").unwrap().too_deep(), None);
        let deep = power_chain(GRAPH_DEPTH_MAX + 2);
        let (v, depth) = SubTree::new(&deep, "power").unwrap().too_deep().unwrap();
        assert_eq!((deep.name(v), depth), ("power257", 257));
        let err = crate::subtree_of(&deep, "power").unwrap_err();
        assert!(
            err.to_string().contains("power tree is deeper than 256"),
            "{err}"
        );
    }
}
