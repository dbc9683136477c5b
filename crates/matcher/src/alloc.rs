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

/// Static facts about the tree that expansion needs, computed once per graph (32 bytes a
/// vertex): each vertex's post-order position, the size of each subtree, and every vertex
/// in post-order as a whole subtree lists it (all its units, exclusively). In post-order a
/// subtree is one contiguous run ending at its root, so a vertex taken whole expands to one
/// slice copy rather than a walk, already in the writers' children-first order.
#[derive(Clone, Debug, Default)]
pub struct TreeOrder {
    post: Vec<u32>,
    /// Vertices in each vertex's subtree, itself included.
    subtree: Vec<u32>,
    /// The vertex at each post-order position, taken whole.
    template: Vec<AllocVertex>,
}

impl TreeOrder {
    pub fn new(g: &ResourceGraph) -> TreeOrder {
        let n = g.len();
        let mut post = vec![0u32; n];
        let mut depth = vec![0u32; n];
        let mut template = Vec::with_capacity(n);
        let mut subtree = vec![1u32; n];
        let mut stack: Vec<(u32, bool)> = vec![(g.root().0, false)];
        while let Some((v, done)) = stack.pop() {
            if done {
                post[v as usize] = template.len() as u32;
                template.push(AllocVertex {
                    v: VertexId(v),
                    needs: g.size(VertexId(v)),
                    exclusive: true,
                    depth: depth[v as usize],
                });
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
            subtree,
            template,
        }
    }

    /// Post-order positions of `v`'s strict descendants: `v`'s subtree minus `v` itself.
    fn below(&self, v: u32) -> std::ops::Range<usize> {
        let hi = self.post[v as usize] as usize;
        let lo = (hi + 1).saturating_sub(self.subtree[v as usize] as usize);
        lo..hi
    }

    fn depth(&self, v: u32) -> u32 {
        self.template[self.post[v as usize] as usize].depth
    }
}

/// Vertex lists of allocations that ended, kept for the next ones. A whole-node allocation
/// lists every vertex of its nodes (tens of kilobytes for a hundred nodes); taking fresh
/// memory for each one, and giving it back, made the kernel zero pages on every match.
pub const SPARE_VERTEX_LISTS_MAX: usize = 8;

/// Reusable per-match memory: a mark per vertex (by epoch, so clearing is free), the
/// buffers an expansion works in, and spare vertex lists (at most
/// [`SPARE_VERTEX_LISTS_MAX`]). Scratch only: a clone starts empty.
#[derive(Debug, Default)]
pub struct Marks {
    epoch: u32,
    mark: Vec<u32>,
    slot: Vec<u32>,
    sparse: Vec<AllocVertex>,
    wholes: Vec<u32>,
    stack: Vec<u32>,
    keys: Vec<(u32, u32)>,
    spare: Vec<Vec<AllocVertex>>,
    /// Positions in the last expansion's vertex list of each subtree taken whole (its
    /// strict descendants, copied from the template): `commit` sums them from static
    /// totals instead of vertex by vertex.
    whole_runs: Vec<(u32, u32)>,
}

impl Clone for Marks {
    fn clone(&self) -> Self {
        Marks::default()
    }
}

impl Marks {
    /// An empty vertex list with room for `n` vertices, reusing the memory of an ended
    /// allocation: the smallest spare list that is large enough. When none is, the largest
    /// is freed first, so that the new one may take its place without fresh pages.
    pub fn vertex_list(&mut self, n: usize) -> Vec<AllocVertex> {
        let fit = (0..self.spare.len())
            .filter(|&i| self.spare[i].capacity() >= n)
            .min_by_key(|&i| self.spare[i].capacity());
        if let Some(i) = fit {
            return self.spare.swap_remove(i);
        }
        if let Some(i) = (0..self.spare.len()).max_by_key(|&i| self.spare[i].capacity()) {
            drop(self.spare.swap_remove(i));
        }
        Vec::with_capacity(n)
    }

