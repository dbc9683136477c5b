//! The coordinator's async driver: one QUIC endpoint, a task per connection, the pure
//! [`Core`] behind a lock, and the routing table published with arc-swap.
//!
//! ```text
//! Coordinator::bind(config, options)   state dir: CA, own certificate, the journal (opened,
//!                                      verified, the start's changes committed), then the
//!                                      endpoint, then <state-dir>/address
//! Coordinator::run(shutdown)           accept loop until `shutdown` resolves (SIGTERM or
//!                                      Ctrl-C with [`shutdown_signal`]); then close every
//!                                      connection and remove the address file
//! ```
//!
//! Each connection is served by role, read from its certificate: shards get `shard_coord`
//! requests served and their session kept for `coord_shard` commands; users and admins get
//! `client_coord`. proto's `serve` checks each request's [`Op`](shardsched_proto::Op)
//! against the peer's role before a handler runs, so admin-only operations never reach the
//! core from a user. The core's lock is never held across an `.await`.

mod admin;
mod files;
mod handlers;
mod reconfig;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use shardsched_proto::msg::RouteTable;
use shardsched_proto::{CloseCode, Role, Session, TlsError, accept, tls};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Config;
use crate::core::{ConnId, Core, CoreError};
use crate::journal::{CoordJournal, CoordJournalError, Origin};

pub use crate::journal::{JOURNAL_FILE, LEGACY_STATE_FILE};
pub use files::{ADDRESS_FILE, CERT_STEM};

/// Most connections (shards, users, admins) served at once; one more is refused at the
/// door. Requests in flight per connection are bounded by QUIC flow control at
/// [`STREAMS_CONCURRENT_MAX`](shardsched_proto::limits::STREAMS_CONCURRENT_MAX).
pub const CONNECTIONS_MAX: usize = 4096;
/// How long a shard that holds a queue has to answer a liveness probe when a second shard
/// registers for the same queue. If it does not answer, it is taken for dead (a shard that
/// restarted before its old connection timed out) and the newcomer registers.
pub const SHARD_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long each shard has to answer a `jobs` fan-out; a shard that does not is left out and
/// the list is marked truncated.
pub const FANOUT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a shard has to acknowledge a command (`SetQueueState`).
pub const SHARD_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// How long shutdown waits for connections to close cleanly.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Longest sleep of the move pump when no move is in progress (it is woken by every move
/// event anyway).
pub const MOVE_PUMP_IDLE: Duration = Duration::from_secs(60);

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
        match self {
            DriverError::Journal(CoordJournalError::Journal(e)) => e.is_unreadable(),
            DriverError::Journal(
                CoordJournalError::Format { .. } | CoordJournalError::LegacyDecode { .. },
            ) => true,
            _ => false,
        }
    }
}

/// A bound coordinator, ready to [`run`](Coordinator::run).
pub struct Coordinator {
    shared: Arc<Shared>,
    endpoint: quinn::Endpoint,
    local_addr: SocketAddr,
    address_file: PathBuf,
}

/// What every connection task shares.
pub(crate) struct Shared {
    core: Mutex<Core>,
    /// Sessions of connected shards, by connection, to send them commands.
    sessions: Mutex<HashMap<ConnId, Session>>,
    /// The routing table, republished after every change of the core's epoch.
    routes: ArcSwap<RouteTable>,
    /// Serialises admin changes, so that a shard hears them in the order they were made.
    admin: tokio::sync::Mutex<()>,
    /// The journal. Its lock serialises writes, so a flush returns only once every record
    /// changed before it is on disk (a flush that finds nothing to write waited for the one
    /// that carried its records).
    journal: tokio::sync::Mutex<CoordJournal>,
    /// Wakes the move pump (new records or commands, answers).
    moves_wake: tokio::sync::Notify,
}

