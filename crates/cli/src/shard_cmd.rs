//! `shardsched shard --queue NAME --coordinator ADDR --state-dir DIR`: runs one queue's
//! scheduling shard (the `shardsched-shard` crate; docs/PROTOCOL.md for the wire).
//!
//! The state directory holds `cert.pem`, `key.pem` (role shard, name = the queue, from
//! `shardsched cert issue --role shard --name NAME --out DIR`) and `ca.pem`, and the shard
//! keeps its journal there (`journal.redb`, docs/JOURNAL.md): restarted with the same
//! directory, it brings back its jobs. A damaged journal makes it refuse to start. The shard
//! listens on `--listen` (port 0: any free port), registers its real address with the
//! coordinator, and serves clients until Ctrl-C or SIGTERM, or until the coordinator has
//! been unreachable for a while. It logs to stderr (`RUST_LOG` filters, default `info`; as
//! JSON with `--log-format json`). A
//! journal it cannot read back stops it with the file, table and key named and exit status
//! [`UNREADABLE_EXIT_STATUS`] (65), which `up` does not restart.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use shardsched_journal::UNREADABLE_EXIT_STATUS;
use shardsched_shard::agents::AgentsOptions;
use shardsched_shard::limits::KILL_GRACE;
use shardsched_shard::{DriverError, ExecOptions, RESTART_EXIT_STATUS, ShardOptions};
use shardsched_telemetry::{LogFormat, Metrics};

use crate::telemetry::{self, HttpListener};

/// Flags of `shardsched shard`.
#[derive(Args, Debug, Clone)]
pub struct ShardArgs {
    /// The queue this shard schedules (its certificate's name).
    #[arg(long, value_name = "NAME")]
    pub queue: String,
    /// The coordinator's address.
    #[arg(long, value_name = "ADDR")]
    pub coordinator: SocketAddr,
    /// State directory: cert.pem, key.pem and ca.pem; the journal (journal.redb) is kept
    /// here, and a restart from the same directory brings the queue's jobs back.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// How long finished jobs are kept (for `jobs -a`, in memory and in the journal)
    /// after they end: 90s, 30m, 2h, 1d, a bare number is seconds (at most the newest 10,000
    /// are kept in any case).
    #[arg(long, value_name = "DURATION", default_value = "1h",
          value_parser = crate::duration_arg::seconds_or_units)]
    pub retention: Duration,
    /// UDP address to listen on for clients; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// TCP address of its `/metrics` (HTTP); port 0 picks a free port (its URL is written
    /// to DIR/http-address).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub http_listen: SocketAddr,
    /// The sim executor runs jobs this many times faster than their duration.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub time_scale: f64,
    /// How jobs run.
    #[arg(long, value_enum, default_value_t = Executor::Sim)]
    pub executor: Executor,
    /// exec, agents: time between SIGTERM and SIGKILL when a job is killed (time limit, cancel,
    /// node down): 500ms, 10s; a bare number is seconds [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration_arg::seconds_or_units)]
    pub kill_grace: Option<Duration>,
    /// Log lines as `text` (for people) or `json` (one object per line); `RUST_LOG`
    /// filters either.
    #[arg(long, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Set by `up`: hold this file locked (shared) while running (`up::lock`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub up_lock: Option<PathBuf>,
}

/// How a shard runs jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Executor {
    /// Simulated: a job holds its resources for its duration (divided by the time scale).
    Sim,
    /// Really run: the job's command runs on this host, as this shard's user, under a
    /// supervisor process (`<state-dir>/jobs/<id>/` holds its output; docs/EXEC.md).
    Exec,
    /// Really run on the nodes allocated, by their node agents (`shardsched node`), as the
    /// user who signed the submit; `shardsched job output` shows what tasks wrote.
    Agents,
}

/// `shardsched shard`.
pub fn main(args: &ShardArgs) -> Result<()> {
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        anyhow::bail!(
            "--time-scale must be a positive number, not {}",
            args.time_scale
        );
    }
    let executor = match args.executor {
        Executor::Sim => shardsched_shard::Executor::Sim,
        Executor::Agents => shardsched_shard::Executor::Agents(AgentsOptions {
            kill_grace: args.kill_grace.unwrap_or(KILL_GRACE),
        }),
        Executor::Exec => {
            let program = std::env::current_exe().context("finding this executable")?;
            shardsched_shard::Executor::Exec(ExecOptions {
                supervisor: shardsched_process::plan::supervisor_path(&program)?,
                kill_grace: args.kill_grace.unwrap_or(KILL_GRACE),
            })
        }
    };
    let _up_lock = crate::up::lock::start_child(args.up_lock.as_deref(), args.log_format)?;
    let runtime = telemetry::runtime(tracing::info_span!("shard", queue = %args.queue))?;
    let (metrics, shard_metrics) = Metrics::shard(&args.queue);
    telemetry::observe_wire(&shard_metrics.process);
    let options = ShardOptions {
        queue: args.queue.clone(),
        coordinator: args.coordinator,
        state_dir: args.state_dir.clone(),
        listen: args.listen,
        time_scale: args.time_scale,
        executor,
        retention: args.retention,
        metrics: shard_metrics,
    };
    let served = runtime.block_on(async {
        let _http =
            HttpListener::start(args.http_listen, &args.state_dir, Arc::new(metrics), None).await?;
        anyhow::Ok(shardsched_shard::run(options, shardsched_proto::shutdown_signal()).await)
    })?;
    match served {
        // Not a failure: the coordinator asked for a restart with a new queue
        // configuration; the distinct status tells the supervisor to start it again at once.
        Err(DriverError::Restart) => std::process::exit(i32::from(RESTART_EXIT_STATUS)),
        // A journal that cannot be read back: the error names the file, table and key, and
        // the status tells the supervisor not to restart into the same failure.
        Err(e) if e.journal_unreadable() => {
            shardsched_client::output::say(format_args!("shard {}: {e}", args.queue));
            std::process::exit(i32::from(UNREADABLE_EXIT_STATUS))
        }
        result => result.with_context(|| format!("shard {}", args.queue)),
    }
}
