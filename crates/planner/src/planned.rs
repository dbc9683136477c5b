//! [`PlannerOf`]: what a [`Planner`](crate::Planner) (one pool) and a
//! [`MultiPlanner`](crate::MultiPlanner) (several typed pools) are made of, and the part of
//! their behaviour that does not depend on how many pools there are: the window, the
//! calendar of spans, the checks of a query and the walk of fitting start times. Each
//! kind's own methods (its spans' shape, one amount or one per type) are in its module.

use std::iter::FusedIterator;

use crate::calendar::{Calendar, Points};
use crate::window::Window;
use crate::{PlannerError, SpanId};

/// Availability of pools (resource types `0..k`) over the integer time window
/// `[base_time, base_time + horizon)`; one span reserves an amount of each type for the
/// same interval. `T` holds the pools' totals: `[i64; 1]` inline for a
/// [`Planner`](crate::Planner), a `SmallVec` (inline up to four types) for a
/// [`MultiPlanner`](crate::MultiPlanner).
#[derive(Debug, Clone)]
pub struct PlannerOf<T> {
    pub(crate) window: Window,
    pub(crate) totals: T,
    /// `None` while no span exists; a [`Planner`](crate::Planner) keeps it once it had
    /// one, even when empty.
    pub(crate) cal: Option<Box<Calendar>>,
    /// Serial given to the next span; survives the calendar being dropped so that stale
    /// ids stay stale.
    pub(crate) serial: u32,
}

impl<T: AsRef<[i64]> + AsMut<[i64]>> PlannerOf<T> {
    /// A planner with no span over `[base_time, base_time + horizon)`, the horizon clamped
    /// so that the window ends at `i64::MAX` at the latest.
    pub(crate) fn with_totals(base_time: i64, horizon: u64, totals: T) -> Self {
        PlannerOf {
            window: Window::new(base_time, horizon),
            totals,
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

    /// End of the window (exclusive): `base_time + horizon`.
    #[must_use]
    pub fn horizon_end(&self) -> i64 {
        self.window.end()
    }

    /// Whether `[at, at + duration)` is a window queries answer about: not empty, and inside
    /// the planner's (elsewhere they answer 0 free, whatever is planned).
    #[must_use]
    pub fn window_holds(&self, at: i64, duration: u64) -> bool {
        self.window.query_end(at, duration).is_some()
    }

    /// Number of spans.
    #[must_use]
    pub fn span_count(&self) -> usize {
        self.cal.as_ref().map_or(0, |c| c.live())
    }

    /// Number of change points (times at which some type's use changes).
    #[must_use]
    pub fn point_count(&self) -> usize {
        self.points().len()
    }

    /// Changes the pool size of type `resource`; fails if the type does not exist, the
    /// total is negative, or it is below that type's peak use.
    pub(crate) fn set_total_of(
        &mut self,
        resource: usize,
        new_total: i64,
    ) -> Result<(), PlannerError> {
        let count = self.totals.as_ref().len();
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
        self.totals.as_mut()[resource] = new_total;
        Ok(())
    }

    /// Records a span already checked to fit (`end` from the window's `span_end`), making
    /// the calendar on the first one.
    pub(crate) fn insert(
        &mut self,
        start: i64,
        duration: u64,
        end: i64,
        planned: &[i64],
    ) -> Result<SpanId, PlannerError> {
        let k = self.totals.as_ref().len();
        let cal = self.cal.get_or_insert_with(|| Box::new(Calendar::new(k)));
        let id = cal.insert(start, duration, end, planned, self.serial)?;
        self.serial = self.serial.wrapping_add(1);
        Ok(id)
    }

    /// Removes span `id`; the calendar is dropped once empty unless `keep_empty`.
    pub(crate) fn remove(&mut self, id: SpanId, keep_empty: bool) -> Result<(), PlannerError> {
        let cal = self.cal.as_mut().ok_or(PlannerError::UnknownSpan(id))?;
        cal.remove(id)?;
        if !keep_empty && cal.live() == 0 {
            self.cal = None;
        }
        Ok(())
    }

    /// Units of type `resource` free at time `t`; `0` outside the window or for a type
    /// that does not exist.
    pub(crate) fn free_at(&self, t: i64, resource: usize) -> i64 {
        match self.totals.as_ref().get(resource) {
            Some(total) if self.window.contains(t) => total - self.points().used_at(t, resource),
            _ => 0,
        }
    }

    /// Fewest units of type `resource` free at any time of `[at, at + duration)`; `0` if
    /// the type does not exist or the window is empty or not inside the planner's.
    pub(crate) fn free_during(&self, at: i64, duration: u64, resource: usize) -> i64 {
        match (
            self.totals.as_ref().get(resource),
            self.window.query_end(at, duration),
        ) {
            (Some(total), Some(end)) => total - self.points().max_used(at, end, resource),
            _ => 0,
        }
    }

    /// Whether `requests` (one per type) are free during all of `[at, at + duration)`.
    pub(crate) fn fit(&self, at: i64, duration: u64, requests: &[i64]) -> bool {
        match self.window.query_end(at, duration) {
            Some(end) if self.valid(requests) => {
                self.points().fits(at, end, self.totals.as_ref(), requests)
            }
            _ => false,
        }
    }

    /// Earliest `t >= at` at which `requests` fit for `duration`.
    pub(crate) fn first_fit(&self, at: i64, duration: u64, requests: &[i64]) -> Option<i64> {
        if duration == 0 || !self.valid(requests) {
            return None;
        }
        self.points().search(
            at.max(self.window.base),
            duration,
            self.window.end(),
            self.totals.as_ref(),
            requests,
        )
    }

    /// The fitting start times of `requests` for `duration` from `at` on; `requests` is
    /// the iterator's own copy.
    pub(crate) fn fit_times<R: AsRef<[i64]>>(
        &self,
        at: i64,
        duration: u64,
        requests: R,
    ) -> AvailTimes<'_, R> {
        let valid = duration > 0 && self.valid(requests.as_ref());
        AvailTimes {
            points: self.points(),
            totals: self.totals.as_ref(),
            end: self.window.end(),
            duration,
            requests,
            from: valid.then(|| at.max(self.window.base)),
        }
    }

    /// Whether `requests` is a valid query: one entry per type, each in `0..=total`.
    pub(crate) fn valid(&self, requests: &[i64]) -> bool {
        let totals = self.totals.as_ref();
        requests.len() == totals.len()
            && requests
                .iter()
                .zip(totals)
                .all(|(r, &total)| (0..=total).contains(r))
    }

    pub(crate) fn points(&self) -> Points<'_> {
        self.cal
            .as_ref()
            .map_or(Points::empty(self.totals.as_ref().len()), |c| c.view())
    }
}