impl Coordinator {
    /// Prepares the state directory (creating the CA and the coordinator's certificate on
    /// first start), opens and verifies the journal (importing the old TOML state file
    /// once), builds the core and commits the start's changes, binds the endpoint and
    /// writes `<state-dir>/address`. Needs a tokio runtime. A damaged journal refuses the
    /// start with the file named.
    pub fn bind(config: Config, options: &Options) -> Result<Coordinator, DriverError> {
        // Scoped failpoints (`coordinator/NAME=ACTION`) fire in this process only.
        shardsched_proto::failpoint::set_scope("coordinator");
        let dir = &options.state_dir;
        let (creds, reset_secret) = files::credentials(dir)?;
        // The journal blocks on its commit thread: open it off the async runtime.
        let (journal, core) = off_runtime(|| -> Result<_, DriverError> {
            let (mut journal, previous, origin) = CoordJournal::open(dir)?;
            match &origin {
                Origin::Fresh => {
                    tracing::info!(journal = %journal.path().display(), "new coordinator journal")
                }
                Origin::Journal => {}
                Origin::Imported(from) => tracing::info!(
                    from = %from.display(),
                    journal = %journal.path().display(),
                    "imported the old coordinator state file into the journal"
                ),
            }
            let (core, durable) = Core::new(config, &previous, now_ms())?;
            journal.write_blocking(&durable.diff(&previous))?;
            Ok((journal, core))
        })?;
        shardsched_proto::failpoint::hit("coord.start.after_journal");
        let endpoint =
            tls::server_endpoint_with_reset_secret(&creds, options.listen, &reset_secret)?;
        let local_addr = endpoint.local_addr().map_err(|error| DriverError::Io {
            path: dir.join(ADDRESS_FILE),
            error,
        })?;
        let address_file = files::write_address(dir, local_addr)?;
        let routes = ArcSwap::from_pointee(core.routes());
        tracing::info!(
            address = %local_addr,
            state_dir = %dir.display(),
            config = %core.config().origin,
            queues = core.config().queues.len(),
            nodes = core.config().cluster.nodes.len(),
            "coordinator listening"
        );
        Ok(Coordinator {
            shared: Arc::new(Shared {
                core: Mutex::new(core),
                sessions: Mutex::new(HashMap::new()),
                routes,
                admin: tokio::sync::Mutex::new(()),
                journal: tokio::sync::Mutex::new(journal),
                moves_wake: tokio::sync::Notify::new(),
            }),
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
        self.shared.routes.load_full()
    }

    /// Serves until `shutdown` resolves or the endpoint closes, then closes every connection
    /// (waiting at most [`SHUTDOWN_GRACE`]) and removes the address file.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), DriverError> {
        let connections = Arc::new(Semaphore::new(CONNECTIONS_MAX));
        let pump = tokio::spawn(handlers::move_pump(Arc::clone(&self.shared)));
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                incoming = self.endpoint.accept() => {
                    let Some(incoming) = incoming else { break };
                    match Arc::clone(&connections).try_acquire_owned() {
                        Ok(permit) => {
                            tokio::spawn(connection(Arc::clone(&self.shared), incoming, permit));
                        }
                        Err(_) => {
                            tracing::warn!(
                                remote = %incoming.remote_address(),
                                limit = CONNECTIONS_MAX,
                                "connection refused: too many connections"
                            );
                            incoming.refuse();
                        }
                    }
                }
            }
        }
        pump.abort();
        tracing::info!("coordinator shutting down");
        self.endpoint
            .close(CloseCode::Done.varint(), b"coordinator shutting down");
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.endpoint.wait_idle()).await;
        match std::fs::remove_file(&self.address_file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(DriverError::Io {
                    path: self.address_file.clone(),
                    error,
                });
            }
        }
        Ok(())
    }
}

/// Installs a tracing subscriber writing to stderr, filtered by `RUST_LOG` (default:
/// `info`).
/// Field values are escaped ([`shardsched_proto::text::log_fields`]): names and reasons
/// come from users. For binaries; does nothing if a subscriber is already installed.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(shardsched_proto::text::log_fields())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

pub use shardsched_proto::shutdown_signal;

impl Shared {
    /// Runs `f` on the core and republishes the routing table if the epoch moved.
    fn with_core<T>(&self, f: impl FnOnce(&mut Core) -> T) -> T {
        let mut core = lock(&self.core);
        let before = core.epoch();
        let out = f(&mut core);
        if core.epoch() != before {
            self.routes.store(Arc::new(core.routes()));
        }
        out
    }

    fn session(&self, conn: ConnId) -> Option<Session> {
        lock(&self.sessions).get(&conn).cloned()
    }
}

/// Serves one connection by its peer's role.
async fn connection(shared: Arc<Shared>, incoming: quinn::Incoming, _permit: OwnedSemaphorePermit) {
    let remote = incoming.remote_address();
    let session = match accept(incoming).await {
        Ok(session) => session,
        Err(e) => {
            tracing::info!(%remote, error = %e, "connection refused");
            return;
        }
    };
    match session.peer().role {
        Role::Shard => handlers::shard_connection(shared, session).await,
        Role::User | Role::Admin => handlers::client_connection(shared, session).await,
        Role::Coordinator => {
            tracing::warn!(%remote, peer = %session.peer(), "refusing a coordinator certificate as a client");
            session.connection().close(
                CloseCode::NoIdentity.varint(),
                b"coordinators do not connect to coordinators",
            );
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Core methods do not panic on any input; should one have panicked anyway, serving the
    // state it left is better than taking every connection down with it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs blocking `work` on a thread outside the async runtime (the journal's blocking calls
/// must not run on a runtime thread), and waits for it.
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| match s.spawn(work).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(1)
}
