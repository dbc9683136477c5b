//! Every bound of the shard's driver, with its unit in its name or its type; the core's
//! bounds ([`shardsched_shard_core::limits`]) are re-exported here.
//!
//! The wire's own bounds (frame size, ids per cancel, rows per list) live in
//! [`shardsched_proto::limits`].

use std::time::Duration;

pub use shardsched_shard_core::limits::*;

/// Requests waiting for the core task at once (client submits and cancels, coordinator
/// commands); senders wait when it is full.
pub const COMMAND_QUEUE_CAPACITY: usize = 8192;

/// Most requests the core task takes into one batch before it runs its scheduling pass.
pub const BATCH_REQUESTS_MAX: usize = 4096;

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

/// Batches whose journal commit is in flight at once in the core task (each waits for its
/// commit before its snapshot is published and its answers sent); the core task waits when
/// this many are pending.
pub const COMMITS_IN_FLIGHT_MAX: usize = 64;

/// The `exec` executor: how long a job's process group has between SIGTERM and SIGKILL
/// (at its time limit, on cancel, when its node goes down, and for processes it left
/// behind). `shardsched shard --kill-grace` overrides it.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// The `exec` executor: how often the shard looks at the status files of running jobs
/// whose supervisors are not its children (started by an earlier shard process), or that
/// left processes behind. A supervisor it started is heard from as soon as it exits.
pub const EXEC_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The `exec` executor: launch and kill requests waiting for the exec task at once; the
/// core task waits when it is full.
pub const EXEC_QUEUE_CAPACITY: usize = 4096;

/// `job output` reads waiting for the agents task at once; a client waits when it is full.
pub const OUTPUT_ASKS_QUEUED_MAX: usize = 256;

/// `Released` reports waiting to be acknowledged by the coordinator, at most (more are
/// dropped: the coordinator re-asks the donor about every outgoing node anyway).
pub const RELEASED_PENDING_MAX: usize = 4096;

/// How often unacknowledged `Released` reports are sent again.
pub const RELEASED_RESEND_INTERVAL: Duration = Duration::from_secs(1);
