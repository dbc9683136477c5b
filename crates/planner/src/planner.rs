//! [`Planner`]: availability of one pool of identical units over time.

use crate::planned::{AvailTimes, PlannerOf};
use crate::{PlannerError, Span, SpanId};

/// Availability of one pool of `total` identical units over the integer time
/// window `[base_time, base_time + horizon)`.
///
/// A planner that never had a span holds no heap memory. Once it had one, it
/// keeps its (possibly empty) calendar: a vertex that is held and freed over
/// and over (a node taken by one whole-node job after another) would otherwise
/// allocate and free it every time. See the [crate documentation](crate) for
/// the model; the window's accessors and equality are [`PlannerOf`]'s.
pub type Planner = PlannerOf<[i64; 1]>;

impl Planner {
    /// A planner for `total` units over `[base_time, base_time + horizon)`.
    ///
    /// Never fails: a negative `total` is taken as `0`, and a `horizon` that
    /// would run past `i64::MAX` is shortened to end there ([`horizon`]
    /// reports the value in force).
    ///
    /// [`horizon`]: PlannerOf::horizon
    #[must_use]
    pub fn new(base_time: i64, horizon: u64, total: i64) -> Planner {
        PlannerOf::with_totals(base_time, horizon, [total.max(0)])
    }

    /// Size of the pool.
    #[must_use]
    pub fn total(&self) -> i64 {
        self.totals[0]
    }

    /// Changes the size of the pool. Fails if `new_total` is negative or below
    /// the number of units planned at the busiest time.
    pub fn set_total(&mut self, new_total: i64) -> Result<(), PlannerError> {
        self.set_total_of(0, new_total)
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
        let total = self.total();
        if request <= 0 || request > total {
            return Err(PlannerError::InvalidRequest { request, total });
        }
        let end = self.window.span_end(start, duration)?;
        let available = total - self.points().max_used(start, end, 0);
        if available < request {
            return Err(PlannerError::Insufficient {
                request,
                available,
                start,
                end,
            });
        }
        self.insert(start, duration, end, &[request])
    }

    /// Removes a span, giving its units back. Once the last span is removed
    /// the planner is equal to a fresh one (it keeps its empty calendar's
    /// memory for the next span).
    pub fn rem_span(&mut self, id: SpanId) -> Result<(), PlannerError> {
        self.remove(id, true)
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

    /// Units free at time `t`; `0` outside the window.
    #[must_use]
    pub fn avail_at(&self, t: i64) -> i64 {
        self.free_at(t, 0)
    }

    /// Fewest units free at any time of `[at, at + duration)`; `0` if that
    /// window is empty (`duration == 0`) or not inside the planner's window.
    #[must_use]
    pub fn avail_during(&self, at: i64, duration: u64) -> i64 {
        self.free_during(at, duration, 0)
    }

    /// Whether `request` units are free during all of `[at, at + duration)`.
    /// `false` if the window is empty or leaves the planner's window, or if
    /// `request` is negative. A request of 0 fits any valid window.
    #[must_use]
    pub fn fits_during(&self, at: i64, duration: u64, request: i64) -> bool {
        self.fit(at, duration, &[request])
    }

    /// Earliest `t >= at` such that `fits_during(t, duration, request)`,
    /// i.e. `request` units are free during `[t, t + duration)` and that
    /// window ends within the horizon. `None` if there is no such time,
    /// `duration` is 0, or `request` is not in `0..=total`.
    #[must_use]
    pub fn avail_time_first(&self, at: i64, duration: u64, request: i64) -> Option<i64> {
        self.first_fit(at, duration, &[request])
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
        self.fit_times(at, duration, [request])
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
