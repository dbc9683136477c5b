//! Every bound of the shard, with its unit in its name or its type.
//!
//! The wire's own bounds (frame size, ids per cancel, rows per list) live in
//! [`shardsched_proto::limits`]; these are the shard's.

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

/// Priority of a job submitted without one (Flux's default urgency).
pub const PRIORITY_DEFAULT: u32 = 16;

/// Requests waiting for the core task at once (client submits and cancels, coordinator
/// commands); senders wait when it is full.
pub const COMMAND_QUEUE_CAPACITY: usize = 8192;

/// Most requests the core task takes into one batch before it runs its scheduling pass.
pub const BATCH_REQUESTS_MAX: usize = 4096;

/// Least time between two status reports to the coordinator.
pub const STATUS_INTERVAL_MIN: Duration = Duration::from_millis(250);

/// Most time between two status reports (a heartbeat when nothing changed).
pub const STATUS_INTERVAL_MAX: Duration = Duration::from_secs(5);

/// First wait before reconnecting to the coordinator; doubled after each failure.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// Longest wait between two connection attempts.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// How long the shard keeps trying to reach the coordinator (at start, or after losing
/// it) before it gives up and shuts down.
pub const COORDINATOR_LOST_AFTER: Duration = Duration::from_secs(30);

/// How long shutdown waits for the QUIC endpoint to say goodbye to its peers.
pub const SHUTDOWN_LINGER: Duration = Duration::from_millis(500);

/// After a `Reconfigure`, how long the shard lets its acknowledgement leave before it
/// closes the coordinator's connection to restart. The coordinator does not depend on the
/// acknowledgement (the new configuration comes with the next registration), so this only
/// spares it a "connection lost" in its log.
pub const RESTART_ACK_LINGER: Duration = Duration::from_millis(50);

/// How long a finished job is kept after it ended (in memory and in the journal) unless
/// `--retention` says otherwise, ms: one hour.
pub const RETENTION_DEFAULT_MS: u64 = 3_600_000;

/// Batches whose journal commit is in flight at once in the core task (each waits for its
/// commit before its snapshot is published and its answers sent); the core task waits when
/// this many are pending.
pub const COMMITS_IN_FLIGHT_MAX: usize = 64;

/// The `exec` executor: how long a job's process group has between SIGTERM and SIGKILL
/// (at its time limit, on cancel, when its node goes down, and for processes it left
/// behind). `shardsched shard --kill-grace` overrides it.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// The `exec` executor: how often the shard looks at the status files of its running jobs
/// (the files are the ground truth, so that supervisors started by an earlier shard process
/// report the same way).
pub const EXEC_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The `exec` executor: how often a supervisor looks for a cancel file (the shard also
/// signals it; the file covers a signal lost to a shard crash).
pub const SUPERVISOR_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// The `exec` executor: launch and kill requests waiting for the exec task at once; the
/// core task waits when it is full.
pub const EXEC_QUEUE_CAPACITY: usize = 4096;

/// How far an incoming node's hold is pushed, ms, when its donor's expected free time has
/// passed and the `Acquire` has not come yet: reservations on it move this much later at a
/// time (short, so a job waiting for it starts soon after the hand-over).
pub const INCOMING_HOLD_EXTEND_MS: u64 = 2_000;

/// `Released` reports waiting to be acknowledged by the coordinator, at most (more are
/// dropped: the coordinator re-asks the donor about every outgoing node anyway).
pub const RELEASED_PENDING_MAX: usize = 4096;

/// How often unacknowledged `Released` reports are sent again.
pub const RELEASED_RESEND_INTERVAL: Duration = Duration::from_secs(1);
