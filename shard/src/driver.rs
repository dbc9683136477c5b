//! The shard process: credentials from the state directory, one QUIC endpoint, registration
//! with the coordinator, the core task, and a clean shutdown.
//!
//! ```text
//! run(options, shutdown):
//!   load <state-dir>/{ca,cert,key}.pem; the certificate must be `shard <queue>`
//!   open and verify <state-dir>/journal.redb (damaged: refuse to start, naming it)
//!   listen on --listen (clients connect here)
//!   connect to the coordinator from the same endpoint; Register{queue, listen,
//!       held = the journal's owned nodes (allocated flags), last_job_id}
//!       → Assignment (cluster, queue config, generator id, owned nodes)
//!   build ShardCore with the ASSIGNED nodes up (none before): a first start, or
//!       ShardCore::restored (node move states, flags, jobs, then the assignment)
//!   open <state-dir>/transitions.log (driver/transitions.rs)
//!   start the journal's commit thread; spawn the core task, the client accept loop
//!   on the registration connection: serve coord_shard commands (moves, drain, dry run
//!       included), send Status reports and durable Released reports (driver/released.rs)
//!   until shutdown, or the coordinator is lost for COORDINATOR_LOST_AFTER:
//!       lost → reconnect with backoff, re-register (held nodes, last job id), carry on
//! ```
//!
//! The state directory holds `cert.pem`, `key.pem` (role shard, name = queue, issued by the
//! coordinator's CA: `shardsched cert issue --role shard --name Q --out DIR`), `ca.pem`,
//! and the journal `journal.redb` (docs/JOURNAL.md).

mod core_task;
mod exec_task;
mod released;
mod serve;
pub mod stats;
pub mod transitions;

pub use exec_task::{ExecOptions, Executor};

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use shardsched_journal::{Committer, Journal};
use shardsched_proto::backoff::Backoff;
use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::msg::shard_coord::{self, Assignment, Register, ShardStatus};
use shardsched_proto::msg::{QueueConfig, RefusalCode};
use shardsched_proto::state_dir::JOURNAL_FILE;
use shardsched_proto::{CloseCode, Credentials, Error, Role, Session, connect, serve, tls};
use tokio::sync::{mpsc, oneshot, watch};

use self::core_task::Command;
use crate::core::{CoreExecutor, CoreOptions, ShardCore};
use crate::error::DriverError;
use crate::journal::{self, Restored};
use crate::limits::{
    COMMAND_QUEUE_CAPACITY, COORDINATOR_LOST_AFTER, EXEC_QUEUE_CAPACITY, RECONNECT_BACKOFF_MAX,
    RECONNECT_BACKOFF_MIN, RESTART_ACK_LINGER, SHUTDOWN_LINGER,
};
use crate::snapshot::Snapshot;

/// The shard's certificate, its private key and the cluster CA's certificate, in its state
/// directory.
pub use shardsched_proto::state_dir::{CA_CERT_FILE as CA_FILE, CERT_FILE, KEY_FILE};

/// What `shardsched shard` is told on its command line.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardOptions {
    /// The queue this shard schedules (its certificate's name).
    pub queue: String,
    /// The coordinator's address.
    pub coordinator: SocketAddr,
    /// Where `cert.pem`, `key.pem` and `ca.pem` are.
    pub state_dir: PathBuf,
    /// Where to listen for clients (port 0: any free port; the real one is registered).
    pub listen: SocketAddr,
    /// The sim executor's speed-up (see [`CoreOptions::time_scale`]).
    pub time_scale: f64,
    /// How jobs run: simulated, or really (`exec`, under `<state-dir>/jobs`).
    pub executor: Executor,
    /// How long finished jobs are kept (see [`CoreOptions::retention_ms`]).
    pub retention: Duration,
}

/// Installs the tracing subscriber: `RUST_LOG`-style filter (default `info`) to stderr.
/// Field values are escaped ([`shardsched_proto::text::log_fields`]): names and reasons
/// come from users.
/// For binaries; does nothing if one is already installed.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(shardsched_proto::text::log_fields())
        .with_writer(std::io::stderr)
        // Colour only for a terminal: under `up`, stderr is a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Runs the shard on a new multi-threaded runtime until SIGTERM or Ctrl-C.
pub fn run_until_signal(options: ShardOptions) -> Result<(), DriverError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(options, shutdown_signal()))
}

pub use shardsched_proto::shutdown_signal;

