//! `shardsched bench`: the tools that measure matching, so that optimisations are judged by
//! numbers taken the same way before and after.
//!
//! `bench match` answers two questions (issues 2 and 7):
//!
//! - **How long does the work take as a whole process?** That is the figure Fluxion's
//!   resource-query was measured by, so for the three reference workloads of
//!   `../shared/bench/README.md` we spawn this very binary as `shardsched query` with the
//!   README's command stream on stdin and time it end to end (exec, graph load, every match,
//!   output), several times, reporting the median.
//! - **Where does that time go?** A second, fresh process loads the graph and runs the same
//!   stream through [`Matcher::run`] — the entry point `query`, replay and the shards use, so
//!   no benchmark-only fast path can flatter the numbers — timing every call for median and
//!   p99, timing the load, and reading its own memory from `/proc/self/status`. It runs in a
//!   fresh process (this binary again, with `--graph … --json`) so that one workload's freed
//!   memory cannot hide in the next one's RSS delta and the peak (VmHWM) belongs to one
//!   workload alone.
//!
//! Without `--workload`, `bench match --nodes N` (a generated cluster) or `--graph FILE` runs
//! M allocates and then R allocate-or-reserves in-process and prints the same inside figures.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};
use shardsched_jobspec::Jobspec;
use shardsched_matcher::{MatchOp, MatchOutcome, MatchPolicy, Matcher, PruneFilters};
use shardsched_resource::{GraphFormat, ResourceGraph, generated_cluster, read_graph_file};

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
    Match(MatchArgs),
}

/// Flags of `shardsched bench match`.
#[derive(Args, Debug, Clone)]
#[command(group(
    ArgGroup::new("source")
        .required(true)
        .args(["workload", "nodes", "graph"])
))]
pub struct MatchArgs {
    /// Reference workload of ../shared/bench/README.md (`all` runs the three).
    #[arg(long, value_enum, value_name = "NAME")]
    pub workload: Option<WorkloadName>,
    /// Folder with the bench inputs [default: $SHARDSCHED_BENCH_DIR, else ../shared/bench].
    #[arg(long, value_name = "DIR")]
    pub bench_dir: Option<PathBuf>,
    /// Whole-process repetitions per workload; the median is reported (0 skips them).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub repeat: usize,
    /// Run only the first N match commands of each workload stream (for long runs and quick
    /// checks; Fluxion's figure then no longer applies and no speed-up is shown).
    #[arg(long, value_name = "N", requires = "workload",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Print the workload's command stream (what `shardsched query` gets on stdin, after
    /// --limit) and exit: for profiling `query` on exactly the measured input.
    #[arg(long, requires = "workload")]
    pub print_stream: bool,
    /// Generated cluster of N nodes (racks of 64, 2 sockets × 22 cores, 2 gpus and 4 × 16 GB
    /// memory per socket: the shape of the bench GRUGs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub nodes: Option<u64>,
    /// Graph file to load (format from the extension unless --format says).
    #[arg(long, value_name = "FILE")]
    pub graph: Option<PathBuf>,
    /// Format of --graph: grug, jgf, rv1exec or spec.
    #[arg(long, requires = "graph", value_name = "FORMAT")]
    pub format: Option<GraphFormat>,
    /// Jobspec to match [default: one exclusive node].
    #[arg(long, value_name = "FILE", conflicts_with = "workload")]
    pub jobspec: Option<PathBuf>,
    /// Match policy (first, high, low, hinode, lonode, hinodex, lonodex, …).
    #[arg(long, default_value = "first", conflicts_with = "workload")]
    pub policy: String,
    /// Number of `allocate` matches.
    #[arg(
        long,
        default_value_t = 1024,
        value_name = "M",
        conflicts_with = "workload"
    )]
    pub matches: usize,
    /// Number of `allocate_orelse_reserve` matches after the allocates.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "R",
        conflicts_with = "workload"
    )]
    pub reserve: usize,
    /// Prune filters, as `shardsched query --prune-filters`.
    #[arg(long, default_value = "ALL:core,ALL:node")]
    pub prune_filters: String,
    /// Print machine-readable JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The reference workloads, by the README's names.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadName {
    #[value(name = "high-1024")]
    High1024,
    #[value(name = "first-1024")]
    First1024,
    #[value(name = "low-4096")]
    Low4096,
    #[value(name = "all")]
    All,
}

