//! The shard process: credentials from the state directory, one QUIC endpoint, registration
//! with the coordinator, the core task, and a clean shutdown.
//!
//! ```text
//! run(options, shutdown):
//!   load <state-dir>/{ca,cert,key}.pem; the certificate must be `shard <queue>`
//!   open and verify <state-dir>/journal.redb (damaged, or not format v1: refuse to
//!       start, naming it)
//!   listen on --listen (clients connect here)
//!   connect to the coordinator from the same endpoint; Register{queue, listen,
//!       held = the journal's owned and outgoing nodes (allocated flags), last_job_id}
//!       → Assignment (cluster, queue config, generator id, owned nodes)
//!   build ShardCore with the ASSIGNED nodes up (none before): a first start, or
//!       ShardCore::restored (the node table, jobs, then the assignment)
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
//!
//! By concern: `link` (registration, the coordinator's connection, reconnecting),
//! `tasks` (building the core, starting and stopping the tasks around it), `core_task`
//! (the batch loop and the publisher), `commands` (each request as one core call),
//! `serve` (request handlers), `exec_task` (the exec executor's processes; the agents
//! executor is [`crate::agents`]), `released`
//! (`Released` reports until acknowledged), [`transitions`] (the transition log),
//! [`stats`] (journal statistics).

mod commands;
pub(crate) mod core_task;
pub(crate) mod exec_task;
mod link;
pub(crate) mod output;
mod released;
mod serve;
pub mod stats;
mod tasks;
pub mod transitions;

pub use exec_task::{ExecOptions, Executor};

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use shardsched_journal::Journal;
use shardsched_proto::state_dir::JOURNAL_FILE;
use shardsched_proto::{CloseCode, Credentials, Error, Role, tls};
use shardsched_telemetry::ShardMetrics;

use crate::error::DriverError;
use crate::journal::{self, Restored};
use crate::limits::SHUTDOWN_LINGER;

/// The shard's certificate, its private key and the cluster CA's certificate, in its state
/// directory.
pub use shardsched_proto::state_dir::{CA_CERT_FILE as CA_FILE, CERT_FILE, KEY_FILE};

/// What `shardsched shard` is told on its command line.
#[derive(Clone, Debug)]
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
    /// Where the shard counts what it does (its `/metrics`, served by the binary;
    /// `ShardMetrics::default()` counts into no registry).
    pub metrics: ShardMetrics,
}

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
    tracing::info!(%listen, coordinator = %options.coordinator, "shard listening");
    let result = serve_until(&options, &endpoint, listen, journal, restored, shutdown).await;
    endpoint.close(CloseCode::Done.varint(), b"shutdown");
    let _ = tokio::time::timeout(SHUTDOWN_LINGER, endpoint.wait_idle()).await;
    match &result {
        Ok(()) => tracing::info!("shard stopped"),
        Err(DriverError::Restart) => {
            tracing::info!("shard stopped to restart with its new configuration")
        }
        Err(e) => tracing::error!(error = %e, "shard stopping"),
    }
    result
}

/// Opens (or creates) the journal in the state directory, verifies it, checks its format
/// (a journal written before format v1 is refused by name) and reads it back.
pub fn open_journal(dir: &Path) -> Result<(Journal, Restored), DriverError> {
    let journal = journal::open(&dir.join(JOURNAL_FILE))?;
    let restored = journal::load(&journal)?;
    if !restored.is_empty() {
        tracing::info!(
            path = %journal.path().display(),
            jobs = restored.jobs.len(),
            live = restored.live(),
            nodes = restored.nodes.len(),
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

/// The shard's life once its endpoint is up: register, build the core from the
/// assignment and the journal, start its tasks, serve the coordinator's link, stop.
async fn serve_until(
    options: &ShardOptions,
    endpoint: &quinn::Endpoint,
    listen: SocketAddr,
    journal: Journal,
    restored: Restored,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DriverError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut link = link::Link::new(options, endpoint, listen, &restored);
    let Some((session, assignment)) = link.register(&mut shutdown).await? else {
        return Ok(());
    };
    let core = tasks::build_core(options, &assignment, restored)?;
    let mut tasks = tasks::Tasks::start(options, endpoint, journal, core)?;
    let outcome = link.serve(session, &mut tasks, &mut shutdown).await;
    tasks.stop(outcome).await
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
    fn unspecified_listen_addresses_register_loopback() {
        let any: SocketAddr = "0.0.0.0:4000".parse().expect("addr");
        assert_eq!(advertised(any), "127.0.0.1:4000".parse().expect("addr"));
        let own: SocketAddr = "127.0.0.2:4000".parse().expect("addr");
        assert_eq!(advertised(own), own);
    }
}