/// Runs the shard until `shutdown` resolves (`Ok`) or the coordinator is lost for good
/// (`Err`). See the module documentation.
pub async fn run(
    options: ShardOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DriverError> {
    // Failpoint entries scoped `<queue>/shard.…` fire in this shard only.
    shardsched_proto::failpoint::set_scope(&options.queue);
    let creds = load_credentials(&options.state_dir, &options.queue)?;
    let (journal, restored) = open_journal(&options.state_dir)?;
    let endpoint = tls::server_endpoint(&creds, options.listen)?;
    let bound = endpoint
        .local_addr()
        .map_err(|e| Error::Endpoint(format!("local address: {e}")))?;
    let listen = advertised(bound);
    tracing::info!(queue = %options.queue, %listen, coordinator = %options.coordinator, "shard listening");
    let result = serve_until(&options, &endpoint, listen, journal, restored, shutdown).await;
    endpoint.close(CloseCode::Done.varint(), b"shutdown");
    let _ = tokio::time::timeout(SHUTDOWN_LINGER, endpoint.wait_idle()).await;
    match &result {
        Ok(()) => tracing::info!(queue = %options.queue, "shard stopped"),
        Err(DriverError::Restart) => {
            tracing::info!(queue = %options.queue, "shard stopped to restart with its new configuration")
        }
        Err(e) => tracing::error!(queue = %options.queue, error = %e, "shard stopping"),
    }
    result
}

/// Opens (or creates) the journal in the state directory, verifies it and reads it back.
pub fn open_journal(dir: &Path) -> Result<(Journal, Restored), DriverError> {
    let journal = Journal::open(dir.join(JOURNAL_FILE))?;
    let restored = journal::load(&journal)?;
    if !restored.is_empty() {
        tracing::info!(
            path = %journal.path().display(),
            jobs = restored.jobs.len(),
            live = restored.live(),
            owned = restored.owned.len(),
            "journal read"
        );
    }
    Ok((journal, restored))
}

/// Loads the shard's credentials and checks they are a shard certificate for `queue`.
pub fn load_credentials(dir: &Path, queue: &str) -> Result<Credentials, DriverError> {
    let creds = Credentials::load(
        &dir.join(CA_FILE),
        &dir.join(CERT_FILE),
        &dir.join(KEY_FILE),
    )
    .map_err(|source| DriverError::Credentials {
        dir: dir.to_owned(),
        source,
    })?;
    let me = creds
        .identity()
        .map_err(|e| DriverError::Identity(format!("{}: {e}", dir.join(CERT_FILE).display())))?;
    if me.role != Role::Shard || me.name != queue {
        return Err(DriverError::Identity(format!(
            "{} is a certificate for {me}, not for shard {queue}",
            dir.join(CERT_FILE).display()
        )));
    }
    Ok(creds)
}

async fn serve_until(
    options: &ShardOptions,
    endpoint: &quinn::Endpoint,
    listen: SocketAddr,
    journal: Journal,
    restored: Restored,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DriverError> {
    tokio::pin!(shutdown);
    let mut register = Register {
        queue: options.queue.clone(),
        listen,
        held: restored.held(),
        last_job_id: restored.last_id,
    };
    let (mut session, assignment) = tokio::select! {
        () = &mut shutdown => return Ok(()),
        registered = register_with_retry(endpoint, options.coordinator, &register) => registered?,
    };
    let jobs_dir = exec_task::jobs_dir(&options.state_dir);
    let core_options = CoreOptions {
        time_scale: options.time_scale,
        executor: match options.executor {
            Executor::Sim => CoreExecutor::Sim,
            Executor::Exec(_) => CoreExecutor::Exec {
                jobs_dir: jobs_dir.clone(),
            },
        },
        retention_ms: u64::try_from(options.retention.as_millis()).unwrap_or(u64::MAX),
        journal: true,
        ..CoreOptions::default()
    };
    // The configuration this core runs with: a re-registration that brings another one
    // restarts the shard (see `needs_restart`).
    let running_config = assignment.queue.clone();
    let core = if restored.is_empty() {
        ShardCore::new(&assignment, core_options)?
    } else {
        ShardCore::restored(&assignment, core_options, core_task::now_ms(), &restored)?.0
    };
    drop(restored);
    let log = transitions::TransitionLog::open(&options.state_dir, &options.queue);
    let released = released::ReleasedQueue::default();
    let committer = Committer::start(journal)?;
    let journal_stats = tokio::spawn(stats::write_periodically(
        committer.clone(),
        options.state_dir.clone(),
    ));
    tracing::info!(
        queue = %options.queue,
        generator_id = assignment.generator_id,
        owned = core.owned().len(),
        enabled = assignment.queue.enabled,
        started = assignment.queue.started,
        "registered"
    );
    let snapshot = Arc::new(ArcSwap::from_pointee(core.snapshot()));
    let (commands, queue) = mpsc::channel(COMMAND_QUEUE_CAPACITY);
    let (status_tx, status_rx) = watch::channel(None);
    let exec = match &options.executor {
        Executor::Sim => None,
        Executor::Exec(exec_options) => {
            let (exec_tx, exec_rx) = mpsc::channel(EXEC_QUEUE_CAPACITY);
            tokio::spawn(exec_task::run(
                options.queue.clone(),
                exec_options.clone(),
                jobs_dir,
                exec_rx,
                commands.clone(),
            ));
            Some(exec_tx)
        }
    };
    let mut core_task = tokio::spawn(core_task::run(
        core,
        queue,
        Arc::clone(&snapshot),
        status_tx,
        committer,
        core_task::Sinks {
            exec,
            log,
            released: released.clone(),
        },
    ));
    let mut core_running = true;
    // Set by a `Reconfigure` from the coordinator: stop cleanly, exit for a restart.
    let restart = Arc::new(tokio::sync::Notify::new());
    let clients = tokio::spawn(serve::clients(
        endpoint.clone(),
        commands.clone(),
        Arc::clone(&snapshot),
    ));
    let outcome = loop {
        let on_link = serve_coordinator(
            &session, &commands, &snapshot, &status_rx, &restart, &released,
        );
        let lost = tokio::select! {
            () = &mut shutdown => break Ok(()),
            () = restart.notified() => {
                // Let the acknowledgement leave before the connection closes.
                tokio::time::sleep(RESTART_ACK_LINGER).await;
                break Err(DriverError::Restart);
            }
            joined = &mut core_task => {
                core_running = false;
                break match joined {
                    Ok(Err(e)) => Err(e),
                    Ok(Ok(())) => Err(DriverError::CoreStopped("it returned".to_owned())),
                    Err(e) => Err(DriverError::CoreStopped(e.to_string())),
                };
            }
            lost = session.connection().closed() => lost,
        };
        on_link.abort();
        tracing::warn!(queue = %options.queue, error = %Error::from(lost), "lost the coordinator; reconnecting");
        let (held_tx, held_rx) = oneshot::channel();
        if commands.send(Command::Held(held_tx)).await.is_ok()
            && let Ok((held, last_job_id)) = held_rx.await
        {
            register.held = held;
            register.last_job_id = last_job_id;
        }
        let registered = tokio::select! {
            () = &mut shutdown => break Ok(()),
            registered = register_with_retry(endpoint, options.coordinator, &register) => registered,
        };
        match registered {
            Ok((new_session, assignment)) => {
                tracing::info!(queue = %options.queue, "registered again");
                session = new_session;
                if needs_restart(&running_config, &assignment.queue) {
                    // Changed while we were away (a coordinator restart with an edited
                    // configuration, a Reconfigure that did not reach us).
                    tracing::info!(queue = %options.queue, "the queue's configuration changed while disconnected; restarting to apply it");
                    break Err(DriverError::Restart);
                }
                let _ = commands
                    .send(Command::Reassigned(Box::new(assignment)))
                    .await;
            }
            Err(e) => break Err(e),
        }
    };
    session.close();
    clients.abort();
    journal_stats.abort();
    let _ = journal_stats.await;
    if core_running {
        let _ = commands.send(Command::Stop).await;
        match core_task.await {
            Ok(Err(e)) if outcome.is_ok() => return Err(e),
            Ok(Err(e)) => tracing::error!(error = %e, "stopping the core task"),
            _ => {}
        }
    }
    outcome
}

/// The tasks bound to one registration connection: serving the coordinator's commands and
/// sending status reports. Aborted together when the connection is lost.
struct OnLink(Vec<tokio::task::JoinHandle<()>>);

impl OnLink {
    fn abort(self) {
        for task in self.0 {
            task.abort();
        }
    }
}

fn serve_coordinator(
    session: &Session,
    commands: &mpsc::Sender<Command>,
    snapshot: &Arc<ArcSwap<Snapshot>>,
    status: &watch::Receiver<Option<ShardStatus>>,
    restart: &Arc<tokio::sync::Notify>,
    released: &released::ReleasedQueue,
) -> OnLink {
    let (commands, snapshot) = (commands.clone(), Arc::clone(snapshot));
    let restart = Arc::clone(restart);
    let serving = tokio::spawn({
        let session = session.clone();
        async move {
            let served = serve(session, move |peer, request| {
                serve::coordinator_request(
                    commands.clone(),
                    Arc::clone(&snapshot),
                    Arc::clone(&restart),
                    peer,
                    request,
                )
            })
            .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "coordinator connection ended");
            }
        }
    });
    let mut status = status.clone();
    status.mark_changed();
    let reporting = tokio::spawn(report_status(session.clone(), status));
    let releasing = tokio::spawn(released::report(session.clone(), released.clone()));
    OnLink(vec![serving, reporting, releasing])
}