/// One reference workload: `allocate` × `match allocate JOBSPEC`, then
/// `reserve` × `match allocate_orelse_reserve JOBSPEC`, then `quit`.
#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    graph: &'static str,
    policy: &'static str,
    jobspec: &'static str,
    allocate: usize,
    reserve: usize,
    /// Fluxion resource-query (flux-sched fd257f71), whole process, on the project machine.
    fluxion_s: f64,
}

/// The README's table, in its order.
const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "high-1024",
        graph: "bench1024.graphml",
        policy: "high",
        jobspec: "a_node_excl.yaml",
        allocate: 1024,
        reserve: 300,
        fluxion_s: 31.0,
    },
    Workload {
        name: "first-1024",
        graph: "bench1024.graphml",
        policy: "first",
        jobspec: "c_socket_22c_1g.yaml",
        allocate: 2048,
        reserve: 300,
        fluxion_s: 1.3,
    },
    Workload {
        name: "low-4096",
        graph: "bench4096.graphml",
        policy: "low",
        jobspec: "d_64node_excl.yaml",
        allocate: 64,
        reserve: 20,
        fluxion_s: 12.6,
    },
];

/// The default jobspec of `--nodes`/`--graph` runs: one node, exclusive (the same text as
/// `a_node_excl.yaml`, built in so a generated cluster needs no files at all).
const ONE_NODE_EXCLUSIVE: &str = "version: 9999
resources:
  - type: node
    count: 1
    exclusive: true
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: 1
attributes:
  system:
    duration: 3600
tasks:
  - command: [ \"app\" ]
    slot: default
    count:
      per_slot: 1
";

/// How memory is measured, stated in every report because RSS deltas and allocator counts
/// differ and the acceptance figures say "said which".
const MEMORY_METHOD: &str = "RSS delta: VmRSS from /proc/self/status before and after graph \
     load + Matcher::new, in a fresh process (an upper bound on what the graph keeps: freed \
     parse buffers may stay resident); peak = VmHWM of that process";

/// Latency figures over a set of calls, in microseconds (nearest-rank percentiles).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Latency {
    pub calls: usize,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub total_ms: f64,
}

impl Latency {
    fn of(samples: &[Duration]) -> Latency {
        let mut ns: Vec<u64> = samples
            .iter()
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .collect();
        ns.sort_unstable();
        let total: u128 = ns.iter().map(|&n| u128::from(n)).sum();
        let us = |n: u64| n as f64 / 1e3;
        Latency {
            calls: ns.len(),
            median_us: us(nearest_rank(&ns, 0.5)),
            p99_us: us(nearest_rank(&ns, 0.99)),
            max_us: us(ns.last().copied().unwrap_or(0)),
            mean_us: if ns.is_empty() {
                0.0
            } else {
                total as f64 / ns.len() as f64 / 1e3
            },
            total_ms: total as f64 / 1e6,
        }
    }
}

/// The value at percentile `p` (0..=1) of sorted samples, nearest-rank method; 0 if empty.
fn nearest_rank<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One phase of a run (all calls with the same operation).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Phase {
    pub op: String,
    pub allocated: usize,
    pub reserved: usize,
    pub no_match: usize,
    pub latency: Latency,
}

/// Time to get a graph ready to match.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Load {
    /// Reading/generating the resource graph.
    pub graph_ms: f64,
    /// `Matcher::new`: scheduling state, calendars and prune aggregates.
    pub state_ms: f64,
    pub total_ms: f64,
}

/// Memory as seen from inside the measuring process.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Memory {
    pub method: String,
    pub rss_before_bytes: u64,
    pub rss_after_load_bytes: u64,
    pub load_delta_bytes: u64,
    pub bytes_per_vertex: f64,
    /// VmHWM at the end of the run: the process's peak resident set.
    pub peak_bytes: u64,
}

