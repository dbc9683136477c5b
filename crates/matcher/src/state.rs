//! Per-vertex scheduling state, in dense arrays indexed by vertex.
//!
//! What the matcher needs to know about a vertex during a window is, as in Fluxion, how
//! many of its own units are free (a core has 1, a 2 GB memory pool 2) and how many jobs
//! touch it — a shared use counts 1, an exclusive use all [`XCHECK_TOTAL`], so an
//! exclusively held vertex blocks everyone and a vertex anybody touches cannot be taken
//! exclusively. Leaves (cores, gpus, memory: nearly every vertex) keep both in one compact
//! hold list ([`Pools`]: 4 bytes per vertex idle, no allocation in steady state); inner
//! vertices, which every job passes through, keep two [`Planner`]s.
//!
//! Prune filters (`HL:LL`) add, at inner vertices, the free units of each low-level type
//! below them ([`Aggregate`]), so the traversal skips subtrees that cannot hold a request.

use shardsched_planner::{HoldId, MultiPlanner, Planner, Pools, SpanId};
use shardsched_resource::{ResourceGraph, Sym, VertexId};

use crate::MatchError;

/// Capacity of the job-count calendar; an exclusive use takes all of it.
pub const XCHECK_TOTAL: i64 = 1 << 30;
/// First instant of the planning window.
pub const PLAN_BASE: i64 = 0;
/// Length of the planning window in seconds (about 34,800 years): effectively unbounded.
pub const PLAN_HORIZON: u64 = 1 << 40;
const LEAF: u32 = u32::MAX;

/// Prune filters: pairs of (high-level type or all, low-level type).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneFilters {
    pub pairs: Vec<(Option<String>, String)>,
}

impl PruneFilters {
    /// Parses `HL:LL,HL:LL` (`ALL` for any high-level type); empty means no filters.
    pub fn parse(s: &str) -> Result<PruneFilters, MatchError> {
        let mut pairs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (hl, ll) = part
                .split_once(':')
                .filter(|(h, l)| !h.is_empty() && !l.is_empty())
                .ok_or_else(|| MatchError::BadPruneFilter(part.to_string()))?;
            let hl = (hl != "ALL").then(|| hl.to_string());
            pairs.push((hl, ll.to_string()));
        }
        Ok(PruneFilters { pairs })
    }

    /// The default, `ALL:core,ALL:node`.
    pub fn default_filters() -> PruneFilters {
        PruneFilters {
            pairs: vec![(None, "core".into()), (None, "node".into())],
        }
    }
}

/// The aggregate calendar of one vertex: free units of each tracked type below it.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    pub types: Vec<Sym>,
    pub plan: MultiPlanner,
}

/// Calendars of an inner (non-leaf) vertex.
#[derive(Clone, Debug, PartialEq)]
pub struct Inner {
    pub plans: Planner,
    pub xcheck: Planner,
    pub agg: Option<Aggregate>,
}

/// How a vertex is used during a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Own units not held.
    pub units_free: i64,
    /// Job-count capacity not held ([`XCHECK_TOTAL`] when nobody touches the vertex).
    pub jobs_free: i64,
}

/// All scheduling state of one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedState {
    /// Index into `inner` for inner vertices, `LEAF` for leaves.
    inner_of: Vec<u32>,
    pub inner: Vec<Inner>,
    pub leaves: Pools,
    /// Low-level types of the prune filters, as symbols of this graph.
    pub prune_types: Vec<Sym>,
    /// Units of each prune type strictly below each inner vertex (`prune_types.len()` per
    /// entry of `inner`): what taking its subtree whole takes from the aggregates above.
    units_below: Vec<i64>,
}

/// One record of an allocation in the calendars, so that cancel removes exactly it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanRef {
    Leaf(HoldId),
    Plan(u32, SpanId),
    Xcheck(u32, SpanId),
    Agg(u32, SpanId),
}

