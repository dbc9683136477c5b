//! `shardsched workload generate`: synthetic SWF workloads (the model is documented in
//! `shardsched_replay::workload` and docs/QMANAGER.md), so that tests, benches and replays
//! need no downloaded trace. The same flags and seed always give the same file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use shardsched_replay::workload::{GenParams, LOAD_DEFAULT, generate};

/// Flags of `shardsched workload`.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    #[command(subcommand)]
    command: WorkloadCommand,
}

#[derive(Subcommand, Debug, Clone)]
enum WorkloadCommand {
    /// Writes a synthetic workload in the Standard Workload Format.
    Generate(GenerateArgs),
}

#[derive(Args, Debug, Clone)]
struct GenerateArgs {
    /// Number of jobs.
    #[arg(long)]
    jobs: usize,
    /// Cluster size in nodes: job sizes are 1..=NODES nodes, and arrivals are paced for it.
    #[arg(long)]
    nodes: u64,
    /// Seed of the random generator (ChaCha8).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Offered load: requested node-seconds per second over the cluster size.
    #[arg(long, default_value_t = LOAD_DEFAULT)]
    load: f64,
    /// Where to write the SWF file (`-` for standard output).
    #[arg(long)]
    output: PathBuf,
}

/// Runs `shardsched workload`.
pub fn main(args: &WorkloadArgs) -> Result<()> {
    match &args.command {
        WorkloadCommand::Generate(g) => {
            let text = generate(&GenParams {
                jobs: g.jobs,
                nodes: g.nodes,
                seed: g.seed,
                load: g.load,
            })?;
            if g.output.as_os_str() == "-" {
                print!("{text}");
            } else {
                std::fs::write(&g.output, text)
                    .with_context(|| format!("writing {}", g.output.display()))?;
            }
            Ok(())
        }
    }
}