/// The inside view of one run: load, per-call latency, memory.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct InsideReport {
    pub source: String,
    pub policy: String,
    pub jobspec: String,
    pub vertices: usize,
    pub load: Load,
    /// Every `Matcher::run` call of the run.
    pub all: Latency,
    pub phases: Vec<Phase>,
    /// `None` where /proc/self/status is unavailable (not Linux).
    pub memory: Option<Memory>,
}

/// Whole-process timings of `shardsched query` on a workload stream.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct ProcessReport {
    pub command: String,
    pub runs_s: Vec<f64>,
    pub median_s: f64,
    /// CPU time (user + system) of each run: unlike wall time it barely moves when other
    /// work shares the machine, so before/after comparisons stay fair on a busy box.
    pub runs_cpu_s: Vec<f64>,
    pub median_cpu_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// Allocated / reserved / no-match counts read back from the query output, which must
    /// equal the inside run's (else the two measured different work).
    pub allocated: usize,
    pub reserved: usize,
    pub no_match: usize,
}

/// Everything measured for one reference workload.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct WorkloadReport {
    pub name: String,
    pub graph: String,
    pub policy: String,
    pub jobspec: String,
    pub commands: usize,
    /// Whether `--limit` cut the stream short (Fluxion's figure then does not apply).
    pub truncated: bool,
    pub process: Option<ProcessReport>,
    pub fluxion_s: Option<f64>,
    pub speedup: Option<f64>,
    pub inside: InsideReport,
    /// Disagreements between the process and inside runs, if any.
    pub warnings: Vec<String>,
}

/// `--json` output of a workload run.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct WorkloadsDocument {
    pub bench_dir: String,
    pub repeat: usize,
    /// `/proc/loadavg` when the runs started and ended: wall times are only comparable
    /// between runs on an equally quiet machine.
    pub loadavg_start: Option<String>,
    pub loadavg_end: Option<String>,
    pub workloads: Vec<WorkloadReport>,
}

/// Runs `shardsched bench`.
pub fn main(args: &BenchArgs) -> Result<()> {
    match &args.command {
        BenchCommand::Match(m) => match_main(m),
    }
}

