//! `shardsched bench moves`: how fast node moves are, on the real processes `shardsched up`
//! starts (coordinator + two shards, QUIC with mutual TLS on loopback, journals fsync'd on
//! the disk).
//!
//! A move is done when its node is *up in the recipient*: the recipient's
//! `transitions.log` line (docs/MOVES.md) says when, on CLOCK_MONOTONIC, the clock this
//! benchmark reads just before it sends the request: both ends of every figure come from
//! one clock on one host, at nanosecond resolution. The phases:
//!
//! 1. **full queue**: queue `left` owns node[0-N) (default 1,024), `right` (started too, defined
//!    over all 2N nodes) owns the other N. All N nodes of `left` move to `right` in one
//!    request, then back to `left` in one request: a full swap of a queue's nodes. Figure:
//!    request to the last node up.
//! 2. **1,000 idle nodes** (the figure; fewer when a queue has fewer), moved there
//!    and back twice (default 4 samples, each of the same nodes once the previous move
//!    finished): request to the last up.
//! 3. **one idle node**, repeated (default 200 times, each a different node, 20 ms apart so
//!    that each finds the coordinator's journal idle): request to up.
//!    Median and p99; and where the time goes: the request's round trip (the coordinator
//!    answers once the move is journaled), request to the donor's `released` line (the
//!    coordinator's journal write, `Release` sent, applied by the donor), and from that line
//!    to the recipient's `up` (the donor's journal commit and answer, the coordinator's
//!    journal write of the release, `Acquire` sent and applied).
//! 4. **batch**: 100 idle nodes in one request, repeated (default 5): request to the last up.
//! 5. **job end**: J one-node jobs run on `left` (J = 20, ending 200 ms apart), their nodes
//!    are moved to `right` while the jobs run; per node, from the job's end to the node up in
//!    `right`. The end is taken two ways: the donor's `released` line (when its shard
//!    handled the end, ns), and the job's `end_ms` as `jobs` shows it (ms resolution, turned
//!    into the monotonic clock with an offset read at the start).
//!
//! Before and after the phases, the disk's fsync time is probed in the working directory
//! ([`budget`]; both probes make one median, so that a loaded disk is not caught at one
//! moment only): the single-node and job-end figures are printed beside the journal commits
//! they need in sequence and their budget, commits × 2 fsyncs × that median + 1 ms.
//!
//! The working directory defaults to `target/bench-moves-PID` (on the disk, removed
//! afterwards); the report names its file system.
//!
//! The phases and the report are here; a move and its timing in [`measure`], the
//! shards' transition logs read as they grow in [`log_tail`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use shardsched_client::output::Table;
use shardsched_histogram::nearest_rank;

use crate::e2e::readings::CpuSample;
use crate::system::{self, BenchQueue, UpProcess};

use budget::{Budget, IDLE_MOVE_COMMITS, JOB_END_COMMITS};
use measure::MoveBench;

pub mod budget;
pub mod log_tail;
pub mod measure;

