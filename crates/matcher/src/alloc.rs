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

/// Static facts about the tree that writers' order needs: each vertex's post-order
/// position and depth (computed once per graph, 6 bytes a vertex).
#[derive(Clone, Debug, Default)]
pub struct TreeOrder {
    post: Vec<u32>,
    depth: Vec<u16>,
}

impl TreeOrder {
    pub fn new(g: &ResourceGraph) -> TreeOrder {
        let n = g.len();
        let mut post = vec![0u32; n];
        let mut depth = vec![0u16; n];
        let mut next = 0u32;
        let mut stack: Vec<(u32, bool)> = vec![(g.root().0, false)];
        while let Some((v, done)) = stack.pop() {
            if done {
                post[v as usize] = next;
                next += 1;
                continue;
            }
            stack.push((v, true));
            for &c in g.children(VertexId(v)).iter().rev() {
                depth[c as usize] = depth[v as usize].saturating_add(1);
                stack.push((c, false));
            }
        }
        TreeOrder { post, depth }
    }
}

/// Reusable per-match memory: a mark per vertex (by epoch, so clearing is free).
#[derive(Clone, Debug, Default)]
pub struct Marks {
    epoch: u32,
    mark: Vec<u32>,
    slot: Vec<u32>,
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
    }
}

/// Expands the picks under `top` into the set of allocated vertices: every pick, the whole
/// subtree of picks marked whole, every ancestor on the way (shared), and — under
/// node-exclusive policies — every node on the way taken whole.
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
    let mut out: Vec<AllocVertex> = Vec::new();
    let put = |marks: &mut Marks, out: &mut Vec<AllocVertex>, v: u32, needs: i64, excl: bool| {
        let i = v as usize;
        if marks.mark[i] == epoch {
            let e = &mut out[marks.slot[i] as usize];
            e.needs = e.needs.max(needs);
            e.exclusive |= excl;
        } else {
            marks.mark[i] = epoch;
            marks.slot[i] = out.len() as u32;
            out.push(AllocVertex {
                v: VertexId(v),
                needs,
                exclusive: excl,
                depth: u32::from(order.depth[i]),
            });
        }
    };
    let mut wholes: Vec<u32> = Vec::new();
    let mut stack: Vec<u32> = (top.0..top.0 + top.1).collect();
    while let Some(i) = stack.pop() {
        let p = arena[i as usize];
        put(marks, &mut out, p.v, p.needs, p.excl);
        if p.whole {
            wholes.push(p.v);
        }
        stack.extend(p.sub_start..p.sub_start + p.sub_len);
    }
    let picked = out.len();
    for i in 0..picked {
        let mut cur = out[i].v;
        while let Some(p) = g.parent(cur) {
            if marks.mark[p.index()] == epoch {
                break;
            }
            put(marks, &mut out, p.0, 1, false);
            cur = p;
        }
    }
    if node_exclusive && let Some(node) = g.sym("node") {
        for e in out.iter_mut().filter(|e| g.kind(e.v) == node) {
            e.exclusive = true;
            wholes.push(e.v.0);
        }
    }
    for w in wholes {
        for d in g.preorder(VertexId(w)).skip(1) {
            let i = d.index();
            if marks.mark[i] == epoch {
                let e = &mut out[marks.slot[i] as usize];
                e.needs = g.size(d);
                e.exclusive = true;
            } else {
                put(marks, &mut out, d.0, g.size(d), true);
            }
        }
    }
    // Children-first order: a walk restricted to the marked vertices (cheaper than sorting
    // when whole subtrees are taken).
    let mut ordered = Vec::with_capacity(out.len());
    let mut stack: Vec<(u32, bool)> = vec![(g.root().0, false)];
    while let Some((v, expanded)) = stack.pop() {
        if expanded {
            ordered.push(out[marks.slot[v as usize] as usize]);
            continue;
        }
        stack.push((v, true));
        for &c in g.children(VertexId(v)).iter().rev() {
            if marks.mark[c as usize] == epoch {
                stack.push((c, false));
            }
        }
    }
    let out = ordered;
    let _ = &order.post;
    Allocation {
        vertices: out,
        at,
        duration,
    }
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
    // Exclusively taken units of each pruned type below each vertex, summed children-first:
    // `below[d]` collects the totals of the children (at depth d) of the vertex being
    // finished at depth d - 1.
    let k = st.prune_types.len();
    let max_depth = a
        .vertices
        .iter()
        .map(|v| v.depth as usize)
        .max()
        .unwrap_or(0);
    // Row d (k entries) of `below`, flat: no allocation per vertex.
    let mut below: Vec<i64> = vec![0; (max_depth + 2) * k];
    let mut total: Vec<i64> = vec![0; k];
    let mut agg_need: Vec<(VertexId, Vec<i64>)> = Vec::new();
    for av in &a.vertices {
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
                .map(|t| {
                    st.prune_types
                        .iter()
                        .position(|p| p == t)
                        .map_or(0, |i| total[i])
                })
                .collect();
            if need.iter().any(|&n| n > 0) {
                agg_need.push((av.v, need));
            }
        }
        if av.exclusive
            && let Some(i) = st.prune_types.iter().position(|&t| t == g.kind(av.v))
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
