//! `shardsched replay`: replays an SWF workload through the real queue manager and matcher
//! in virtual time, for one or more queue policies, and prints the standard measures
//! (utilisation, wait, bounded slowdown, makespan, scheduler throughput) as one table.
//!
//! The model (units, run-time capping, the order of events at one timestamp, what
//! "scheduler time" covers) is `shardsched_replay::replay`'s, documented in
//! docs/QMANAGER.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shardsched_matcher::MatchPolicy;
use shardsched_qmanager::{Params, QueuePolicy, RESERVATION_DEPTH_DEFAULT, Stats};
use shardsched_replay::metrics::{self, Metrics};
use shardsched_replay::replay::{Replay, Unit};
use shardsched_replay::swf;
use shardsched_resource::{
    GraphFormat, ResourceGraph, SCHEDULER_TYPES, generated_cluster, keep_types, read_graph_file,
};

/// Replays with at least this many jobs show a progress bar (on a terminal).
const PROGRESS_JOBS_MIN: usize = 5_000;
/// Steps between progress bar updates.
const PROGRESS_STEPS: u64 = 512;

/// Flags of `shardsched replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// Cluster to replay on: a cluster spec (`.toml`), or a GRUG / JGF graph file.
    #[arg(long, required_unless_present = "nodes", conflicts_with = "nodes")]
    cluster: Option<PathBuf>,
    /// Replay on a generated cluster of N nodes (2 sockets × 22 cores, 4 gpus each).
    #[arg(long)]
    nodes: Option<usize>,
    /// What one SWF processor is: a whole exclusive node, or one core.
    #[arg(long, default_value = "node", value_parser = parse_unit)]
    unit: Unit,
    /// The workload, in the Standard Workload Format.
    #[arg(long)]
    workload: PathBuf,
    /// Queue policies to compare: fcfs, easy, hybrid, conservative (comma-separated).
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_policy)]
    policy: Vec<QueuePolicy>,
    /// Pending jobs considered per scheduling cycle; 0 = all.
    #[arg(long, default_value_t = 0)]
    queue_depth: usize,
    /// Blocked jobs reserved per cycle under hybrid; 0 = all.
    #[arg(long, default_value_t = RESERVATION_DEPTH_DEFAULT)]
    reservation_depth: usize,
    /// Match policy: first, firstnodex, high, low, hinode, lonode, hinodex, lonodex.
    #[arg(long, default_value = "first")]
    match_policy: String,
    /// Write the workload back with the replayed waits (field 3); with several policies,
    /// one file each, named OUT with the policy before the extension (out.easy.swf).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Also print what the queue manager did: cycles by kind, matches by kind.
    #[arg(long)]
    stats: bool,
    /// Run every cycle by the letter, without the queue manager's shortcuts (much slower):
    /// to check at scale that they change no decision.
    #[arg(long)]
    exhaustive: bool,
}

fn parse_unit(s: &str) -> Result<Unit, String> {
    s.parse()
}

fn parse_policy(s: &str) -> Result<QueuePolicy, String> {
    s.parse()
        .map_err(|e: shardsched_qmanager::QueueError| e.to_string())
}

/// Runs `shardsched replay`.
pub fn main(args: &ReplayArgs) -> Result<()> {
    let match_policy = MatchPolicy::parse(&args.match_policy)?;
    if match_policy.locality {
        // Its top-level choice depends on every candidate's id at once; the queue manager's
        // shortcuts (kept reservations, whole-node search starts) are checked against the
        // other policies only.
        bail!("match policy locality is for `query` sessions only, not for queues");
    }
    let graph = load_cluster(args)?;
    let bytes = std::fs::read(&args.workload)
        .with_context(|| format!("reading {}", args.workload.display()))?;
    let workload =
        swf::parse_bytes(&bytes).with_context(|| format!("reading {}", args.workload.display()))?;
    let capacity = shardsched_replay::replay::capacity(&graph, args.unit);
    println!(
        "replay of {} ({} jobs) on {} {}s, match policy {}",
        args.workload.display(),
        workload.jobs.len(),
        capacity,
        unit_name(args.unit),
        args.match_policy,
    );
    let mut rows = Vec::new();
    for &policy in &args.policy {
        let params = Params {
            policy,
            queue_depth: args.queue_depth,
            reservation_depth: args.reservation_depth,
            match_policy,
            exhaustive: args.exhaustive,
            ..Params::default()
        };
        let (row, fates) = run_one(graph.clone(), &workload, args.unit, params, capacity)?;
        if let Some(out) = &args.output {
            let path = output_path(out, policy, args.policy.len() > 1);
            std::fs::write(&path, swf::write_with_waits(&workload, &fates))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        rows.push(row);
    }
    print!("{}", table(&rows, args.stats));
    Ok(())
}

/// The cluster to replay on, reduced to the types a shard schedules (as a shard loads its
/// graph), so that replay measures and decides what a shard would.
fn load_cluster(args: &ReplayArgs) -> Result<ResourceGraph> {
    let full = load_full_cluster(args)?;
    keep_types(&full, SCHEDULER_TYPES).context("reducing the cluster to the scheduler's types")
}

fn load_full_cluster(args: &ReplayArgs) -> Result<ResourceGraph> {
    match (&args.cluster, args.nodes) {
        (Some(path), _) => {
            let format = GraphFormat::from_path(path).unwrap_or(GraphFormat::Spec);
            read_graph_file(format, path).with_context(|| format!("reading {}", path.display()))
        }
        (None, Some(0)) => bail!("--nodes must be at least 1"),
        (None, Some(n)) => generated_cluster(n)
            .build()
            .context("building the generated cluster"),
        (None, None) => bail!("give --cluster SPEC.toml or --nodes N"),
    }
}

fn unit_name(u: Unit) -> &'static str {
    match u {
        Unit::Core => "core",
        Unit::Node => "node",
    }
}