    /// Keeps `list`'s memory for a later allocation (up to [`SPARE_VERTEX_LISTS_MAX`]).
    pub fn give_back(&mut self, mut list: Vec<AllocVertex>) {
        if self.spare.len() < SPARE_VERTEX_LISTS_MAX && list.capacity() > 0 {
            list.clear();
            self.spare.push(list);
        }
    }

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
        self.whole_runs.clear();
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
                depth: order.depth(v),
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
    let mut out = marks.vertex_list(marks.sparse.len() + whole_count);
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
            push_whole(order, (*r).clone(), &mut out, &mut marks.whole_runs);
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
        push_whole(order, r.clone(), &mut out, &mut marks.whole_runs);
    }
    Allocation {
        vertices: out,
        at,
        duration,
    }
}

/// Appends the strict descendants of a vertex taken whole (post-order positions `range`),
/// and notes where they went.
fn push_whole(
    order: &TreeOrder,
    range: std::ops::Range<usize>,
    out: &mut Vec<AllocVertex>,
    runs: &mut Vec<(u32, u32)>,
) {
    let start = out.len() as u32;
    out.extend_from_slice(&order.template[range]);
    runs.push((start, out.len() as u32));
}

impl Marks {
    /// Where the last [`expand`] copied whole subtrees (see `commit_expanded`), taken out so
    /// that no later commit can use them for another allocation; hand the buffer back with
    /// [`Marks::return_whole_runs`].
    pub(crate) fn take_whole_runs(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.whole_runs)
    }

    /// Gives back the (emptied) buffer [`Marks::take_whole_runs`] took.
    pub(crate) fn return_whole_runs(&mut self, mut runs: Vec<(u32, u32)>) {
        runs.clear();
        self.whole_runs = runs;
    }
}

/// Records `alloc` in the calendars; returns the records so cancel can remove exactly them.
/// On failure nothing stays recorded.
pub fn commit(
    g: &ResourceGraph,
    st: &mut SchedState,
    alloc: &Allocation,
) -> Result<Vec<SpanRef>, MatchError> {
    commit_expanded(g, st, alloc, &[])
}

/// As [`commit`], for an allocation [`expand`] just made: `whole_runs` (from
/// [`Marks::whole_runs`]) says which runs of its vertices are whole subtrees, whose units
/// are then summed from static totals rather than vertex by vertex.
pub(crate) fn commit_expanded(
    g: &ResourceGraph,
    st: &mut SchedState,
    alloc: &Allocation,
    whole_runs: &[(u32, u32)],
) -> Result<Vec<SpanRef>, MatchError> {
    let shadows = shadows(alloc, whole_runs);
    let shadowed: usize = shadows.iter().map(|s| s.top - s.first).sum();
    let own = alloc.vertices.len() - shadowed;
    let mut spans = Vec::with_capacity(2 * own);
    let r = commit_inner(g, st, alloc, &shadows, whole_runs, &mut spans);
    if let Err(e) = r {
        for s in spans {
            // Removing what was just added cannot fail; if it did, the first error is the one to report.
            let _ = st.remove(s);
        }
        return Err(e);
    }
    Ok(spans)
}

/// The subtree below a vertex an allocation holds exclusively (and is not itself below
/// another such vertex): positions `first..top` of the allocation's vertices, `top` being
/// the vertex's own position (children-first order puts a subtree right before its root).
#[derive(Clone, Copy, Debug)]
struct Shadow {
    first: usize,
    top: usize,
    depth: u32,
}

/// The shadows of `a`, in allocation order. Walked parents-first (the reverse of the
/// children-first order), a subtree is the run of deeper vertices after its root. A run in
/// `whole_runs` is the whole subtree of the (exclusive) vertex right after it, so it lies
/// in the shadow open at that vertex and is stepped over at once.
fn shadows(a: &Allocation, whole_runs: &[(u32, u32)]) -> Vec<Shadow> {
    let mut out = Vec::new();
    let mut open: Option<Shadow> = None;
    let mut wholes = whole_runs.iter().rev().peekable();
    let mut i = a.vertices.len();
    while i > 0 {
        i -= 1;
        let av = &a.vertices[i];
        let inside = open.as_ref().is_some_and(|s| av.depth > s.depth);
        if !inside {
            out.extend(open.take().filter(|s| s.first < s.top));
            if av.exclusive {
                open = Some(Shadow {
                    first: i,
                    top: i,
                    depth: av.depth,
                });
            }
        }
        while wholes.next_if(|w| w.1 as usize > i).is_some() {}
        if let Some(s) = open.as_mut() {
            s.first = i.min(s.first);
            if av.exclusive
                && let Some(w) = wholes.next_if(|w| w.1 as usize == i)
            {
                s.first = w.0 as usize;
                i = s.first;
            }
        }
    }
    out.extend(open.filter(|s| s.first < s.top));
    out.reverse();
    out
}

