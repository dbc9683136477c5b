//! An inner vertex's one calendar ([`Aggregate`]): its aggregate's types, then its own
//! units, then its job count.
//!
//! Fluxion keeps three calendars there, and a match adds a span to each vertex it passes
//! through in every one of them (three `add_span` calls, and up to three calendars made,
//! per vertex and job). Here one span carries all three ([`SpanRef::Inner`]), so the
//! amounts are checked as Fluxion's three calendars check them: the units and the job
//! count as a planner of one pool does (`1..=total`, an error otherwise), the aggregate as
//! a multi-planner does (each `0..=total`), whose refusal only zeroes the aggregate's part
//! (its filter refused, the rest is kept). Records edited one by one (a partial cancel, a
//! job matched again, a changed graph) are split into parts first, each a span of the
//! same calendar with only its own amounts ([`SchedState::uncover`]).

use std::ops::Range;
use std::sync::Arc;

use shardsched_planner::{MultiPlanner, PlannerError, SpanId};
use shardsched_resource::{Sym, VertexId};

use super::{
    Aggregate, CALENDAR_INLINE_TYPES, Inner, LEAF_BIT, PLAN_BASE, PLAN_HORIZON, SchedState,
    SpanRef, XCHECK_TOTAL,
};
use crate::MatchError;

impl Aggregate {
    /// A calendar with nothing planned for a vertex of `size` units whose aggregate tracks
    /// `types` (none for a vertex without one), with `totals` of them below it.
    /// `totals` gets the vertex's own two appended.
    pub(super) fn new(
        types: Arc<[Sym]>,
        ranks: Arc<[u32]>,
        totals: &mut Vec<i64>,
        size: i64,
    ) -> Self {
        debug_assert_eq!(types.len(), totals.len());
        totals.extend([size, XCHECK_TOTAL]);
        Aggregate {
            types,
            ranks,
            cal: MultiPlanner::new(PLAN_BASE, PLAN_HORIZON, totals),
            recorded: 0,
            units_held: 0,
        }
    }

    /// Units of each tracked type below the vertex.
    pub fn totals(&self) -> &[i64] {
        &self.cal.totals()[..self.types.len()]
    }

    /// The calendar's type of the vertex's own units.
    fn units(&self) -> usize {
        self.types.len()
    }

    /// The calendar's type of the vertex's job count.
    fn jobs(&self) -> usize {
        self.types.len() + 1
    }

    /// The vertex's own units.
    pub fn size(&self) -> i64 {
        self.cal.totals()[self.units()]
    }

    /// Own units free throughout the window.
    #[inline]
    pub fn units_free(&self, at: i64, dur: u64) -> i64 {
        if self.units_held == 0 {
            let free = if self.cal.window_holds(at, dur) {
                self.size()
            } else {
                0
            };
            debug_assert_eq!(free, self.cal.avail_during(at, dur, self.units()));
            return free;
        }
        self.cal.avail_during(at, dur, self.units())
    }

    /// Job-count capacity free throughout the window.
    #[inline]
    pub fn jobs_free(&self, at: i64, dur: u64) -> i64 {
        self.cal.avail_during(at, dur, self.jobs())
    }

    /// The earliest instant at or after `at` from which no job touches the vertex for
    /// `dur` seconds (its job count all free).
    pub fn untouched_from(&self, at: i64, dur: u64) -> Option<i64> {
        let jobs = self.jobs();
        with_zeros(self.cal.resource_count(), |r| {
            r[jobs] = self.cal.totals()[jobs];
            self.cal.avail_time_first(at, dur, r)
        })
    }

    /// Whether `need` (one amount per tracked type) is free throughout the window; `false`
    /// for a `need` of another length, as a planner of these types alone says.
    pub fn fits_during(&self, at: i64, dur: u64, need: &[i64]) -> bool {
        self.padded(need, |r| self.cal.fits_during(at, dur, r))
            .unwrap_or(false)
    }

