//! `shardsched`: the command-line entry point. Each subcommand lives in its own module.
//!
//! The commands fall in three groups:
//!
//! - **the system**: `up` (a coordinator and one shard per queue on loopback, supervised),
//!   `coordinator`, `shard` and `cert` (the processes and certificates `up` starts and issues);
//! - **the user's commands**, which talk to a running system through the directory named by
//!   `SHARDSCHED_DIR` (see [`client`]): `submit`, `jobs`, `job info`, `cancel`,
//!   `queue list`, `resource list`, and `demo`;
//! - **offline tools**: `query` (Fluxion's resource-query), `bench`, `replay`, `workload`.

mod bench;
mod bench_e2e;
mod bench_moves;
mod cert_cmd;
mod client;
mod coordinator_cmd;
mod demo;
mod differential;
mod duration_arg;
mod query;
mod replay;
mod shard_cmd;
mod supervise_cmd;
mod up;
mod workload;

use clap::{Args, Parser, Subcommand};

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
    /// Starts a coordinator and one shard per queue on loopback, and supervises them.
    Up(up::UpArgs),
    /// Submits a job to its queue's shard and prints its id.
    Submit(client::submit::SubmitArgs),
    /// Lists jobs (yours, pending and running, unless told otherwise).
    Jobs(client::jobs::JobsArgs),
    /// One job in detail: `job info ID`.
    Job(client::jobs::JobArgs),
    /// Cancels jobs.
    Cancel(client::jobs::CancelArgs),
    /// Queues: `queue list`; for admins `add`, `remove`, `update`, `enable`, `disable`,
    /// `start`, `stop`, `move`, and `moves` to watch them.
    Queue(client::status::QueueArgs),
    /// Nodes, their owning queues and states: `resource list`; for admins `down`, `up`,
    /// `drain`, `undrain`.
    Resource(client::status::ResourceArgs),
    /// Re-reads the coordinator's configuration file: its queues replace the run-time
    /// changes (`queue add|remove|update`). Admin only.
    Reload(client::queue_config::ReloadArgs),
    /// Runs a short scripted workload against a running `up` and tells what happened.
    Demo(demo::DemoArgs),
    /// The coordinator: queue configuration, node ownership, routing table.
    Coordinator(coordinator_cmd::CoordinatorArgs),
    /// One queue's scheduling shard.
    Shard(shard_cmd::ShardArgs),
    /// Certificates from the cluster CA: `cert issue --role ROLE --name NAME --out DIR`.
    Cert(cert_cmd::CertArgs),
    /// Fluxion resource-query compatible matcher: reads commands on standard input.
    Query(query::QueryArgs),
    /// Benchmarks: matching latency on generated clusters or graph files, and the whole
    /// system end to end (`bench e2e`).
    Bench(BenchCli),
    /// Replays a workload (SWF) through the real queue manager and matcher in virtual time.
    Replay(replay::ReplayArgs),
    /// Generates synthetic workloads.
    Workload(workload::WorkloadArgs),
    /// Runs one exec job under supervision (started by a shard; docs/EXEC.md).
    #[command(hide = true)]
    Supervise(supervise_cmd::SuperviseArgs),
    /// Random resource-query cases through `query` and Fluxion's resource-query, compared
    /// byte for byte (a developer's instrument; docs/MATCHING.md).
    #[command(hide = true)]
    Differential(differential::DifferentialArgs),
}

/// `shardsched bench`: the matching benchmarks of [`bench`], plus `e2e` from [`bench_e2e`].
/// The two live in separate modules with separate owners, so this wrapper flattens the
/// former's subcommands next to the latter's instead of editing either.
#[derive(Args)]
struct BenchCli {
    #[command(subcommand)]
    command: BenchCliCommand,
}

#[derive(Subcommand)]
enum BenchCliCommand {
    #[command(flatten)]
    Matching(bench::BenchCommand),
    /// The whole system over QUIC on loopback: submit throughput and submit→allocated
    /// latency through one shard, then two at once.
    E2e(bench_e2e::E2eArgs),
    /// Node moves between two shards: one idle node, 100, a queue's 1,024, a job's end to
    /// its node up in the recipient (docs/BENCHMARKS.md, "Moves").
    Moves(bench_moves::MovesArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Up(args) => up::main(&args),
        Command::Submit(args) => client::submit::main(&args),
        Command::Jobs(args) => client::jobs::jobs_main(&args),
        Command::Job(args) => client::jobs::job_main(&args),
        Command::Cancel(args) => client::jobs::cancel_main(&args),
        Command::Queue(args) => client::status::queue_main(&args),
        Command::Resource(args) => client::status::resource_main(&args),
        Command::Reload(args) => client::queue_config::reload_main(&args),
        Command::Demo(args) => demo::main(&args),
        Command::Coordinator(args) => coordinator_cmd::main(&args),
        Command::Shard(args) => shard_cmd::main(&args),
        Command::Cert(args) => cert_cmd::main(&args),
        Command::Query(args) => query::main(&args),
        Command::Bench(BenchCli { command }) => match command {
            BenchCliCommand::Matching(command) => bench::main(&bench::BenchArgs { command }),
            BenchCliCommand::E2e(args) => bench_e2e::main(&args),
            BenchCliCommand::Moves(args) => bench_moves::main(&args),
        },
        Command::Replay(args) => replay::main(&args),
        Command::Workload(args) => workload::main(&args),
        Command::Supervise(args) => supervise_cmd::main(&args),
        Command::Differential(args) => differential::main(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            client::output::say(format_args!("{e:#}"));
            std::process::ExitCode::FAILURE
        }
    }
}