/// Which calendar entries an allocation makes, and why so few.
///
/// While an allocation holds a vertex exclusively, nothing else can look at that vertex's
/// units, its aggregates, or anything below it: every walk starts at the root, a vertex is
/// visited only after its parent passed the prune, and the prune fails on a vertex whose
/// job-count calendar is full during any part of the window asked about. So such a vertex
/// gets only its job-count entry (the root excepted: the queue manager reads the root's
/// aggregates directly), and the vertices below it get none; their units still count in
/// the aggregates of the vertices above. A whole node then costs one calendar entry, not
/// one per core, memory pool and socket.
fn commit_inner(
    g: &ResourceGraph,
    st: &mut SchedState,
    a: &Allocation,
    shadows: &[Shadow],
    whole_runs: &[(u32, u32)],
    spans: &mut Vec<SpanRef>,
) -> Result<(), MatchError> {
    // Exclusively taken units of each pruned type below each vertex, summed children-first:
    // `below[d]` collects the totals of the children (at depth d) of the vertex being
    // finished at depth d - 1. A shadowed vertex adds its units straight to the row of
    // its shadow's root's children: its own sums are never needed.
    let k = st.prune_types.len();
    let max_depth = a.vertices.iter().map(|v| v.depth).max().unwrap_or(0) as usize;
    let mut below: Vec<i64> = vec![0; (max_depth + 2) * k];
    let mut total: Vec<i64> = vec![0; k];
    let mut agg_need: Vec<(VertexId, Vec<i64>)> = Vec::new();
    let prune_types = st.prune_types.clone();
    let prune_index = |kind| prune_types.iter().position(|&t| t == kind);
    let mut next_shadow = shadows.iter().peekable();
    let mut next_whole = whole_runs.iter().peekable();
    let mut i = 0;
    while i < a.vertices.len() {
        if let Some(s) = next_shadow.next_if(|s| s.first == i) {
            while next_whole.next_if(|w| (w.0 as usize) < s.first).is_some() {}
            let whole = next_whole
                .next_if(|w| (w.0 as usize, w.1 as usize) == (s.first, s.top))
                .is_some();
            let row = &mut below[(s.depth as usize + 1) * k..(s.depth as usize + 2) * k];
            if whole && let Some(units) = st.units_below(a.vertices[s.top].v) {
                // Every vertex below, all its units, exclusively: the static totals.
                for (acc, u) in row.iter_mut().zip(units) {
                    *acc += u;
                }
            } else if k > 0 {
                for av in &a.vertices[s.first..s.top] {
                    if av.exclusive
                        && let Some(j) = prune_index(g.kind(av.v))
                    {
                        row[j] += av.needs;
                    }
                }
            }
            i = s.top;
            continue;
        }
        let av = &a.vertices[i];
        i += 1;
        if av.exclusive && av.depth > 0 {
            st.hold_exclusive_mark(av.v, a.at, a.duration, av.needs, spans)?;
        } else {
            st.hold(av.v, a.at, a.duration, av.needs, av.exclusive, spans)?;
        }
        if k == 0 {
            continue;
        }
        let d = av.depth as usize;
        let children = &mut below[(d + 1) * k..(d + 2) * k];
        total.copy_from_slice(children);
        children.fill(0);
        if !(av.exclusive && av.depth > 0)
            && let Some(agg) = st.aggregate(av.v)
        {
            let need: Vec<i64> = agg
                .types
                .iter()
                .map(|&t| prune_index(t).map_or(0, |j| total[j]))
                .collect();
            if need.iter().any(|&n| n > 0) {
                agg_need.push((av.v, need));
            }
        }
        if av.exclusive
            && let Some(j) = prune_index(g.kind(av.v))
        {
            total[j] += av.needs;
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
