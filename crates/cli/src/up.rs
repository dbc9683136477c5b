//! `shardsched up`: the whole system from one command, on loopback.
//!
//! `up` is a small supervisor. It does nothing the user could not do by hand with
//! `shardsched coordinator`, `cert issue` and `shard`; it only does it in the right order and
//! keeps it running:
//!
//! 1. take the state directory's lock ([`lock`]: `up` holds `up.pid`, its children
//!    `processes.lock`), so two `up`s never share a directory, even when the first was
//!    killed and its children still serve; then lay the directory out (see
//!    [`shardsched_proto::state_dir`]);
//! 2. start the coordinator on `127.0.0.1:0` and wait for it to write its bound address;
//! 3. issue the local user an **admin** certificate (named after the effective user's
//!    passwd name), so every client command works with no flags, and ask the coordinator
//!    which queues it has;
//! 4. with `--agents`, issue each node's agent a certificate and start one `node` process
//!    per node of the cluster ([`agents`]); issue each queue's shard a certificate and
//!    start one `shard` process per queue;
//! 5. wait until every queue's shard is routable, then print how to reach the system and
//!    where the status page is (the coordinator wrote its URL to `coordinator/http-address`);
//! 6. supervise: a child that dies is reported and restarted with bounded backoff (the
//!    coordinator at the addresses it had, so running shards, clients and browsers find it
//!    again); a
//!    shard that exits with the restart status (its queue was reconfigured) is started
//!    again at once; every [`queues::QUEUE_SYNC_INTERVAL`] the coordinator's queue list is
//!    read, and shards are started for added queues and stopped for removed ones;
//! 7. on Ctrl-C, SIGTERM or SIGHUP: stop the shards, then the coordinator (SIGTERM, wait
//!    [`SHUTDOWN_GRACE`], then SIGKILL), remove the address file and the lock, exit 0.
//!
//! Children run in their own process groups, so a Ctrl-C in the terminal reaches `up` alone
//! and the shutdown happens in order (shards before the coordinator), not all at once. Their
//! output goes to `logs/<name>.log` in the state directory; when a child fails to start, the
//! end of its log is shown.
//!
//! Steps 2 to 5 are in [`start`], a child's life in [`child`], the lock in [`lock`], the
//! queue table's changes at run time in [`queues`].

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use shardsched_client::StateDir;
use shardsched_proto::backoff::Backoff;
use shardsched_telemetry::LogFormat;
use tokio::signal::unix::{SignalKind, signal};

use crate::cert_cmd::create_private_dir;

/// `eprintln!` that cannot fail: stopping the children must not depend on being able to
/// print. A closed terminal gives EIO, `up 2>&1 | tee` after Ctrl-C gives EPIPE, and
/// `eprintln!` panics on both, which once left every child running.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod agents;
mod banner;
mod child;
pub mod lock;
mod queues;
mod start;

use child::{Supervised, stop_all};

