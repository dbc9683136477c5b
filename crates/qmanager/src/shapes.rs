//! Cheap answers the matcher would give anyway.
//!
//! A match walks the whole graph, so the queue manager asks it only questions whose answer
//! is not already known:
//!
//! - **Satisfiability is a property of the request's shape**, not of the job: two jobs asking
//!   for the same resources with the same constraints are both satisfiable or both not,
//!   whatever their duration. [`Shapes`] caches the answer per shape, against the queue's
//!   definition (forever) and against what is up now (until availability next changes; while
//!   availability never changed, "up now" *is* the definition).
//! - **A necessary condition for fitting**: the root's prune aggregates count the free units
//!   of each tracked type (cores, nodes) in every time window. A request that needs more
//!   units of some type than the root has free during `[now, now + duration)` cannot fit
//!   anywhere below it, so [`RootAgg::may_fit`] answers "no" without a traversal. It never
//!   answers "no" wrongly: status, exclusivity and constraints only make fitting harder.
//!   For the same reason no reservation can start before [`RootAgg::earliest_fit`], the
//!   first time the root's aggregates admit the request: a reservation search may start
//!   there instead of trying, one traversal each, every earlier instant at which some job
//!   ends.

use std::collections::HashMap;

use shardsched_jobspec::Jobspec;
use shardsched_matcher::{
    MatchError, MatchOp, MatchOutcome, Matcher, PLAN_BASE, PLAN_HORIZON, Request,
};
use shardsched_resource::{Sym, VertexId};

/// Distinct request shapes remembered before the cache is emptied and refilled.
pub const SHAPES_MAX: usize = 65_536;

/// Satisfiability per request shape.
#[derive(Debug, Default, Clone)]
pub(crate) struct Shapes {
    cache: HashMap<String, ShapeSat>,
}

#[derive(Debug, Clone, Copy)]
struct ShapeSat {
    definition: bool,
    /// (availability epoch, answer) against what is up.
    up: Option<(u64, bool)>,
}

impl Shapes {
    /// The cache key of a jobspec: its resources and constraints, not its duration or tasks.
    pub(crate) fn key(js: &Jobspec) -> String {
        format!("{:?}|{:?}", js.resources, js.attributes.constraints)
    }

    /// Whether `js` (of shape `key`) could ever fit the definition, asking `definition` (a
    /// matcher over the definition graph that holds no job) on a cache miss.
    pub(crate) fn fits_definition(
        &mut self,
        key: &str,
        js: &Jobspec,
        definition: &mut Matcher,
        now: i64,
        asked: &mut u64,
    ) -> Result<bool, MatchError> {
        if let Some(s) = self.cache.get(key) {
            return Ok(s.definition);
        }
        *asked += 1;
        let ok = satisfiable(definition, js, now)?;
        self.remember(
            key,
            ShapeSat {
                definition: ok,
                up: None,
            },
        );
        Ok(ok)
    }

    /// Whether `js` fits what `live` has up now (allocations ignored). `epoch` counts
    /// availability changes; epoch 0 means none happened, so the definition's answer holds.
    pub(crate) fn fits_up(
        &mut self,
        key: &str,
        js: &Jobspec,
        live: &mut Matcher,
        epoch: u64,
        now: i64,
        asked: &mut u64,
    ) -> Result<bool, MatchError> {
        let cached = self.cache.get(key).copied();
        if epoch == 0
            && let Some(s) = cached
        {
            return Ok(s.definition);
        }
        if let Some(ShapeSat {
            up: Some((e, ok)), ..
        }) = cached
            && e == epoch
        {
            return Ok(ok);
        }
        *asked += 1;
        let ok = satisfiable(live, js, now)?;
        match self.cache.get_mut(key) {
            Some(s) => s.up = Some((epoch, ok)),
            // Evicted since the definition answer: the job was admitted, so it fits the
            // definition; remember both.
            None => self.remember(
                key,
                ShapeSat {
                    definition: true,
                    up: Some((epoch, ok)),
                },
            ),
        }
        Ok(ok)
    }

    /// Caches `sat` for shape `key`; a full cache ([`SHAPES_MAX`]) is emptied first.
    fn remember(&mut self, key: &str, sat: ShapeSat) {
        if self.cache.len() >= SHAPES_MAX {
            self.cache.clear();
        }
        self.cache.insert(key.to_string(), sat);
    }
}

fn satisfiable(m: &mut Matcher, js: &Jobspec, now: i64) -> Result<bool, MatchError> {
    // The job id does not matter: satisfiability records nothing.
    Ok(matches!(
        m.run(MatchOp::Satisfiability, js, 0, now)?,
        MatchOutcome::Satisfiable(true)
    ))
}

/// The root vertex's aggregate calendars, for [`RootAgg::may_fit`].
#[derive(Debug, Clone)]
pub(crate) struct RootAgg {
    pub(crate) root: VertexId,
    /// The types the root's aggregate tracks (empty without prune filters).
    pub(crate) types: Vec<Sym>,
    /// Units of each type below the root.
    totals: Vec<i64>,
}