/// How long the benchmark waits for any one move (or the jobs) before giving up.
pub const MOVE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often it reads the transition logs while waiting (the figures come from the lines'
/// own timestamps, so this only bounds the benchmark's pace, not what it measures).
pub const LOG_POLL: Duration = Duration::from_millis(1);
/// How often it asks the coordinator whether a move is finished (between moves; not
/// part of any figure).
pub const FINISH_POLL: Duration = Duration::from_millis(2);
/// Nodes of the large-move phase (issue 20: a 1,000-node move < 100 ms).
pub const LARGE_MOVE_NODES: u64 = 1000;
/// Pause between two single-node moves (not part of any figure): a move is listed as
/// finished once the coordinator took the recipient's acknowledgement, before its
/// completion record is on disk; a move sent at once would wait behind that write.
pub const SINGLE_MOVE_SPACING: Duration = Duration::from_millis(20);
/// The job-end phase's jobs end this far apart (real time).
pub const JOB_END_SPACING_MS: u64 = 200;
/// Simulated time in the shards runs this much faster than real time, so that the job-end
/// phase's jobs (whole simulated seconds) end [`JOB_END_SPACING_MS`] apart.
pub const TIME_SCALE: u64 = 5;

/// Flags of `shardsched bench moves`.
#[derive(Args, Debug, Clone)]
pub struct MovesArgs {
    /// Nodes per queue (the cluster has twice as many).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(2..=8192))]
    pub nodes: u64,
    /// Moves of 1,000 idle nodes (alternately there and back: an even count leaves them
    /// where they were).
    #[arg(long, default_value_t = 4)]
    pub large: u64,
    /// Single idle-node moves.
    #[arg(long, default_value_t = 200)]
    pub single: u64,
    /// Batches of 100 idle nodes.
    #[arg(long, default_value_t = 5)]
    pub batches: u64,
    /// Jobs of the job-end phase.
    #[arg(long, default_value_t = 20)]
    pub job_ends: u64,
    /// Working directory (the journals go there: put it on the disk to measure) [default:
    /// a fresh `target/bench-moves-PID` when ./target exists, else one under the temp dir;
    /// removed afterwards].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One phase's figures, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct MovesReport {
    /// What was measured.
    pub phase: String,
    /// Samples.
    pub samples: usize,
    /// Nodes per move request.
    pub nodes_per_move: usize,
    /// Median, µs.
    pub median_us: u64,
    /// 99th percentile (nearest rank), µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
    /// Journal commits the phase needs in sequence (fsync-bound phases only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commits_in_sequence: Option<u64>,
    /// What the phase may take on this disk (with `commits_in_sequence`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

impl MovesReport {
    /// The figures of `samples_ns` (nanoseconds).
    pub fn new(phase: &str, nodes_per_move: usize, mut samples_ns: Vec<u64>) -> MovesReport {
        let mut us: Vec<u64> = samples_ns.drain(..).map(|ns| ns / 1000).collect();
        us.sort_unstable();
        MovesReport {
            phase: phase.to_owned(),
            samples: us.len(),
            nodes_per_move,
            median_us: nearest_rank(&us, 0.5),
            p99_us: nearest_rank(&us, 0.99),
            max_us: us.last().copied().unwrap_or(0),
            commits_in_sequence: None,
            budget: None,
        }
    }

    /// The same, for a phase that needs `commits` journal commits in sequence (its budget
    /// is set once the disk's fsync time is known).
    fn within(mut self, commits: u64) -> MovesReport {
        self.commits_in_sequence = Some(commits);
        self
    }
}

/// `shardsched bench moves`.
pub fn main(args: &MovesArgs) -> Result<()> {
    let needed = args.single + 100 * args.batches + args.job_ends;
    if needed > args.nodes {
        bail!(
            "--single + 100 × --batches + --job-ends = {needed} nodes, more than the {} of a queue; raise --nodes",
            args.nodes
        );
    }
    system::run_in_bench_dir(
        "moves",
        args.dir.as_deref(),
        &config_toml(args.nodes),
        args.json,
        |work, config| run(args, work, config),
        |reports, work, fs| report_table(args, reports, work, fs),
    )
}

fn run(args: &MovesArgs, work: &Path, config: &Path) -> Result<Vec<MovesReport>> {
    let dir = work.join("up");
    eprintln!("bench moves: starting `up` in {}", dir.display());
    let up = UpProcess::start(config, &dir, &["--time-scale", &TIME_SCALE.to_string()])?;
    let mut fsyncs = budget::probe_fsyncs(work)?;
    // One thread, as the command-line client has: a request's path is the daemons', not
    // this process's hand-offs between workers.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let cpu_before = CpuSample::take(up.pid());
    let result = runtime.block_on(phases(args, &up.dir));
    let cpu = CpuSample::take(up.pid()).minus(&cpu_before);
    // Beside the figures: a move's cost in the processes that make it, and this process's
    // own (its client and the 1 ms reads of the transitions logs).
    eprintln!(
        "bench moves: CPU over the phases: coordinator {:.2} s, shards {:.2} s, this process {:.2} s",
        cpu.coordinator_ms as f64 / 1000.0,
        cpu.shards_ms as f64 / 1000.0,
        cpu.client_ms as f64 / 1000.0
    );
    let after = budget::probe_fsyncs(work);
    up.stop();
    let mut reports = result?;
    fsyncs.extend(after?);
    let fsync = MovesReport::new(
        &format!(
            "fsync: {} KiB appended + fdatasync, before and after the phases",
            budget::PROBE_WRITE_BYTES / 1024
        ),
        0,
        fsyncs,
    );
    for r in &mut reports {
        r.budget = r
            .commits_in_sequence
            .map(|commits| Budget::of_commits(commits, fsync.median_us));
    }
    reports.insert(0, fsync);
    Ok(reports)
}

async fn phases(args: &MovesArgs, dir: &Path) -> Result<Vec<MovesReport>> {
    let mut bench = MoveBench::connect(dir).await?;
    let names = |range: std::ops::Range<u64>| -> Vec<String> {
        range.map(|i| format!("node{i}")).collect()
    };
    let n = args.nodes;
    let mut reports = Vec::new();

    eprintln!("bench moves: full queue: {n} nodes left → right → left");
    let there = bench.move_nodes(&names(0..n), "left", "right").await?;
    let back = bench.move_nodes(&names(0..n), "right", "left").await?;
    reports.push(MovesReport::new(
        &format!("{n} idle nodes (a queue's all), request → last up"),
        n as usize,
        vec![there.last_up_ns, back.last_up_ns],
    ));

    let large = LARGE_MOVE_NODES.min(n);
    eprintln!(
        "bench moves: {} moves of {large} idle nodes, there and back",
        args.large
    );
    let mut samples = Vec::new();
    for i in 0..args.large {
        let (from, to) = if i % 2 == 0 {
            ("left", "right")
        } else {
            ("right", "left")
        };
        samples.push(
            bench
                .move_nodes(&names(0..large), from, to)
                .await?
                .last_up_ns,
        );
    }
    if args.large % 2 == 1 {
        // Back where the next phases expect them.
        bench.move_nodes(&names(0..large), "right", "left").await?;
    }
    reports.push(MovesReport::new(
        &format!("{large} idle nodes, request → last up"),
        large as usize,
        samples,
    ));

    eprintln!("bench moves: {} single idle nodes", args.single);
    let (mut up, mut rtt, mut released, mut handover) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.single {
        // Let the previous move's last journal write (its completion, written after the
        // coordinator marks it finished) end first, so each move is measured alone.
        tokio::time::sleep(SINGLE_MOVE_SPACING).await;
        let m = bench.move_nodes(&names(i..i + 1), "left", "right").await?;
        up.push(m.last_up_ns);
        rtt.push(m.answered_ns);
        released.push(m.released_ns);
        handover.push(m.last_up_ns.saturating_sub(m.released_ns));
    }
    reports.push(MovesReport::new("1 idle node, request → up", 1, up).within(IDLE_MOVE_COMMITS));
    reports.push(MovesReport::new(
        "... request → coordinator's answer",
        1,
        rtt,
    ));
    reports.push(MovesReport::new(
        "... request → donor's released line",
        1,
        released,
    ));
    reports.push(MovesReport::new(
        "... donor's released → recipient's up",
        1,
        handover,
    ));

    eprintln!("bench moves: {} batches of 100 idle nodes", args.batches);
    let mut batch = Vec::new();
    let first = args.single;
    for b in 0..args.batches {
        let from = first + 100 * b;
        let m = bench
            .move_nodes(&names(from..from + 100), "left", "right")
            .await?;
        batch.push(m.last_up_ns);
    }
    reports.push(MovesReport::new(
        "100 idle nodes, request → last up",
        100,
        batch,
    ));

    eprintln!("bench moves: {} job ends", args.job_ends);
    let (by_released, by_end_ms) = bench.job_ends(args.job_ends).await?;
    reports.push(
        MovesReport::new(
            "job end (donor's released line) → up",
            args.job_ends as usize,
            by_released,
        )
        .within(JOB_END_COMMITS),
    );
    reports.push(MovesReport::new(
        "job end (jobs end_ms, ms resolution) → up",
        args.job_ends as usize,
        by_end_ms,
    ));
    bench.close().await;
    Ok(reports)
}

/// Two started queues: `left` owns node[0-N); `right`, defined over all 2N nodes (an
/// overlap: `left` owns the shared half, first by name), owns node[N-2N), so `left`'s nodes
/// can move to it and back while both run.
fn config_toml(nodes: u64) -> String {
    let queue = |name, nodes| BenchQueue {
        name,
        nodes,
        match_first: false,
    };
    system::config_toml(
        &format!("shardsched bench moves: two queues of {nodes} nodes; right may take left's."),
        2 * nodes,
        &[],
        &[
            queue("left", format!("node[0-{}]", nodes - 1)),
            queue("right", format!("node[0-{}]", 2 * nodes - 1)),
        ],
    )
}

fn report_table(args: &MovesArgs, reports: &[MovesReport], work: &Path, fs: &str) -> String {
    let mut out = format!(
        "bench moves: two queues of {} nodes, QUIC + mutual TLS on loopback, {} cores; journals in {} on {fs}\n",
        args.nodes,
        std::thread::available_parallelism().map_or(0, usize::from),
        work.display()
    );
    let mut table = Table::new(&[
        "PHASE", "SAMPLES", "MEDIAN", "P99", "MAX", "COMMITS", "BUDGET",
    ]);
    let ms = |us: u64| format!("{:.2} ms", us as f64 / 1000.0);
    for r in reports {
        table.row(vec![
            r.phase.clone(),
            r.samples.to_string(),
            ms(r.median_us),
            ms(r.p99_us),
            ms(r.max_us),
            r.commits_in_sequence
                .map(|c| c.to_string())
                .unwrap_or_default(),
            r.budget.map(|b| b.formula()).unwrap_or_default(),
        ]);
    }
    out.push_str(&table.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_take_quantiles_in_microseconds() {
        let r = MovesReport::new("x", 1, (1..=100).map(|i| i * 1000).collect());
        assert_eq!(
            (r.median_us, r.p99_us, r.max_us, r.samples),
            (50, 99, 100, 100)
        );
    }
}