/// How long the coordinator may take to write its address, and the shards to become
/// routable, before `up` gives up. Generous: a debug build loading a large cluster is slow.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often `up` looks at its children and, while starting, at files and routes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How often the supervisor checks whether a child died.
pub const SUPERVISE_INTERVAL: Duration = Duration::from_millis(200);
/// Wait before the first restart of a dead child; doubled for each consecutive failure.
pub const RESTART_BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between two restarts of one child.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The wait before restarting a dead child, by its consecutive failures.
pub const RESTART_BACKOFF: Backoff = Backoff::new(RESTART_BACKOFF_FIRST, RESTART_BACKOFF_MAX);
/// A child that ran this long before dying counts as healthy: its backoff starts over.
pub const RESTART_STABLE_RUN: Duration = Duration::from_secs(60);
/// Consecutive failed runs after which a child is given up on (and, for the coordinator,
/// the whole system is stopped).
pub const RESTARTS_MAX: u32 = 10;
/// How long a child may take to exit after SIGTERM before it is killed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Lines of a child's log shown when it fails.
pub const LOG_TAIL_LINES: usize = 20;
/// A shard child's label is this followed by its queue's name.
pub const SHARD_LABEL_PREFIX: &str = "shard ";
/// Flags of `shardsched up`.
#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Coordinator configuration (TOML: cluster and queues) [default: the embedded 128-node
    /// cluster with queues batch and debug started, standby stopped].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State directory [default: $SHARDSCHED_DIR, else $XDG_STATE_HOME/shardsched, else
    /// $HOME/.local/state/shardsched].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Simulated time runs this many times faster than real time in the shards' sim
    /// executor [default: the shard's].
    #[arg(long, value_name = "F")]
    pub time_scale: Option<f64>,
    /// How the shards run jobs: `sim`, or `exec` to really run them on this host
    /// [default: the shard's, sim].
    #[arg(long, value_name = "EXECUTOR")]
    pub executor: Option<crate::shard_cmd::Executor>,
    /// How long the shards keep finished jobs (in memory and in their journals): 90s, 30m,
    /// 2h, 1d (a bare number is seconds) [default: the shard's, 1h].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration_arg::seconds_or_units)]
    pub retention: Option<Duration>,
    /// Run jobs through node agents: start one `shardsched node` per node of the cluster,
    /// each on a loopback address of its own, and have the shards launch every job on its
    /// nodes' agents, as the user who submitted it (implies real execution; docs/EXEC.md).
    #[arg(long)]
    pub agents: bool,
    /// With --agents: one more argument for every node agent, e.g.
    /// `--agent-arg=--prolog=/etc/shardsched/prolog` (repeat it for several).
    #[arg(
        long = "agent-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "agents"
    )]
    pub agent_args: Vec<String>,
    /// Where the coordinator serves its status page and `/metrics` (HTTP). Bound off
    /// loopback, the page leaves out admins' reasons and job ids (docs/OPERATIONS.md). The
    /// shards serve their `/metrics` on free loopback ports [default: the configuration's
    /// `[http] listen`, else a free loopback port].
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// The coordinator's and the shards' log lines in their log files: `text` or `json`.
    #[arg(long, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `shardsched up`.
pub fn main(args: &UpArgs) -> Result<()> {
    let dir = StateDir::given_or_env(args.dir.as_deref())?;
    let root = absolute(dir.root())?;
    let dir = StateDir::at(root);
    create_private_dir(dir.root())?;
    let lock = lock::UpLock::take(&dir)?;
    prepare_dirs(&dir)?;
    let config = match &args.config {
        Some(path) => Some(
            fs::canonicalize(path)
                .with_context(|| format!("configuration file {}", path.display()))?,
        ),
        None => None,
    };
    if args.agents
        && args
            .executor
            .is_some_and(|e| e != crate::shard_cmd::Executor::Agents)
    {
        bail!("--agents runs jobs through node agents: it goes with no other --executor");
    }
    let exe = std::env::current_exe().context("finding this executable")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let mut stop = StopSignals::install()?;
        let mut sup = Supervisor {
            exe,
            dir,
            config,
            time_scale: args.time_scale,
            executor: if args.agents {
                Some(crate::shard_cmd::Executor::Agents)
            } else {
                args.executor
            },
            retention: args.retention,
            agents: args.agents,
            agent_args: args.agent_args.clone(),
            agent_dirs: Vec::new(),
            log_format: args.log_format,
            http_listen: args.http_listen,
            processes_lock: lock.processes_lock().to_owned(),
            children: Vec::new(),
            coordinator: None,
            queue_sync: None,
            retiring: Vec::new(),
        };
        let started = tokio::select! {
            biased;
            name = stop.recv() => Err(anyhow!("{name} while starting")),
            started = sup.start() => started,
        };
        let result = match started {
            Ok(()) => sup.supervise(&mut stop).await,
            Err(e) => Err(e),
        };
        sup.shutdown().await;
        result
    })
}

