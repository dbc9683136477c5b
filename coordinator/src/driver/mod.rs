//! The coordinator's async driver: one QUIC endpoint, a task per connection, and ONE task
//! that owns the pure [`Core`] and the journal — quinn's endpoint driver, raft-rs's
//! `RawNode` loop.
//!
//! ```text
//! Coordinator::bind(config, options)   state dir: CA, own certificate, the journal (opened,
//!                                      verified, the start's changes committed), then the
//!                                      endpoint, then <state-dir>/address
//! Coordinator::run(shutdown)           the core task, and the accept loop, until `shutdown`
//!                                      resolves (SIGTERM or Ctrl-C with [`shutdown_signal`]);
//!                                      then close every connection and remove the address file
//!
//! connection tasks ──Event──► core task (owns Core + journal + each shard's link)
//!   shard / client requests        loop {
//!   connections up and down          wait for an event, or the moves' next wakeup
//!   move answers, continuations      handle it and every event already queued (a batch)
//!                                    core.moves_tick(now)
//!                                    journal what the batch changed (fsync)
//!                                    publish the routing table, then answer and send
//!                                  }
//! ```
//!
//! Each connection is served by role, read from its certificate: shards' `shard_coord`
//! requests and users' and admins' `client_coord` requests become `Event`s, each matched
//! once, in the core task, to a core call (`dispatch`). proto's `serve` checks each
//! request's [`Op`](shardsched_proto::Op) against the peer's role first, so admin-only
//! operations never reach the core from a user. The routing table, republished after
//! every batch that moved the core's epoch, is the one thing read without the core task.
//!
//! Nothing waits on the network inside the core task: a request that needs a shard's
//! answer (a job list, a dry run, a removal's idle check, a liveness probe) or a file
//! (reload) hands that to a small task, which comes back with an event. Commands to a
//! shard that change its state leave through that shard's `link`, one at a time, in the
//! order the core decided them.
//!
//! A journal write that fails stops the coordinator (`run` returns the error), and a panic
//! in the core task unwinds out of `run`: either way the process exits non-zero, its
//! supervisor restarts it, and the restart replays the journal, which holds everything
//! that was ever acknowledged.

mod connections;
mod core_task;
mod deps;
mod dispatch;
mod event;
mod files;
mod followups;
mod history;
mod link;
mod telemetry;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use shardsched_proto::msg::RouteTable;
use shardsched_proto::{CloseCode, TlsError, tls};
use shardsched_telemetry::{CoordinatorMetrics, StatusSource};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::core::{Core, CoreError};
use crate::history::{HistoryError, HistoryStore};
use crate::journal::{CoordJournal, CoordJournalError, Origin};
use core_task::CoreTask;
use event::Event;

pub use crate::journal::{JOURNAL_FILE, LEGACY_STATE_FILE};
pub use files::{ADDRESS_FILE, CERT_STEM};

/// Most connections (shards, users, admins) served at once; one more is refused at the
/// door. Requests in flight per connection are bounded by QUIC flow control at
/// [`STREAMS_CONCURRENT_MAX`](shardsched_proto::limits::STREAMS_CONCURRENT_MAX).
pub const CONNECTIONS_MAX: usize = 4096;
/// Events queued for the core task; a connection waits to queue more (back-pressure).
pub const EVENTS_QUEUED_MAX: usize = 1024;
/// Most events the core task handles in one batch (one journal write).
pub const BATCH_EVENTS_MAX: usize = 256;
/// How long a shard that holds a queue has to answer a liveness probe when a second shard
/// registers for the same queue. If it does not answer, it is taken for dead (a shard that
/// restarted before its old connection timed out) and the newcomer registers.
pub const SHARD_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long each shard has to answer a `jobs` fan-out; a shard that does not is left out and
/// the list is marked truncated.
pub const FANOUT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a shard has to acknowledge a command (`SetQueueState`, a move step, …).
pub const SHARD_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shutdown waits for connections to close cleanly.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Where the coordinator listens and keeps its state.
#[derive(Clone, Debug)]
pub struct Options {
    /// UDP address to listen on (port 0: any free port; see `<state-dir>/address`).
    pub listen: SocketAddr,
    /// State directory: CA, the coordinator's certificate, journal, address file.
    pub state_dir: PathBuf,
}

