//! `shardsched coordinator --config FILE --listen ADDR --state-dir DIR`: runs the coordinator
//! (docs/CONFIG.md for the configuration, docs/PROTOCOL.md for the wire).
//!
//! On first start it creates the cluster CA in the state directory; on every start it issues
//! its own certificate, writes its durable state, binds, and writes `DIR/address` (the bound
//! socket address, one line); then it serves its status page and `/metrics` over HTTP on
//! `--http-listen` and writes their URL to `DIR/http-address`. It logs to stderr
//! (`RUST_LOG` filters; `--log-format json` writes one JSON object per line) and stops
//! cleanly on Ctrl-C or SIGTERM, removing both address files. A journal it cannot read back
//! stops it with the file, table and key named and exit status [`UNREADABLE_EXIT_STATUS`]
//! (65), which `up` does not restart.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use shardsched_coordinator::config::{Config, DEFAULT_CONFIG_ORIGIN};
use shardsched_coordinator::driver::{self, Coordinator, Options};
use shardsched_journal::UNREADABLE_EXIT_STATUS;
use shardsched_telemetry::{LogFormat, Metrics, StatusService};

use crate::telemetry::{self, HttpListener};

/// Where the status page is served when neither `--http-listen` nor the configuration says:
/// a free loopback port.
pub const HTTP_LISTEN_DEFAULT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Flags of `shardsched coordinator`.
#[derive(Args, Debug, Clone)]
pub struct CoordinatorArgs {
    /// Configuration file (TOML, docs/CONFIG.md). Without it: the embedded default (the
    /// 128-node cluster; queues batch, debug, and a stopped standby).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// UDP address to listen on; port 0 picks a free port (written to DIR/address).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// TCP address of the status page and `/metrics` (HTTP); port 0 picks a free port (its
    /// URL is written to DIR/http-address). Off loopback, the page leaves out admins'
    /// reasons and job ids [default: the configuration's `[http] listen`, else
    /// 127.0.0.1:0].
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// State directory: the cluster CA, the coordinator's certificate and state, `address`.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// Check the configuration, print a summary and exit without serving.
    #[arg(long)]
    pub check: bool,
    /// Every node has an agent (`[agents] required = true`, whatever the file says): a
    /// node whose agent has not registered within the heartbeat timeout is marked down.
    /// `up --agents` passes it.
    #[arg(long)]
    pub agents: bool,
    /// Log lines as `text` (for people) or `json` (one object per line); `RUST_LOG`
    /// filters either.
    #[arg(long, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Set by `up`: hold this file locked (shared) while running (`up::lock`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub up_lock: Option<PathBuf>,
}

/// `shardsched coordinator`.
pub fn main(args: &CoordinatorArgs) -> Result<()> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default().context(DEFAULT_CONFIG_ORIGIN)?,
    };
    config.agents.required |= args.agents;
    if args.check {
        print_summary(&config);
        return Ok(());
    }
    let _up_lock = crate::up::lock::start_child(args.up_lock.as_deref(), args.log_format)?;
    let runtime = telemetry::runtime(tracing::info_span!("coordinator"))?;
    let (metrics, views) = Metrics::coordinator();
    telemetry::observe_wire(&views.process);
    let http_listen = config.http_listen;
    runtime.block_on(async {
        let options = Options {
            listen: args.listen,
            state_dir: args.state_dir.clone(),
        };
        let coordinator = match Coordinator::bind(config, &options) {
            Ok(coordinator) => coordinator.with_metrics(views.clone()),
            // The error names the file, table and key; the status tells the supervisor not
            // to restart into the same failure.
            Err(e) if e.journal_unreadable() => {
                shardsched_client::output::say(format_args!("coordinator: {e}"));
                std::process::exit(i32::from(UNREADABLE_EXIT_STATUS))
            }
            Err(e) => return Err(e.into()),
        };
        let page = StatusService {
            source: coordinator.status_source(),
            metrics: views,
        };
        let _http = HttpListener::start(
            args.http_listen
                .or(http_listen)
                .unwrap_or(HTTP_LISTEN_DEFAULT),
            &args.state_dir,
            Arc::new(metrics),
            Some(page),
        )
        .await?;
        // Nothing here catches a panic: one in the core task unwinds out of `run` and the
        // process exits (status 101), so its supervisor restarts it over its journal.
        coordinator.run(driver::shutdown_signal()).await?;
        Ok(())
    })
}

fn print_summary(config: &Config) {
    println!(
        "{}: cluster of {} nodes, default queue {}",
        config.origin,
        config.cluster.nodes.len(),
        config.default_queue
    );
    for q in &config.queues {
        let nodes = config.node_names(&q.definition);
        println!(
            "  {:<12} {:<8} {:<12} {} ({} nodes){}{}",
            q.name,
            q.policy.as_str(),
            q.match_policy.as_str(),
            shardsched_resource::encode_hostlist(&nodes),
            nodes.len(),
            if q.started { "" } else { ", stopped" },
            if q.enabled { "" } else { ", disabled" },
        );
    }
}
