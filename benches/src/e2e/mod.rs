//! `shardsched bench e2e`: the whole system, end to end, over QUIC on loopback.
//!
//! What a user of a batch scheduler feels is how fast submitted jobs get resources, and
//! how many jobs a second the system takes in. This benchmark measures exactly that on the
//! real processes `shardsched up` starts (coordinator + one shard per queue, mutual TLS,
//! journal, sim executor), from a client speaking the real wire:
//!
//! 1. **one shard, one at a time**: start `up` with a generated cluster (default 1,024
//!    nodes, the bench shape: 2 sockets × 22 cores) split into two queues of equal halves;
//!    submit L one-core jobs to one queue, each after the previous one was answered. This is
//!    the unloaded latency.
//! 2. **one shard**: on the same system, N more jobs to the same queue over one connection
//!    with C requests in flight at once (each on its own QUIC stream, each with its own
//!    idempotency key); wait until every job is allocated.
//! 3. **two shards**: a fresh `up`, N jobs to each queue at the same time.
//!
//! Reported per phase:
//!
//! - **sustained jobs/s**: jobs / (last allocation − first submission), from the shard's own
//!   start times (`JobSummary::start_ms`) and the client's clock at the first send (one
//!   machine, one clock), so it counts only jobs that actually got resources;
//! - **submit→allocated** as the shard recorded it (`start_ms − submit_ms`, median and p99):
//!   millisecond resolution, and it starts when the shard's core takes the request, so it
//!   leaves out the time a request waits in the shard's queue under load;
//! - **submit round trip** (median, p99, µs): from the client sending the request to reading
//!   the job id. The shard answers a submit only after the scheduling pass that follows it
//!   (and after the journal's fsync), so for a job that fits this is an **upper bound on
//!   submit→allocated as the client sees it**, at microsecond resolution. With C requests
//!   in flight it also holds the queueing that C implies (Little's law: C / throughput); the
//!   one-at-a-time phase gives the unloaded figure.
//!
//! - **journal commits** (fsync latency median and p99, commits, writes per commit): every
//!   submit is journaled (fsync) before it is answered, with group commit; each shard writes
//!   its commit statistics to `journal-stats.json` in its state directory, read before and
//!   after each phase.
//!
//! Jobs last an hour of simulated time, and N is kept under the queue's core count, so no
//! job completes during the run and every job can be allocated at once: the figures are the
//! submit and match path alone, not backlog scheduling. The client shares the machine's
//! cores with the shards and the coordinator, which this report does not hide.
//!
//! The journals must be on the real disk for the fsync figures to mean anything: the working
//! directory defaults to `target/bench-e2e-PID` when run from a directory with a `target/`
//! (a cargo checkout), and the report names the file system it is on (a tmpfs is warned
//! about).
//!
//! The phases and the report are here; one phase's submissions and waits in [`phase`], the
//! readings of the shards' journal statistics and of CPU time in [`readings`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use shardsched_client::output::Table;

use crate::system::{self, BenchQueue, UpProcess};

pub mod agents;
pub mod phase;
pub mod readings;

/// Cores per node of the generated cluster (2 sockets × 22 cores, the bench GRUG shape).
pub const CORES_PER_NODE: u64 = 44;
/// How long the benchmark waits for all jobs of a phase to be allocated.
pub const PHASE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often it looks at the shard's job list while waiting for allocations.
pub const ALLOCATION_POLL: Duration = Duration::from_millis(250);

