//! Per-vertex scheduling state, in dense arrays indexed by vertex.
//!
//! Three calendars per vertex, as in Fluxion:
//! - `plans`: the vertex's own units (a core has 1, a 2 GB memory pool has 2); exclusive
//!   allocations take units from it;
//! - `xcheck`: how many jobs touch the vertex; a shared use takes 1, an exclusive one takes
//!   all [`XCHECK_TOTAL`], so an exclusively held vertex blocks everyone and a vertex anybody
//!   touches cannot be taken exclusively;
//! - `agg`: for prune filters (`HL:LL`), the free units of each low-level type below a
//!   vertex, so the traversal skips subtrees that cannot hold the request.

use shardsched_planner::{MultiPlanner, Planner, SpanId};
use shardsched_resource::{ResourceGraph, Sym, VertexId};

use crate::MatchError;

/// Capacity of the job-count calendar; an exclusive use takes all of it.
pub const XCHECK_TOTAL: i64 = 1 << 30;
/// First instant of the planning window.
pub const PLAN_BASE: i64 = 0;
/// Length of the planning window in seconds (about 34,800 years): effectively unbounded.
pub const PLAN_HORIZON: u64 = 1 << 40;

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

/// All scheduling state of one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedState {
    pub plans: Vec<Planner>,
    pub xcheck: Vec<Planner>,
    pub agg: Vec<Option<Box<Aggregate>>>,
    /// Low-level types of the prune filters, as symbols of this graph.
    pub prune_types: Vec<Sym>,
}

/// Which calendar a span lives in, so that cancel can remove it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanRef {
    Plan(u32, SpanId),
    Xcheck(u32, SpanId),
    Agg(u32, SpanId),
}

impl SchedState {
    /// Fresh state for `g` with the given prune filters.
    pub fn new(g: &ResourceGraph, filters: &PruneFilters) -> SchedState {
        let n = g.len();
        let plans = g
            .vertices()
            .map(|v| Planner::new(PLAN_BASE, PLAN_HORIZON, g.size(v)))
            .collect();
        let xcheck = (0..n)
            .map(|_| Planner::new(PLAN_BASE, PLAN_HORIZON, XCHECK_TOTAL))
            .collect();
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
        let agg = g
            .vertices()
            .map(|v| {
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
                (!types.is_empty()).then(|| {
                    Box::new(Aggregate {
                        types,
                        plan: MultiPlanner::new(PLAN_BASE, PLAN_HORIZON, &totals),
                    })
                })
            })
            .collect();
        SchedState {
            plans,
            xcheck,
            agg,
            prune_types,
        }
    }

    /// Free units of `t` below `v` during the window, if `v` tracks `t`.
    pub fn agg_avail(&self, v: VertexId, t: Sym, at: i64, dur: u64) -> Option<i64> {
        let a = self.agg[v.index()].as_ref()?;
        let i = a.types.iter().position(|&x| x == t)?;
        Some(a.plan.avail_during(at, dur, i))
    }

    /// Removes a span recorded by an allocation.
    pub fn remove(&mut self, s: SpanRef) -> Result<(), MatchError> {
        let r = match s {
            SpanRef::Plan(v, id) => self.plans[v as usize].rem_span(id),
            SpanRef::Xcheck(v, id) => self.xcheck[v as usize].rem_span(id),
            SpanRef::Agg(v, id) => match self.agg[v as usize].as_mut() {
                Some(a) => a.plan.rem_span(id),
                None => return Err(MatchError::Internal(format!("vertex {v} has no aggregate"))),
            },
        };
        r.map_err(|e| MatchError::Internal(e.to_string()))
    }
}