    /// The earliest instant at or after `at` at which `need` (one amount per tracked type)
    /// is free for `dur` seconds; `None` for a `need` of another length, as a planner of
    /// these types alone says.
    pub fn avail_time_first(&self, at: i64, dur: u64, need: &[i64]) -> Option<i64> {
        self.padded(need, |r| self.cal.avail_time_first(at, dur, r))
            .flatten()
    }

    /// `f` of `need` (one amount per tracked type) with zeros for the vertex's own two
    /// types; `None` for a `need` of another length.
    fn padded<R>(&self, need: &[i64], f: impl FnOnce(&[i64]) -> R) -> Option<R> {
        (need.len() == self.types.len()).then(|| {
            with_zeros(self.cal.resource_count(), |r| {
                r[..need.len()].copy_from_slice(need);
                f(r)
            })
        })
    }

    /// The vertex's own units and job count in `planned`, a span's amounts.
    pub(super) fn own_amounts(&self, planned: &[i64]) -> (i64, i64) {
        (planned[self.units()], planned[self.jobs()])
    }

    /// Whether the aggregate has a record (a span carrying its part).
    pub fn has_records(&self) -> bool {
        self.recorded > 0
    }
}

impl Inner {
    /// Its aggregate, if it tracks any type.
    #[inline]
    pub fn aggregate(&self) -> Option<&Aggregate> {
        (!self.agg.types.is_empty()).then_some(&self.agg)
    }
}

/// Runs `f` on `len` zeros, on the stack for the usual few types (this runs for every inner
/// vertex a match takes).
#[inline]
fn with_zeros<R>(len: usize, f: impl FnOnce(&mut [i64]) -> R) -> R {
    if len <= CALENDAR_INLINE_TYPES {
        let mut inline = [0i64; CALENDAR_INLINE_TYPES];
        f(&mut inline[..len])
    } else {
        f(&mut vec![0; len])
    }
}

fn internal(e: PlannerError) -> MatchError {
    MatchError::Internal(e.to_string())
}

/// A calendar's error about the vertex's units or job count, as a planner of that one pool
/// says it.
fn as_one_pool(e: PlannerError) -> PlannerError {
    match e {
        PlannerError::InsufficientResource {
            request,
            available,
            start,
            end,
            ..
        } => PlannerError::Insufficient {
            request,
            available,
            start,
            end,
        },
        e => e,
    }
}

/// What a planner of one pool checks of a span before its window: a duration, and a
/// request in `1..=total`.
fn one_pool_request(dur: u64, request: i64, total: i64) -> Result<(), MatchError> {
    if dur == 0 {
        return Err(internal(PlannerError::ZeroDuration));
    }
    if request <= 0 || request > total {
        return Err(internal(PlannerError::InvalidRequest { request, total }));
    }
    Ok(())
}

/// Fills the aggregate's part of `r` with `needs` by rank (types not there need 0).
fn fill_needs(r: &mut [i64], ranks: &[u32], needs: &[(u32, i64)]) {
    for (x, rank) in r.iter_mut().zip(ranks) {
        *x = needs.iter().find(|e| e.0 == *rank).map_or(0, |e| e.1);
    }
}

