//! The time window `[base, base + horizon)` shared by both planner kinds.

use crate::PlannerError;

/// A planner's time window. The horizon is clamped at construction so that
/// `base + horizon` never overflows `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) base: i64,
    pub(crate) horizon: u64,
}

impl Window {
    pub(crate) fn new(base: i64, horizon: u64) -> Self {
        // `base <= i64::MAX`, so this is exactly `i64::MAX - base`.
        let max = i64::MAX.abs_diff(base);
        Window {
            base,
            horizon: horizon.min(max),
        }
    }

    /// End of the window (exclusive).
    pub(crate) fn end(&self) -> i64 {
        // Exact: the horizon was clamped in `new`.
        self.base.saturating_add_unsigned(self.horizon)
    }

    pub(crate) fn contains(&self, t: i64) -> bool {
        self.base <= t && t < self.end()
    }

    /// End of a span to be added, or why it cannot be added.
    pub(crate) fn span_end(&self, start: i64, duration: u64) -> Result<i64, PlannerError> {
        let end = start
            .checked_add_unsigned(duration)
            .ok_or(PlannerError::TimeOverflow { start, duration })?;
        if start < self.base || end > self.end() {
            return Err(PlannerError::OutOfHorizon {
                start,
                end,
                base_time: self.base,
                horizon_end: self.end(),
            });
        }
        Ok(end)
    }

    /// End of a query window if it is non-empty and inside the planner's.
    pub(crate) fn query_end(&self, at: i64, duration: u64) -> Option<i64> {
        let end = at.checked_add_unsigned(duration)?;
        (duration > 0 && at >= self.base && end <= self.end()).then_some(end)
    }
}
