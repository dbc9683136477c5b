//! Resource availability over integer time, for scheduling and backfill.
//!
//! This crate plays the role of Fluxion's `planner` and `planner_multi`: the
//! matcher keeps one [`Planner`] per resource-graph vertex (how many units of
//! that vertex are free when) and one [`MultiPlanner`] per vertex for its
//! prune aggregates (how many cores, GPUs, ... are free below it when). It is
//! a pure library: no I/O, no clock, no randomness, and no panics on any
//! input.
//!
//! # Model
//!
//! A planner covers the time window `[base_time, base_time + horizon)` and a
//! pool of `total` units (one pool per resource type for a
//! [`MultiPlanner`]). A *span* reserves some units during `[start, start +
//! duration)`; spans are all-or-nothing and must fit in the window and in the
//! free units at every time they cover.
//!
//! Usage is kept as a sorted list of *change points* `(time, used)`: from a
//! point's time up to the next point's time exactly `used` units are planned,
//! and before the first point nothing is. The list is canonical: a point
//! exists only where usage changes, so adding and then removing spans (in any
//! order) gives back exactly the representation of a fresh planner, and the
//! two compare equal. Lookups are binary searches over that list; spans live
//! in a small slab addressed by [`SpanId`]. A planner that never had a span
//! holds no heap memory; one that had keeps its calendar for the next.
//!
//! Queries answer "how many units are free at / during" and "when is the
//! earliest time at or after `at` that `request` units are free for
//! `duration`" ([`Planner::avail_time_first`]); [`Planner::avail_times`] walks
//! all fitting candidate start times, like Fluxion's `avail_time_next`.
//!
//! # Example
//!
//! ```
//! use shardsched_planner::{Planner, PlannerError};
//!
//! // 16 cores, schedulable over [0, 1000).
//! let mut cores = Planner::new(0, 1000, 16);
//! let running = cores.add_span(0, 100, 12)?;
//! assert_eq!(cores.avail_at(50), 4);
//! assert_eq!(cores.avail_during(50, 100), 4);
//!
//! // A job that wants 8 cores for 30 time units can start at 100 at the
//! // earliest: that is where it would be reserved (backfill).
//! assert_eq!(cores.avail_time_first(0, 30, 8), Some(100));
//! let reserved = cores.add_span(100, 30, 8)?;
//!
//! // Asking for more than is free is an error and changes nothing.
//! assert!(matches!(
//!     cores.add_span(90, 20, 8),
//!     Err(PlannerError::Insufficient { available: 4, .. })
//! ));
//!
//! // Cancelling everything restores the calendar exactly.
//! cores.rem_span(reserved)?;
//! cores.rem_span(running)?;
//! assert_eq!(cores, Planner::new(0, 1000, 16));
//! # Ok::<(), PlannerError>(())
//! ```

mod calendar;
mod error;
mod lists;
mod multi;
mod planned;
mod planner;
mod pools;
mod window;

pub use error::PlannerError;
pub use lists::HoldLists;
pub use multi::{INLINE_TOTALS, MultiAvailTimes, MultiPlanner, MultiSpan};
pub use planned::{AvailTimes, PlannerOf};
pub use planner::Planner;
pub use pools::{HoldId, PeakUse, Pools};

/// Identifies a span within the planner that created it.
///
/// Ids are not reused while their span exists, and an id whose span was
/// removed is rejected afterwards even if its slot is reused (up to 2^32
/// spans later in the same planner). Ids are only meaningful to the planner
/// that returned them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(u64);

impl SpanId {
    pub(crate) fn new(slot: u32, serial: u32) -> SpanId {
        SpanId(u64::from(serial) << 32 | u64::from(slot))
    }

    /// Slab slot (low 32 bits).
    pub(crate) fn slot(self) -> u32 {
        // Truncation intended: the low half is the slot.
        self.0 as u32
    }

    /// Serial that tells apart successive spans of one slot (high 32 bits).
    pub(crate) fn serial(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The id as a plain integer, e.g. for storing it elsewhere.
    #[must_use]
    pub fn to_raw(self) -> u64 {
        self.0
    }

    /// Rebuilds an id from [`to_raw`](SpanId::to_raw). An integer that was
    /// never an id of a planner simply names no span there.
    #[must_use]
    pub fn from_raw(raw: u64) -> SpanId {
        SpanId(raw)
    }
}

impl std::fmt::Display for SpanId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A span of a [`Planner`]: `planned` units during `[start, start + duration)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    /// First time of the span.
    pub start: i64,
    /// Length of the span (at least 1).
    pub duration: u64,
    /// Units reserved.
    pub planned: i64,
}

impl Span {
    /// End of the span (exclusive): `start + duration`.
    #[must_use]
    pub fn end(&self) -> i64 {
        // Spans lie inside a window whose end fits in i64.
        self.start.saturating_add_unsigned(self.duration)
    }

    /// Last time unit of the span: `start + duration - 1`.
    #[must_use]
    pub fn last(&self) -> i64 {
        self.end() - 1
    }
}
