//! The update walk: what a select's marks take, in the order Fluxion emits it.
//!
//! From the root, only marked edges are followed. A vertex is taken when its subtree holds a
//! vertex taken exclusively (itself included); it is listed after everything it holds below
//! (post-order, children in graph order), with the units the mark into it says and whether
//! exclusively. Below a vertex of a type the match takes whole — a type the jobspec writes
//! `exclusive: true` anywhere, or `node` under a `*nodex` policy — every vertex is taken,
//! marked or not, all its units, exclusively. Slot membership alone does not take a subtree
//! whole: `slot → node[1]` takes the node, not what is in it.

use std::sync::Arc;

use shardsched_resource::{ResourceGraph, Sym, VertexId};

use crate::alloc::{AllocVertex, Allocation, Depth, Spares};
use crate::dfu::{Marks, Tree};
use crate::state::{KeptListings, SchedState, WholeListing};

/// Where the list of a match that takes subtrees whole in a tree starts, in entries; it
/// grows by doubling. Why not counted first from the marks: a node taken whole is one
/// entry (its listing kept, `state::listing`), so a 320-node reservation's list, ~340
/// entries, is copied three times as it grows (~16 kB), where counting the marked
/// vertices first read a mark per node: 4 % of the 5,000-job conservative replay's time
/// (`perf`), and 3-4 % faster without it.
const WHOLE_LIST_START: usize = 64;

/// Lists what the last select's marks take (see the module doc); `whole_types` are the
/// types taken with their whole subtree. Empty when nothing would be taken exclusively (the
/// match then fails). `expected`: how many vertices the list will likely hold (the last
/// match's count: streams repeat a jobspec), unless subtrees are taken whole in a tree
/// ([`WHOLE_LIST_START`], or the roomiest of the `spares`). `ranges` gets
/// the first and last index of each subtree listed whole (its top vertex last, the rest in
/// the tree's order, children before parents), for the commit (`alloc::commit_noting`). A
/// node taken whole whose first listing `st` keeps (`state::listing`) is one entry that
/// refers to it (`alloc::allocation`). The allocation is over `[at, at + duration)`.
#[allow(clippy::too_many_arguments)]
pub fn emission(
    g: &ResourceGraph,
    tree: &dyn Tree,
    marks: &Marks,
    whole_types: &[Sym],
    (expected, spares): (usize, &mut Spares),
    st: &mut SchedState,
    ranges: &mut Vec<(u32, u32)>,
    (at, duration): (i64, u64),
) -> Allocation {
    ranges.clear();
    debug_assert!(
        !tree.is_dag() || marks.keeps_parents(),
        "marks of a select over another tree"
    );
    let root = tree.root();
    let whole = |v: VertexId| whole_types.contains(&g.kind(v));
    let lists = if tree.is_dag() || whole_types.is_empty() {
        spares.lists(expected)
    } else {
        spares.roomiest_lists(WHOLE_LIST_START)
    };
    let mut out = Allocation::in_lists(lists, at, duration);
    let mut walk = Emit {
        g,
        child_lists: tree.child_lists(),
        marks,
        whole: &whole,
        st,
        out: &mut out,
        ranges,
        seen: if tree.is_dag() {
            vec![false; g.len()]
        } else {
            Vec::new()
        },
        stack: Vec::new(),
    };
    let n = walk.visit(root, marks.root.needs, marks.root.excl, false, 0);
    if n == 0 {
        spares.give_back(std::mem::replace(
            &mut out,
            Allocation::window(at, duration),
        ));
        ranges.clear();
    }
    out
}

struct Emit<'a, F: Fn(VertexId) -> bool> {
    g: &'a ResourceGraph,
    /// The tree's child lists, read once ([`Tree::child_lists`]).
    child_lists: (&'a [u32], &'a [u32]),
    marks: &'a Marks,
    whole: &'a F,
    /// Where whole nodes' listings are kept.
    st: &'a mut SchedState,
    out: &'a mut Allocation,
    /// Subtrees listed whole: first and last index in `out`'s entries.
    ranges: &'a mut Vec<(u32, u32)>,
    /// Visited vertices, in a graph where vertices share parents (Fluxion's colors).
    seen: Vec<bool>,
    /// [`Emit::visit_whole`]'s stack.
    stack: Vec<Entered>,
}

