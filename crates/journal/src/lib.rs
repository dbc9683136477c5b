//! shardsched's durable journal: what a process acknowledges is on disk first.
//!
//! A [`Journal`] is one redb file of named tables (keys `u64`, values bytes) and named
//! values (the meta table). Every value carries a CRC-32 of its table, key and bytes, and a
//! state record — rewritten in every transaction — counts the records and numbers the
//! transactions. [`Journal::open`] reads everything back and checks it: a file that redb
//! cannot open, a record that fails its checksum, or a count that does not match makes the
//! open fail with an error naming the file (and the table and key); a panic inside redb on a
//! corrupted file is caught and reported the same way. So a journal either opens with every
//! acknowledged record intact, or does not open.
//!
//! # The loop a reader must understand
//!
//! ```text
//!   process start:  Journal::open(path)  → verify → scan(table) … rebuild in memory
//!                   Committer::start(journal)
//!   each batch:     ticket = committer.submit(batch).await   (bounded queue)
//!                   … ticket.wait().await                     (durable: fsync done)
//!                   only now answer the requests the batch stands for
//! ```
//!
//! The [`Committer`] thread takes every queued batch (up to [`limits::GROUP_COMMIT_MAX`]
//! writes) into ONE transaction: many submitters, one fsync (group commit). Its
//! [`CommitStats`] carry a histogram of commit latencies for benchmarks.
//!
//! Retention is the caller's decision: it deletes what it no longer needs
//! ([`Batch::delete`], or [`Batch::delete_below`] for keys that grow with time). redb reuses
//! the freed pages, so a steady churn of inserts and deletes keeps the file's size bounded.
//!
//! ```
//! use shardsched_journal::{Batch, Committer, Journal};
//! let dir = tempfile::tempdir().unwrap();
//! let journal = Journal::open(dir.path().join("journal.redb")).unwrap();
//! let committer = Committer::start(journal.clone()).unwrap();
//! let mut batch = Batch::new();
//! batch.put("jobs", 1, b"first".to_vec()).put_meta("last_id", 1u64.to_le_bytes());
//! committer.submit_blocking(batch).unwrap().wait_blocking().unwrap();
//! assert_eq!(journal.scan("jobs").unwrap(), vec![(1, b"first".to_vec())]);
//! drop((committer, journal));
//! let again = Journal::open(dir.path().join("journal.redb")).unwrap();   // verified
//! assert_eq!(again.meta("last_id").unwrap(), Some(1u64.to_le_bytes().to_vec()));
//! ```

pub mod batch;
pub mod committer;
pub mod error;
pub mod format;
pub mod limits;
pub mod store;

pub use batch::{Batch, Write};
pub use committer::{CommitStats, CommitTicket, Committer};
pub use error::{ErrorKind, JournalError};
pub use shardsched_histogram::{LatencyHistogram, quantile_of_buckets};
pub use store::{CommitInfo, Journal, JournalState};

/// The exit status of a process that cannot read its journal back (a damaged file, a record
/// that does not decode or cannot be restored): restarting it would fail the same way, so
/// its supervisor (`shardsched up`) does not, and says so; an admin must look at the file
/// the error names. 65 is `EX_DATAERR` of sysexits.h.
pub const UNREADABLE_EXIT_STATUS: u8 = 65;
