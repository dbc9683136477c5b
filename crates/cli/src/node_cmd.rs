//! `shardsched node --name NODE --coordinator ADDR --state-dir DIR [--listen ADDR]
//! [--cgroup-root PATH]`: the node agent of one compute node (the `shardsched-node` crate;
//! docs/EXEC.md, "Node agents"; docs/DEPLOY.md).
//!
//! The state directory holds `cert.pem`, `key.pem` (role node, named after the node, from
//! `shardsched cert issue --role node --name NODE --out DIR`) and `ca.pem`, and the job
//! directories. The agent registers with the coordinator, which tells it which queue owns
//! the node, and runs the jobs that queue's shard launches there, each under a supervisor
//! that outlives the agent. Run as root, it runs each job as the user who signed it; run as
//! anyone else, it runs jobs as itself, and says so.
//! That supervisor is `shardsched-supervisor`, installed next to `shardsched`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use shardsched_node::agent::{NodeOptions, load_credentials, run};
use shardsched_node::cgroup::Hierarchy;
use shardsched_node::executor::ExecSettings;
use shardsched_node::user::{MIN_UID_DEFAULT, UserPolicy, effective_user};
use shardsched_telemetry::LogFormat;

/// Flags of `shardsched node`.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// The node this agent runs (its certificate's name).
    #[arg(long, value_name = "NODE")]
    pub name: String,
    /// The coordinator's address.
    #[arg(long, value_name = "ADDR")]
    pub coordinator: SocketAddr,
    /// State directory: cert.pem, key.pem, ca.pem, and the job directories.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// UDP address to listen on for shards and other agents; port 0 picks a free port (the
    /// address is written to DIR/address).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// The agent's directory in the unified cgroup hierarchy [default:
    /// shardsched/NODE under it].
    #[arg(long, value_name = "PATH")]
    pub cgroup_root: Option<PathBuf>,
    /// Run before each job's tasks, as root; a failure requeues the job.
    #[arg(long, value_name = "PATH")]
    pub prolog: Option<PathBuf>,
    /// Run after each job's processes are gone, as root.
    #[arg(long, value_name = "PATH")]
    pub epilog: Option<PathBuf>,
    /// Run every --health-interval, as root; a failure drains the node with the program's
    /// output as the reason (`resource undrain` brings it back).
    #[arg(long, value_name = "PATH")]
    pub health_check: Option<PathBuf>,
    /// How often the health check runs: 60s, 5m (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = crate::duration_arg::seconds_or_units)]
    pub health_interval: std::time::Duration,
    /// Users with a lower uid are refused.
    #[arg(long, value_name = "UID", default_value_t = MIN_UID_DEFAULT)]
    pub min_uid: u32,
    /// Allow jobs to run as root (uid 0).
    #[arg(long)]
    pub allow_root: bool,
    /// Log lines as `text` (for people) or `json` (one object per line); `RUST_LOG`
    /// filters either.
    #[arg(long, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Set by `up`: hold this file locked (shared) while running (`up::lock`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub up_lock: Option<PathBuf>,
}

/// `shardsched node`.
pub fn main(args: &NodeArgs) -> Result<()> {
    let _up_lock = crate::up::lock::start_child(args.up_lock.as_deref(), args.log_format)?;
    let creds = load_credentials(&args.state_dir).map_err(|e| anyhow!(e))?;
    let as_root = nix::unistd::Uid::effective().is_root();
    if !as_root {
        let me = effective_user()
            .map(|u| u.name)
            .unwrap_or_else(|| "?".into());
        tracing::warn!(
            user = %me,
            "not running as root: every job on node {} runs as {me}, whoever submitted it",
            args.name
        );
    }
    let cgroups = Hierarchy::find(args.cgroup_root.as_deref(), &args.name);
    match &cgroups {
        Some(h) => tracing::info!(root = %h.root.display(), v1 = h.v1.len(), "job cgroups"),
        None => tracing::warn!("no usable cgroup hierarchy: jobs are tracked by process group"),
    }
    let program = std::env::current_exe().context("finding the shardsched binary")?;
    let supervisor = shardsched_process::plan::supervisor_path(&program)?;
    let options = NodeOptions {
        name: args.name.clone(),
        coordinator: args.coordinator,
        listen: args.listen,
        exec: ExecSettings {
            state_dir: args.state_dir.clone(),
            supervisor,
            creds,
            as_root,
            users: UserPolicy {
                min_uid: args.min_uid,
                allow_root: args.allow_root,
            },
            cgroups,
            prolog: args.prolog.clone(),
            epilog: args.epilog.clone(),
        },
        health: args.health_check.clone().map(|script| {
            (
                script,
                args.health_interval.max(std::time::Duration::from_secs(1)),
            )
        }),
    };
    // One thread: an agent carries a few messages a second; a cluster of them on one
    // machine (`up --agents`) should not cost a thread pool each.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run(options)).map_err(|e| anyhow!(e))
}
