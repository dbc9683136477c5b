//! Error type shared by [`Planner`](crate::Planner) and
//! [`MultiPlanner`](crate::MultiPlanner).

use crate::SpanId;

/// Everything that can go wrong when changing a planner.
///
/// Queries never fail: they answer `0`, `false` or `None` for requests that
/// cannot be satisfied. Only the mutating calls (`add_span`, `rem_span`,
/// `set_total`) return this error, and a failed call leaves the planner
/// unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlannerError {
    /// A span must last at least one time unit.
    #[error("span duration must be at least 1, got 0")]
    ZeroDuration,

    /// A single-pool request must lie in `1..=total`.
    #[error("request of {request} units is invalid: it must be between 1 and the total {total}")]
    InvalidRequest {
        /// Units asked for.
        request: i64,
        /// Size of the pool.
        total: i64,
    },

    /// A multi-pool request for one resource type must lie in `0..=total`.
    #[error(
        "request of {request} units of resource type {resource} is invalid: \
         it must be between 0 and the total {total}"
    )]
    InvalidResourceRequest {
        /// Index of the resource type.
        resource: usize,
        /// Units asked for.
        request: i64,
        /// Size of that type's pool.
        total: i64,
    },

    /// A multi-pool request must name exactly one amount per resource type.
    #[error("request names {actual} resource types but the planner has {expected}")]
    RequestLength {
        /// Number of resource types of the planner.
        expected: usize,
        /// Length of the request slice given.
        actual: usize,
    },

    /// `start + duration` does not fit in an `i64`.
    #[error("span end overflows: start {start} + duration {duration} exceeds i64::MAX")]
    TimeOverflow {
        /// Requested start.
        start: i64,
        /// Requested duration.
        duration: u64,
    },

    /// The span does not lie inside the planner's window.
    #[error("span [{start}, {end}) lies outside the planner window [{base_time}, {horizon_end})")]
    OutOfHorizon {
        /// Requested start.
        start: i64,
        /// Requested end (exclusive).
        end: i64,
        /// First time of the window.
        base_time: i64,
        /// End of the window (exclusive).
        horizon_end: i64,
    },

    /// Not enough units are free during the whole span.
    #[error(
        "only {available} of the {request} requested units are available during [{start}, {end})"
    )]
    Insufficient {
        /// Units asked for.
        request: i64,
        /// Minimum number of free units during the span.
        available: i64,
        /// Requested start.
        start: i64,
        /// Requested end (exclusive).
        end: i64,
    },

    /// Not enough units of one resource type are free during the whole span.
    #[error(
        "only {available} of the {request} requested units of resource type {resource} \
         are available during [{start}, {end})"
    )]
    InsufficientResource {
        /// Index of the resource type.
        resource: usize,
        /// Units asked for.
        request: i64,
        /// Minimum number of free units during the span.
        available: i64,
        /// Requested start.
        start: i64,
        /// Requested end (exclusive).
        end: i64,
    },

    /// The span id does not name a span currently in this planner.
    #[error("unknown span id {0}")]
    UnknownSpan(SpanId),

    /// A total must not be negative.
    #[error("total of {total} units is invalid: it must not be negative")]
    NegativeTotal {
        /// The total asked for.
        total: i64,
    },

    /// A total cannot shrink below what is already planned at some time.
    #[error("cannot set total to {new_total}: {peak} units are already planned at the peak")]
    TotalBelowPeak {
        /// The total asked for.
        new_total: i64,
        /// Highest number of units in use at any time.
        peak: i64,
    },

    /// The resource type index is not below the number of types.
    #[error("resource type {resource} does not exist: the planner has {count} types")]
    UnknownResource {
        /// Index given.
        resource: usize,
        /// Number of resource types.
        count: usize,
    },

    /// The span table is full (more than `u32::MAX - 1` live spans).
    #[error("too many live spans in one planner")]
    TooManySpans,
}
