//! shardsched's benchmarks, as a library: `shardsched bench` (crates/cli) is their entry
//! point, and the criterion benches of this package (`benches/`) take their inputs from here.
//!
//! - [`matching`]: `bench match`, the matcher on the reference workloads (whole
//!   `shardsched query` processes and from inside) or on a generated cluster or graph file;
//! - [`e2e`]: `bench e2e`, the whole system over QUIC on loopback: submit throughput and
//!   submit→allocated latency through one shard, then two;
//! - [`moves`]: `bench moves`, node moves between two running queues;
//! - [`scale`]: `bench scale`, a 16,384-node cluster with 32 queues under `up`: start time,
//!   memory, jobs/s with the journals on, 1,000 nodes moved under load;
//! - [`system`]: what the last two share (a `shardsched up` they start, a working directory
//!   on the disk being measured, the generated cluster's configuration);
//! - [`inputs`]: the reference jobspecs and where the shared bench folder is.
//!
//! Every figure is a nearest-rank percentile ([`shardsched_histogram`]). docs/BENCHMARKS.md
//! says how each was measured and what it was.

use anyhow::Result;
use clap::{Args, Subcommand};

pub mod e2e;
pub mod inputs;
pub mod matching;
pub mod moves;
pub mod scale;
pub mod system;

/// Flags of `shardsched bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// What `shardsched bench` measures.
#[derive(Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Matching: the reference workloads (whole process and from inside), or a generated
    /// cluster / graph file run through a sequence of matches.
    Match(matching::MatchArgs),
    /// The whole system over QUIC on loopback: submit throughput and submit→allocated
    /// latency through one shard, then two at once.
    E2e(e2e::E2eArgs),
    /// Node moves between two shards: one idle node, 100, a queue's 1,024, a job's end to
    /// its node up in the recipient (docs/BENCHMARKS.md, "Moves").
    Moves(moves::MovesArgs),
    /// A cluster on one box: `up` of 16,384 nodes and 32 queues, 100,000 jobs, 1,000 nodes
    /// moved under load (docs/BENCHMARKS.md, "Scale"; docs/SCALE.md).
    Scale(scale::ScaleArgs),
}

/// Runs `shardsched bench`.
pub fn main(args: &BenchArgs) -> Result<()> {
    match &args.command {
        BenchCommand::Match(args) => matching::main(args),
        BenchCommand::E2e(args) => e2e::main(args),
        BenchCommand::Moves(args) => moves::main(args),
        BenchCommand::Scale(args) => scale::main(args),
    }
}
