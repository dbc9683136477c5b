//! [`Planner`]: availability of one pool of identical units over time.

use std::iter::FusedIterator;

use crate::calendar::{Calendar, Points};
use crate::window::Window;
use crate::{PlannerError, Span, SpanId};

/// Availability of one pool of `total` identical units over the integer time
/// window `[base_time, base_time + horizon)`.
///
/// A planner that never had a span holds no heap memory. Once it had one, it
/// keeps its (possibly empty) calendar: a vertex that is held and freed over
/// and over (a node taken by one whole-node job after another) would otherwise
/// allocate and free it every time. See the [crate documentation](crate) for
/// the model.
#[derive(Debug, Clone)]
pub struct Planner {
    window: Window,
    total: i64,
    /// `None` until the first span; afterwards kept, even when empty.
    cal: Option<Box<Calendar>>,
    /// Serial given to the next span; survives the calendar being dropped so
    /// that stale ids stay stale.
    serial: u32,
}

impl Planner {
    /// A planner for `total` units over `[base_time, base_time + horizon)`.
    ///
    /// Never fails: a negative `total` is taken as `0`, and a `horizon` that
    /// would run past `i64::MAX` is shortened to end there ([`horizon`]
    /// reports the value in force).
    ///
    /// [`horizon`]: Planner::horizon
    #[must_use]
    pub fn new(base_time: i64, horizon: u64, total: i64) -> Planner {
        Planner {
            window: Window::new(base_time, horizon),
            total: total.max(0),
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

    /// Size of the pool.
    #[must_use]
    pub fn total(&self) -> i64 {
        self.total
    }

    /// Changes the size of the pool. Fails if `new_total` is negative or below
    /// the number of units planned at the busiest time.
    pub fn set_total(&mut self, new_total: i64) -> Result<(), PlannerError> {
        if new_total < 0 {
            return Err(PlannerError::NegativeTotal { total: new_total });
        }
        let peak = self.points().peak(0);
        if new_total < peak {
            return Err(PlannerError::TotalBelowPeak { new_total, peak });
        }
        self.total = new_total;
        Ok(())
    }

    /// Highest number of units planned at any time (0 when idle).
    #[must_use]
    pub fn peak(&self) -> i64 {
        self.points().peak(0)
    }

    /// Reserves `request` units during `[start, start + duration)`.
    ///
    /// Fails, leaving the planner unchanged, if `duration` is 0, `request` is
    /// not in `1..=total`, the end overflows `i64`, the span leaves the
    /// window, or fewer than `request` units are free at some time of it.
    pub fn add_span(
        &mut self,
        start: i64,
        duration: u64,
        request: i64,
    ) -> Result<SpanId, PlannerError> {
        if duration == 0 {
            return Err(PlannerError::ZeroDuration);
        }
        if request <= 0 || request > self.total {
            return Err(PlannerError::InvalidRequest {
                request,
                total: self.total,
            });
        }
        let end = self.window.span_end(start, duration)?;
        let available = self.total - self.points().max_used(start, end, 0);
        if available < request {
            return Err(PlannerError::Insufficient {
                request,
                available,
                start,
                end,
            });
        }
        let cal = self.cal.get_or_insert_with(|| Box::new(Calendar::new(1)));
        let id = cal.insert(start, duration, end, &[request], self.serial)?;
        self.serial = self.serial.wrapping_add(1);
        Ok(id)
    }

    /// Removes a span, giving its units back. Once the last span is removed
    /// the planner is equal to a fresh one (it keeps its empty calendar's
    /// memory for the next span).
    pub fn rem_span(&mut self, id: SpanId) -> Result<(), PlannerError> {
        let cal = self.cal.as_mut().ok_or(PlannerError::UnknownSpan(id))?;
        cal.remove(id)?;
        Ok(())
    }

    /// The span with this id, if it exists.
    #[must_use]
    pub fn span(&self, id: SpanId) -> Option<Span> {
        let (start, duration, planned) = self.cal.as_ref()?.get(id)?;
        Some(Span {
            start,
            duration,
            planned: planned.first().copied().unwrap_or(0),
        })
    }

    /// Number of spans.
    #[must_use]
    pub fn span_count(&self) -> usize {
        self.cal.as_ref().map_or(0, |c| c.live())
    }

    /// All spans with their ids, in no particular order.
    pub fn spans(&self) -> impl Iterator<Item = (SpanId, Span)> + '_ {
        self.cal.iter().flat_map(|c| {
            c.spans().map(|(id, (start, duration, planned))| {
                (
                    id,
                    Span {
                        start,
                        duration,
                        planned: planned.first().copied().unwrap_or(0),
                    },
                )
            })
        })
    }

    /// Number of change points (times at which availability changes).
    #[must_use]
    pub fn point_count(&self) -> usize {
        self.points().len()
    }

    /// Units free at time `t`; `0` outside the window.
    #[must_use]
    pub fn avail_at(&self, t: i64) -> i64 {
        if !self.window.contains(t) {
            return 0;
        }
        self.total - self.points().used_at(t, 0)
    }

    /// Fewest units free at any time of `[at, at + duration)`; `0` if that
    /// window is empty (`duration == 0`) or not inside the planner's window.
    #[must_use]
    pub fn avail_during(&self, at: i64, duration: u64) -> i64 {
        match self.window.query_end(at, duration) {
            Some(end) => self.total - self.points().max_used(at, end, 0),
            None => 0,
        }
    }

    /// Whether `request` units are free during all of `[at, at + duration)`.
    /// `false` if the window is empty or leaves the planner's window, or if
    /// `request` is negative. A request of 0 fits any valid window.
    #[must_use]
    pub fn fits_during(&self, at: i64, duration: u64, request: i64) -> bool {
        match self.window.query_end(at, duration) {
            Some(end) if self.valid_request(request) => {
                self.points().fits(at, end, &[self.total], &[request])
            }
            _ => false,
        }
    }

    /// Earliest `t >= at` such that `fits_during(t, duration, request)`,
    /// i.e. `request` units are free during `[t, t + duration)` and that
    /// window ends within the horizon. `None` if there is no such time,
    /// `duration` is 0, or `request` is not in `0..=total`.
    #[must_use]
    pub fn avail_time_first(&self, at: i64, duration: u64, request: i64) -> Option<i64> {
        if duration == 0 || !self.valid_request(request) {
            return None;
        }
        self.points().search(
            at.max(self.window.base),
            duration,
            self.window.end(),
            &[self.total],
            &[request],
        )
    }

    /// Every candidate start time at which `request` units fit for
    /// `duration`, in strictly increasing order.
    ///
    /// The candidates are `max(at, base_time)` and every change point after
    /// it (every time at which availability changes, i.e. a span starts or
    /// ends); the iterator yields those candidates `t` for which
    /// [`fits_during`](Planner::fits_during)`(t, duration, request)` holds.
    /// Its first item is [`avail_time_first`](Planner::avail_time_first), and
    /// each later item is the next fitting change point, as Fluxion's
    /// `planner_avail_time_first` / `planner_avail_time_next` walk does.
    /// Times strictly between change points are not yielded: if one of them
    /// fits then so does the change point (or `at`) that begins its segment.
    /// Yields nothing when `duration` is 0 or `request` is not in
    /// `0..=total`.
    pub fn avail_times(&self, at: i64, duration: u64, request: i64) -> AvailTimes<'_> {
        let from = (duration > 0 && self.valid_request(request)).then(|| at.max(self.window.base));
        AvailTimes {
            points: self.points(),
            end: self.window.end(),
            duration,
            total: [self.total],
            request: [request],
            from,
        }
    }

