//! Turning a traversal's picks into an allocation, and committing it to the calendars.

use shardsched_resource::{ResourceGraph, VertexId};

use crate::MatchError;
use crate::state::{SchedState, SpanRef};
use crate::traverse::Pick;

/// One vertex of an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocVertex {
    pub v: VertexId,
    /// Units of the vertex taken (a 2 GB memory pool taken whole has 2).
    pub needs: i64,
    pub exclusive: bool,
    /// Depth in the containment tree (root = 0), for writers.
    pub depth: u32,
}

/// What a match got: vertices in writer order (children before parents, siblings in graph
/// order), and the time window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub vertices: Vec<AllocVertex>,
    pub at: i64,
    pub duration: u64,
}

/// Static facts about the tree that writers' order needs, computed once per graph (12 bytes
/// a vertex): each vertex's post-order position and depth, the vertices in post-order, and
/// the size of each subtree. In post-order a subtree is one contiguous run ending at its
/// root, so a vertex taken whole expands to a slice copy rather than a walk.
#[derive(Clone, Debug, Default)]
pub struct TreeOrder {
    post: Vec<u32>,
    depth: Vec<u16>,
    /// The vertex at each post-order position.
    seq: Vec<u32>,
    /// Vertices in each vertex's subtree, itself included.
    subtree: Vec<u32>,
}

impl TreeOrder {
    pub fn new(g: &ResourceGraph) -> TreeOrder {
        let n = g.len();
        let mut post = vec![0u32; n];
        let mut depth = vec![0u16; n];
        let mut seq = Vec::with_capacity(n);
        let mut subtree = vec![1u32; n];
        let mut stack: Vec<(u32, bool)> = vec![(g.root().0, false)];
        while let Some((v, done)) = stack.pop() {
            if done {
                post[v as usize] = seq.len() as u32;
                seq.push(v);
                if let Some(p) = g.parent(VertexId(v)) {
                    subtree[p.index()] += subtree[v as usize];
                }
                continue;
            }
            stack.push((v, true));
            for &c in g.children(VertexId(v)).iter().rev() {
                depth[c as usize] = depth[v as usize].saturating_add(1);
                stack.push((c, false));
            }
        }
        TreeOrder {
            post,
            depth,
            seq,
            subtree,
        }
    }

    /// Post-order positions of `v`'s strict descendants: `v`'s subtree minus `v` itself.
    fn below(&self, v: u32) -> std::ops::Range<usize> {
        let hi = self.post[v as usize] as usize;
        let lo = (hi + 1).saturating_sub(self.subtree[v as usize] as usize);
        lo..hi
    }
}

/// Reusable per-match memory: a mark per vertex (by epoch, so clearing is free), and the
/// buffers an expansion works in.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    epoch: u32,
    mark: Vec<u32>,
    slot: Vec<u32>,
    sparse: Vec<AllocVertex>,
    wholes: Vec<u32>,
    stack: Vec<u32>,
    keys: Vec<(u32, u32)>,
}

impl Marks {
    fn begin(&mut self, n: usize) {
        if self.mark.len() != n {
            self.mark = vec![0; n];
            self.slot = vec![0; n];
            self.epoch = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.epoch = 1;
        }
        self.sparse.clear();
        self.wholes.clear();
        self.stack.clear();
        self.keys.clear();
    }

    fn put(&mut self, order: &TreeOrder, v: u32, needs: i64, excl: bool) {
        let i = v as usize;
        if self.mark[i] == self.epoch {
            let e = &mut self.sparse[self.slot[i] as usize];
            e.needs = e.needs.max(needs);
            e.exclusive |= excl;
        } else {
            self.mark[i] = self.epoch;
            self.slot[i] = self.sparse.len() as u32;
            self.sparse.push(AllocVertex {
                v: VertexId(v),
                needs,
                exclusive: excl,
                depth: u32::from(order.depth[i]),
            });
        }
    }
}

