//! Every bound of the journal, with its unit in its name.

/// Submissions (batches) waiting for the commit thread at once; submitters wait (async) or
/// are refused (`try_submit`) when it is full.
pub const JOURNAL_QUEUE_CAPACITY: usize = 4096;

/// Writes one group commit takes at most: the commit thread stops taking queued batches
/// once it holds this many writes (a single larger batch still commits whole, alone).
pub const GROUP_COMMIT_MAX: usize = 65_536;

/// Bytes of one record's value at most (the payload, before the checksum).
pub const VALUE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Bytes of a table or meta name at most.
pub const NAME_BYTES_MAX: usize = 64;

/// Bytes of page cache redb may keep in memory for one journal.
pub const CACHE_BYTES: usize = 64 * 1024 * 1024;
