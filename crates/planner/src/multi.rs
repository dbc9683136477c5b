//! [`MultiPlanner`]: several typed pools whose spans are planned together.

use smallvec::SmallVec;

use crate::planned::{AvailTimes, PlannerOf};
use crate::{PlannerError, SpanId};

/// Availability of `k` pools (resource types `0..k`) over the integer time
/// window `[base_time, base_time + horizon)`, where one span reserves an
/// amount of each type for the same interval.
///
/// This is what a resource-graph vertex keeps for its prune aggregates (for
/// example "free cores and GPUs below this vertex"). The caller maps type
/// names to indices. All types share one list of change points and one span
/// table; an idle planner holds nothing on the heap for up to [`INLINE_TOTALS`] types (its
/// calendar is dropped with its last span). The window's accessors and equality are
/// [`PlannerOf`]'s.
pub type MultiPlanner = PlannerOf<SmallVec<[i64; INLINE_TOTALS]>>;

/// Types whose totals a [`MultiPlanner`] keeps inline: as many as its calendar keeps inline
/// (an inner vertex's under the default filters has three or four). Why: a box of totals
/// each was one allocation per inner vertex at start (3,089 of the 6,544 blocks `query`
/// allocates on the 1,024-node bench graph).
pub const INLINE_TOTALS: usize = crate::calendar::INLINE_TYPES;

/// [`Planner::avail_times`](crate::Planner::avail_times)' iterator for several types:
/// returned by [`MultiPlanner::avail_times`], with its own copy of the requests.
pub type MultiAvailTimes<'a> = AvailTimes<'a, Vec<i64>>;

/// A span of a [`MultiPlanner`], borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiSpan<'a> {
    /// First time of the span.
    pub start: i64,
    /// Length of the span (at least 1).
    pub duration: u64,
    /// Units reserved of each resource type.
    pub planned: &'a [i64],
}

impl MultiSpan<'_> {
    /// End of the span (exclusive): `start + duration`.
    #[must_use]
    pub fn end(&self) -> i64 {
        // Spans lie inside a window whose end fits in i64.
        self.start.saturating_add_unsigned(self.duration)
    }
}

impl MultiPlanner {
    /// A planner with one pool per entry of `totals` over
    /// `[base_time, base_time + horizon)`. Negative totals are taken as `0`
    /// and the horizon is clamped as in [`Planner::new`](crate::Planner::new).
    #[must_use]
    pub fn new(base_time: i64, horizon: u64, totals: &[i64]) -> MultiPlanner {
        let totals = totals.iter().map(|&t| t.max(0)).collect();
        PlannerOf::with_totals(base_time, horizon, totals)
    }

    /// Pool size of every resource type.
    #[must_use]
    pub fn totals(&self) -> &[i64] {
        &self.totals
    }

    /// Number of resource types.
    #[must_use]
    pub fn resource_count(&self) -> usize {
        self.totals.len()
    }

    /// Changes the pool size of one type; fails if the type does not exist,
    /// the total is negative, or it is below that type's peak use.
    pub fn set_total(&mut self, resource: usize, new_total: i64) -> Result<(), PlannerError> {
        self.set_total_of(resource, new_total)
    }

    /// Reserves `requests[i]` units of each type `i` during
    /// `[start, start + duration)`. A request of 0 leaves that type alone.
    ///
    /// All or nothing: fails, leaving the planner unchanged, if `requests`
    /// does not have one entry per type, `duration` is 0, some request is not
    /// in `0..=total`, the end overflows `i64`, the span leaves the window,
    /// or some type lacks free units at some time of the span.
    pub fn add_span(
        &mut self,
        start: i64,
        duration: u64,
        requests: &[i64],
    ) -> Result<SpanId, PlannerError> {
        self.check_len(requests)?;
        if duration == 0 {
            return Err(PlannerError::ZeroDuration);
        }
        for (resource, (&request, &total)) in requests.iter().zip(self.totals.iter()).enumerate() {
            if !(0..=total).contains(&request) {
                return Err(PlannerError::InvalidResourceRequest {
                    resource,
                    request,
                    total,
                });
            }
        }
        let end = self.window.span_end(start, duration)?;
        let points = self.points();
        // One pass over the span's points for every type at once; only where that finds a
        // point in the way is each type asked for looked at again, for the error.
        if !points.fits(start, end, &self.totals, requests) {
            for (resource, (&request, &total)) in
                requests.iter().zip(self.totals.iter()).enumerate()
            {
                if request == 0 {
                    continue;
                }
                let available = total - points.max_used(start, end, resource);
                if available < request {
                    return Err(PlannerError::InsufficientResource {
                        resource,
                        request,
                        available,
                        start,
                        end,
                    });
                }
            }
        }
        self.insert(start, duration, end, requests)
    }

    /// Removes a span, giving its units back. Once the last span is removed
    /// the planner is equal to a fresh one.
    pub fn rem_span(&mut self, id: SpanId) -> Result<(), PlannerError> {
        self.remove(id, false)
    }