fn run_one(
    graph: ResourceGraph,
    workload: &swf::Workload,
    unit: Unit,
    params: Params,
    capacity: u64,
) -> Result<(Row, Vec<swf::Fate>)> {
    let policy = params.policy;
    let mut replay = Replay::new(graph, workload, unit, params)?;
    let cpu_before = thread_cpu_secs();
    let bar = progress_bar(workload.jobs.len(), policy);
    let mut steps = 0u64;
    while replay.step()? {
        steps += 1;
        if steps.is_multiple_of(PROGRESS_STEPS) {
            bar.set_position(replay.submitted() as u64);
        }
    }
    bar.finish_and_clear();
    let cpu = thread_cpu_secs()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let secs = replay.scheduler_time().as_secs_f64();
    let metrics = metrics::compute(replay.results(), capacity, secs);
    let row = Row {
        policy,
        metrics,
        stats: replay.queue().stats().clone(),
        cpu,
    };
    Ok((row, replay.fates()))
}

/// One policy's results.
struct Row {
    policy: QueuePolicy,
    metrics: Metrics,
    stats: Stats,
    /// CPU time of this thread over the whole replay (jobspecs and bookkeeping included).
    cpu: Option<f64>,
}

/// User + system CPU seconds of the calling thread (Linux `/proc/thread-self/stat`, in
/// clock ticks of 1/100 s); `None` elsewhere. Unlike wall time, it hardly moves when other
/// work shares the machine.
fn thread_cpu_secs() -> Option<f64> {
    const TICKS_PER_SEC: f64 = 100.0;
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 (state);
    // utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let user: f64 = f.next()?.parse().ok()?;
    let system: f64 = f.next()?.parse().ok()?;
    Some((user + system) / TICKS_PER_SEC)
}

fn progress_bar(jobs: usize, policy: QueuePolicy) -> ProgressBar {
    if jobs < PROGRESS_JOBS_MIN {
        return ProgressBar::hidden();
    }
    // Hidden by indicatif itself when standard error is not a terminal.
    let bar = ProgressBar::with_draw_target(Some(jobs as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} jobs submitted ({eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(policy.name());
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

fn output_path(out: &Path, policy: QueuePolicy, several: bool) -> PathBuf {
    if !several {
        return out.to_path_buf();
    }
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    let name = match out.extension() {
        Some(ext) => format!("{stem}.{}.{}", policy.name(), ext.to_string_lossy()),
        None => format!("{stem}.{}", policy.name()),
    };
    out.with_file_name(name)
}

fn table(rows: &[Row], with_stats: bool) -> String {
    let mut s = String::new();
    let head = [
        "policy",
        "started",
        "not run",
        "util",
        "wait mean",
        "wait p95",
        "bsld",
        "makespan",
        "sched s",
        "jobs/s",
        "cpu s",
    ];
    let _ = writeln!(s, "{}", row_text(head.map(String::from)));
    for Row {
        policy,
        metrics: m,
        cpu,
        ..
    } in rows
    {
        let cells = [
            policy.name().to_string(),
            m.started.to_string(),
            m.not_run.to_string(),
            format!("{:.1}%", m.utilisation * 100.0),
            format!("{:.1}", m.wait_mean),
            m.wait_p95.to_string(),
            format!("{:.2}", m.bsld_mean),
            m.makespan.to_string(),
            format!("{:.3}", m.scheduler_secs),
            format!("{:.0}", m.jobs_per_sec),
            cpu.map_or_else(|| "-".to_string(), |c| format!("{c:.2}")),
        ];
        let _ = writeln!(s, "{}", row_text(cells));
    }
    if with_stats {
        let head = [
            "policy",
            "replan",
            "retry",
            "continue",
            "idle",
            "allocate",
            "reserve",
            "sat",
            "prefiltered",
            "replanned",
            "kept",
            "whole",
        ];
        let _ = writeln!(s, "\n{}", row_text(head.map(String::from)));
        for Row {
            policy: p,
            stats: st,
            ..
        } in rows
        {
            let cells = [
                st.cycles_replan,
                st.cycles_retry,
                st.cycles_continue,
                st.cycles_idle,
                st.match_allocate,
                st.match_reserve,
                st.match_satisfiability,
                st.prefiltered,
                st.reservations_replanned,
                st.reservations_kept,
                st.whole_node_skips,
            ];
            let mut row = vec![p.name().to_string()];
            row.extend(cells.iter().map(u64::to_string));
            let _ = writeln!(s, "{}", row_text(row));
        }
    }
    s
}

/// A table row: the policy left-aligned in 13 columns, then each cell right-aligned in 10
/// and always after at least one space, however wide it is.
fn row_text(cells: impl IntoIterator<Item = String>) -> String {
    let mut out = String::new();
    for (k, c) in cells.into_iter().enumerate() {
        if k == 0 {
            let _ = write!(out, "{c:<12}");
        } else {
            let _ = write!(out, " {c:>10}");
        }
    }
    out
}
