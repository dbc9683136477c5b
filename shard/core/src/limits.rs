//! Every bound of the shard's core, with its unit in its name.
//!
//! The wire's own bounds (frame size, ids per cancel, rows per list) live in
//! [`shardsched_wire::limits`]; the driver's (queues, intervals, timeouts) in
//! `shardsched_shard::limits`, which re-exports these.

use std::time::Duration;

/// Finished jobs (completed, failed, cancelled) kept in the job table so that `jobs -a` and
/// `job info` can show them; the oldest finished job is forgotten first (with its
/// idempotency key). Live jobs are never evicted.
pub const FINISHED_JOBS_RETAINED: usize = 10_000;

/// Live (pending or running) jobs one shard holds at most; a submit beyond it is refused
/// as `Unavailable`.
pub const ACTIVE_JOBS_MAX: usize = 1_000_000;

/// Events recorded per job; later ones are dropped (a job's life has about seven).
pub const EVENTS_PER_JOB_MAX: usize = 32;

/// Pending jobs, in queue order, whose "why pending" reason is refreshed after a scheduling
/// pass (jobs further back keep theirs until they come near the head).
pub const REASON_REFRESH_MAX: usize = 256;

/// Scheduling passes one tick runs at most while passes keep starting jobs (each looks at
/// up to the queue depth of pending jobs); see `ShardCore::tick`.
pub const SCHEDULE_PASSES_MAX: usize = 1024;

/// How long a finished job is kept after it ended (in memory and in the journal) unless
/// `--retention` says otherwise, ms: one hour.
pub const RETENTION_DEFAULT_MS: u64 = 3_600_000;

/// How far an incoming node's hold is pushed, ms, when its donor's expected free time has
/// passed and the `Acquire` has not come yet: reservations on it move this much later at a
/// time (short, so a job waiting for it starts soon after the hand-over).
pub const INCOMING_HOLD_EXTEND_MS: u64 = 2_000;

/// How often a shard seals the fair-share usage it counted into a batch for its status
/// report (docs/POLICIES.md, "Fair-share"), ms: a batch per interval, not a message per
/// job. A batch also seals at once when it names
/// [`FAIRSHARE_USERS_MAX`](shardsched_wire::limits::FAIRSHARE_USERS_MAX) users.
pub const USAGE_BATCH_INTERVAL_MS: u64 = 2000;

/// Least time between two status reports to the coordinator (but an allowance asked for
/// or returned is reported at once: [`ReportClock`](crate::core::ReportClock)).
pub const STATUS_INTERVAL_MIN: Duration = Duration::from_millis(250);

/// Most time between two status reports (a heartbeat when nothing changed).
pub const STATUS_INTERVAL_MAX: Duration = Duration::from_secs(5);

/// Most time between two status reports while pending jobs wait on jobs of other queues
/// (the report asks about them: docs/POLICIES.md): the latency of a dependency across
/// queues.
pub const DEPENDENCY_ASK_INTERVAL: Duration = Duration::from_secs(1);

/// The window over which a shard counts what it admitted under a user's per-user limit,
/// ms: the allowance it asks for ahead of need is what it admitted in the last full
/// window or in this one, whichever is more (docs/POLICIES.md, "Limits"), so a user
/// submitting steadily is admitted without waiting for a grant, and a user who stopped
/// gives the headroom back within two windows.
pub const ALLOWANCE_AHEAD_WINDOW_MS: u64 = 1_000;
