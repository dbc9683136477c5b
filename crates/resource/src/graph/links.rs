//! The containment tree's arrays (each vertex's tree parent and its children in edge order),
//! derived from the topology: made once when a graph is built, and again when `attach` or
//! `remove` changes its edges ([`super::grow`]).

use petgraph::graph::{DiGraph, NodeIndex};

use super::GraphError;
use crate::error::GRAPH_DEPTH_MAX;
use crate::intern::Sym;

/// Each vertex's containment parent (`u32::MAX`: none) and its children, compressed.
pub(super) struct Links {
    pub(super) parent: Vec<u32>,
    pub(super) child_start: Vec<u32>,
    pub(super) child_list: Vec<u32>,
    /// Some vertex has more than one containment parent.
    pub(super) shared: bool,
}

impl Links {
    /// The links of the containment edges among `edges` ((parent, child, subsystem), in
    /// order; `n` vertices, `containment` their symbol): a vertex's first containment edge
    /// gives its tree parent; a second one is an error unless `shared_ok` (then only the
    /// first is a tree edge).
    pub(super) fn of<E>(edges: E, n: usize, containment: Sym, shared_ok: bool) -> Result<Links, u32>
    where
        E: IntoIterator<Item = (u32, u32, Sym)>,
        E::IntoIter: DoubleEndedIterator + Clone,
    {
        let edges = edges.into_iter();
        let mut parent = vec![u32::MAX; n];
        // child_start[p] counts p's containment children, then becomes the end of p's range.
        let mut child_start = vec![0u32; n + 1];
        let mut shared = false;
        for (p, c, sub) in edges.clone() {
            if sub != containment {
                continue;
            }
            if parent[c as usize] != u32::MAX {
                if shared_ok {
                    shared = true;
                    continue;
                }
                return Err(c);
            }
            parent[c as usize] = p;
            child_start[p as usize] += 1;
        }
        let end = counts_to_ends(&mut child_start);
        // Fill each range from its end, walking the edges backwards: children keep their
        // edge order and each range's end becomes its start.
        let mut child_list = vec![0u32; end as usize];
        // With shared children only the edge from the tree parent is a tree edge (the first
        // one: the last met walking backwards).
        let mut placed = vec![false; if shared { n } else { 0 }];
        for (p, c, sub) in edges.rev() {
            if sub == containment {
                let (p, c) = (p as usize, c as usize);
                if shared {
                    if parent[c] as usize != p || placed[c] {
                        continue;
                    }
                    placed[c] = true;
                }
                child_start[p] -= 1;
                child_list[child_start[p] as usize] = c as u32;
            }
        }
        Ok(Links {
            parent,
            child_start,
            child_list,
            shared,
        })
    }

    /// The links of a tree given by each vertex's parent (`u32::MAX`: none), a vertex's
    /// children in vertex order: [`Links::of`] the edges `parent[c] → c` in the order of
    /// `c`, without a list of them.
    pub(super) fn of_parents(parent: Vec<u32>) -> Links {
        let n = parent.len();
        let mut child_start = vec![0u32; n + 1];
        for &p in &parent {
            if p != u32::MAX {
                child_start[p as usize] += 1;
            }
        }
        let end = counts_to_ends(&mut child_start);
        let mut child_list = vec![0u32; end as usize];
        for (c, &p) in parent.iter().enumerate().rev() {
            if p != u32::MAX {
                child_start[p as usize] -= 1;
                child_list[child_start[p as usize] as usize] = c as u32;
            }
        }
        Links {
            parent,
            child_start,
            child_list,
            shared: false,
        }
    }

    /// How many tree edges lead from the root down to vertex `v`, counted up to one past
    /// [`GRAPH_DEPTH_MAX`] (a deeper vertex, or one on a cycle, answers that).
    pub(super) fn depth(&self, v: usize) -> usize {
        let mut depth = 0;
        let mut cur = v;
        while let Some(&p) = self.parent.get(cur).filter(|&&p| p != u32::MAX) {
            depth += 1;
            if depth > GRAPH_DEPTH_MAX {
                break;
            }
            cur = p as usize;
        }
        depth
    }

    /// How many vertices the tree reaches from `root`, in one pass over the vertices, when
    /// every tree parent comes before its children (readers create vertices top down, the
    /// GRUG reader always) and no vertex is deeper than 254 levels: then the tree has no
    /// cycle and a vertex's depth is its parent's plus one. `None` otherwise, for the
    /// graph's walk from the root to count and to name a vertex too deep. Why: that walk
    /// pushes and pops every vertex with its depth (2.4 M instructions on the 1,024-node
    /// bench graph, 1.6 M this pass).
    pub(super) fn reachable_in_order(&self, root: usize) -> Option<usize> {
        // Per vertex: 0 when the root does not reach it, else its depth + 1.
        let mut level = vec![0u8; self.parent.len()];
        *level.get_mut(root)? = 1;
        let mut count = 1;
        for (v, &p) in self.parent.iter().enumerate() {
            if p == u32::MAX {
                continue;
            }
            if p as usize >= v {
                return None;
            }
            match level[p as usize] {
                0 => {}
                u8::MAX => return None,
                l => {
                    level[v] = l + 1;
                    count += 1;
                }
            }
        }
        Some(count)
    }
}

/// The edges of `topo` as [`Links::of`] takes them: (parent, child, subsystem), in order.
pub(super) fn edges_of(
    topo: &DiGraph<(), Sym, u32>,
) -> impl DoubleEndedIterator<Item = (u32, u32, Sym)> + Clone {
    topo.raw_edges().iter().map(|e| {
        (
            e.source().index() as u32,
            e.target().index() as u32,
            e.weight,
        )
    })
}

/// The petgraph topology of `n` vertices and `edges` ((parent, child, subsystem), every end
/// below `n`), in order.
pub(super) fn topology(n: usize, edges: &[(u32, u32, Sym)]) -> DiGraph<(), Sym, u32> {
    let mut topo = DiGraph::with_capacity(n, edges.len());
    for _ in 0..n {
        topo.add_node(());
    }
    for &(p, c, sub) in edges {
        topo.add_edge(NodeIndex::new(p as usize), NodeIndex::new(c as usize), sub);
    }
    topo
}

/// Turns `child_start`'s counts of each vertex's children (the last entry aside) into the
/// ends of their ranges, the last entry the total, which it returns: filled from each end
/// backwards, the ranges' ends become their starts.
fn counts_to_ends(child_start: &mut [u32]) -> u32 {
    let n = child_start.len() - 1;
    let mut end = 0;
    for count in &mut child_start[..n] {
        end += *count;
        *count = end;
    }
    child_start[n] = end;
    end
}

/// The error of a vertex with two containment parents where that is not allowed.
pub(super) fn two_parents(child: u32, name: &str) -> GraphError {
    GraphError::TwoParents {
        child,
        name: name.to_string(),
    }
}
