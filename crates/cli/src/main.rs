//! `shardsched`: the command-line entry point. Each subcommand lives in its own module.

mod bench;
mod query;
mod replay;
mod workload;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "shardsched", version, about = "A sharded batch scheduler for HPC clusters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fluxion resource-query compatible matcher: reads commands on standard input.
    Query(query::QueryArgs),
    /// Benchmarks: matching latency on generated clusters or graph files.
    Bench(bench::BenchArgs),
    /// Replays a workload (SWF) through the real queue manager and matcher in virtual time.
    Replay(replay::ReplayArgs),
    /// Generates synthetic workloads.
    Workload(workload::WorkloadArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Query(args) => query::main(&args),
        Command::Bench(args) => bench::main(&args),
        Command::Replay(args) => replay::main(&args),
        Command::Workload(args) => workload::main(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shardsched: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