/// Expands the picks under `top` into the set of allocated vertices: every pick, the whole
/// subtree of picks marked whole, every ancestor on the way (shared), and — under
/// node-exclusive policies — every node on the way taken whole.
///
/// Inside a subtree taken whole every vertex is taken whole (all its units, exclusively),
/// whatever the picks said of it, so only the vertices outside such subtrees (the picks and
/// their ancestors: a few per node) are collected one by one; each whole subtree is then
/// copied from the post-order, which is already the writers' children-first order.
#[allow(clippy::too_many_arguments)]
pub fn expand(
    g: &ResourceGraph,
    order: &TreeOrder,
    marks: &mut Marks,
    arena: &[Pick],
    top: (u32, u32),
    node_exclusive: bool,
    at: i64,
    duration: u64,
) -> Allocation {
    marks.begin(g.len());
    let epoch = marks.epoch;
    marks.stack.extend(top.0..top.0 + top.1);
    while let Some(i) = marks.stack.pop() {
        let p = arena[i as usize];
        marks.put(order, p.v, p.needs, p.excl);
        if p.whole {
            marks.wholes.push(p.v);
        }
        marks.stack.extend(p.sub_start..p.sub_start + p.sub_len);
    }
    let picked = marks.sparse.len();
    for i in 0..picked {
        let mut cur = marks.sparse[i].v;
        while let Some(p) = g.parent(cur) {
            if marks.mark[p.index()] == epoch {
                break;
            }
            marks.put(order, p.0, 1, false);
            cur = p;
        }
    }
    if node_exclusive && let Some(node) = g.sym("node") {
        for e in marks.sparse.iter_mut().filter(|e| g.kind(e.v) == node) {
            e.exclusive = true;
            marks.wholes.push(e.v.0);
        }
    }
    // Post-order positions of the collected vertices, and the maximal whole subtrees as
    // post-order ranges of their strict descendants.
    for (i, e) in marks.sparse.iter().enumerate() {
        marks.keys.push((order.post[e.v.index()], i as u32));
    }
    marks.keys.sort_unstable();
    let mut ranges: Vec<std::ops::Range<usize>> = marks
        .wholes
        .iter()
        .map(|&w| order.below(w))
        .filter(|r| !r.is_empty())
        .collect();
    ranges.sort_unstable_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    let mut maximal: Vec<std::ops::Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match maximal.last() {
            Some(m) if r.end <= m.end => {}
            _ => maximal.push(r),
        }
    }
    let whole_count: usize = maximal.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(marks.sparse.len() + whole_count);
    let mut next_range = maximal.iter().peekable();
    for &(pos, i) in &marks.keys {
        let pos = pos as usize;
        // Emit every whole range that ends at or before this vertex's position.
        while let Some(r) = next_range.peek()
            && r.start <= pos
        {
            if pos < r.end {
                break;
            }
            push_whole(g, order, &order.seq[(*r).clone()], &mut out);
            next_range.next();
        }
        let inside = next_range
            .peek()
            .is_some_and(|r| r.start <= pos && pos < r.end);
        if !inside {
            out.push(marks.sparse[i as usize]);
        }
    }
    for r in next_range {
        push_whole(g, order, &order.seq[r.clone()], &mut out);
    }
    Allocation {
        vertices: out,
        at,
        duration,
    }
}

/// Appends vertices of a subtree taken whole: all their units, exclusively.
fn push_whole(g: &ResourceGraph, order: &TreeOrder, seq: &[u32], out: &mut Vec<AllocVertex>) {
    out.extend(seq.iter().map(|&d| AllocVertex {
        v: VertexId(d),
        needs: g.size(VertexId(d)),
        exclusive: true,
        depth: u32::from(order.depth[d as usize]),
    }));
}