impl SchedState {
    /// Records one job's use of inner vertex `v` as one span: a job on its count, `units`
    /// of its own when `Some` (exclusive), and `needs` (by pruning-type rank) on its
    /// aggregate when `Some` and it has one. Returns whether the aggregate refused `needs`
    /// (its part is zeros then; the rest is kept).
    pub(crate) fn hold_inner(
        &mut self,
        v: VertexId,
        (at, dur): (i64, u64),
        units: Option<i64>,
        needs: Option<&[(u32, i64)]>,
        out: &mut Vec<SpanRef>,
    ) -> Result<bool, MatchError> {
        let i = self.inner_of[v.index()];
        debug_assert_eq!(i & LEAF_BIT, 0, "not an inner vertex");
        let c = self.wholes.of_inner[i as usize];
        let a = &mut self.inner[i as usize].agg;
        let n = a.types.len();
        // The job count is checked first, as its calendar took the first record.
        one_pool_request(dur, 1, XCHECK_TOTAL)?;
        if let Some(units) = units {
            one_pool_request(dur, units, a.size())?;
        }
        let needs = needs.filter(|_| n > 0);
        let (id, taken) = with_zeros(n + 2, |r| {
            r[n] = units.unwrap_or(0);
            r[n + 1] = 1;
            if let Some(needs) = needs {
                fill_needs(&mut r[..n], &a.ranks, needs);
                match a.cal.add_span(at, dur, r) {
                    Ok(id) => return Ok((id, true)),
                    // The aggregate's types come first: an error about one of them is
                    // its filter refusing.
                    Err(
                        PlannerError::InvalidResourceRequest { resource, .. }
                        | PlannerError::InsufficientResource { resource, .. },
                    ) if resource < n => {}
                    Err(e) => return Err(as_one_pool(e)),
                }
                r[..n].fill(0);
            }
            a.cal
                .add_span(at, dur, r)
                .map(|id| (id, false))
                .map_err(as_one_pool)
        })
        .map_err(internal)?;
        a.recorded += u32::from(taken);
        a.units_held += u32::from(units.is_some());
        out.push(SpanRef::Inner(i, id, taken));
        // Counted as its parts, which it may be split into.
        let parts = 1 + i32::from(units.is_some()) + i32::from(taken);
        self.count_record(c, parts);
        Ok(needs.is_some() && !taken)
    }

    /// Records on inner vertex `i` `jobs` on its job count (when more than 0), then
    /// `units` of its own (when `Some`), each a part of its own.
    pub(super) fn record_parts(
        &mut self,
        i: u32,
        at: i64,
        dur: u64,
        units: Option<i64>,
        jobs: i64,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let c = self.wholes.of_inner[i as usize];
        if jobs > 0 {
            let a = &mut self.inner[i as usize].agg;
            let col = a.jobs();
            let id = one_pool_part(&mut a.cal, col, (at, dur), jobs)?;
            out.push(SpanRef::Xcheck(i, id));
            self.count_record(c, 1);
        }
        if let Some(units) = units {
            *self.jobless_units |= jobs <= 0;
            let a = &mut self.inner[i as usize].agg;
            let col = a.units();
            let id = one_pool_part(&mut a.cal, col, (at, dur), units)?;
            out.push(SpanRef::Plan(i, id));
            a.units_held += 1;
            self.count_record(c, 1);
        }
        Ok(())
    }

    /// Adds an aggregate part at inner vertex `i` (which has an aggregate) taking `needs`.
    pub(super) fn record_aggregate(
        &mut self,
        i: u32,
        at: i64,
        dur: u64,
        needs: &[(u32, i64)],
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let a = &mut self.inner[i as usize].agg;
        let n = a.types.len();
        let id = with_zeros(n + 2, |r| {
            fill_needs(&mut r[..n], &a.ranks, needs);
            a.cal.add_span(at, dur, r)
        })
        .map_err(internal)?;
        a.recorded += 1;
        out.push(SpanRef::Agg(i, id));
        self.count_record(self.wholes.of_inner[i as usize], 1);
        Ok(())
    }

    /// Replaces the aggregate record `s` by one of `amounts` (by the aggregate's types) over
    /// the same window.
    pub fn replace_aggregate(
        &mut self,
        s: SpanRef,
        amounts: &[i64],
    ) -> Result<SpanRef, MatchError> {
        let SpanRef::Agg(i, id) = s else {
            return Err(MatchError::Internal("not an aggregate record".into()));
        };
        if self.inner[i as usize].aggregate().is_none() {
            return Err(MatchError::Internal(format!(
                "inner vertex {i} has no aggregate"
            )));
        }
        let a = &mut self.inner[i as usize].agg;
        let n = a.types.len();
        let (start, duration) = {
            let span = a
                .cal
                .span(id)
                .ok_or_else(|| MatchError::Internal("unknown aggregate record".into()))?;
            (span.start, span.duration)
        };
        a.cal.rem_span_keep(id).map_err(internal)?;
        a.recorded -= 1;
        if amounts.len() != n {
            return Err(internal(PlannerError::RequestLength {
                expected: n,
                actual: amounts.len(),
            }));
        }
        let new = add_part(&mut a.cal, start, duration, 0..n, amounts).map_err(internal)?;
        a.recorded += 1;
        Ok(SpanRef::Agg(i, new))
    }