/// Flags of `shardsched bench e2e`.
#[derive(Args, Debug, Clone)]
pub struct E2eArgs {
    /// Jobs submitted to each shard in each phase [default: 20000; 3000 with --agents].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: Option<u64>,
    /// Jobs submitted one at a time (one request in flight) before the throughput run, for
    /// the unloaded submit→allocated latency (0 skips it) [default: 1000; with --agents,
    /// 50 of each size].
    #[arg(long)]
    pub latency_jobs: Option<u64>,
    /// Submit requests in flight at once, per shard (each on its own QUIC stream).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub concurrency: u64,
    /// Nodes in the generated cluster (split in two equal queues; one queue with --agents)
    /// [default: 1024; 16 with --agents].
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    pub nodes: Option<u64>,
    /// Jobs that really run, through one node agent per node (`up --agents`): submit → all
    /// tasks started at 1, 4 and 16 nodes per job, then `/bin/true` jobs per second and CPU
    /// per launched task ([`agents`]).
    #[arg(long)]
    pub agents: bool,
    /// Working directory for the two `up`s (the shards' journals go there: put it on the
    /// disk to measure) [default: a fresh `target/bench-e2e-PID` when ./target exists, else
    /// one under the temp dir; removed afterwards].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Only the one-shard phase.
    #[arg(long)]
    pub one_only: bool,
    /// With the policies that span shards on (docs/POLICIES.md): `--limits` and
    /// `--fairshare` together, to compare with a run without them.
    #[arg(long)]
    pub policies: bool,
    /// With a per-user `max_running` and `max_pending` no job reaches: every job is
    /// admitted through allowances the coordinator lends (docs/POLICIES.md, "Limits").
    #[arg(long)]
    pub limits: bool,
    /// With fair-share on: usage batches, factors, priorities (docs/POLICIES.md,
    /// "Fair-share").
    #[arg(long)]
    pub fairshare: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The figures of one phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    /// `one shard` or `two shards`.
    pub phase: String,
    /// Shards submitted to.
    pub shards: usize,
    /// Jobs submitted (all shards).
    pub jobs: u64,
    /// Requests in flight per shard.
    pub concurrency: u64,
    /// Jobs allocated per second, first submission to last allocation (shard clock).
    pub allocated_per_s: f64,
    /// Submissions acknowledged per second, first send to last answer (client clock).
    pub acked_per_s: f64,
    /// Median submit→allocated, milliseconds (shard clock, ms resolution).
    pub alloc_latency_median_ms: u64,
    /// 99th percentile submit→allocated, milliseconds.
    pub alloc_latency_p99_ms: u64,
    /// Share of jobs allocated within the millisecond of their submission.
    pub alloc_same_ms_share: f64,
    /// Median submit round trip seen by the client, microseconds.
    pub submit_rtt_median_us: u64,
    /// 99th percentile submit round trip, microseconds.
    pub submit_rtt_p99_us: u64,
    /// CPU time (user + system) of the shards per job while submitting, microseconds.
    pub cpu_shards_us_per_job: u64,
    /// CPU time of the coordinator per job, microseconds.
    pub cpu_coordinator_us_per_job: u64,
    /// CPU time of this benchmark client per job, microseconds.
    pub cpu_client_us_per_job: u64,
    /// Cores kept busy on average by all of them while submitting.
    pub cores_busy: f64,
    /// Journal commits (transactions, each one fsync'd) during the phase, all shards.
    pub journal_commits: u64,
    /// Journal writes per commit (group commit at work).
    pub journal_writes_per_commit: f64,
    /// Median commit (fsync) latency, microseconds (within 12.5 %: a histogram).
    pub fsync_median_us: u64,
    /// 99th percentile commit (fsync) latency, microseconds.
    pub fsync_p99_us: u64,
}

/// `shardsched bench e2e`.
pub fn main(args: &E2eArgs) -> Result<()> {
    if args.agents {
        return agents::main(args);
    }
    let (jobs, latency_jobs, nodes) = (
        args.jobs.unwrap_or(20_000),
        args.latency_jobs.unwrap_or(1000),
        args.nodes.unwrap_or(1024),
    );
    if jobs + latency_jobs > (nodes / 2) * CORES_PER_NODE {
        bail!(
            "{} one-core jobs do not all fit in a queue of {} nodes × {CORES_PER_NODE} cores; \
             lower --jobs and --latency-jobs, or raise --nodes",
            jobs + latency_jobs,
            nodes / 2
        );
    }
    system::run_in_bench_dir(
        "e2e",
        args.dir.as_deref(),
        &config_toml(
            nodes,
            args.policies || args.limits,
            args.policies || args.fairshare,
        ),
        args.json,
        |work, config| run_phases(args, jobs, latency_jobs, work, config),
        |reports, work, fs| report_table(nodes, reports, work, fs),
    )
}

/// What one phase does: which queues it submits to, how many jobs each, how many at once.
pub struct Phase {
    /// As the report names it.
    pub name: &'static str,
    /// The queues it submits to.
    pub queues: &'static [&'static str],
    /// Jobs per queue.
    pub jobs: u64,
    /// Requests in flight per queue.
    pub concurrency: u64,
}

