//! `shardsched bench scale`: the whole system at cluster scale on one box (issue 20, item 6).
//!
//! `up` starts a generated cluster of the bench shape (default 16,384 nodes: racks of 64,
//! 2 sockets × 22 cores, 2 gpus and 4 × 16 GB memory per socket) with Q queues (default 32)
//! of equal blocks of nodes, sim executor, journals fsync'd in the working directory. Then:
//!
//! 1. **start**: from spawning `up` to its "is up" line (every queue routable), and the
//!    resident memory of each of its processes once up;
//! 2. **jobs**: J jobs (default 100,000) of one core each, spread evenly over the queues,
//!    submitted as job arrays of at most 64 elements per request ([`PER_REQUEST_MAX`]),
//!    [`IN_FLIGHT_PER_QUEUE`] requests in flight per queue; each runs one simulated second
//!    (at `--time-scale`, 100 by default: 10 ms). jobs/s = J ÷ (the last job's end − the
//!    first submit), both wall clock ms;
//! 3. **moves under load**: once a quarter of the jobs are acknowledged, M nodes (default
//!    1,000) move to the last queue, taken evenly from the others (one request per donor,
//!    all sent at once); figure: the first request to the last move finished (each node up
//!    in the recipient, after the jobs holding it ended);
//! 4. **after**: every job completed (checked in each shard's own list), submit → start per
//!    job (p50, p99: the queue wait and the match), the processes' memory again, CPU time
//!    of the shards, the coordinator and this client during the jobs, the load average.
//!
//! `--json` prints one object (at least `start_s`, `rss_total_mb`, `jobs_per_s`,
//! `move_1000_ms`). docs/BENCHMARKS.md ("Scale") has the figures, docs/SCALE.md what they
//! project to.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;

use crate::system::{BenchDir, UpProcess};

mod load;
mod procs;

pub use procs::ProcessMemory;

/// Most jobs one submit request carries (one job array).
pub const PER_REQUEST_MAX: u32 = 64;
/// Submit requests in flight per queue.
pub const IN_FLIGHT_PER_QUEUE: usize = 4;
/// Jobs per queue at most: a shard keeps 10,000 finished jobs, and the benchmark checks
/// every one ended completed in the shards' own lists.
pub const JOBS_PER_QUEUE_MAX: u64 = 10_000;
/// The simulated run time of every job, seconds.
pub const JOB_SECONDS: u64 = 1;

/// Flags of `shardsched bench scale`.
#[derive(Args, Debug, Clone)]
pub struct ScaleArgs {
    /// Nodes of the generated cluster.
    #[arg(long, default_value_t = 16_384, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub nodes: u64,
    /// Queues (each its own shard), over equal blocks of nodes.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(2..=1024))]
    pub queues: u64,
    /// Jobs, spread evenly over the queues.
    #[arg(long, default_value_t = 100_000)]
    pub jobs: u64,
    /// Nodes moved to the last queue under load, taken evenly from the others.
    #[arg(long, default_value_t = 1000)]
    pub move_nodes: u64,
    /// Jobs per submit request (one job array), at most 64.
    #[arg(long, default_value_t = PER_REQUEST_MAX,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(PER_REQUEST_MAX)))]
    pub per_request: u32,
    /// The shards' sim executor runs this many times faster than real time (every job is
    /// one simulated second).
    #[arg(long, default_value_t = 100)]
    pub time_scale: u32,
    /// Working directory (the journals go there: put it on the disk to measure) [default:
    /// a fresh `target/bench-scale-PID` when ./target exists, else one under the temp dir;
    /// removed afterwards].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// What `bench scale` measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub nodes: u64,
    pub queues: u64,
    pub jobs: u64,
    /// `up` spawned → every queue routable, s.
    pub start_s: f64,
    /// Every process of `up` (itself included) once up, MB (10⁶ bytes).
    pub rss_start_total_mb: f64,
    /// The same after the jobs and the moves, MB.
    pub rss_total_mb: f64,
    /// The coordinator's, after, MB.
    pub rss_coordinator_mb: f64,
    /// The largest shard's, after, MB.
    pub rss_shard_max_mb: f64,
    /// Each process after, by name (`up`, `coordinator`, `shard QUEUE`).
    pub rss_after: Vec<ProcessMemory>,
    /// Jobs ÷ (the last job's end − the first submit), wall clock.
    pub jobs_per_s: f64,
    /// The first submit → the last job's end, s.
    pub jobs_wall_s: f64,
    /// Every submit acknowledged, s after the first.
    pub submitted_s: f64,
    /// Jobs that ended completed (the benchmark fails unless all did).
    pub completed: u64,
    /// Submit → start, per job: 50th and 99th percentile (nearest rank), ms.
    pub match_latency_p50_ms: u64,
    pub match_latency_p99_ms: u64,
    /// Nodes moved under load, and in how many requests.
    pub moved_nodes: u64,
    pub move_requests: u64,
    /// The first move request → the last move finished, ms.
    pub move_1000_ms: f64,
    /// CPU time during the jobs (first submit → last end), s: the shards, the
    /// coordinator, this client.
    pub cpu_shards_s: f64,
    pub cpu_coordinator_s: f64,
    pub cpu_client_s: f64,
    /// /proc/loadavg's 1-minute figure at the end.
    pub load_average_1m: f64,
    /// Cores of this machine.
    pub cores: usize,
    /// The file system of the journals.
    pub file_system: String,
}