impl RootAgg {
    pub(crate) fn new(m: &Matcher) -> RootAgg {
        let root = m.graph.root();
        let (types, totals) = match m.state.aggregate(root) {
            Some(a) => (a.types.to_vec(), a.totals().to_vec()),
            None => (Vec::new(), Vec::new()),
        };
        RootAgg {
            root,
            types,
            totals,
        }
    }

    /// Units of each tracked type the request needs at least (count minimums); `Err` when
    /// the request does not compile (e.g. a malformed constraint). A jobspec offering
    /// alternatives (or-slots, `xor_slot`) needs only one of them, so no minimum is known:
    /// nothing (the matcher alone decides).
    pub(crate) fn needs(&self, m: &Matcher, js: &Jobspec) -> Result<Vec<i64>, MatchError> {
        let req = Request::compile(js, &m.graph, &m.state.prune_types)?;
        if js.has_alternatives() {
            return Ok(vec![0; self.types.len()]);
        }
        Ok(self.types.iter().map(|&t| req.total_need(t)).collect())
    }

    /// False when the request needs more of some type than the whole graph has.
    pub(crate) fn within_totals(&self, needs: &[i64]) -> bool {
        needs.iter().zip(&self.totals).all(|(n, t)| n <= t)
    }

    /// False only when the request certainly cannot fit during `[now, now + duration)`
    /// (duration 0 = to the end of the planning horizon, as the matcher plans it).
    pub(crate) fn may_fit(&self, m: &Matcher, needs: &[i64], now: i64, duration: u64) -> bool {
        let window = planning_window(now, duration);
        if window == 0 {
            return false;
        }
        self.types.iter().zip(needs).all(|(&t, &n)| {
            n <= 0
                || m.state
                    .agg_avail(self.root, t, now, window)
                    .is_none_or(|free| free >= n)
        })
    }

    /// The earliest time at or after `now` at which the root has enough free units of every
    /// tracked type for `duration` seconds: no match can succeed earlier. `None` when the
    /// aggregates cannot say (no aggregate, unlimited duration).
    pub(crate) fn earliest_fit(
        &self,
        m: &Matcher,
        needs: &[i64],
        now: i64,
        duration: u64,
    ) -> Option<i64> {
        if duration == 0 || needs.len() != self.types.len() {
            return None;
        }
        let agg = m.state.aggregate(self.root)?;
        let clamped: Vec<i64> = needs.iter().map(|&n| n.max(0)).collect();
        agg.avail_time_first(now, planning_window(now, duration), &clamped)
    }

    /// Units of type `i` free at `now` (for one second): an upper bound of what any job
    /// starting now can get.
    pub(crate) fn free_now(&self, m: &Matcher, i: usize, now: i64) -> Option<i64> {
        self.free_during(m, i, now, 1)
    }

    /// Units of type `i` free throughout `[at, at + len)`.
    pub(crate) fn free_during(&self, m: &Matcher, i: usize, at: i64, len: i64) -> Option<i64> {
        let t = *self.types.get(i)?;
        m.state
            .agg_avail(self.root, t, at, u64::try_from(len).ok()?)
    }
}

/// The length of the window the matcher plans a job of `duration` seconds at `at` over.
pub(crate) fn planning_window(at: i64, duration: u64) -> u64 {
    let end = PLAN_BASE.saturating_add(i64::try_from(PLAN_HORIZON).unwrap_or(i64::MAX));
    let left = u64::try_from(end.saturating_sub(at)).unwrap_or(0);
    if duration == 0 {
        left
    } else {
        duration.min(left)
    }
}

/// Pending jobs' needs per tracked type, as multisets, so a cycle can see in O(log n) that
/// no pending job can fit what is free now.
#[derive(Debug, Default, Clone)]
pub(crate) struct NeedIndex {
    per_type: Vec<std::collections::BTreeMap<i64, u32>>,
}

impl NeedIndex {
    pub(crate) fn new(types: usize) -> NeedIndex {
        NeedIndex {
            per_type: vec![std::collections::BTreeMap::new(); types],
        }
    }

    pub(crate) fn insert(&mut self, needs: &[i64]) {
        for (m, &n) in self.per_type.iter_mut().zip(needs) {
            *m.entry(n).or_insert(0) += 1;
        }
    }

    pub(crate) fn remove(&mut self, needs: &[i64]) {
        for (m, &n) in self.per_type.iter_mut().zip(needs) {
            if let Some(c) = m.get_mut(&n) {
                *c -= 1;
                if *c == 0 {
                    m.remove(&n);
                }
            }
        }
    }

    /// The smallest need of type `i` among pending jobs.
    pub(crate) fn min(&self, i: usize) -> Option<i64> {
        self.per_type.get(i)?.keys().next().copied()
    }

    pub(crate) fn types(&self) -> usize {
        self.per_type.len()
    }
}