/// The driver could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A file in the state directory could not be read or written.
    #[error("{}: {error}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why (in the message, so not also a `source`).
        error: std::io::Error,
    },
    /// The CA or the coordinator's certificate could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The journal could not be opened (damaged: the file is named), read or written.
    #[error(transparent)]
    Journal(#[from] CoordJournalError),
    /// The job history store could not be opened.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The core refused the configuration with the durable state.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The endpoint could not be created.
    #[error(transparent)]
    Endpoint(#[from] shardsched_proto::Error),
}

impl DriverError {
    /// Whether the coordinator could not start because its journal cannot be read back (a
    /// damaged file or record, a format this build does not read): restarting would fail
    /// the same way (exit with
    /// [`UNREADABLE_EXIT_STATUS`](shardsched_journal::UNREADABLE_EXIT_STATUS)).
    pub fn journal_unreadable(&self) -> bool {
        matches!(self, DriverError::Journal(e) if e.is_unreadable())
    }
}

/// A bound coordinator, ready to [`run`](Coordinator::run).
pub struct Coordinator {
    task: CoreTask,
    queued: mpsc::Receiver<Event>,
    routes: Arc<ArcSwap<RouteTable>>,
    endpoint: quinn::Endpoint,
    local_addr: SocketAddr,
    address_file: PathBuf,
}

impl Coordinator {
    /// Prepares the state directory (creating the CA and the coordinator's certificate on
    /// first start), opens and verifies the journal, builds the core and commits the
    /// start's changes, binds the endpoint and writes `<state-dir>/address`. Needs a tokio
    /// runtime. A damaged journal, or one this build does not read, refuses the start with
    /// the file named.
    pub fn bind(config: Config, options: &Options) -> Result<Coordinator, DriverError> {
        // Scoped failpoints (`coordinator/NAME=ACTION`) fire in this process only.
        shardsched_proto::failpoint::set_scope("coordinator");
        let dir = &options.state_dir;
        let (creds, reset_secret) = files::credentials(dir)?;
        // The journal blocks on its commit thread: open it off the async runtime.
        let (journal, core) = off_runtime(|| -> Result<_, DriverError> {
            let (mut journal, previous, origin) = CoordJournal::open(dir)?;
            if origin == Origin::Fresh {
                tracing::info!(journal = %journal.path().display(), "new coordinator journal");
            }
            let (core, durable) = Core::new(config, &previous, now_ms())?;
            journal.write_blocking(&durable.diff(&previous))?;
            Ok((journal, core))
        })?;
        shardsched_proto::failpoint::hit("coord.start.after_journal");
        let days = core.config().history_days;
        let history = history::History::new(off_runtime(|| HistoryStore::open(dir, days))?);
        let endpoint =
            tls::server_endpoint_with_reset_secret(&creds, options.listen, &reset_secret)?;
        let local_addr = endpoint.local_addr().map_err(|error| DriverError::Io {
            path: dir.join(ADDRESS_FILE),
            error,
        })?;
        let address_file = files::write_address(dir, local_addr)?;
        let routes = Arc::new(ArcSwap::from_pointee(core.routes()));
        let (events, queued) = mpsc::channel::<Event>(EVENTS_QUEUED_MAX);
        tracing::info!(
            address = %local_addr,
            state_dir = %dir.display(),
            config = %core.config().origin,
            queues = core.config().queues.len(),
            nodes = core.config().cluster.nodes.len(),
            "coordinator listening"
        );
        Ok(Coordinator {
            task: CoreTask::new(core, journal, Arc::clone(&routes), events, history),
            queued,
            routes,
            endpoint,
            local_addr,
            address_file,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The routing table as clients see it now.
    pub fn routes(&self) -> Arc<RouteTable> {
        self.routes.load_full()
    }

    /// Counts what the driver does (journal commits, move steps) into `metrics`, the
    /// registry the binary serves.
    pub fn with_metrics(mut self, metrics: CoordinatorMetrics) -> Coordinator {
        self.task.counters.metrics = metrics;
        self
    }

    /// The core's views for the status page and `/metrics`, asked of the core task like a
    /// client's request (a refusal once the coordinator has stopped).
    pub fn status_source(&self) -> Arc<dyn StatusSource> {
        Arc::new(telemetry::StatusHandle {
            events: self.task.events.clone(),
        })
    }

    /// Serves until `shutdown` resolves or the endpoint closes, then closes every connection
    /// (waiting at most [`SHUTDOWN_GRACE`]) and removes the address file. Returns the error
    /// that stopped the core task (a failed journal write); a panic in it unwinds from here.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), DriverError> {
        let Coordinator {
            task,
            queued,
            routes,
            endpoint,
            address_file,
            ..
        } = self;
        let accepting = tokio::spawn(connections::accept_loop(
            endpoint.clone(),
            task.events.clone(),
            routes,
        ));
        let outcome = tokio::select! {
            () = shutdown => Ok(()),
            ended = task.run(queued) => ended,
        };
        accepting.abort();
        tracing::info!("coordinator shutting down");
        endpoint.close(CloseCode::Done.varint(), b"coordinator shutting down");
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, endpoint.wait_idle()).await;
        match std::fs::remove_file(&address_file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return outcome.and(Err(DriverError::Io {
                    path: address_file.clone(),
                    error,
                }));
            }
        }
        outcome
    }
}

pub use shardsched_proto::shutdown_signal;

/// Runs blocking `work` on a thread outside the async runtime (the journal's blocking calls
/// must not run on a runtime thread), and waits for it.
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    // The thread logs inside the caller's span (the process's).
    let span = tracing::Span::current();
    std::thread::scope(|s| match s.spawn(move || span.in_scope(work)).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// The wall clock, ms since the Unix epoch: the one clock the core's inputs get.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(1)
}