/// `shardsched bench scale`.
pub fn main(args: &ScaleArgs) -> Result<()> {
    let plan = Plan::new(args)?;
    let bench = BenchDir::prepare("scale", args.dir.as_deref(), &plan.config_toml())?;
    let result = run(args, &plan, &bench.work, &bench.config, bench.fs.clone());
    bench.finish();
    let report = result?;
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        report_table(&report)
    };
    shardsched_client::output::emit(&text)
}

/// The queues and the moves of one run.
pub struct Plan {
    /// Queue names, `q00`…: name order is index order (the first by name owns a node
    /// two queues define, docs/CONFIG.md).
    pub queues: Vec<String>,
    /// Each queue's block, `[first, last]`.
    pub blocks: Vec<(u64, u64)>,
    /// Per donor (every queue but the last): the nodes it gives the last, the end of its
    /// block.
    pub moves: Vec<Vec<u64>>,
    nodes: u64,
}

impl Plan {
    /// Checks the flags and lays the queues and moves out.
    pub fn new(args: &ScaleArgs) -> Result<Plan> {
        let q = args.queues;
        if args.nodes < q {
            bail!("--nodes {} is fewer than --queues {q}", args.nodes);
        }
        if args.jobs.div_ceil(q) > JOBS_PER_QUEUE_MAX {
            bail!("more than {JOBS_PER_QUEUE_MAX} jobs per queue: raise --queues or lower --jobs");
        }
        let per = args.nodes / q;
        let donors = q - 1;
        // Each donor keeps at least half its block, so its own jobs keep running.
        if args.move_nodes > donors * (per / 2) {
            bail!(
                "--move-nodes {} is more than half of the other queues' nodes ({})",
                args.move_nodes,
                donors * (per / 2)
            );
        }
        let width = (q - 1).to_string().len();
        let queues: Vec<String> = (0..q).map(|i| format!("q{i:0width$}")).collect();
        let blocks: Vec<(u64, u64)> = (0..q)
            .map(|i| {
                let last = if i + 1 == q {
                    args.nodes
                } else {
                    (i + 1) * per
                };
                (i * per, last - 1)
            })
            .collect();
        let moves = (0..donors)
            .map(|d| {
                let share = args.move_nodes / donors + u64::from(d < args.move_nodes % donors);
                let (_, last) = blocks[d as usize];
                (last + 1 - share..=last).collect()
            })
            .collect();
        Ok(Plan {
            queues,
            blocks,
            moves,
            nodes: args.nodes,
        })
    }

    /// The configuration: the generated cluster, each queue over its block, fcfs with
    /// `first`; the last queue also over the nodes it will be given (`owns` its block, so
    /// the donors own theirs).
    pub fn config_toml(&self) -> String {
        let mut out = format!(
            "# shardsched bench scale: {} nodes, {} queues\ndefault_queue = \"{}\"\n\n\
             [cluster.inline]\nname = \"bench\"\n\n[[cluster.inline.nodes]]\n\
             hosts = \"node[0-{}]\"\nrack_size = 64\nsockets = 2\ncores_per_socket = 22\n\
             gpus_per_socket = 2\nmemory_per_socket_gb = 64\nmemory_pools_per_socket = 4\n",
            self.nodes,
            self.queues.len(),
            self.queues[0],
            self.nodes - 1
        );
        let last = self.queues.len() - 1;
        for (i, (name, &(first, end))) in self.queues.iter().zip(&self.blocks).enumerate() {
            let mut hosts = vec![format!("node[{first}-{end}]")];
            if i == last {
                hosts.extend(
                    self.moves
                        .iter()
                        .filter_map(|m| Some(format!("node[{}-{}]", m.first()?, m.last()?))),
                );
            }
            let _ = write!(
                out,
                "\n[queues.{name}]\nnodes = \"{}\"\npolicy = \"fcfs\"\nmatch_policy = \"first\"\n\
                 default_duration = \"1h\"\nmax_duration = \"24h\"\n",
                hosts.join(",")
            );
            if i == last {
                let _ = writeln!(out, "owns = \"node[{first}-{end}]\"");
            }
        }
        out
    }
}