impl SchedState {
    /// Fresh state for `g` with the given prune filters.
    pub fn new(g: &ResourceGraph, filters: &PruneFilters) -> SchedState {
        let n = g.len();
        let resolved: Vec<(Option<Sym>, Sym)> = filters
            .pairs
            .iter()
            .filter_map(|(hl, ll)| {
                let ll = g.sym(ll)?;
                match hl {
                    None => Some((None, ll)),
                    Some(h) => g.sym(h).map(|h| (Some(h), ll)),
                }
            })
            .collect();
        let mut prune_types: Vec<Sym> = resolved.iter().map(|p| p.1).collect();
        prune_types.sort();
        prune_types.dedup();
        // Units of each low-level type below every vertex, summed bottom-up.
        let k = prune_types.len();
        let mut below = vec![0i64; n * k];
        let order: Vec<VertexId> = g.preorder(g.root()).collect();
        for &v in order.iter().rev() {
            if let Some(p) = g.parent(v) {
                for (i, t) in prune_types.iter().enumerate() {
                    let own = if g.kind(v) == *t { g.size(v) } else { 0 };
                    below[p.index() * k + i] += below[v.index() * k + i] + own;
                }
            }
        }
        let mut inner_of = vec![LEAF; n];
        let mut inner = Vec::new();
        let mut units_below = Vec::new();
        for v in g.vertices() {
            if g.children(v).is_empty() {
                continue;
            }
            units_below.extend_from_slice(&below[v.index() * k..(v.index() + 1) * k]);
            let mut types = Vec::new();
            let mut totals = Vec::new();
            for (i, t) in prune_types.iter().enumerate() {
                let tracked = resolved
                    .iter()
                    .any(|(hl, ll)| ll == t && hl.is_none_or(|h| h == g.kind(v)));
                let total = below[v.index() * k + i];
                if tracked && total > 0 {
                    types.push(*t);
                    totals.push(total);
                }
            }
            let agg = (!types.is_empty()).then(|| Aggregate {
                types,
                plan: MultiPlanner::new(PLAN_BASE, PLAN_HORIZON, &totals),
            });
            inner_of[v.index()] = inner.len() as u32;
            inner.push(Inner {
                plans: Planner::new(PLAN_BASE, PLAN_HORIZON, g.size(v)),
                xcheck: Planner::new(PLAN_BASE, PLAN_HORIZON, XCHECK_TOTAL),
                agg,
            });
        }
        SchedState {
            inner_of,
            inner,
            leaves: Pools::new(n),
            prune_types,
            units_below,
        }
    }

    /// Units of each prune type (in `prune_types` order) strictly below `v`; `None` for a
    /// leaf.
    pub fn units_below(&self, v: VertexId) -> Option<&[i64]> {
        let i = self.inner_of[v.index()];
        let k = self.prune_types.len();
        (i != LEAF).then(|| &self.units_below[i as usize * k..(i as usize + 1) * k])
    }

    fn inner(&self, v: VertexId) -> Option<&Inner> {
        let i = self.inner_of[v.index()];
        (i != LEAF).then(|| &self.inner[i as usize])
    }

    /// How `v` (of size `size`) is used during `[at, at + dur)`.
    #[inline]
    pub fn usage(&self, v: VertexId, size: i64, at: i64, dur: u64) -> Usage {
        match self.inner(v) {
            Some(inner) => Usage {
                units_free: inner.plans.avail_during(at, dur),
                jobs_free: inner.xcheck.avail_during(at, dur),
            },
            None => self.leaf_usage(v, size, at, dur),
        }
    }

    /// As [`SchedState::usage`], but `None` as soon as the job count shows the vertex held
    /// exclusively (no job count free): the walk's question, answered without looking at
    /// the units of a vertex it cannot use anyway.
    #[inline]
    pub fn usage_if_reachable(&self, v: VertexId, size: i64, at: i64, dur: u64) -> Option<Usage> {
        let usage = match self.inner(v) {
            Some(inner) => {
                let jobs_free = inner.xcheck.avail_during(at, dur);
                if jobs_free <= 0 {
                    return None;
                }
                Usage {
                    units_free: inner.plans.avail_during(at, dur),
                    jobs_free,
                }
            }
            None => self.leaf_usage(v, size, at, dur),
        };
        (usage.jobs_free > 0).then_some(usage)
    }

    #[inline]
    fn leaf_usage(&self, v: VertexId, size: i64, at: i64, dur: u64) -> Usage {
        if self.leaves.is_idle(v.index()) {
            return Usage {
                units_free: size,
                jobs_free: XCHECK_TOTAL,
            };
        }
        let peak = self.leaves.peak_during(v.index(), at, dur);
        Usage {
            units_free: size - peak.units,
            jobs_free: XCHECK_TOTAL - peak.jobs,
        }
    }

