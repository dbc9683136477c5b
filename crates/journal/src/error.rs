//! The journal's one error type: every error names the journal file, and — for a record that
//! fails its checksum or does not decode — the table and key.

use std::path::{Path, PathBuf};

/// A journal operation failed. `path` is the journal file; `kind` says what went wrong.
/// Cloneable so that one failed group commit can answer every waiter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("journal {}: {kind}", path.display())]
pub struct JournalError {
    /// The journal file.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong, without the file (see [`JournalError`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// redb could not open the file (bad header, truncated, locked by another process, …).
    #[error("cannot open: {0}")]
    Open(String),
    /// A read or write failed inside redb (I/O, corrupted page).
    #[error("{op}: {message}")]
    Storage {
        /// What the journal was doing.
        op: &'static str,
        /// redb's message.
        message: String,
    },
    /// A record's checksum does not match its table, key and value.
    #[error("table {table}, key {key}: checksum mismatch (the record is corrupted)")]
    Checksum {
        /// The table (or `meta` for a named value).
        table: String,
        /// The key, as text.
        key: String,
    },
    /// A stored record is too short to hold its checksum.
    #[error("table {table}, key {key}: record of {bytes} bytes is truncated")]
    Truncated {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
        /// Its length.
        bytes: usize,
    },
    /// The journal's own state record is missing, corrupted, or disagrees with the records
    /// found.
    #[error("journal state: {0}")]
    State(String),
    /// A caller's record did not decode (reported by the caller through
    /// [`JournalError::decode`]).
    #[error("table {table}, key {key}: cannot decode: {message}")]
    Decode {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
        /// The decoder's message.
        message: String,
    },
    /// A table or meta name the journal does not accept.
    #[error("bad name {name:?}: {why}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        why: &'static str,
    },
    /// A value larger than [`VALUE_BYTES_MAX`](crate::limits::VALUE_BYTES_MAX).
    #[error("table {table}, key {key}: value of {bytes} bytes is over the limit")]
    TooLarge {
        /// The table.
        table: String,
        /// The key, as text.
        key: String,
        /// Its length.
        bytes: usize,
    },
    /// redb panicked on this file (a corruption it does not report as an error).
    #[error("the storage engine panicked reading it (corrupted file?): {0}")]
    Panicked(String),
    /// The commit thread has stopped (the journal was closed, or an earlier commit failed:
    /// after a failed commit nothing more is written).
    #[error("the commit thread has stopped: {0}")]
    Stopped(String),
    /// The journal's format stamp is missing (records written before format v1), of another
    /// kind of process, newer than this build reads, or unreadable
    /// ([`format::check`](crate::format::check)).
    #[error("{0}")]
    Format(String),
    /// The commit queue is full (only from `try_submit`).
    #[error("the commit queue is full")]
    Full,
}

impl JournalError {
    /// An error about `path`.
    pub fn new(path: &Path, kind: ErrorKind) -> JournalError {
        JournalError {
            path: path.to_owned(),
            kind,
        }
    }

    /// A record of `table`/`key` in the journal at `path` that the caller could not decode.
    pub fn decode(path: &Path, table: &str, key: u64, message: impl ToString) -> JournalError {
        JournalError::new(
            path,
            ErrorKind::Decode {
                table: table.to_owned(),
                key: key.to_string(),
                message: message.to_string(),
            },
        )
    }

    /// Whether the journal's content could not be read back (the file does not open, a
    /// record is corrupted or does not decode, the state record disagrees): a restart would
    /// fail the same way, unlike a failed write ([`ErrorKind::Storage`], a stopped
    /// committer). See [`UNREADABLE_EXIT_STATUS`](crate::UNREADABLE_EXIT_STATUS).
    pub fn is_unreadable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Open(_)
                | ErrorKind::Checksum { .. }
                | ErrorKind::Truncated { .. }
                | ErrorKind::State(_)
                | ErrorKind::Decode { .. }
                | ErrorKind::Format(_)
                | ErrorKind::Panicked(_)
        )
    }

    /// The named value `name` (the meta table) in the journal at `path` that the caller
    /// could not decode: the error names the value as its key.
    pub fn decode_meta(path: &Path, name: &str, message: impl ToString) -> JournalError {
        JournalError::new(
            path,
            ErrorKind::Decode {
                table: "meta".to_owned(),
                key: name.to_owned(),
                message: message.to_string(),
            },
        )
    }

    pub(crate) fn storage(
        path: &Path,
        op: &'static str,
        e: impl std::fmt::Display,
    ) -> JournalError {
        JournalError::new(
            path,
            ErrorKind::Storage {
                op,
                message: e.to_string(),
            },
        )
    }
}