impl<F: Fn(VertexId) -> bool> Emit<'_, F> {
    /// Fluxion's `upd_dfv`: returns how many vertices below and at `u` are taken
    /// exclusively.
    fn visit(&mut self, u: VertexId, needs: u64, excl: bool, shadow: bool, depth: Depth) -> u64 {
        let whole = shadow || (self.whole)(u);
        let excl = excl || whole;
        let dag = !self.seen.is_empty();
        if whole && !dag {
            return self.visit_taken_whole(u, needs, depth);
        }
        if dag {
            self.seen[u.index()] = true;
        }
        let (start, list) = self.child_lists;
        let children = &list[start[u.index()] as usize..start[u.index() + 1] as usize];
        // Children that may be listed here at once (see below), asked of the first: a
        // rack's nodes are not, and each one asked would be a cache miss of a reservation.
        let leaves = !whole && !dag && children.first().is_some_and(|&c| self.is_leaf(c));
        // Children taken whole, asked of the first (a rack's nodes): their own loop.
        let mut n = if !whole
            && !dag
            && !leaves
            && children.first().is_some_and(|&c| (self.whole)(VertexId(c)))
        {
            self.visit_whole_children(children, depth + 1)
        } else {
            self.visit_children(u, children, (whole, dag, leaves), depth + 1)
        };
        if excl {
            n += 1;
        }
        if n > 0 {
            self.out.push(AllocVertex {
                v: u,
                needs: i64::try_from(needs).unwrap_or(i64::MAX),
                exclusive: excl,
                depth,
            });
        }
        n
    }

    /// The loop of [`Emit::visit`] over `u`'s `children` (at `depth`): `whole` when `u` is
    /// taken whole, `dag` when vertices share parents, `leaves` when the children may be
    /// leaves listed here at once.
    #[inline(always)]
    fn visit_children(
        &mut self,
        u: VertexId,
        children: &[u32],
        (whole, dag, leaves): (bool, bool, bool),
        depth: Depth,
    ) -> u64 {
        let mut n = 0;
        for &c in children {
            if dag && self.seen[c as usize] {
                continue;
            }
            let (needs, x) = if whole {
                (u64::try_from(self.g.size(VertexId(c))).unwrap_or(0), true)
            } else {
                match self.marks.get(c) {
                    // In a DAG the mark is on one edge into `c`: the one from its walk parent.
                    Some(m) if !dag || m.from == u.0 => (m.needs, m.excl),
                    _ => continue,
                }
            };
            // A leaf of no type taken whole, in a tree, below a vertex not taken whole (a
            // socket's cores): listed here as its visit would list it, when taken
            // exclusively (a call a leaf saved, most of a socket match's listing).
            if leaves && self.is_leaf(c) && !(self.whole)(VertexId(c)) {
                if x {
                    let needs = i64::try_from(needs).unwrap_or(i64::MAX);
                    self.out.push(exclusive_entry(c, needs, depth));
                    n += 1;
                }
                continue;
            }
            n += self.visit(VertexId(c), needs, x, whole, depth);
        }
        n
    }

    /// Whether vertex `c` has no children in the tree.
    #[inline]
    fn is_leaf(&self, c: u32) -> bool {
        let (start, _) = self.child_lists;
        start[c as usize] == start[c as usize + 1]
    }

    /// The loop of [`Emit::visit`] over `children` (at `depth`) of a vertex not taken whole,
    /// in a tree, whose first child is taken whole (a rack's nodes: most of a node
    /// reservation's listing). Each child taken whole is listed here, a call of `visit`
    /// saved a node; out of line, so that the usual walk keeps its lean loop.
    #[inline(never)]
    fn visit_whole_children(&mut self, children: &[u32], depth: Depth) -> u64 {
        let mut n = 0;
        for &c in children {
            let Some(m) = self.marks.get(c) else {
                continue;
            };
            n += if (self.whole)(VertexId(c)) {
                self.visit_taken_whole(VertexId(c), m.needs, depth)
            } else {
                self.visit(VertexId(c), m.needs, m.excl, false, depth)
            };
        }
        n
    }

    /// [`Emit::visit`] of `u`, a vertex taken whole in a tree: everything below it is taken
    /// whole, no marks, no types to ask about. Called from a parent's loop directly for
    /// each child taken whole (a rack's nodes: most of a node reservation's listing), which
    /// saves a call of `visit` a node.
    #[inline(always)]
    fn visit_taken_whole(&mut self, u: VertexId, needs: u64, depth: Depth) -> u64 {
        let first = self.out.entries().len();
        let needs = i64::try_from(needs).unwrap_or(i64::MAX);
        let n = match self.st.whole_listing_of(u) {
            WholeListing::Kept(kept, c, top) => {
                let n = push_kept(self.out, kept, c, top, (needs, depth));
                if cfg!(debug_assertions) {
                    self.check_kept(u, c);
                }
                // (Not a range: the commit knows the entry from the allocation.)
                return n;
            }
            WholeListing::Learn(c) => {
                let n = self.visit_whole(u, needs, depth);
                let listed = &self.out.entries()[first..];
                if let Some(top) = self.st.learn_whole_listing(self.g, c, listed, depth) {
                    // Kept now: the allocation refers to it as to any listing kept
                    // before, and the next node is listed where this one was (in
                    // memory a fresh node's listing has just warmed, not another 1.4 kB
                    // of a bench node's entries further on).
                    self.out.truncate_entries(first);
                    let kept = self.st.kept_listings();
                    return push_kept(self.out, kept, c, top, (needs, depth));
                }
                n
            }
            WholeListing::Walk => self.visit_whole(u, needs, depth),
        };
        let last = self.out.entries().len() - 1;
        if let (Ok(first), Ok(last)) = (u32::try_from(first), u32::try_from(last)) {
            self.ranges.push((first, last));
        }
        n
    }

    /// Checks that the last entry pushed, node `u` kept whole (its listing whole `c`'s),
    /// stands for what the walk lists.
    fn check_kept(&mut self, u: VertexId, c: u32) {
        let (Some(&w), Some(node)) = (self.out.wholes().last(), self.out.last()) else {
            return;
        };
        let listed: Vec<AllocVertex> = self.out.listed(&w).chain([node]).collect();
        let kept = self.out.entries().len();
        self.visit_whole(u, node.needs, node.depth);
        debug_assert_eq!(
            self.out.entries()[kept..],
            listed,
            "whole {c}'s kept listing"
        );
        self.out.entries_mut().truncate(kept);
    }

    /// [`Emit::visit`] of a vertex taken whole, in a tree: `u` (`needs` of its units) and
    /// everything below it, all their units, exclusively, children before parents.
    ///
    /// One loop over the compressed child lists with a stack of the vertices entered, and
    /// an inner loop listing a run of leaves without touching the stack: a node's first
    /// listing, which a 64-node match makes for each of its nodes on a cluster it has not
    /// used yet, was a recursive call and a child-list lookup per vertex (85 instructions
    /// a vertex), then a loop entering the stack at each vertex (53).
    fn visit_whole(&mut self, u: VertexId, needs: i64, depth: Depth) -> u64 {
        let first = self.out.entries().len();
        let (start, list) = self.child_lists;
        let g = self.g;
        // The first and last index of `v`'s children in `list`.
        let children = |v: u32| (start[v as usize], start[v as usize + 1]);
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        let (next, end) = children(u.0);
        stack.push(Entered {
            v: u.0,
            needs,
            next,
            end,
        });
        loop {
            // The depth of the top vertex's children.
            let below = depth + stack.len() as Depth;
            let Some(top) = stack.last_mut() else {
                break;
            };
            // Its children from `next`: a run of leaves is listed here, at once.
            let mut inner = None;
            while top.next < top.end {
                let c = list[top.next as usize];
                top.next += 1;
                // (As `visit` takes a child's size: none when negative.)
                let size = g.size(VertexId(c)).max(0);
                let (next, end) = children(c);
                if next == end {
                    self.out.push(exclusive_entry(c, size, below));
                } else {
                    inner = Some(Entered {
                        v: c,
                        needs: size,
                        next,
                        end,
                    });
                    break;
                }
            }
            match inner {
                Some(entered) => stack.push(entered),
                None => {
                    let done = *top;
                    stack.pop();
                    self.out
                        .push(exclusive_entry(done.v, done.needs, below - 1));
                }
            }
        }
        self.stack = stack;
        (self.out.entries().len() - first) as u64
    }
}

