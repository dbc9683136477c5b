//! Whole shapes: whether a whole cover can stand for what a whole listing of a whole records,
//! and what the listing adds to its parent's sums — learned once per whole, from the graph
//! alone (`state::whole`).
//!
//! Why the learning is one lean pass: a whole's shape is learned at its first whole listing,
//! so a match that takes fresh nodes learns one per node it takes. With a general walk (its
//! children looked up at every step, each vertex's sums moved through a list of their own,
//! four lists allocated per whole) that was half the instructions of the 64-node exclusive
//! match on 4,096 nodes (`bench match --nodes 4096 --jobspec d_64node_excl.yaml --policy
//! low`): ~280 instructions a vertex. The pass below looks each vertex's children up once,
//! merges its sums into its parent's part of one list in place, and reuses its lists; a whole
//! alike the last one learned shares its shape without a new allocation or a hash.
//!
//! And most wholes are not learned at all: a shape depends only on each vertex's place in
//! the whole, its type and its units — which its listing's layout (`state::listing`, learned
//! just before, at the same first listing) records. So the shape learned for one whole of a
//! layout serves every whole of that layout: on that bench, where every match takes 64
//! fresh nodes, this took a third of the instructions off (96.4 → 61.6 M). Debug builds
//! learn every whole all the same and check that the two agree.

use shardsched_resource::{ResourceGraph, VertexId};

use super::SchedState;
use super::distinct::Distinct;
use crate::alloc::PruneRank;
use crate::dfu::Tree;

/// What a whole listing of a whole records, learned once from the graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    /// How many vertices it has, the node included.
    pub(crate) vertices: u32,
    /// What its listing adds to its parent's per-type sums (by pruning rank).
    pub(crate) up: Vec<(u32, i64)>,
    /// Where its inner vertices are in a listing in the tree's order (children before
    /// parents), from its first vertex.
    pub(crate) inner_at: Vec<u32>,
}

/// A whole's shape not learned yet.
const UNKNOWN: u32 = u32::MAX;
/// A whole whose records are not what a cover answers for (an aggregate record of other
/// amounts than its totals, a leaf without a cover group): never covered.
const NOT_WHOLE: u32 = u32::MAX - 1;

/// The wholes' shapes: each whole's (by index among the distinct ones), learned at its
/// first whole listing; nodes alike share one.
#[derive(Clone, Debug, Default)]
pub(super) struct Shapes {
    of: Vec<u32>,
    distinct: Distinct<Shape>,
    /// Per listing layout (`state::listing`), the shape of the wholes listed so, once one
    /// was learned: the layout says all a shape depends on (each vertex's place, type and
    /// units), so a whole of a known layout needs no learning pass.
    by_layout: Vec<u32>,
    /// The learning pass's lists, kept between wholes.
    scratch: Scratch,
}

/// What the learning pass fills: a whole's sums as they are added up, then what it adds to
/// its parent, and where its inner vertices are.
#[derive(Clone, Debug, Default)]
struct Scratch {
    sums: Vec<(u32, i64)>,
    inner_at: Vec<u32>,
}

impl Shapes {
    pub(super) fn new(wholes: usize) -> Shapes {
        Shapes {
            of: vec![UNKNOWN; wholes],
            ..Shapes::default()
        }
    }

    /// Whole `c`'s shape, if learned and one a cover stands for.
    fn of(&self, c: u32) -> Option<&Shape> {
        self.distinct.get(self.of[c as usize])
    }

    /// Notes what was learned of whole `c`: its vertex count and the scratch lists, or
    /// `None` for a whole a cover cannot stand for.
    fn learned(&mut self, c: u32, vertices: Option<u32>) {
        let Scratch { sums, inner_at } = &self.scratch;
        let number = vertices.and_then(|vertices| {
            let alike =
                |s: &Shape| s.vertices == vertices && s.up == *sums && s.inner_at == *inner_at;
            let make = || Shape {
                vertices,
                up: sums.clone(),
                inner_at: inner_at.clone(),
            };
            self.distinct.number(alike, make, NOT_WHOLE as usize)
        });
        self.of[c as usize] = number.unwrap_or(NOT_WHOLE);
    }

    /// The shape number of the wholes of listing layout `layout`, once one was learned.
    fn of_layout(&self, layout: u32) -> Option<u32> {
        self.by_layout
            .get(layout as usize)
            .copied()
            .filter(|&s| s != UNKNOWN)
    }

    /// Notes that the wholes of listing layout `layout` have shape number `number`.
    fn note_layout(&mut self, layout: u32, number: u32) {
        let l = layout as usize;
        if self.by_layout.len() <= l {
            self.by_layout.resize(l + 1, UNKNOWN);
        }
        self.by_layout[l] = number;
    }
}

