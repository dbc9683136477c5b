//! `shardsched`: the command-line entry point.

mod query;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "shardsched",
    version,
    about = "A sharded batch scheduler for HPC clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fluxion resource-query compatible matcher: reads commands on standard input.
    Query(query::QueryArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Query(args) => query::main(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shardsched: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
