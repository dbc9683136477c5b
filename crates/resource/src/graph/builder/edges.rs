//! The builder's edges, kept as little as they allow.

use petgraph::graph::DiGraph;

use crate::graph::links::{self, Links};
use crate::intern::Sym;

/// Every edge a reader added, in order. While they are what a GRUG recipe (and most
/// readers) adds — containment edges, each to a child after the one of the edge before —
/// only each child's parent is kept: that is the graph's `parent` array as it will be, the
/// children of a parent are in edge order when in vertex order, and there is no edge list
/// to copy into petgraph or to free. (A list of the bench graph's 60,432 edges was 0.7 MB
/// that, freed, also raised glibc's mmap threshold, so that the matcher's large arrays
/// then came from reused heap memory: zeroed by hand and copied when grown, 0.7 M
/// instructions more.) The first edge that is not such turns the parents into a list.
#[derive(Debug)]
pub(super) struct BuiltEdges {
    /// By child, while every edge is a containment edge to a child above the last one's:
    /// its parent (`u32::MAX`: no edge into it).
    parents: Vec<u32>,
    /// Otherwise every edge, in order: (parent, child, subsystem).
    list: Vec<(u32, u32, Sym)>,
    /// Whether `list` holds the edges.
    listed: bool,
    /// The builder's symbol of containment.
    containment: Sym,
}

/// Why the edges cannot become a graph's.
pub(super) enum EdgeError {
    /// An edge names this vertex, which does not exist.
    NoSuchVertex(u32),
    /// This vertex has a second containment parent where that is not allowed.
    TwoParents(u32),
}

impl BuiltEdges {
    pub(super) fn new(containment: Sym) -> BuiltEdges {
        BuiltEdges {
            parents: Vec::new(),
            list: Vec::new(),
            listed: false,
            containment,
        }
    }

    /// Room for `vertices` more vertices and `edges` more edges.
    pub(super) fn reserve_exact(&mut self, vertices: usize, edges: usize) {
        match self.listed {
            false => self.parents.reserve_exact(vertices),
            true => self.list.reserve_exact(edges),
        }
    }

    /// Adds the edge `parent → child` of `subsystem` (a builder symbol), `vertices` being
    /// added so far.
    #[inline]
    pub(super) fn push(&mut self, parent: u32, child: u32, subsystem: Sym, vertices: usize) {
        let next_child = self.parents.len() as u32;
        let tree_edge = subsystem == self.containment && child >= next_child;
        // Both ends exist: the parents need no check at the end.
        if !self.listed && tree_edge && (child.max(parent) as usize) < vertices {
            if child > next_child {
                self.parents.resize(child as usize, u32::MAX);
            }
            self.parents.push(parent);
            return;
        }
        self.push_listed(parent, child, subsystem);
    }