/// Sends every status report the core task hands out (it bounds their rate).
async fn report_status(session: Session, mut reports: watch::Receiver<Option<ShardStatus>>) {
    while reports.changed().await.is_ok() {
        let Some(report) = reports.borrow_and_update().clone() else {
            continue;
        };
        if let Err(e) = session.request(&shard_coord::Request::Status(report)).await {
            tracing::debug!(error = %e, "status report not delivered");
            if session.connection().close_reason().is_some() {
                return;
            }
        }
    }
}

/// Why one registration attempt failed.
enum Attempt {
    /// Worth trying again (coordinator not up yet, network).
    Retry(String),
    /// Trying again would not help (refused, wrong certificates).
    Fatal(DriverError),
}

/// Connects and registers, retrying with a doubling backoff for up to
/// [`COORDINATOR_LOST_AFTER`].
async fn register_with_retry(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    register: &Register,
) -> Result<(Session, Assignment), DriverError> {
    let started = Instant::now();
    let mut backoff = Backoff::new(RECONNECT_BACKOFF_MIN, RECONNECT_BACKOFF_MAX);
    loop {
        let last = match register_once(endpoint, addr, register).await {
            Ok(registered) => return Ok(registered),
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Retry(why)) => why,
        };
        if started.elapsed() >= COORDINATOR_LOST_AFTER {
            return Err(DriverError::CoordinatorLost {
                addr,
                secs: COORDINATOR_LOST_AFTER.as_secs(),
                last,
            });
        }
        tracing::info!(coordinator = %addr, error = %last, retry_in_ms = backoff.peek().as_millis() as u64, "coordinator not reached");
        tokio::time::sleep(backoff.next_wait()).await;
    }
}