/// Records `alloc` in the calendars; returns the records so cancel can remove exactly them.
/// On failure nothing stays recorded.
pub fn commit(
    g: &ResourceGraph,
    st: &mut SchedState,
    alloc: &Allocation,
) -> Result<Vec<SpanRef>, MatchError> {
    let mut spans = Vec::with_capacity(alloc.vertices.len() + 8);
    let r = commit_inner(g, st, alloc, &mut spans);
    if let Err(e) = r {
        for s in spans {
            // Removing what was just added cannot fail; if it did, the first error is the one to report.
            let _ = st.remove(s);
        }
        return Err(e);
    }
    Ok(spans)
}

fn commit_inner(
    g: &ResourceGraph,
    st: &mut SchedState,
    a: &Allocation,
    spans: &mut Vec<SpanRef>,
) -> Result<(), MatchError> {
    // Which vertices need calendar entries of their own: not those below a vertex this
    // allocation holds exclusively. Every walk starts at the root and a vertex is visited
    // only after its parent passed the prune, which fails on an exclusively held vertex
    // during any window that overlaps the hold; so nothing below it can be looked at while
    // it is held, and a whole node costs its own entries, not one per core.
    // Walked parents-first (the reverse of the children-first order), the parent of a
    // vertex at depth d is the last vertex seen at depth d - 1. `shadow[i]` is the depth
    // of the topmost exclusive ancestor of vertex i in this allocation, if any.
    const NONE: u32 = u32::MAX;
    let mut shadow = vec![NONE; a.vertices.len()];
    // Per depth: the topmost exclusive vertex over (or at) the last vertex seen there.
    let mut shadow_at_depth: Vec<u32> = Vec::new();
    for (i, av) in a.vertices.iter().enumerate().rev() {
        let d = av.depth as usize;
        if shadow_at_depth.len() <= d {
            shadow_at_depth.resize(d + 1, NONE);
        }
        let above = if d > 0 { shadow_at_depth[d - 1] } else { NONE };
        shadow[i] = above;
        shadow_at_depth[d] = if above == NONE && av.exclusive {
            av.depth
        } else {
            above
        };
    }
    // Exclusively taken units of each pruned type below each vertex, summed children-first:
    // `below[d]` collects the totals of the children (at depth d) of the vertex being
    // finished at depth d - 1. A vertex in an exclusive vertex's shadow adds its units
    // straight to the row of that vertex's children: its own sums are never needed.
    let k = st.prune_types.len();
    let max_depth = shadow_at_depth.len();
    // Row d (k entries) of `below`, flat: no allocation per vertex.
    let mut below: Vec<i64> = vec![0; (max_depth + 2) * k];
    let mut total: Vec<i64> = vec![0; k];
    let mut agg_need: Vec<(VertexId, Vec<i64>)> = Vec::new();
    let prune_types = st.prune_types.clone();
    let prune_index = |kind| prune_types.iter().position(|&t| t == kind);
    for (av, &top) in a.vertices.iter().zip(&shadow) {
        if top != NONE {
            if av.exclusive
                && let Some(i) = prune_index(g.kind(av.v))
            {
                below[(top as usize + 1) * k + i] += av.needs;
            }
            continue;
        }
        st.hold(av.v, a.at, a.duration, av.needs, av.exclusive, spans)?;
        if k == 0 {
            continue;
        }
        let d = av.depth as usize;
        let children = &mut below[(d + 1) * k..(d + 2) * k];
        total.copy_from_slice(children);
        children.fill(0);
        if let Some(agg) = st.aggregate(av.v) {
            let need: Vec<i64> = agg
                .types
                .iter()
                .map(|&t| prune_index(t).map_or(0, |i| total[i]))
                .collect();
            if need.iter().any(|&n| n > 0) {
                agg_need.push((av.v, need));
            }
        }
        if av.exclusive
            && let Some(i) = prune_index(g.kind(av.v))
        {
            total[i] += av.needs;
        }
        for (acc, t) in below[d * k..(d + 1) * k].iter_mut().zip(&total) {
            *acc += t;
        }
    }
    for (p, need) in agg_need {
        spans.push(st.hold_aggregate(p, a.at, a.duration, &need)?);
    }
    Ok(())
}