    /// [`rem_span`](MultiPlanner::rem_span), keeping the emptied calendar's memory for the
    /// next span as a [`Planner`](crate::Planner) does: for a calendar that is held and
    /// freed over and over (a vertex's own calendar, taken by one job after another).
    pub fn rem_span_keep(&mut self, id: SpanId) -> Result<(), PlannerError> {
        self.remove(id, true)
    }

    /// The span with this id, if it exists.
    #[must_use]
    pub fn span(&self, id: SpanId) -> Option<MultiSpan<'_>> {
        let (start, duration, planned) = self.cal.as_ref()?.get(id)?;
        Some(MultiSpan {
            start,
            duration,
            planned,
        })
    }

    /// All spans with their ids, in no particular order.
    pub fn spans(&self) -> impl Iterator<Item = (SpanId, MultiSpan<'_>)> + '_ {
        self.cal.iter().flat_map(|c| {
            c.spans().map(|(id, (start, duration, planned))| {
                (
                    id,
                    MultiSpan {
                        start,
                        duration,
                        planned,
                    },
                )
            })
        })
    }

    /// Units of type `resource` free at time `t`; `0` outside the window or
    /// for a type that does not exist.
    #[must_use]
    pub fn avail_at(&self, t: i64, resource: usize) -> i64 {
        self.free_at(t, resource)
    }

    /// Fewest units of type `resource` free at any time of
    /// `[at, at + duration)`; `0` if the type does not exist or the window is
    /// empty or not inside the planner's.
    #[must_use]
    pub fn avail_during(&self, at: i64, duration: u64, resource: usize) -> i64 {
        self.free_during(at, duration, resource)
    }

    /// The units of type `resource` in use during `[at, at + duration)`, as steps into
    /// `out`: `(start, used)` in order, the first starting at `at`, each holding until the
    /// next (the last until the window's end) — what
    /// [`avail_during`](MultiPlanner::avail_during) takes the highest of. `false`, with
    /// nothing added, where `avail_during` answers 0 whatever is planned (a type that does
    /// not exist, an empty window, one not inside the planner's).
    pub fn used_steps(
        &self,
        at: i64,
        duration: u64,
        resource: usize,
        out: &mut Vec<(i64, i64)>,
    ) -> bool {
        match (
            self.totals.get(resource),
            self.window.query_end(at, duration),
        ) {
            (Some(_), Some(end)) => {
                self.points().steps(at, end, resource, out);
                true
            }
            _ => false,
        }
    }

    /// [`avail_during`](MultiPlanner::avail_during) for every type.
    #[must_use]
    pub fn avail_resources_during(&self, at: i64, duration: u64) -> Vec<i64> {
        let mut out = vec![0; self.totals.len()];
        // The length matches, so this cannot fail.
        let _ = self.avail_resources_during_into(at, duration, &mut out);
        out
    }

    /// [`avail_during`](MultiPlanner::avail_during) for every type, written
    /// into `out`, which must have one entry per type.
    pub fn avail_resources_during_into(
        &self,
        at: i64,
        duration: u64,
        out: &mut [i64],
    ) -> Result<(), PlannerError> {
        self.check_len(out)?;
        let end = self.window.query_end(at, duration);
        let points = self.points();
        for (resource, (slot, &total)) in out.iter_mut().zip(self.totals.iter()).enumerate() {
            *slot = end.map_or(0, |end| total - points.max_used(at, end, resource));
        }
        Ok(())
    }

    /// Whether `requests[i]` units of every type `i` are free during all of
    /// `[at, at + duration)`. `false` if `requests` has the wrong length or a
    /// negative entry, or the window is empty or leaves the planner's.
    #[must_use]
    pub fn fits_during(&self, at: i64, duration: u64, requests: &[i64]) -> bool {
        self.fit(at, duration, requests)
    }

    /// Earliest `t >= at` with `fits_during(t, duration, requests)`. `None`
    /// if there is none, `duration` is 0, or `requests` is malformed (wrong
    /// length, or an entry not in `0..=total`).
    #[must_use]
    pub fn avail_time_first(&self, at: i64, duration: u64, requests: &[i64]) -> Option<i64> {
        self.first_fit(at, duration, requests)
    }

    /// Candidate start times at which `requests` fit for `duration`, in
    /// strictly increasing order: `max(at, base_time)` and every later change
    /// point, filtered by [`fits_during`](MultiPlanner::fits_during). Same
    /// contract as [`Planner::avail_times`](crate::Planner::avail_times).
    /// The iterator keeps its own copy of `requests`.
    pub fn avail_times(&self, at: i64, duration: u64, requests: &[i64]) -> MultiAvailTimes<'_> {
        self.fit_times(at, duration, requests.to_vec())
    }

    fn check_len(&self, slice: &[i64]) -> Result<(), PlannerError> {
        if slice.len() == self.totals.len() {
            Ok(())
        } else {
            Err(PlannerError::RequestLength {
                expected: self.totals.len(),
                actual: slice.len(),
            })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