/// Appends to `out` a node taken whole whose listing is kept (whole `c`'s in `kept`, its
/// node's entry `top` as first listed), taking `needs` of its units at `depth`: one entry
/// that refers to the listing (`alloc::allocation`). Returns how many vertices it stands
/// for.
#[inline(always)]
fn push_kept(
    out: &mut Allocation,
    kept: &Arc<KeptListings>,
    c: u32,
    top: AllocVertex,
    (needs, depth): (i64, Depth),
) -> u64 {
    let node = AllocVertex {
        needs,
        depth,
        ..top
    };
    out.push_whole(node, kept, c, top.depth) as u64 + 1
}

/// A vertex [`Emit::visit_whole`] entered: its units, and its children not listed yet
/// (indices into the compressed child lists).
#[derive(Clone, Copy, Debug)]
struct Entered {
    v: u32,
    needs: i64,
    next: u32,
    end: u32,
}

/// The entry of vertex `v` taken exclusively, `needs` of its units at `depth`: each vertex
/// of a subtree taken whole, and a leaf its parent's loop lists (`Emit::visit`).
fn exclusive_entry(v: u32, needs: i64, depth: Depth) -> AllocVertex {
    AllocVertex {
        v: VertexId(v),
        needs,
        exclusive: true,
        depth,
    }
}