fn run_phases(
    args: &E2eArgs,
    jobs: u64,
    latency_jobs: u64,
    work: &Path,
    config: &Path,
) -> Result<Vec<PhaseReport>> {
    let latency = Phase {
        name: "one shard, one at a time",
        queues: &["left"],
        jobs: latency_jobs,
        concurrency: 1,
    };
    let one = Phase {
        name: "one shard",
        queues: &["left"],
        jobs,
        concurrency: args.concurrency,
    };
    let two = Phase {
        name: "two shards",
        queues: &["left", "right"],
        jobs,
        concurrency: args.concurrency,
    };
    // Each group runs on a fresh `up`, so that the two-shard figures do not inherit the
    // first group's jobs.
    let mut groups: Vec<Vec<Phase>> = vec![vec![latency, one]];
    if !args.one_only {
        groups.push(vec![two]);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut reports = Vec::new();
    for (i, group) in groups.iter().enumerate() {
        let dir = work.join(format!("up{}", i + 1));
        eprintln!("bench e2e: starting `up` in {}", dir.display());
        let up = UpProcess::start(config, &dir, &[])?;
        for phase in group.iter().filter(|p| p.jobs > 0) {
            reports.push(runtime.block_on(phase::run(phase, &up.dir, up.pid()))?);
        }
        up.stop();
    }
    Ok(reports)
}

/// What `--limits` adds to the configuration: limits every job is admitted under (none
/// reaches them).
const LIMITS_TOML: &str = "
[limits]
max_running = 1000000
max_pending = 1000000
";

/// What `--fairshare` adds to the configuration.
const FAIRSHARE_TOML: &str = "
[fairshare]
half_life = \"1h\"
";

/// The cluster and its two queues, as the coordinator's TOML (with [`LIMITS_TOML`] and
/// [`FAIRSHARE_TOML`] as asked).
fn config_toml(nodes: u64, limits: bool, fairshare: bool) -> String {
    let half = nodes / 2;
    let queue = |name, nodes| BenchQueue {
        name,
        nodes,
        match_first: true,
    };
    let mut toml = system::config_toml(
        "shardsched bench e2e: a generated cluster split in two equal queues.",
        nodes,
        &[
            "gpus_per_socket = 2",
            "memory_per_socket_gb = 64",
            "memory_pools_per_socket = 4",
        ],
        &[
            queue("left", format!("node[0-{}]", half - 1)),
            queue("right", format!("node[{half}-{}]", nodes - 1)),
        ],
    );
    if limits {
        toml.push_str(LIMITS_TOML);
    }
    if fairshare {
        toml.push_str(FAIRSHARE_TOML);
    }
    toml
}

fn report_table(nodes: u64, reports: &[PhaseReport], work: &Path, fs: &str) -> String {
    let mut out = format!(
        "bench e2e: {} nodes, one-core jobs, sim executor, QUIC + mutual TLS on loopback, \
         {} cores; journals in {} on {fs}\n",
        nodes,
        std::thread::available_parallelism().map_or(0, usize::from),
        work.display()
    );
    let mut table = Table::new(&[
        "PHASE",
        "JOBS",
        "IN FLIGHT",
        "ALLOCATED/S",
        "ALLOC MEDIAN/P99",
        "RTT MEDIAN",
        "RTT P99",
        "CPU/JOB SHARD+COORD+CLIENT",
        "CORES BUSY",
        "FSYNC MEDIAN/P99",
        "COMMITS (WRITES EACH)",
    ]);
    for r in reports {
        table.row(vec![
            r.phase.clone(),
            r.jobs.to_string(),
            format!("{}×{}", r.concurrency, r.shards),
            format!("{:.0}", r.allocated_per_s),
            format!(
                "{}/{} ms ({:.0}% same ms)",
                r.alloc_latency_median_ms,
                r.alloc_latency_p99_ms,
                r.alloc_same_ms_share * 100.0
            ),
            format!("{} µs", r.submit_rtt_median_us),
            format!("{} µs", r.submit_rtt_p99_us),
            format!(
                "{}+{}+{} µs",
                r.cpu_shards_us_per_job, r.cpu_coordinator_us_per_job, r.cpu_client_us_per_job
            ),
            format!("{:.2}", r.cores_busy),
            format!(
                "{:.1}/{:.1} ms",
                r.fsync_median_us as f64 / 1000.0,
                r.fsync_p99_us as f64 / 1000.0
            ),
            format!("{} ({:.1})", r.journal_commits, r.journal_writes_per_commit),
        ]);
    }
    out.push_str(&table.render());
    let by_name = |name: &str| reports.iter().find(|r| r.phase == name);
    if let (Some(one), Some(two)) = (by_name("one shard"), by_name("two shards")) {
        out.push_str(&format!(
            "two shards / one shard: {:.2}× allocated/s\n",
            two.allocated_per_s / one.allocated_per_s.max(f64::MIN_POSITIVE)
        ));
    }
    out
}