fn match_main(args: &MatchArgs) -> Result<()> {
    if let Some(name) = args.workload {
        return run_workloads(args, name);
    }
    let source = match (&args.graph, args.nodes) {
        (Some(path), _) => {
            let format = match args.format {
                Some(f) => f,
                None => GraphFormat::from_path(path).with_context(|| {
                    format!(
                        "--graph {}: can't tell the format from the extension; say --format",
                        path.display()
                    )
                })?,
            };
            GraphSource::File(path.clone(), format)
        }
        (None, Some(n)) => GraphSource::Generated(
            usize::try_from(n).with_context(|| format!("--nodes {n}: too large"))?,
        ),
        (None, None) => bail!("give --workload, --nodes or --graph"),
    };
    let (js_text, js_label) = match &args.jobspec {
        Some(path) => (
            std::fs::read_to_string(path)
                .with_context(|| format!("--jobspec {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (
            ONE_NODE_EXCLUSIVE.to_string(),
            "one exclusive node (built in)".to_string(),
        ),
    };
    let js = shardsched_jobspec::parse(&js_text).with_context(|| js_label.clone())?;
    let policy = MatchPolicy::parse(&args.policy).context("--policy")?;
    let filters =
        PruneFilters::parse(args.prune_filters.trim_matches('"')).context("--prune-filters")?;
    let report = measure_inside(
        &source,
        &js,
        &js_label,
        (&args.policy, policy),
        &filters,
        args.matches,
        args.reserve,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_inside(&report));
    }
    Ok(())
}

/// Where the graph of an inside run comes from.
enum GraphSource {
    Generated(usize),
    File(PathBuf, GraphFormat),
}

impl GraphSource {
    fn label(&self) -> String {
        match self {
            GraphSource::Generated(n) => format!("generated {n} nodes"),
            GraphSource::File(p, _) => p.display().to_string(),
        }
    }

    fn load(&self) -> Result<ResourceGraph> {
        Ok(match self {
            GraphSource::Generated(n) => generated_cluster(*n)
                .build()
                .with_context(|| format!("generating a {n}-node cluster"))?,
            GraphSource::File(path, format) => read_graph_file(*format, path)?,
        })
    }
}

/// Loads the graph and runs `allocate` allocates then `reserve` allocate-or-reserves through
/// [`Matcher::run`], timing each call. Job ids count from 1 as in `shardsched query`.
fn measure_inside(
    source: &GraphSource,
    js: &Jobspec,
    js_label: &str,
    (policy_name, policy): (&str, MatchPolicy),
    filters: &PruneFilters,
    allocate: usize,
    reserve: usize,
) -> Result<InsideReport> {
    let rss_before = proc_status_bytes("VmRSS");
    let started = Instant::now();
    let graph = source.load()?;
    let graph_time = started.elapsed();
    let vertices = graph.len();
    let started = Instant::now();
    let mut matcher = Matcher::new(graph, policy, filters);
    let state_time = started.elapsed();
    let rss_after = proc_status_bytes("VmRSS");

    let mut all = Vec::with_capacity(allocate + reserve);
    let mut phases = Vec::new();
    let mut jobid = 1u64;
    for (op, count, name) in [
        (MatchOp::Allocate, allocate, "allocate"),
        (
            MatchOp::AllocateOrElseReserve,
            reserve,
            "allocate_orelse_reserve",
        ),
    ] {
        if count == 0 {
            continue;
        }
        let mut phase = Phase {
            op: name.to_string(),
            ..Phase::default()
        };
        let mut samples = Vec::with_capacity(count);
        for _ in 0..count {
            let t = Instant::now();
            let outcome = matcher.run(op, js, jobid, 0);
            samples.push(t.elapsed());
            match outcome.with_context(|| format!("match {name} (job {jobid})"))? {
                MatchOutcome::Allocated(_) => phase.allocated += 1,
                MatchOutcome::Reserved(_) => phase.reserved += 1,
                MatchOutcome::NoMatch { .. } | MatchOutcome::Satisfiable(_) => phase.no_match += 1,
            }
            jobid += 1;
        }
        phase.latency = Latency::of(&samples);
        all.extend(samples);
        phases.push(phase);
    }
    // Keep the matcher alive until the peak is read, so VmHWM covers the filled state.
    let peak = proc_status_bytes("VmHWM");
    drop(matcher);

    let memory = match (rss_before, rss_after, peak) {
        (Some(before), Some(after), Some(peak)) => {
            let delta = after.saturating_sub(before);
            Some(Memory {
                method: MEMORY_METHOD.to_string(),
                rss_before_bytes: before,
                rss_after_load_bytes: after,
                load_delta_bytes: delta,
                bytes_per_vertex: delta as f64 / vertices.max(1) as f64,
                peak_bytes: peak,
            })
        }
        _ => None,
    };
    Ok(InsideReport {
        source: source.label(),
        policy: policy_name.to_string(),
        jobspec: js_label.to_string(),
        vertices,
        load: Load {
            graph_ms: ms(graph_time),
            state_ms: ms(state_time),
            total_ms: ms(graph_time + state_time),
        },
        all: Latency::of(&all),
        phases,
        memory,
    })
}

/// A `kB` field of `/proc/self/status` in bytes; `None` off Linux or if absent.
fn proc_status_bytes(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The bench folder: `--bench-dir`, else `$SHARDSCHED_BENCH_DIR`, else `../shared/bench`
/// relative to the current directory (the checkout sits beside `shared/`).
fn bench_dir(args: &MatchArgs) -> Result<PathBuf> {
    let (dir, how) = match (&args.bench_dir, std::env::var_os("SHARDSCHED_BENCH_DIR")) {
        (Some(d), _) => (d.clone(), "--bench-dir"),
        (None, Some(d)) => (PathBuf::from(d), "SHARDSCHED_BENCH_DIR"),
        (None, None) => (PathBuf::from("../shared/bench"), "the default"),
    };
    std::fs::canonicalize(&dir).with_context(|| {
        format!(
            "bench inputs not found at {} ({how}); give --bench-dir or set SHARDSCHED_BENCH_DIR",
            dir.display()
        )
    })
}

/// The first three fields of `/proc/loadavg` (1, 5 and 15 minute load averages).
fn loadavg() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Clock ticks per second of the times in `/proc/*/stat` (`USER_HZ`, 100 on Linux for every
/// mainstream architecture; `getconf CLK_TCK` would need libc).
const CLOCK_TICKS: f64 = 100.0;

/// CPU seconds (user + system) of this process's waited-for children: fields `cutime` and
/// `cstime` of `/proc/self/stat`. The difference across a `wait` is that child's CPU time,
/// with no race (the kernel adds it when the child is reaped).
fn children_cpu_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces; the
    // first of them is field 3 (state), so cutime (16) and cstime (17) are at 13 and 14.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((ticks(13)? + ticks(14)?) as f64 / CLOCK_TICKS)
}

/// The README's command stream, cut to `limit` match commands, ending with `quit`.
fn command_stream(w: &Workload, allocate: usize, reserve: usize) -> String {
    let mut s = String::new();
    for _ in 0..allocate {
        let _ = writeln!(s, "match allocate {}", w.jobspec);
    }
    for _ in 0..reserve {
        let _ = writeln!(s, "match allocate_orelse_reserve {}", w.jobspec);
    }
    s.push_str("quit\n");
    s
}

fn run_workloads(args: &MatchArgs, name: WorkloadName) -> Result<()> {
    let chosen: Vec<&Workload> = match name {
        WorkloadName::All => WORKLOADS.iter().collect(),
        one => {
            let wanted = match one {
                WorkloadName::High1024 => "high-1024",
                WorkloadName::First1024 => "first-1024",
                _ => "low-4096",
            };
            WORKLOADS.iter().filter(|w| w.name == wanted).collect()
        }
    };
    if args.print_stream {
        let [w] = chosen.as_slice() else {
            bail!("--print-stream takes one workload, not `all`");
        };
        let (allocate, reserve) = prefix(w, args.limit);
        print!("{}", command_stream(w, allocate, reserve));
        return Ok(());
    }
    let dir = bench_dir(args)?;
    let exe = std::env::current_exe().context("locating this executable")?;
    let mut doc = WorkloadsDocument {
        bench_dir: dir.display().to_string(),
        repeat: args.repeat,
        loadavg_start: loadavg(),
        loadavg_end: None,
        workloads: Vec::new(),
    };
    for w in chosen {
        doc.workloads.push(run_workload(args, &exe, &dir, w)?);
    }
    doc.loadavg_end = loadavg();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render_workloads(&doc));
    }
    Ok(())
}