impl<T: PartialEq> PartialEq for PlannerOf<T> {
    /// Logical equality: same window, totals, change points and spans (with the same ids).
    /// The serial counter for future ids and a kept empty calendar are not compared, so a
    /// planner whose spans were all removed equals a fresh one.
    fn eq(&self, other: &Self) -> bool {
        let calendars_equal = match (&self.cal, &other.cal) {
            (Some(a), Some(b)) => a == b,
            // An empty calendar has no change points (they are canonical).
            (Some(c), None) | (None, Some(c)) => c.live() == 0,
            (None, None) => true,
        };
        self.window == other.window && self.totals == other.totals && calendars_equal
    }
}

impl<T: Eq> Eq for PlannerOf<T> {}

/// Iterator returned by [`Planner::avail_times`](crate::Planner::avail_times) (`R`: the
/// one request) and [`MultiPlanner::avail_times`](crate::MultiPlanner::avail_times)
/// (`R`: one request per type).
#[derive(Debug, Clone)]
pub struct AvailTimes<'a, R = [i64; 1]> {
    points: Points<'a>,
    totals: &'a [i64],
    end: i64,
    duration: u64,
    requests: R,
    /// Next candidate to try from; `None` once exhausted.
    from: Option<i64>,
}

impl<R: AsRef<[i64]>> Iterator for AvailTimes<'_, R> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        let from = self.from.take()?;
        let t = self.points.search(
            from,
            self.duration,
            self.end,
            self.totals,
            self.requests.as_ref(),
        )?;
        self.from = self.points.next_time_after(t);
        Some(t)
    }
}

impl<R: AsRef<[i64]>> FusedIterator for AvailTimes<'_, R> {}
