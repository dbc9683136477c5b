//! Fresh calendars for a graph: the aggregates primed as Fluxion primes them, the cover
//! groups and the wholes.

use std::sync::Arc;

use shardsched_planner::{HoldLists, Pools};
use shardsched_resource::{ResourceGraph, Sym, VertexId};

use super::whole::{NO_WHOLE, Wholes};
use super::{Aggregate, ChildKinds, CoverGroup, Hint, Inner, LEAF, SchedState, cover};
use crate::types::{PruneTypes, TypeTable};

impl SchedState {
    /// Fresh state for `g`: primes the aggregates as Fluxion does, completing `prune` with
    /// the leaf types no filter names.
    pub fn new(g: &ResourceGraph, types: &TypeTable, prune: &mut PruneTypes) -> SchedState {
        Self::new_on(g, g, types, prune)
    }

    /// [`SchedState::new`] over the tree of the dominant subsystem `tree`.
    pub fn new_on(
        g: &ResourceGraph,
        tree: &dyn crate::dfu::Tree,
        types: &TypeTable,
        prune: &mut PruneTypes,
    ) -> SchedState {
        let n = g.len();
        let cluster = 0u32;
        let mut inner_of = vec![LEAF; n];
        let mut inner_vertex: Vec<u32> = Vec::new();
        let mut cover_groups: Vec<CoverGroup> = Vec::new();
        let mut inner = Vec::new();
        // Depth-first, children in order, each inner vertex a frame summing the units of
        // each pruning type (by rank) its children hold. Where vertices share parents, each
        // is primed once, under the first parent that reaches it (Fluxion's colors).
        let dag = tree.is_dag();
        // Wholes: non-root nodes not inside another, where vertices have one parent.
        let node = if dag { None } else { g.sym("node") };
        let mut whole_vertex: Vec<u32> = Vec::new();
        let mut whole_of_inner: Vec<u32> = Vec::new();
        let mut primed = vec![false; if dag { n } else { 0 }];
        let root = tree.root();
        if dag {
            primed[root.index()] = true;
        }
        let mut frames: Vec<Frame> = Vec::new();
        // Sums of finished frames, reused.
        let mut spare: Vec<Vec<(u32, i64)>> = Vec::new();
        // Fluxion counts a vertex's own size first, with the types known then.
        let own_of = |prune: &PruneTypes, v: VertexId| {
            let rank = types.rank(g.kind(v));
            prune.is_pruning(rank).then(|| (rank, g.size(v)))
        };
        // The child lists read once, as slices: through `&dyn Tree` each `children` call was
        // a dynamic call, two per leaf (4.1 M instructions on the 1,024-node bench graph).
        let (start, list) = tree.child_lists();
        let is_leaf = |v: u32| start[v as usize] == start[v as usize + 1];
        // The type and rank of the last leaf seen: its rank is a pruning type from then on
        // (made one if no filter named it), so the leaves of a run of one type (a socket's
        // 22 cores) skip the rank lookup and the pruning set (a BTreeSet search per leaf).
        let mut last_leaf: Option<(Sym, u32)> = None;
        // The types each inner type tracks ([`PruneTypes::tracked_by`], a BTreeMap search
        // and two lists), by rank, as far as asked: (rank, (ranks, types)), the lists shared
        // by every aggregate of that type. Emptied when the pruning types change.
        let mut tracked: Vec<(u32, TrackedTypes)> = Vec::new();
        // The aggregate's totals, reused.
        let mut totals: Vec<i64> = Vec::new();
        // Every vertex with children is an inner vertex (where vertices share parents or
        // some are outside the tree, fewer are): the arrays of inner vertices grow no more
        // (their doubling copied 0.3 M instructions' worth on the 1,024-node bench graph).
        let inners = start.windows(2).filter(|w| w[0] != w[1]).count();
        inner.reserve_exact(inners);
        inner_vertex.reserve_exact(inners);
        whole_of_inner.reserve_exact(inners);
        if is_leaf(root.0) {
            // A graph of one vertex: a leaf, primed as one.
            let rank = types.rank(g.kind(root));
            if !prune.is_pruning(rank) {
                prune.set(Some(cluster), rank);
            }
        } else {
            frames.push(Frame {
                v: root.0,
                next: start[root.index()],
                sum: Vec::new(),
                own: own_of(prune, root),
                whole: NO_WHOLE,
                kinds: ChildKinds::default(),
            });
        }
        while let Some(top) = frames.last_mut() {
            let end = start[top.v as usize + 1];
            if top.next < end {
                let c = list[top.next as usize];
                top.next += 1;
                let cv = VertexId(c);
                let kind = g.kind(cv);
                let leaf = is_leaf(c);
                let rank = match last_leaf {
                    Some((k, r)) if leaf && k == kind => r,
                    _ => types.rank(kind),
                };
                top.kinds.add(rank);
                if dag {
                    if primed[c as usize] {
                        continue;
                    }
                    primed[c as usize] = true;
                }
                if leaf {
                    // A leaf holds its own size, its type made a pruning type (anchored at
                    // the cluster) when no filter names it.
                    if last_leaf != Some((kind, rank)) {
                        if !prune.is_pruning(rank) {
                            prune.set(Some(cluster), rank);
                            tracked.clear();
                        }
                        last_leaf = Some((kind, rank));
                    }
                    let units = sum_of(&mut top.sum, rank);
                    *units = units.saturating_add(g.size(cv));
                    // The leaves of its type right after it (a socket's 22 cores) add to the
                    // same sum, one after another, without a turn of the walk each (3.5 M
                    // instructions less on the 1,024-node bench graph).
                    while !dag && top.next < end {
                        let d = VertexId(list[top.next as usize]);
                        if !is_leaf(d.0) || g.kind(d) != kind {
                            break;
                        }
                        top.next += 1;
                        *units = units.saturating_add(g.size(d));
                    }
                } else {
                    let own = own_of(prune, cv);
                    let whole = if top.whole != NO_WHOLE {
                        top.whole
                    } else if node.is_some_and(|n| kind == n) {
                        whole_vertex.push(c);
                        (whole_vertex.len() - 1) as u32
                    } else {
                        NO_WHOLE
                    };
                    frames.push(Frame {
                        v: c,
                        next: start[c as usize],
                        sum: spare.pop().unwrap_or_default(),
                        own,
                        whole,
                        kinds: ChildKinds::default(),
                    });
                }
                continue;
            }
            // Children are done: the aggregate, then this vertex's own size, and what
            // travels up (pruning types only).
            let Some(Frame {
                v,
                own,
                mut sum,
                whole,
                kinds,
                ..
            }) = frames.pop()
            else {
                break;
            };
            let vid = VertexId(v);
            let rank = types.rank(g.kind(vid));
            let known = match tracked.iter().position(|t| t.0 == rank) {
                Some(k) => k,
                None => {
                    let ranks = prune.tracked_by(rank);
                    let syms = ranks.iter().map(|&r| types.at_rank(r)).collect();
                    tracked.push((rank, (ranks.into(), syms)));
                    tracked.len() - 1
                }
            };
            let (_, (ranks, syms)) = &tracked[known];
            totals.clear();
            totals.extend(
                ranks
                    .iter()
                    .map(|t| sum.iter().find(|e| e.0 == *t).map_or(0, |e| e.1)),
            );
            let agg = Aggregate::new(
                Arc::clone(syms),
                Arc::clone(ranks),
                &mut totals,
                g.size(vid),
            );
            let index = inner.len() as u32;
            inner_of[v as usize] = index;
            inner_vertex.push(v);
            whole_of_inner.push(whole);
            // Leaf children point at their cover group (this vertex and their type), so
            // that a cover of it reaches them (one parent each: not where vertices share
            // parents).
            if !dag {
                let at = (index, whole);
                cover::group_leaves(g, (start, list), vid, at, &mut inner_of, &mut cover_groups);
            }
            inner.push(Inner {
                agg,
                child_kinds: kinds,
            });
            if let Some((t, k)) = own {
                add_to(&mut sum, t, k);
            }
            if let Some(parent) = frames.last_mut() {
                // Only pruning types enter a sum (a leaf's type is made one, a vertex's own
                // size counts when its type is one), and no type stops being one.
                for &(t, k) in &sum {
                    debug_assert!(prune.is_pruning(t));
                    add_to(&mut parent.sum, t, k);
                }
            }
            sum.clear();
            spare.push(sum);
        }
        let prune_ranks: Vec<u32> = prune.all().collect();
        let covers = HoldLists::new(cover_groups.len());
        SchedState {
            inner_of,
            inner_vertex,
            inner,
            leaves: Pools::new(n),
            covers,
            cover_groups,
            wholes: Wholes::new(whole_vertex, whole_of_inner),
            prune_types: prune_ranks.iter().map(|&r| types.at_rank(r)).collect(),
            prune_ranks,
            jobless_units: Default::default(),
            built: Hint(BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        }
    }
}

/// States built in this process so far ([`SchedState::built`]).
static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// An inner vertex whose children [`SchedState::new_on`] is summing.
struct Frame {
    v: u32,
    /// Where its next child to visit is in the tree's child list.
    next: u32,
    /// Units of each pruning type (by rank) its children visited so far hold.
    sum: Vec<(u32, i64)>,
    /// Its own size, when its type was a pruning type as the walk reached it.
    own: Option<(u32, i64)>,
    /// The whole it belongs to, or [`NO_WHOLE`].
    whole: u32,
    /// The types of its children seen so far.
    kinds: ChildKinds,
}

pub(super) fn add_to(sum: &mut Vec<(u32, i64)>, t: u32, k: i64) {
    let units = sum_of(sum, t);
    *units = units.saturating_add(k);
}

/// The units of type `t` in `sum`, an entry of 0 made if it has none.
fn sum_of(sum: &mut Vec<(u32, i64)>, t: u32) -> &mut i64 {
    let at = match sum.iter().position(|e| e.0 == t) {
        Some(at) => at,
        None => {
            sum.push((t, 0));
            sum.len() - 1
        }
    };
    &mut sum[at].1
}

/// The ranks and the types an aggregate tracks, in Fluxion's order (see [`Aggregate`]).
type TrackedTypes = (Arc<[u32]>, Arc<[Sym]>);