/// The (allocate, reserve) counts of `w`'s stream cut to its first `limit` match commands.
fn prefix(w: &Workload, limit: Option<u64>) -> (usize, usize) {
    let full = w.allocate + w.reserve;
    let limit = limit
        .map_or(full, |l| usize::try_from(l).unwrap_or(usize::MAX))
        .min(full);
    let allocate = w.allocate.min(limit);
    (allocate, limit - allocate)
}

fn run_workload(args: &MatchArgs, exe: &Path, dir: &Path, w: &Workload) -> Result<WorkloadReport> {
    let (allocate, reserve) = prefix(w, args.limit);
    let limit = allocate + reserve;
    let truncated = limit < w.allocate + w.reserve;
    for f in [w.graph, w.jobspec] {
        let p = dir.join(f);
        if !p.is_file() {
            bail!("{}: missing bench input {}", w.name, p.display());
        }
    }

    eprintln!("bench match: {}: inside run ({limit} matches)…", w.name);
    let inside = inside_in_child(args, exe, dir, w, allocate, reserve)?;

    let mut warnings = Vec::new();
    let process = if args.repeat == 0 {
        None
    } else {
        let stream = command_stream(w, allocate, reserve);
        let mut runs = Vec::with_capacity(args.repeat);
        let mut cpu = Vec::with_capacity(args.repeat);
        let mut counts = (0, 0, 0);
        let mut command = String::new();
        for rep in 0..args.repeat {
            eprintln!(
                "bench match: {}: whole process {}/{}…",
                w.name,
                rep + 1,
                args.repeat
            );
            let run = run_query_process(exe, dir, w, &stream)?;
            runs.push(run.elapsed.as_secs_f64());
            cpu.extend(run.cpu_s);
            counts = run.counts;
            command = run.command;
        }
        let inside_counts = inside.phases.iter().fold((0, 0, 0), |acc, p| {
            (acc.0 + p.allocated, acc.1 + p.reserved, acc.2 + p.no_match)
        });
        if counts != inside_counts {
            warnings.push(format!(
                "query output has allocated/reserved/no-match {counts:?} but the inside run \
                 had {inside_counts:?}: the two runs did different work"
            ));
        }
        let mut sorted = runs.clone();
        sorted.sort_by(f64::total_cmp);
        let mut sorted_cpu = cpu.clone();
        sorted_cpu.sort_by(f64::total_cmp);
        Some(ProcessReport {
            command,
            median_s: nearest_rank(&sorted, 0.5),
            median_cpu_s: nearest_rank(&sorted_cpu, 0.5),
            runs_cpu_s: cpu,
            min_s: sorted.first().copied().unwrap_or(0.0),
            max_s: sorted.last().copied().unwrap_or(0.0),
            runs_s: runs,
            allocated: counts.0,
            reserved: counts.1,
            no_match: counts.2,
        })
    };
    let fluxion_s = (!truncated).then_some(w.fluxion_s);
    let speedup = match (&process, fluxion_s) {
        (Some(p), Some(f)) if p.median_s > 0.0 => Some(f / p.median_s),
        _ => None,
    };
    Ok(WorkloadReport {
        name: w.name.to_string(),
        graph: w.graph.to_string(),
        policy: w.policy.to_string(),
        jobspec: w.jobspec.to_string(),
        commands: limit,
        truncated,
        process,
        fluxion_s,
        speedup,
        inside,
        warnings,
    })
}

