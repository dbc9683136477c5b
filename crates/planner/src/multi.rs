//! [`MultiPlanner`]: several typed pools whose spans are planned together.

use std::iter::FusedIterator;

use crate::calendar::{Calendar, Points};
use crate::window::Window;
use crate::{PlannerError, SpanId};

/// Availability of `k` pools (resource types `0..k`) over the integer time
/// window `[base_time, base_time + horizon)`, where one span reserves an
/// amount of each type for the same interval.
///
/// This is what a resource-graph vertex keeps for its prune aggregates (for
/// example "free cores and GPUs below this vertex"). The caller maps type
/// names to indices. All types share one list of change points and one span
/// table; an idle planner holds only its totals on the heap.
#[derive(Debug, Clone)]
pub struct MultiPlanner {
    window: Window,
    totals: Box<[i64]>,
    /// `None` while no span exists.
    cal: Option<Box<Calendar>>,
    /// Serial given to the next span (see [`Planner`](crate::Planner)).
    serial: u32,
}

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
        MultiPlanner {
            window: Window::new(base_time, horizon),
            totals: totals.iter().map(|&t| t.max(0)).collect(),
            cal: None,
            serial: 0,
        }
    }

    /// First time of the window.
    #[must_use]
    pub fn base_time(&self) -> i64 {
        self.window.base
    }

    /// Length of the window.
    #[must_use]
    pub fn horizon(&self) -> u64 {
        self.window.horizon
    }

    /// End of the window (exclusive).
    #[must_use]
    pub fn horizon_end(&self) -> i64 {
        self.window.end()
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
        let count = self.totals.len();
        if resource >= count {
            return Err(PlannerError::UnknownResource { resource, count });
        }
        if new_total < 0 {
            return Err(PlannerError::NegativeTotal { total: new_total });
        }
        let peak = self.points().peak(resource);
        if new_total < peak {
            return Err(PlannerError::TotalBelowPeak { new_total, peak });
        }
        self.totals[resource] = new_total;
        Ok(())
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
        for (resource, (&request, &total)) in requests.iter().zip(self.totals.iter()).enumerate() {
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
        let k = self.totals.len();
        let cal = self.cal.get_or_insert_with(|| Box::new(Calendar::new(k)));
        let id = cal.insert(start, duration, end, requests, self.serial)?;
        self.serial = self.serial.wrapping_add(1);
        Ok(id)
    }

    /// Removes a span, giving its units back. Once the last span is removed
    /// the planner is equal to a fresh one.
    pub fn rem_span(&mut self, id: SpanId) -> Result<(), PlannerError> {
        let cal = self.cal.as_mut().ok_or(PlannerError::UnknownSpan(id))?;
        cal.remove(id)?;
        if cal.live() == 0 {
            self.cal = None;
        }
        Ok(())
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

    /// Number of spans.
    #[must_use]
    pub fn span_count(&self) -> usize {
        self.cal.as_ref().map_or(0, |c| c.live())
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

    /// Number of change points (times at which some type's use changes).
    #[must_use]
    pub fn point_count(&self) -> usize {
        self.points().len()
    }

    /// Units of type `resource` free at time `t`; `0` outside the window or
    /// for a type that does not exist.
    #[must_use]
    pub fn avail_at(&self, t: i64, resource: usize) -> i64 {
        match self.totals.get(resource) {
            Some(total) if self.window.contains(t) => total - self.points().used_at(t, resource),
            _ => 0,
        }
    }

    /// Fewest units of type `resource` free at any time of
    /// `[at, at + duration)`; `0` if the type does not exist or the window is
    /// empty or not inside the planner's.
    #[must_use]
    pub fn avail_during(&self, at: i64, duration: u64, resource: usize) -> i64 {
        match (
            self.totals.get(resource),
            self.window.query_end(at, duration),
        ) {
            (Some(total), Some(end)) => total - self.points().max_used(at, end, resource),
            _ => 0,
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
        match self.window.query_end(at, duration) {
            Some(end) if self.valid_requests(requests) => {
                self.points().fits(at, end, &self.totals, requests)
            }
            _ => false,
        }
    }

    /// Earliest `t >= at` with `fits_during(t, duration, requests)`. `None`
    /// if there is none, `duration` is 0, or `requests` is malformed (wrong
    /// length, or an entry not in `0..=total`).
    #[must_use]
    pub fn avail_time_first(&self, at: i64, duration: u64, requests: &[i64]) -> Option<i64> {
        if duration == 0 || !self.valid_requests(requests) {
            return None;
        }
        self.points().search(
            at.max(self.window.base),
            duration,
            self.window.end(),
            &self.totals,
            requests,
        )
    }

    /// Candidate start times at which `requests` fit for `duration`, in
    /// strictly increasing order: `max(at, base_time)` and every later change
    /// point, filtered by [`fits_during`](MultiPlanner::fits_during). Same
    /// contract as [`Planner::avail_times`](crate::Planner::avail_times).
    /// The iterator keeps its own copy of `requests`.
    pub fn avail_times(&self, at: i64, duration: u64, requests: &[i64]) -> MultiAvailTimes<'_> {
        let valid = duration > 0 && self.valid_requests(requests);
        MultiAvailTimes {
            points: self.points(),
            totals: &self.totals,
            end: self.window.end(),
            duration,
            requests: if valid { requests.to_vec() } else { Vec::new() },
            from: valid.then(|| at.max(self.window.base)),
        }
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

    /// Whether `requests` is a valid query: one entry per type, each in
    /// `0..=total`.
    fn valid_requests(&self, requests: &[i64]) -> bool {
        requests.len() == self.totals.len()
            && requests
                .iter()
                .zip(self.totals.iter())
                .all(|(r, &total)| (0..=total).contains(r))
    }

    fn points(&self) -> Points<'_> {
        self.cal
            .as_ref()
            .map_or(Points::empty(self.totals.len()), |c| c.view())
    }
}

impl PartialEq for MultiPlanner {
    /// Logical equality, as for [`Planner`](crate::Planner).
    fn eq(&self, other: &Self) -> bool {
        self.window == other.window && self.totals == other.totals && self.cal == other.cal
    }
}

impl Eq for MultiPlanner {}

/// Iterator returned by [`MultiPlanner::avail_times`].
#[derive(Debug, Clone)]
pub struct MultiAvailTimes<'a> {
    points: Points<'a>,
    totals: &'a [i64],
    end: i64,
    duration: u64,
    requests: Vec<i64>,
    from: Option<i64>,
}

impl Iterator for MultiAvailTimes<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        let from = self.from.take()?;
        let t = self
            .points
            .search(from, self.duration, self.end, self.totals, &self.requests)?;
        self.from = self.points.next_time_after(t);
        Some(t)
    }
}

impl FusedIterator for MultiAvailTimes<'_> {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