impl SchedState {
    /// Whole `c`'s shape, when a whole cover can stand for its records (learned at the
    /// first call).
    ///
    /// Inlined: a commit asks it of every node it takes whole, nearly always learned.
    #[inline]
    pub(crate) fn whole_shape(
        &mut self,
        g: &ResourceGraph,
        tree: &dyn Tree,
        ranks: &dyn PruneRank,
        c: u32,
    ) -> Option<&Shape> {
        if self.wholes.shapes.of[c as usize] == UNKNOWN {
            self.learn_whole_shape(g, tree, ranks, c);
        }
        self.wholes.shapes.of(c)
    }

    /// Learns whole `c`'s shape: from its layout's, or by walking it.
    #[inline(never)]
    fn learn_whole_shape(
        &mut self,
        g: &ResourceGraph,
        tree: &dyn Tree,
        ranks: &dyn PruneRank,
        c: u32,
    ) {
        let layout = self.whole_layout(c);
        let known = layout.and_then(|l| self.wholes.shapes.of_layout(l));
        match known {
            // (Debug builds learn it all the same, and compare.)
            Some(number) if !cfg!(debug_assertions) => {
                self.wholes.shapes.of[c as usize] = number;
            }
            _ => {
                let mut scratch = std::mem::take(&mut self.wholes.shapes.scratch);
                let vertices = self.learn_shape(g, tree, ranks, c, &mut scratch);
                let shapes = &mut self.wholes.shapes;
                shapes.scratch = scratch;
                shapes.learned(c, vertices);
                let number = shapes.of[c as usize];
                debug_assert!(
                    known.is_none_or(|k| k == number),
                    "whole {c}: the shape of its layout is not its own"
                );
                if let Some(l) = layout {
                    shapes.note_layout(l, number);
                }
            }
        }
    }

    /// Whole `c`'s shape, once learned ([`SchedState::whole_shape`]).
    pub(crate) fn learned_shape(&self, c: u32) -> Option<&Shape> {
        self.wholes.shapes.of(c)
    }

    /// Walks whole `c` as a whole listing's commit sums it (children before parents) and
    /// checks that every record it would make is one a cover answers for; its vertex count,
    /// with what it adds to its parent's sums and where its inner vertices are left in
    /// `scratch`.
    ///
    /// The sums of the vertices on the path live one after another in `scratch.sums`, each
    /// vertex's part after its parent's; a vertex done merges its part into its parent's in
    /// place (a type the parent's part has is added there, a new one stays, in order), then
    /// adds its own units.
    fn learn_shape(
        &self,
        g: &ResourceGraph,
        tree: &dyn Tree,
        ranks: &dyn PruneRank,
        c: u32,
        scratch: &mut Scratch,
    ) -> Option<u32> {
        let Scratch { sums, inner_at } = scratch;
        sums.clear();
        inner_at.clear();
        let node = self.whole_vertex(c);
        // (vertex, its children, the next child to visit, where its sums start)
        let mut stack: Vec<(VertexId, &[u32], usize, usize)> = Vec::with_capacity(8);
        stack.push((node, tree.children(node), 0, 0));
        let mut vertices = 0u32;
        while let Some(top) = stack.last_mut() {
            if let Some(&child) = top.1.get(top.2) {
                top.2 += 1;
                let child = VertexId(child);
                stack.push((child, tree.children(child), 0, sums.len()));
                continue;
            }
            let (v, _, _, from) = *top;
            stack.pop();
            let parent_from = stack.last().map_or(0, |p| p.3);
            if self.inner_index(v).is_some() {
                inner_at.push(vertices);
                // `sums[from..]` is what v's children add: what v's record takes.
                if let Some(agg) = self.aggregate(v) {
                    let dfu = &sums[from..];
                    let same = agg.ranks.iter().zip(agg.totals()).all(|(r, total)| {
                        dfu.iter().find(|e| e.0 == *r).map_or(0, |e| e.1) == *total
                    });
                    if dfu.is_empty() || !same {
                        return None;
                    }
                }
            } else {
                // A leaf's whole is found through its cover group.
                self.cover_group(v)?;
            }
            vertices += 1;
            // What v adds to its parent's sums, merged into the parent's part.
            let mut kept = from;
            for k in from..sums.len() {
                let (t, n) = sums[k];
                match sums[parent_from..from].iter_mut().find(|e| e.0 == t) {
                    Some(e) => e.1 = e.1.saturating_add(n),
                    None => {
                        sums[kept] = (t, n);
                        kept += 1;
                    }
                }
            }
            sums.truncate(kept);
            if let Some(r) = ranks.prune_rank(v) {
                let size = g.size(v);
                match sums[parent_from..].iter_mut().find(|e| e.0 == r) {
                    Some(e) => e.1 = e.1.saturating_add(size),
                    None => sums.push((r, size)),
                }
            }
        }
        Some(vertices)
    }
}