    /// Whether `request` is a valid query amount: in `0..=total`.
    fn valid_request(&self, request: i64) -> bool {
        (0..=self.total).contains(&request)
    }

    fn points(&self) -> Points<'_> {
        self.cal.as_ref().map_or(Points::empty(1), |c| c.view())
    }
}

impl PartialEq for Planner {
    /// Logical equality: same window, total, change points and spans (with
    /// the same ids). The serial counter for future ids and a kept empty
    /// calendar are not compared, so a planner whose spans were all removed
    /// equals a fresh one.
    fn eq(&self, other: &Self) -> bool {
        let calendars_equal = match (&self.cal, &other.cal) {
            (Some(a), Some(b)) => a == b,
            // An empty calendar has no change points (they are canonical).
            (Some(c), None) | (None, Some(c)) => c.live() == 0,
            (None, None) => true,
        };
        self.window == other.window && self.total == other.total && calendars_equal
    }
}

impl Eq for Planner {}

/// Iterator returned by [`Planner::avail_times`].
#[derive(Debug, Clone)]
pub struct AvailTimes<'a> {
    points: Points<'a>,
    end: i64,
    duration: u64,
    total: [i64; 1],
    request: [i64; 1],
    /// Next candidate to try from; `None` once exhausted.
    from: Option<i64>,
}

impl Iterator for AvailTimes<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        let from = self.from.take()?;
        let t = self
            .points
            .search(from, self.duration, self.end, &self.total, &self.request)?;
        self.from = self.points.next_time_after(t);
        Some(t)
    }
}

impl FusedIterator for AvailTimes<'_> {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