    /// Takes an inner vertex's record (a whole one or a part) out of its calendar; how many
    /// parts it counted for.
    pub(super) fn remove_inner(&mut self, s: SpanRef) -> Result<i32, MatchError> {
        let (i, id) = match s {
            SpanRef::Inner(i, id, _)
            | SpanRef::Plan(i, id)
            | SpanRef::Xcheck(i, id)
            | SpanRef::Agg(i, id) => (i, id),
            _ => {
                return Err(MatchError::Internal(format!(
                    "{s:?} is not an inner record"
                )));
            }
        };
        if matches!(s, SpanRef::Agg(..)) && self.inner[i as usize].aggregate().is_none() {
            return Err(MatchError::Internal(format!(
                "inner vertex {i} has no aggregate"
            )));
        }
        let a = &mut self.inner[i as usize].agg;
        let (parts, units) = match s {
            SpanRef::Inner(_, _, taken) => {
                let span = a
                    .cal
                    .span(id)
                    .ok_or(PlannerError::UnknownSpan(id))
                    .map_err(internal)?;
                let (units, jobs) = a.own_amounts(span.planned);
                let units = units > 0;
                let parts = i32::from(jobs > 0) + i32::from(units);
                (parts + i32::from(taken), units)
            }
            SpanRef::Plan(..) => (1, true),
            _ => (1, false),
        };
        a.cal.rem_span_keep(id).map_err(internal)?;
        a.units_held -= u32::from(units);
        if matches!(s, SpanRef::Agg(..) | SpanRef::Inner(_, _, true)) {
            a.recorded -= 1;
        }
        Ok(parts)
    }

    /// Splits inner vertex `i`'s record `id` (`taken`: with an aggregate part) into its
    /// parts, pushed to `out` as [`SchedState::record_parts`] and
    /// [`SchedState::record_aggregate`] make them: the calendar says the same, in records
    /// that can go separately. Counts stay: the record counted for its parts.
    pub(super) fn split_inner(
        &mut self,
        i: u32,
        id: SpanId,
        taken: bool,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let a = &mut self.inner[i as usize].agg;
        let (n, units, jobs) = (a.types.len(), a.units(), a.jobs());
        let (start, dur, planned) = {
            let span = a
                .cal
                .span(id)
                .ok_or(PlannerError::UnknownSpan(id))
                .map_err(internal)?;
            (span.start, span.duration, span.planned.to_vec())
        };
        a.cal.rem_span_keep(id).map_err(internal)?;
        let mut part = |cols: Range<usize>| {
            add_part(&mut a.cal, start, dur, cols.clone(), &planned[cols]).map_err(internal)
        };
        if planned[jobs] > 0 {
            out.push(SpanRef::Xcheck(i, part(jobs..jobs + 1)?));
        }
        if planned[units] > 0 {
            out.push(SpanRef::Plan(i, part(units..units + 1)?));
        }
        if taken {
            out.push(SpanRef::Agg(i, part(0..n)?));
        }
        Ok(())
    }
}

/// Adds a span of `cal` with `amount` at type `col` alone, checked as a planner of that one
/// pool checks it (its errors as that planner says them).
fn one_pool_part(
    cal: &mut MultiPlanner,
    col: usize,
    (at, dur): (i64, u64),
    amount: i64,
) -> Result<SpanId, MatchError> {
    one_pool_request(dur, amount, cal.totals()[col])?;
    add_part(cal, at, dur, col..col + 1, &[amount])
        .map_err(as_one_pool)
        .map_err(internal)
}

/// Adds a span of `cal` with `amounts` at types `cols` and nothing at the others.
fn add_part(
    cal: &mut MultiPlanner,
    start: i64,
    dur: u64,
    cols: Range<usize>,
    amounts: &[i64],
) -> Result<SpanId, PlannerError> {
    with_zeros(cal.resource_count(), |r| {
        r[cols].copy_from_slice(amounts);
        cal.add_span(start, dur, r)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
