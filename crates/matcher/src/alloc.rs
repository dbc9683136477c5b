//! Turning a traversal's picks into an allocation, and committing it to the calendars.

use std::collections::HashMap;

use shardsched_resource::{ResourceGraph, VertexId};

use crate::MatchError;
use crate::state::{SchedState, SpanRef, XCHECK_TOTAL};
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

/// Expands the picks under `top` into the set of allocated vertices: every pick, the whole
/// subtree of exclusive picks that asked for nothing below them, every ancestor on the way
/// (shared), and — under node-exclusive policies — every node on the way taken whole.
pub fn expand(
    g: &ResourceGraph,
    arena: &[Pick],
    top: (u32, u32),
    node_exclusive: bool,
    at: i64,
    duration: u64,
) -> Allocation {
    let mut chosen: HashMap<u32, (i64, bool)> = HashMap::new();
    let mut wholes: Vec<u32> = Vec::new();
    let mut stack: Vec<u32> = (top.0..top.0 + top.1).collect();
    while let Some(i) = stack.pop() {
        let p = arena[i as usize];
        let e = chosen.entry(p.v).or_insert((0, false));
        e.0 = e.0.max(p.needs);
        e.1 |= p.excl;
        if p.whole {
            wholes.push(p.v);
        }
        stack.extend(p.sub_start..p.sub_start + p.sub_len);
    }
    let node = g.sym("node");
    let picked: Vec<u32> = chosen.keys().copied().collect();
    for v in picked {
        let mut cur = VertexId(v);
        while let Some(p) = g.parent(cur) {
            if chosen.contains_key(&p.0) {
                break;
            }
            chosen.insert(p.0, (1, false));
            cur = p;
        }
    }
    if node_exclusive {
        for (&v, e) in chosen.iter_mut() {
            if Some(g.kind(VertexId(v))) == node {
                e.1 = true;
                wholes.push(v);
            }
        }
    }
    for w in wholes {
        for d in g.preorder(VertexId(w)).skip(1) {
            chosen.insert(d.0, (g.size(d), true));
        }
    }
    // Post-order walk restricted to chosen vertices gives the writer order.
    let mut vertices = Vec::with_capacity(chosen.len());
    let mut stack: Vec<(u32, u32, bool)> = vec![(g.root().0, 0, false)];
    while let Some((v, depth, expanded)) = stack.pop() {
        let Some(&(needs, exclusive)) = chosen.get(&v) else {
            continue;
        };
        if expanded {
            vertices.push(AllocVertex {
                v: VertexId(v),
                needs,
                exclusive,
                depth,
            });
            continue;
        }
        stack.push((v, depth, true));
        for &c in g.children(VertexId(v)).iter().rev() {
            if chosen.contains_key(&c) {
                stack.push((c, depth + 1, false));
            }
        }
    }
    Allocation {
        vertices,
        at,
        duration,
    }
}

/// Records `alloc` in the calendars; returns the spans so cancel can remove exactly them.
/// On failure nothing stays recorded.
pub fn commit(
    g: &ResourceGraph,
    st: &mut SchedState,
    alloc: &Allocation,
) -> Result<Vec<SpanRef>, MatchError> {
    let mut spans = Vec::new();
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
    let err = |e: shardsched_planner::PlannerError| MatchError::Internal(e.to_string());
    let mut agg_need: HashMap<u32, Vec<i64>> = HashMap::new();
    for av in &a.vertices {
        let v = av.v;
        let jobs = if av.exclusive { XCHECK_TOTAL } else { 1 };
        let id = st.xcheck[v.index()]
            .add_span(a.at, a.duration, jobs)
            .map_err(err)?;
        spans.push(SpanRef::Xcheck(v.0, id));
        if !av.exclusive {
            continue;
        }
        let id = st.plans[v.index()]
            .add_span(a.at, a.duration, av.needs)
            .map_err(err)?;
        spans.push(SpanRef::Plan(v.0, id));
        let kind = g.kind(v);
        if !st.prune_types.contains(&kind) {
            continue;
        }
        let mut cur = v;
        while let Some(p) = g.parent(cur) {
            if let Some(agg) = st.agg[p.index()].as_ref()
                && let Some(i) = agg.types.iter().position(|&t| t == kind)
            {
                let n = agg.types.len();
                agg_need.entry(p.0).or_insert_with(|| vec![0; n])[i] += av.needs;
            }
            cur = p;
        }
    }
    let mut keys: Vec<u32> = agg_need.keys().copied().collect();
    keys.sort_unstable();
    for p in keys {
        let Some(agg) = st.agg[p as usize].as_mut() else {
            continue;
        };
        let id = agg
            .plan
            .add_span(a.at, a.duration, &agg_need[&p])
            .map_err(err)?;
        spans.push(SpanRef::Agg(p, id));
    }
    Ok(())
}
