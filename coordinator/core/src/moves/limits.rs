//! Every bound of the move machine, with its unit in its name.

/// Most nodes one move may name (a whole 16K-node cluster in one move is allowed).
pub const MOVE_NODES_MAX: usize = 16_384;

/// Most unfinished moves at once; a further move is refused as busy.
pub const MOVES_ACTIVE_MAX: usize = 1024;

/// Finished moves kept for `queue moves`; the oldest is forgotten first.
pub const MOVES_FINISHED_RETAINED: usize = 256;

/// Most nodes one command carries; a larger step is split into several commands, so no
/// command comes near the wire's frame limit.
pub const NODES_PER_COMMAND_MAX: usize = 4096;

/// Least time between two re-sends of a move's unacknowledged commands, ms.
pub const RESEND_INTERVAL_MS: u64 = 2_000;

/// Journal records handed out and not yet reported durable; past it, inputs that would
/// need a record are refused (admin) or ignored until re-sent (shard reports).
pub const JOURNAL_PENDING_MAX: usize = 65_536;

/// Commands waiting for the driver; past it, further commands are dropped: every command
/// is derived again from the machine's state at the next re-send.
pub const TRANSMIT_PENDING_MAX: usize = 65_536;

/// Anomalies (a shard claiming a generation newer than the coordinator's) kept for the
/// view and the logs; the oldest is dropped first.
pub const ANOMALIES_RETAINED: usize = 64;

/// Most node rows in one `queue moves` answer (about 100 bytes each on the wire, so well
/// inside a frame); moves past it are left out and the answer says it was truncated.
pub const MOVE_VIEW_NODE_ROWS_MAX: usize = 65_536;