struct Supervisor {
    exe: PathBuf,
    dir: StateDir,
    config: Option<PathBuf>,
    time_scale: Option<f64>,
    executor: Option<crate::shard_cmd::Executor>,
    /// `--retention` for the shards.
    retention: Option<Duration>,
    /// `--agents`: one node agent per node.
    agents: bool,
    /// `--agent-arg`s, for every agent.
    agent_args: Vec<String>,
    /// The node agents' state directories, once started.
    agent_dirs: Vec<PathBuf>,
    /// `--log-format` for every child.
    log_format: LogFormat,
    /// The coordinator's `--http-listen`, if any (after its first start, the address it
    /// bound).
    http_listen: Option<SocketAddr>,
    /// Given to every child with `--up-lock` (see [`lock`]).
    processes_lock: PathBuf,
    /// The coordinator first, then the node agents (`--agents`), then the shards (in queue
    /// order at start, then in the order queues were added at run time).
    children: Vec<Supervised>,
    /// The coordinator's address, once it wrote it.
    coordinator: Option<SocketAddr>,
    /// Reads the coordinator's queue table, once the coordinator runs (see [`queues`]).
    queue_sync: Option<queues::QueueSync>,
    /// Shards of removed queues, stopping.
    retiring: Vec<queues::Retiring>,
}

impl Supervisor {
    /// Step 6: until a stop signal, restart children that die.
    async fn supervise(&mut self, stop: &mut StopSignals) -> Result<()> {
        loop {
            tokio::select! {
                biased;
                name = stop.recv() => {
                    note!("shardsched up: {name}: stopping");
                    return Ok(());
                }
                () = tokio::time::sleep(SUPERVISE_INTERVAL) => {}
            }
            for child in &mut self.children {
                child.tend(&self.exe);
            }
            self.sync_queues();
            if self.children.first().is_some_and(|c| c.abandoned) {
                bail!("the coordinator is not restarted (said above why); stopping everything");
            }
        }
    }

    /// Step 7: shards first (they may report to the coordinator as they stop), then the
    /// coordinator.
    async fn shutdown(&mut self) {
        self.queue_sync = None;
        let mut retiring: Vec<Supervised> = self
            .retiring
            .drain(..)
            .map(queues::Retiring::into_child)
            .collect();
        stop_all(retiring.iter_mut()).await;
        let (coordinator, shards) = match self.children.split_first_mut() {
            Some((first, rest)) => (Some(first), rest),
            None => (None, &mut [][..]),
        };
        stop_all(shards.iter_mut()).await;
        stop_all(coordinator.into_iter()).await;
        let _ = remove_if_present(&self.dir.address_file());
        let _ = remove_if_present(&self.dir.http_address_file());
    }
}

/// The last resort, should anything between start and [`Supervisor::shutdown`] panic: the
/// children run in their own process groups, so nothing else would stop them.
impl Drop for Supervisor {
    fn drop(&mut self) {
        let retiring = self.retiring.iter_mut().map(queues::Retiring::child_mut);
        for child in self.children.iter_mut().chain(retiring) {
            if let Some(process) = &mut child.process {
                let _ = process.kill();
                let _ = process.wait();
            }
        }
    }
}

/// Ctrl-C, SIGTERM and SIGHUP (a closed terminal), as one stream of stop requests.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> Result<StopSignals> {
        let install = |kind| signal(kind).context("installing a signal handler");
        Ok(StopSignals {
            interrupt: install(SignalKind::interrupt())?,
            terminate: install(SignalKind::terminate())?,
            hangup: install(SignalKind::hangup())?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "interrupted",
            _ = self.terminate.recv() => "terminated",
            _ = self.hangup.recv() => "hung up",
        }
    }
}

fn prepare_dirs(dir: &StateDir) -> Result<()> {
    for d in [
        dir.root().to_owned(),
        dir.client_dir(),
        dir.logs_dir(),
        dir.shards_dir(),
        dir.nodes_dir(),
    ] {
        create_private_dir(&d)?;
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
}