    /// Free units of `t` below `v` during the window, if `v` tracks `t`.
    pub fn agg_avail(&self, v: VertexId, t: Sym, at: i64, dur: u64) -> Option<i64> {
        let a = self.inner(v)?.agg.as_ref()?;
        let i = a.types.iter().position(|&x| x == t)?;
        Some(a.plan.avail_during(at, dur, i))
    }

    /// The aggregate of `v`, if it has one.
    pub fn aggregate(&self, v: VertexId) -> Option<&Aggregate> {
        self.inner(v)?.agg.as_ref()
    }

    /// The units per type an aggregate record takes, if `s` is one made at `v`.
    pub fn aggregate_span(&self, v: VertexId, s: SpanRef) -> Option<&[i64]> {
        let SpanRef::Agg(i, id) = s else {
            return None;
        };
        if self.inner_of[v.index()] != i {
            return None;
        }
        let agg = self.inner[i as usize].agg.as_ref()?;
        agg.plan.span(id).map(|span| span.planned)
    }

    /// Records one vertex's use: `needs` units when exclusive, and its job count.
    pub fn hold(
        &mut self,
        v: VertexId,
        at: i64,
        dur: u64,
        needs: i64,
        exclusive: bool,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let err = |e: shardsched_planner::PlannerError| MatchError::Internal(e.to_string());
        let jobs = if exclusive { XCHECK_TOTAL } else { 1 };
        let i = self.inner_of[v.index()];
        if i == LEAF {
            let units = if exclusive { needs } else { 0 };
            out.push(SpanRef::Leaf(
                self.leaves
                    .add(v.index(), at, dur, units, jobs)
                    .map_err(err)?,
            ));
            return Ok(());
        }
        let inner = &mut self.inner[i as usize];
        out.push(SpanRef::Xcheck(
            i,
            inner.xcheck.add_span(at, dur, jobs).map_err(err)?,
        ));
        if exclusive {
            out.push(SpanRef::Plan(
                i,
                inner.plans.add_span(at, dur, needs).map_err(err)?,
            ));
        }
        Ok(())
    }

    /// Records that `v` is held exclusively, and nothing more: what an exclusive hold
    /// must show to every walk (see `alloc::commit`). A leaf keeps its one hold of units
    /// and job count, as [`SchedState::hold`] makes it; an inner vertex gets only its
    /// job-count entry.
    pub fn hold_exclusive_mark(
        &mut self,
        v: VertexId,
        at: i64,
        dur: u64,
        needs: i64,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let i = self.inner_of[v.index()];
        if i == LEAF {
            return self.hold(v, at, dur, needs, true, out);
        }
        let id = self.inner[i as usize]
            .xcheck
            .add_span(at, dur, XCHECK_TOTAL)
            .map_err(|e| MatchError::Internal(e.to_string()))?;
        out.push(SpanRef::Xcheck(i, id));
        Ok(())
    }

    /// Adds an aggregate span at inner vertex `v`.
    pub fn hold_aggregate(
        &mut self,
        v: VertexId,
        at: i64,
        dur: u64,
        needs: &[i64],
    ) -> Result<SpanRef, MatchError> {
        let i = self.inner_of[v.index()];
        let agg = (i != LEAF)
            .then(|| self.inner[i as usize].agg.as_mut())
            .flatten()
            .ok_or_else(|| MatchError::Internal(format!("vertex {} has no aggregate", v.0)))?;
        let id = agg
            .plan
            .add_span(at, dur, needs)
            .map_err(|e| MatchError::Internal(e.to_string()))?;
        Ok(SpanRef::Agg(i, id))
    }

    /// Removes a record made by [`SchedState::hold`] or [`SchedState::hold_aggregate`].
    pub fn remove(&mut self, s: SpanRef) -> Result<(), MatchError> {
        let r = match s {
            SpanRef::Leaf(id) => self.leaves.remove(id),
            SpanRef::Plan(i, id) => self.inner[i as usize].plans.rem_span(id),
            SpanRef::Xcheck(i, id) => self.inner[i as usize].xcheck.rem_span(id),
            SpanRef::Agg(i, id) => match self.inner[i as usize].agg.as_mut() {
                Some(a) => a.plan.rem_span(id),
                None => {
                    return Err(MatchError::Internal(format!(
                        "inner vertex {i} has no aggregate"
                    )));
                }
            },
        };
        r.map_err(|e| MatchError::Internal(e.to_string()))
    }
}