fn run(
    args: &ScaleArgs,
    plan: &Plan,
    work: &Path,
    config: &Path,
    file_system: String,
) -> Result<ScaleReport> {
    let dir = work.join("up");
    eprintln!(
        "bench scale: starting `up` ({} nodes, {} queues) in {}",
        args.nodes,
        args.queues,
        dir.display()
    );
    let spawned = Instant::now();
    let up = UpProcess::start(
        config,
        &dir,
        &["--time-scale", &args.time_scale.to_string()],
    )?;
    let start_s = spawned.elapsed().as_secs_f64();
    let before = procs::memory_of(up.pid());
    eprintln!(
        "bench scale: up in {start_s:.1} s, {:.0} MB in {} processes",
        procs::total_mb(&before),
        before.len()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(load::run(args, plan, &up.dir, up.pid()));
    let after = procs::memory_of(up.pid());
    up.stop();
    let load = result?;
    let shard_max = after
        .iter()
        .filter(|p| p.name.starts_with("shard"))
        .map(|p| p.rss_mb)
        .fold(0.0, f64::max);
    let coordinator = after
        .iter()
        .find(|p| p.name == "coordinator")
        .map_or(0.0, |p| p.rss_mb);
    Ok(ScaleReport {
        nodes: args.nodes,
        queues: args.queues,
        jobs: args.jobs,
        start_s,
        rss_start_total_mb: procs::total_mb(&before),
        rss_total_mb: procs::total_mb(&after),
        rss_coordinator_mb: coordinator,
        rss_shard_max_mb: shard_max,
        rss_after: after,
        jobs_per_s: load.jobs_per_s,
        jobs_wall_s: load.jobs_wall_s,
        submitted_s: load.submitted_s,
        completed: load.completed,
        match_latency_p50_ms: load.latency_p50_ms,
        match_latency_p99_ms: load.latency_p99_ms,
        moved_nodes: load.moved_nodes,
        move_requests: load.move_requests,
        move_1000_ms: load.move_ms,
        cpu_shards_s: load.cpu.shards_ms as f64 / 1000.0,
        cpu_coordinator_s: load.cpu.coordinator_ms as f64 / 1000.0,
        cpu_client_s: load.cpu.client_ms as f64 / 1000.0,
        load_average_1m: procs::load_average_1m(),
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        file_system,
    })
}

fn report_table(r: &ScaleReport) -> String {
    let mut out = format!(
        "bench scale: {} nodes, {} queues, {} jobs; {} cores, journals on {}\n",
        r.nodes, r.queues, r.jobs, r.cores, r.file_system
    );
    let mut line = |k: &str, v: String| {
        let _ = writeln!(out, "  {k:<34} {v}");
    };
    line("up start", format!("{:.2} s", r.start_s));
    line(
        "memory once up (all processes)",
        format!("{:.0} MB", r.rss_start_total_mb),
    );
    line(
        "memory after (all processes)",
        format!(
            "{:.0} MB (coordinator {:.0} MB, largest shard {:.0} MB)",
            r.rss_total_mb, r.rss_coordinator_mb, r.rss_shard_max_mb
        ),
    );
    line(
        "jobs",
        format!(
            "{} completed in {:.2} s: {:.0} jobs/s (submits acknowledged in {:.2} s)",
            r.completed, r.jobs_wall_s, r.jobs_per_s, r.submitted_s
        ),
    );
    line(
        "submit → start p50 / p99",
        format!(
            "{} ms / {} ms",
            r.match_latency_p50_ms, r.match_latency_p99_ms
        ),
    );
    line(
        "moves under load",
        format!(
            "{} nodes in {} requests: {:.1} ms to the last finished",
            r.moved_nodes, r.move_requests, r.move_1000_ms
        ),
    );
    line(
        "CPU during the jobs",
        format!(
            "shards {:.1} s, coordinator {:.1} s, client {:.1} s; load average {:.2}",
            r.cpu_shards_s, r.cpu_coordinator_s, r.cpu_client_s, r.load_average_1m
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(nodes: u64, queues: u64, move_nodes: u64) -> ScaleArgs {
        ScaleArgs {
            nodes,
            queues,
            jobs: 100,
            move_nodes,
            per_request: 64,
            time_scale: 100,
            dir: None,
            json: false,
        }
    }

    #[test]
    fn the_plan_spreads_moves_over_the_donors_and_the_coordinator_reads_it() {
        let plan = Plan::new(&args(64, 4, 10)).expect("plan");
        assert_eq!(plan.queues, ["q0", "q1", "q2", "q3"]);
        assert_eq!(plan.blocks[3], (48, 63));
        let sizes: Vec<usize> = plan.moves.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 3, 3]);
        assert_eq!(plan.moves[0], [12, 13, 14, 15], "the end of q0's block");
        let text = plan.config_toml();
        let config = shardsched_coordinator::Config::parse(&text, "bench", Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.queues.len(), 4);
        assert!(
            Plan::new(&args(64, 4, 25)).is_err(),
            "more than half the donors' nodes"
        );
        assert!(Plan::new(&args(3, 4, 0)).is_err());
    }
}