    /// [`push`](Self::push) of `parent → c` for each of `children`, in order: the parents
    /// of a run of children in one go where every edge would be kept as a parent.
    pub(super) fn push_run(
        &mut self,
        parent: u32,
        children: std::ops::Range<u32>,
        subsystem: Sym,
        vertices: usize,
    ) {
        let next_child = self.parents.len() as u32;
        let tree_run = subsystem == self.containment && children.start >= next_child;
        let exist = (children.end as usize) <= vertices && (parent as usize) < vertices;
        if !self.listed && tree_run && exist && !children.is_empty() {
            self.parents.resize(children.start as usize, u32::MAX);
            self.parents
                .extend(std::iter::repeat_n(parent, children.len()));
            return;
        }
        for c in children {
            self.push(parent, c, subsystem, vertices);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_listed(&mut self, parent: u32, child: u32, subsystem: Sym) {
        if !self.listed {
            self.listed = true;
            self.list = self.tree_edges().collect();
            self.parents = Vec::new();
        }
        self.list.push((parent, child, subsystem));
    }

    /// The containment edges `parents` stands for, in order.
    fn tree_edges(&self) -> impl Iterator<Item = (u32, u32, Sym)> + '_ {
        let containment = self.containment;
        (0u32..)
            .zip(&self.parents)
            .filter(|&(_, &p)| p != u32::MAX)
            .map(move |(c, &p)| (p, c, containment))
    }

    /// Number of edges.
    pub(super) fn len(&self) -> usize {
        match self.listed {
            false => self.parents.iter().filter(|&&p| p != u32::MAX).count(),
            true => self.list.len(),
        }
    }

    /// Gives every edge's subsystem its graph number (`final_of`, by builder symbol).
    /// Containment is the builder's and the graph's symbol 0 alike.
    pub(super) fn renumber(&mut self, final_of: &[u32]) {
        for e in &mut self.list {
            e.2 = Sym(final_of[e.2.index()]);
        }
        self.containment = Sym(final_of[self.containment.index()]);
    }

    /// The containment arrays of `n` vertices, and the graph's petgraph topology: empty
    /// where the tree is every edge (see `ResourceGraph::topo`). A second containment
    /// parent is an error unless `shared_ok`.
    pub(super) fn into_links(
        self,
        n: usize,
        shared_ok: bool,
    ) -> Result<(Links, DiGraph<(), Sym, u32>), EdgeError> {
        if !self.listed {
            // Every end was a vertex when its edge came.
            let mut parent = self.parents;
            parent.resize(n, u32::MAX);
            return Ok((Links::of_parents(parent), DiGraph::default()));
        }
        let no_such = |e: &(u32, u32, Sym)| [e.0, e.1].into_iter().find(|&end| end as usize >= n);
        if let Some(end) = self.list.iter().find_map(no_such) {
            return Err(EdgeError::NoSuchVertex(end));
        }
        let containment = self.containment;
        let links = Links::of(self.list.iter().copied(), n, containment, shared_ok)
            .map_err(EdgeError::TwoParents)?;
        let topo = match !links.shared && self.list.iter().all(|e| e.2 == containment) {
            true => DiGraph::default(),
            false => links::topology(n, &self.list),
        };
        Ok((links, topo))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const C: Sym = Sym(0);

    fn arrays(l: &Links) -> (Vec<u32>, Vec<u32>, Vec<u32>, bool) {
        let l = (&l.parent, &l.child_start, &l.child_list, l.shared);
        (l.0.clone(), l.1.clone(), l.2.clone(), l.3)
    }

    fn pushed(edges: &[(u32, u32, Sym)], vertices: usize) -> BuiltEdges {
        let mut e = BuiltEdges::new(C);
        for &(p, c, s) in edges {
            e.push(p, c, s, vertices);
        }
        e
    }

    #[test]
    fn parents_alone_give_the_links_of_the_edges() {
        // Children in order, with gaps and vertices no edge reaches.
        let edges = [
            (0, 1, C),
            (0, 2, C),
            (1, 4, C),
            (2, 5, C),
            (1, 6, C),
            (0, 7, C),
        ];
        let e = pushed(&edges, 9);
        assert!(!e.listed);
        assert_eq!(e.len(), 6);
        let (links, topo) = e.into_links(9, false).ok().unwrap();
        let want = Links::of(edges, 9, C, false).ok().unwrap();
        assert_eq!(arrays(&links), arrays(&want));
        assert_eq!(links.child_list, [1, 2, 7, 4, 6, 5]);
        assert_eq!(topo.node_count(), 0, "the tree is every edge");
    }

    #[test]
    fn other_edges_are_listed_in_order() {
        // A child before the last one's: listed from there on, the order kept.
        let edges = [(0, 2, C), (0, 1, C), (1, 3, C)];
        let e = pushed(&edges, 4);
        assert!(e.listed);
        assert_eq!(e.len(), 3);
        let (links, topo) = e.into_links(4, false).ok().unwrap();
        assert_eq!(
            arrays(&links),
            arrays(&Links::of(edges, 4, C, false).ok().unwrap())
        );
        assert_eq!(topo.node_count(), 0, "still containment alone");

        // Another subsystem, a second parent: petgraph holds every edge.
        let power = Sym(1);
        for edges in [
            [(0, 1, C), (1, 2, C), (0, 2, power)],
            [(0, 1, C), (0, 2, C), (1, 2, C)],
        ] {
            let e = pushed(&edges, 3);
            assert!(e.listed);
            let (links, topo) = e.into_links(3, true).ok().unwrap();
            assert_eq!(
                arrays(&links),
                arrays(&Links::of(edges, 3, C, true).ok().unwrap())
            );
            assert_eq!((topo.node_count(), topo.edge_count()), (3, 3));
        }
        let e = pushed(&[(0, 1, C), (0, 2, C), (1, 2, C)], 3);
        assert!(matches!(
            e.into_links(3, false),
            Err(EdgeError::TwoParents(2))
        ));
    }

    #[test]
    fn a_run_of_children_is_its_edges_one_by_one() {
        let runs: [(u32, std::ops::Range<u32>, Sym, usize); 5] = [
            (0, 1..3, C, 5),   // kept as parents
            (1, 4..5, C, 5),   // after a gap
            (0, 6..9, C, 8),   // a child not added yet: listed
            (2, 9..11, C, 11), // listed already
            (1, 11..12, Sym(1), 12),
        ];
        for upto in 1..=runs.len() {
            let (mut bulk, mut single) = (BuiltEdges::new(C), BuiltEdges::new(C));
            for (p, children, s, vertices) in runs[..upto].iter().cloned() {
                bulk.push_run(p, children.clone(), s, vertices);
                for c in children {
                    single.push(p, c, s, vertices);
                }
            }
            assert_eq!(bulk.listed, single.listed);
            assert_eq!((&bulk.parents, &bulk.list), (&single.parents, &single.list));
        }
    }

    #[test]
    fn edges_to_vertices_not_added_yet_wait_for_them() {
        // The child is not a vertex yet when its edge comes: listed, and fine once it is.
        let e = pushed(&[(0, 1, C), (0, 3, C)], 2);
        assert!(e.listed);
        let (links, _) = e.into_links(4, false).ok().unwrap();
        assert_eq!(links.child_list, [1, 3]);
        // It never comes: the first end missing, in edge order, is named.
        let e = pushed(&[(0, 1, C), (5, 3, C), (0, 4, C)], 2);
        assert!(matches!(
            e.into_links(4, false),
            Err(EdgeError::NoSuchVertex(5))
        ));
        // A parent not added yet.
        let e = pushed(&[(2, 1, C)], 2);
        assert!(e.listed);
        assert!(e.into_links(3, false).is_ok());
    }
}