/// Runs the inside measurement of `w` in a fresh process of this binary (see the module
/// doc for why) and reads back its JSON report.
fn inside_in_child(
    args: &MatchArgs,
    exe: &Path,
    dir: &Path,
    w: &Workload,
    allocate: usize,
    reserve: usize,
) -> Result<InsideReport> {
    let output = Command::new(exe)
        .arg("bench")
        .arg("match")
        .arg("--graph")
        .arg(dir.join(w.graph))
        .args(["--format", "grug", "--policy", w.policy])
        .arg("--jobspec")
        .arg(dir.join(w.jobspec))
        .args(["--matches", &allocate.to_string()])
        .args(["--reserve", &reserve.to_string()])
        .args(["--prune-filters", &args.prune_filters, "--json"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !output.status.success() {
        bail!(
            "{}: inside run failed ({}): {}",
            w.name,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let mut report: InsideReport = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("{}: reading the inside run's report", w.name))?;
    // The child saw absolute paths; report the README's names.
    report.source = w.graph.to_string();
    report.jobspec = w.jobspec.to_string();
    Ok(report)
}

struct ProcessRun {
    elapsed: Duration,
    /// `None` where /proc/self/stat is unavailable.
    cpu_s: Option<f64>,
    counts: (usize, usize, usize),
    command: String,
}

/// Spawns `shardsched query -L GRAPH -S CA -P POLICY -t OUT` in the bench folder with
/// `stream` on stdin, timed from spawn to exit; then counts outcomes in OUT.
fn run_query_process(exe: &Path, dir: &Path, w: &Workload, stream: &str) -> Result<ProcessRun> {
    let out = std::env::temp_dir().join(format!(
        "shardsched-bench-{}-{}.out",
        std::process::id(),
        w.name
    ));
    let query_args = ["query", "-L", w.graph, "-S", "CA", "-P", w.policy, "-t"];
    let command = format!(
        "(cd {}; shardsched {} OUT < stream)",
        dir.display(),
        query_args.join(" ")
    );
    let cpu_before = children_cpu_s();
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(query_args)
        .arg(&out)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", exe.display()))?;
    let mut stdin = child.stdin.take().context("child stdin")?;
    let mut stderr = child.stderr.take().context("child stderr")?;
    // Feed stdin and drain stderr concurrently: the stream is larger than a pipe buffer and
    // a child writing errors must never block on us.
    let (write_result, err_text, status) = std::thread::scope(|s| {
        let writer = s.spawn(move || {
            let r = stdin.write_all(stream.as_bytes());
            drop(stdin);
            r
        });
        let reader = s.spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let status = child.wait();
        (writer.join(), reader.join(), status)
    });
    let elapsed = started.elapsed();
    let cpu_s = match (cpu_before, children_cpu_s()) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    let status = status.context("waiting for shardsched query")?;
    let err_text = err_text.unwrap_or_default();
    let result = (|| {
        if !status.success() {
            bail!("shardsched query failed ({status}): {}", err_text.trim());
        }
        match write_result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("feeding shardsched query: {e}"),
            Err(_) => bail!("feeding shardsched query: writer thread panicked"),
        }
        if !err_text.trim().is_empty() {
            bail!(
                "shardsched query reported errors, the run is not valid: {}",
                err_text.lines().take(5).collect::<Vec<_>>().join("; ")
            );
        }
        let text = std::fs::read_to_string(&out)
            .with_context(|| format!("reading query output {}", out.display()))?;
        let count = |needle: &str| text.lines().filter(|l| *l == needle).count();
        Ok(ProcessRun {
            elapsed,
            cpu_s,
            counts: (
                count("INFO: RESOURCES=ALLOCATED"),
                count("INFO: RESOURCES=RESERVED"),
                count("INFO: No matching resources found"),
            ),
            command: command.clone(),
        })
    })();
    let _ = std::fs::remove_file(&out);
    result
}

/// A plain text table: the first `left` columns (names) left-aligned, the rest (figures)
/// right-aligned.
fn table(left: usize, header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            if i > 0 {
                l.push_str("  ");
            }
            if i < left {
                l.push_str(cell);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(cell);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(rule.iter().map(String::as_str).collect());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

fn phase_rows(label: &str, r: &InsideReport, rows: &mut Vec<Vec<String>>) {
    for p in &r.phases {
        rows.push(vec![
            label.to_string(),
            p.op.clone(),
            p.latency.calls.to_string(),
            p.allocated.to_string(),
            p.reserved.to_string(),
            p.no_match.to_string(),
            format!("{:.1}", p.latency.median_us),
            format!("{:.1}", p.latency.p99_us),
            format!("{:.1}", p.latency.max_us),
            format!("{:.1}", p.latency.total_ms),
        ]);
    }
}

const PHASE_HEADER: [&str; 10] = [
    "run",
    "op",
    "calls",
    "alloc",
    "resv",
    "none",
    "median µs",
    "p99 µs",
    "max µs",
    "total ms",
];

fn render_workloads(doc: &WorkloadsDocument) -> String {
    let mut rows = Vec::new();
    for w in &doc.workloads {
        let mem = w.inside.memory.as_ref();
        rows.push(vec![
            format!("{}{}", w.name, if w.truncated { "*" } else { "" }),
            w.commands.to_string(),
            w.process
                .as_ref()
                .map_or("-".into(), |p| format!("{:.3}", p.median_s)),
            w.process
                .as_ref()
                .filter(|p| !p.runs_cpu_s.is_empty())
                .map_or("-".into(), |p| format!("{:.2}", p.median_cpu_s)),
            w.fluxion_s.map_or("-".into(), |f| format!("{f:.1}")),
            w.speedup.map_or("-".into(), |s| format!("{s:.1}×")),
            format!("{:.1}", w.inside.all.median_us),
            format!("{:.1}", w.inside.all.p99_us),
            format!("{:.1}", w.inside.load.total_ms),
            mem.map_or("-".into(), |m| mib(m.load_delta_bytes)),
            mem.map_or("-".into(), |m| format!("{:.0}", m.bytes_per_vertex)),
            mem.map_or("-".into(), |m| mib(m.peak_bytes)),
        ]);
    }
    let mut out = table(
        1,
        &[
            "workload",
            "matches",
            "process s",
            "CPU s",
            "Fluxion s",
            "speed-up",
            "median µs",
            "p99 µs",
            "load ms",
            "load MiB",
            "B/vertex",
            "peak MiB",
        ],
        &rows,
    );
    out.push('\n');
    let mut detail = Vec::new();
    for w in &doc.workloads {
        phase_rows(&w.name, &w.inside, &mut detail);
    }
    out.push_str("Per call of Matcher::run, by phase:\n");
    out.push_str(&table(2, &PHASE_HEADER, &detail));
    out.push('\n');
    let _ = writeln!(out, "bench inputs: {}", doc.bench_dir);
    let _ = writeln!(
        out,
        "process s: median of {} whole `shardsched query -L <graph> -S CA -P <policy> -t <tmp>` \
         runs (spawn to exit) with the README's stream on stdin; CPU s: user + system of \
         that child (cutime/cstime of /proc/self/stat across its wait)",
        doc.repeat
    );
    for w in &doc.workloads {
        if let Some(p) = &w.process {
            let runs: Vec<String> = p.runs_s.iter().map(|s| format!("{s:.3}")).collect();
            let cpu: Vec<String> = p.runs_cpu_s.iter().map(|s| format!("{s:.2}")).collect();
            let _ = writeln!(
                out,
                "  {}: runs {} s wall; {} s CPU",
                w.name,
                runs.join(", "),
                cpu.join(", ")
            );
        }
    }
    let _ = writeln!(
        out,
        "median/p99 µs: per Matcher::run call (nearest rank), in a fresh process; load ms: graph \
         read + Matcher::new (split: {})",
        doc.workloads
            .iter()
            .map(|w| format!(
                "{} {:.1} + {:.1}",
                w.name, w.inside.load.graph_ms, w.inside.load.state_ms
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "memory: {MEMORY_METHOD}");
    let _ = writeln!(
        out,
        "load average (1/5/15 min): {} at start, {} at end",
        doc.loadavg_start.as_deref().unwrap_or("?"),
        doc.loadavg_end.as_deref().unwrap_or("?")
    );
    if doc.workloads.iter().any(|w| w.truncated) {
        let _ = writeln!(
            out,
            "* only the first --limit match commands were run; Fluxion's figure does not apply"
        );
    }
    for w in &doc.workloads {
        for warning in &w.warnings {
            let _ = writeln!(out, "WARNING: {}: {warning}", w.name);
        }
    }
    out
}

fn render_inside(r: &InsideReport) -> String {
    let mem = r.memory.as_ref();
    let row = vec![
        r.source.clone(),
        r.policy.clone(),
        r.vertices.to_string(),
        r.all.calls.to_string(),
        format!("{:.1}", r.all.median_us),
        format!("{:.1}", r.all.p99_us),
        format!("{:.1}", r.load.total_ms),
        mem.map_or("-".into(), |m| mib(m.load_delta_bytes)),
        mem.map_or("-".into(), |m| format!("{:.0}", m.bytes_per_vertex)),
        mem.map_or("-".into(), |m| mib(m.peak_bytes)),
    ];
    let mut out = table(
        1,
        &[
            "graph",
            "policy",
            "vertices",
            "matches",
            "median µs",
            "p99 µs",
            "load ms",
            "load MiB",
            "B/vertex",
            "peak MiB",
        ],
        &[row],
    );
    out.push('\n');
    let mut detail = Vec::new();
    phase_rows(&r.source, r, &mut detail);
    out.push_str("Per call of Matcher::run, by phase:\n");
    out.push_str(&table(2, &PHASE_HEADER, &detail));
    out.push('\n');
    let _ = writeln!(out, "jobspec: {}", r.jobspec);
    let _ = writeln!(
        out,
        "load ms: graph {:.1} + Matcher::new {:.1}",
        r.load.graph_ms, r.load.state_ms
    );
    match mem {
        Some(_) => {
            let _ = writeln!(out, "memory: {MEMORY_METHOD}");
        }
        None => {
            let _ = writeln!(out, "memory: not measured (/proc/self/status unavailable)");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 0.5), 50);
        assert_eq!(nearest_rank(&v, 0.99), 99);
        assert_eq!(nearest_rank(&[7u64], 0.99), 7);
        assert_eq!(nearest_rank::<u64>(&[], 0.5), 0);
    }

    #[test]
    fn stream_follows_the_readme() {
        let w = &WORKLOADS[2];
        let s = command_stream(w, 2, 1);
        assert_eq!(
            s,
            "match allocate d_64node_excl.yaml\nmatch allocate d_64node_excl.yaml\n\
             match allocate_orelse_reserve d_64node_excl.yaml\nquit\n"
        );
    }

    #[test]
    fn table_aligns() {
        let t = table(1, &["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "a    bb\n---  --\nxyz   1\n");
    }
}