async fn register_once(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    register: &Register,
) -> Result<(Session, Assignment), Attempt> {
    let session = match connect(endpoint, addr, Role::Coordinator, COORDINATOR_NAME).await {
        Ok(session) => session,
        Err(e @ (Error::Handshake(_) | Error::Identity(_) | Error::PeerVersionMismatch { .. })) => {
            return Err(Attempt::Fatal(e.into()));
        }
        Err(e) => return Err(Attempt::Retry(e.to_string())),
    };
    let answer = session
        .request(&shard_coord::Request::Register(register.clone()))
        .await;
    match answer {
        Ok(shard_coord::Response::Registered(assignment)) => Ok((session, *assignment)),
        Ok(other) => Err(Attempt::Fatal(DriverError::Refused(format!(
            "unexpected answer to register: {other:?}"
        )))),
        Err(Error::Refused(r)) if r.code != RefusalCode::Unavailable => {
            Err(Attempt::Fatal(DriverError::Refused(r.message)))
        }
        Err(e) => {
            session.close();
            Err(Attempt::Retry(e.to_string()))
        }
    }
}

/// Whether `new` differs from the configuration the core was built with in anything a
/// running core cannot take (all but the enabled/started flags, which it applies live).
fn needs_restart(running: &QueueConfig, new: &QueueConfig) -> bool {
    let fixed = |c: &QueueConfig| QueueConfig {
        enabled: true,
        started: true,
        ..c.clone()
    };
    fixed(running) != fixed(new)
}

/// The address to register: the bound one, with an unspecified IP (0.0.0.0, ::) replaced by
/// loopback, which is the only address we can be sure reaches us.
fn advertised(bound: SocketAddr) -> SocketAddr {
    let ip = match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    if ip != bound.ip() {
        tracing::warn!(%bound, advertised = %ip, "listening on all addresses; registering loopback");
    }
    SocketAddr::new(ip, bound.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_changed_configuration_beyond_the_flags_needs_a_restart() {
        let running = QueueConfig {
            name: "q".into(),
            queue_policy: "fcfs".into(),
            match_policy: "first".into(),
            queue_depth: 32,
            reservation_depth: 64,
            default_duration_ms: 60_000,
            max_duration_ms: 0,
            definition: vec!["node0".into()],
            enabled: true,
            started: true,
        };
        let flags = QueueConfig {
            enabled: false,
            started: false,
            ..running.clone()
        };
        assert!(!needs_restart(&running, &flags));
        let policy = QueueConfig {
            queue_policy: "easy".into(),
            ..running.clone()
        };
        assert!(needs_restart(&running, &policy));
        let definition = QueueConfig {
            definition: vec!["node0".into(), "node1".into()],
            ..running.clone()
        };
        assert!(needs_restart(&running, &definition));
    }

    #[test]
    fn unspecified_listen_addresses_register_loopback() {
        let any: SocketAddr = "0.0.0.0:4000".parse().expect("addr");
        assert_eq!(advertised(any), "127.0.0.1:4000".parse().expect("addr"));
        let own: SocketAddr = "127.0.0.2:4000".parse().expect("addr");
        assert_eq!(advertised(own), own);
    }
}
