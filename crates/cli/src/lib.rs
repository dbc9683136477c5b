//! The `shardsched` command line: every subcommand, parsed and run by [`main`]. The binary
//! itself is the root package's `src/main.rs`, which only calls [`main`], so that the
//! tests of the binary (the root `tests/`) and `cargo run` at the root find it. Each
//! subcommand lives in its own module.
//!
//! The commands fall in three groups:
//!
//! - **the system**: `up` (a coordinator and one shard per queue on loopback, supervised),
//!   `coordinator`, `shard` and `cert` (the processes and certificates `up` starts and issues);
//! - **the user's commands**, which talk to a running system through the directory named by
//!   `SHARDSCHED_DIR` (see `client_cmd` and [`shardsched_client`]): `submit`, `jobs`,
//!   `job info`, `cancel`, `queue list`, `resource list`, and `demo`;
//! - **offline tools**: `query` (Fluxion's resource-query), `bench` (the benchmarks of
//!   [`shardsched_benches`]), `replay`, `workload`;
//! - **about itself**: `completions SHELL` and `man`, generated from this definition.

mod cert_cmd;
mod client_cmd;
mod coordinator_cmd;
mod deferred;
mod demo;
mod differential;
mod docs_cmd;
mod duration_arg;
mod node_cmd;
mod query;
mod replay;
mod shard_cmd;
mod sim_cmd;
mod telemetry;
mod time_arg;
mod up;
mod workload;

use clap::{Parser, Subcommand};
use deferred::Deferred;

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

/// Each subcommand's arguments are [`Deferred`]: defined only when it is the one run.
#[derive(Subcommand)]
enum Command {
    /// Starts a coordinator and one shard per queue on loopback, and supervises them.
    Up(Deferred<up::UpArgs>),
    /// Submits a job to its queue's shard and prints its id.
    Submit(Deferred<Box<client_cmd::submit::SubmitArgs>>),
    /// Submits a batch script (options in its #SHARDSCHED, #SBATCH or #FLUX: lines) and
    /// prints its id.
    Batch(Deferred<Box<client_cmd::batch::BatchArgs>>),
    /// Lists jobs (yours, pending and running, unless told otherwise).
    Jobs(Deferred<client_cmd::jobs::JobsArgs>),
    /// Core- and GPU-seconds of finished jobs by user, from the job history.
    Usage(Deferred<client_cmd::history::UsageArgs>),
    /// One job in detail: `job info ID`.
    Job(Deferred<client_cmd::jobs::JobArgs>),
    /// Cancels jobs.
    Cancel(Deferred<client_cmd::jobs::CancelArgs>),
    /// Queues: `queue list`; for admins `add`, `remove`, `update`, `enable`, `disable`,
    /// `start`, `stop`, `move`, and `moves` to watch them.
    Queue(Deferred<client_cmd::status::QueueArgs>),
    /// Nodes, their owning queues and states: `resource list`; for admins `down`, `up`,
    /// `drain`, `undrain`.
    Resource(Deferred<client_cmd::status::ResourceArgs>),
    /// Per-user and per-queue limits: `limits` lists them; for admins `limits set NAME
    /// VALUE [--user U | --queue Q]`.
    Limits(Deferred<client_cmd::limits::LimitsArgs>),
    /// Re-reads the coordinator's configuration file: its queues replace the run-time
    /// changes (`queue add|remove|update`). Admin only.
    Reload(Deferred<client_cmd::queue_config::ReloadArgs>),
    /// Runs a short scripted workload against a running `up` and tells what happened.
    Demo(Deferred<demo::DemoArgs>),
    /// The coordinator: queue configuration, node ownership, routing table.
    Coordinator(Deferred<coordinator_cmd::CoordinatorArgs>),
    /// One queue's scheduling shard.
    Shard(Deferred<shard_cmd::ShardArgs>),
    /// The node agent of one compute node: runs the jobs allocated there.
    Node(Deferred<node_cmd::NodeArgs>),
    /// Certificates from the cluster CA: `cert issue --role ROLE --name NAME --out DIR`.
    Cert(Deferred<cert_cmd::CertArgs>),
    /// Fluxion resource-query compatible matcher: reads commands on standard input.
    Query(Deferred<query::QueryArgs>),
    /// Benchmarks: matching latency on generated clusters or graph files, and the whole
    /// system end to end (`bench e2e`).
    Bench(Deferred<shardsched_benches::BenchArgs>),
    /// Replays a workload (SWF) through the real queue manager and matcher in virtual time.
    Replay(Deferred<replay::ReplayArgs>),
    /// Generates synthetic workloads.
    Workload(Deferred<workload::WorkloadArgs>),
    /// The deterministic simulator: the real coordinator and shard cores under a seeded
    /// network, crashes and workload, checked after every step (docs/SIM.md). Exit status
    /// 1 when a seed breaks an invariant.
    Sim(Deferred<sim_cmd::SimArgs>),
    /// Prints a shell's completion script: `shardsched completions bash`.
    Completions(Deferred<docs_cmd::CompletionsArgs>),
    /// Prints the man page (`shardsched man | man -l -`), or writes one page per command
    /// into a directory (`--dir`).
    Man(Deferred<docs_cmd::ManArgs>),
    /// Random resource-query cases through `query` and Fluxion's resource-query, compared
    /// byte for byte (a developer's instrument; docs/MATCHING.md).
    #[command(hide = true)]
    Differential(Deferred<differential::DifferentialArgs>),
}

/// Parses the command line and runs the subcommand: the whole of `shardsched`.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Up(args) => up::main(&args),
        Command::Submit(args) => client_cmd::submit::main(&args),
        Command::Batch(args) => client_cmd::batch::main(&args),
        Command::Jobs(args) => client_cmd::jobs::jobs_main(&args),
        Command::Usage(args) => client_cmd::history::usage_main(&args),
        Command::Job(args) => client_cmd::jobs::job_main(&args),
        Command::Cancel(args) => client_cmd::jobs::cancel_main(&args),
        Command::Queue(args) => client_cmd::status::queue_main(&args),
        Command::Resource(args) => client_cmd::status::resource_main(&args),
        Command::Reload(args) => client_cmd::queue_config::reload_main(&args),
        Command::Limits(args) => client_cmd::limits::main(&args),
        Command::Demo(args) => demo::main(&args),
        Command::Coordinator(args) => coordinator_cmd::main(&args),
        Command::Shard(args) => shard_cmd::main(&args),
        Command::Node(args) => node_cmd::main(&args),
        Command::Cert(args) => cert_cmd::main(&args),
        Command::Query(args) => query::main(&args),
        Command::Bench(args) => shardsched_benches::main(&args),
        Command::Replay(args) => replay::main(&args),
        Command::Workload(args) => workload::main(&args),
        Command::Sim(args) => return sim_cmd::main(&args),
        Command::Completions(args) => docs_cmd::completions_main(&args),
        Command::Man(args) => docs_cmd::man_main(&args),
        Command::Differential(args) => differential::main(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            shardsched_client::output::say(format_args!("{e:#}"));
            std::process::ExitCode::FAILURE
        }
    }
}
