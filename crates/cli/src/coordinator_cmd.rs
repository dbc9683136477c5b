//! `shardsched coordinator --config FILE --listen ADDR --state-dir DIR`: runs the coordinator
//! (docs/CONFIG.md for the configuration, docs/PROTOCOL.md for the wire).
//!
//! On first start it creates the cluster CA in the state directory; on every start it issues
//! its own certificate, writes its durable state, binds, and writes `DIR/address` (the bound
//! socket address, one line). It logs to stderr (`RUST_LOG` filters) and stops cleanly on
//! Ctrl-C or SIGTERM, removing the address file. A journal it cannot read back stops it with
//! the file, table and key named and exit status [`UNREADABLE_EXIT_STATUS`] (65), which `up`
//! does not restart.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use shardsched_coordinator::config::{Config, DEFAULT_CONFIG_ORIGIN};
use shardsched_coordinator::driver::{self, Coordinator, Options};
use shardsched_journal::UNREADABLE_EXIT_STATUS;

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
    /// State directory: the cluster CA, the coordinator's certificate and state, `address`.
    #[arg(long, value_name = "DIR")]
    pub state_dir: PathBuf,
    /// Check the configuration, print a summary and exit without serving.
    #[arg(long)]
    pub check: bool,
    /// Set by `up`: hold this file locked (shared) while running (`up::lock`).
    #[arg(long, value_name = "FILE", hide = true)]
    pub up_lock: Option<PathBuf>,
}

/// `shardsched coordinator`.
pub fn main(args: &CoordinatorArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::embedded_default().context(DEFAULT_CONFIG_ORIGIN)?,
    };
    if args.check {
        print_summary(&config);
        return Ok(());
    }
    let _up_lock = args
        .up_lock
        .as_deref()
        .map(crate::up::lock::hold_shared)
        .transpose()?;
    driver::init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let options = Options {
            listen: args.listen,
            state_dir: args.state_dir.clone(),
        };
        let coordinator = match Coordinator::bind(config, &options) {
            Ok(coordinator) => coordinator,
            // The error names the file, table and key; the status tells the supervisor not
            // to restart into the same failure.
            Err(e) if e.journal_unreadable() => {
                shardsched_client::output::say(format_args!("coordinator: {e}"));
                std::process::exit(i32::from(UNREADABLE_EXIT_STATUS))
            }
            Err(e) => return Err(e.into()),
        };
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
