//! Errors of the shard's driver: what stops the process (credentials, the endpoint, the
//! coordinator, the journal), and the core's own errors ([`ShardError`]) inside them.

use std::path::PathBuf;

pub use shardsched_shard_core::ShardError;

/// The driver could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A credential file is missing or unreadable.
    #[error("credentials in {}: {source}", .dir.display())]
    Credentials {
        /// The state directory.
        dir: PathBuf,
        /// What went wrong.
        #[source]
        source: shardsched_proto::TlsError,
    },
    /// The certificate is not a shard certificate for this queue.
    #[error("{0}")]
    Identity(String),
    /// The QUIC endpoint could not be set up.
    #[error(transparent)]
    Wire(#[from] shardsched_proto::Error),
    /// The coordinator could not be reached (or refused us) for too long.
    #[error("coordinator at {addr} unreachable for {secs} s: {last}")]
    CoordinatorLost {
        /// Its address.
        addr: std::net::SocketAddr,
        /// How long we tried.
        secs: u64,
        /// The last failure.
        last: String,
    },
    /// The coordinator refused to register us; retrying would not help.
    #[error("coordinator refused registration: {0}")]
    Refused(String),
    /// The assignment could not be turned into a running core.
    #[error(transparent)]
    Core(#[from] ShardError),
    /// The journal could not be opened, read or written (the error names the file).
    #[error(transparent)]
    Journal(#[from] shardsched_journal::JournalError),
    /// The task that owns the core stopped on its own (a bug: it panicked).
    #[error("the scheduling task stopped: {0}")]
    CoreStopped(String),
    /// The async runtime could not be started.
    #[error("runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The coordinator changed the queue's configuration (`Reconfigure`): the shard stopped
    /// cleanly to be started again at once (exit status [`RESTART_EXIT_STATUS`]), and then
    /// registers, gets the new configuration and restores its jobs from its journal.
    #[error("the queue's configuration changed; restarting to apply it")]
    Restart,
}

impl DriverError {
    /// Whether the shard stopped because its journal cannot be taken back: the file or a
    /// record is damaged, or a record does not restore. Restarting would fail the same way
    /// (exit with [`UNREADABLE_EXIT_STATUS`](shardsched_journal::UNREADABLE_EXIT_STATUS)).
    pub fn journal_unreadable(&self) -> bool {
        match self {
            DriverError::Journal(e) => e.is_unreadable(),
            DriverError::Core(ShardError::Restore(_)) => true,
            _ => false,
        }
    }
}

/// The exit status of `shardsched shard` after [`DriverError::Restart`]: its supervisor
/// (`up`, or a service manager) starts it again at once, without counting a failure.
/// 75 is `EX_TEMPFAIL` of sysexits.h.
pub const RESTART_EXIT_STATUS: u8 = 75;
