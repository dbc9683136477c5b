//! The tree of a dominant subsystem other than containment (resource-query's `-S PA`: the
//! power subsystem), for walks that follow its edges instead of containment's.

use shardsched_resource::{ResourceGraph, VertexId};

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
}

impl Tree for SubTree {
    fn children(&self, v: VertexId) -> &[u32] {
        let s = self.start[v.index()] as usize;
        let e = self.start[v.index() + 1] as usize;
        &self.list[s..e]
    }

    fn parent(&self, v: VertexId) -> Option<VertexId> {
        let p = self.parent[v.index()];
        (p != u32::MAX).then_some(VertexId(p))
    }

    fn root(&self) -> VertexId {
        self.root
    }

    fn is_dag(&self) -> bool {
        self.dag
    }
}
