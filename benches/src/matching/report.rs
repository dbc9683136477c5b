//! What `bench match` reports: the figures (serialised for `--json`) and their tables.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shardsched_histogram::nearest_rank;

/// How memory is measured, stated in every report because RSS deltas and allocator counts
/// differ and the acceptance figures say "said which".
pub const MEMORY_METHOD: &str = "RSS delta: VmRSS from /proc/self/status before and after graph \
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
    /// The figures of `samples`.
    pub fn of(samples: &[Duration]) -> Latency {
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

/// Fluxion's resource-query on the same stream, each run right after one of ours.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct FluxionReport {
    pub process: ProcessReport,
    /// Whether every run's `-t` file and standard output were byte for byte ours.
    pub same_output: bool,
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
    /// Fluxion's whole-process time: measured side by side (`fluxion`) when `--fluxion`
    /// was given, else the README's figure (none for a `--limit`ed stream).
    pub fluxion_s: Option<f64>,
    /// `fluxion_s` ÷ our median wall time.
    pub speedup: Option<f64>,
    /// Fluxion's resource-query run side by side (`--fluxion`).
    pub fluxion: Option<FluxionReport>,
    /// Fluxion's median CPU time ÷ ours (only when measured side by side).
    pub cpu_speedup: Option<f64>,
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

/// The per-call table under a summary: each run's phases, one row each.
fn phase_table<'a>(runs: impl IntoIterator<Item = (&'a str, &'a InsideReport)>) -> String {
    let mut rows = Vec::new();
    for (label, r) in runs {
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
    format!(
        "Per call of Matcher::run, by phase:\n{}\n",
        table(2, &PHASE_HEADER, &rows)
    )
}

/// The columns both summaries end with: per-call latency, load time, memory.
const INSIDE_HEADER: [&str; 6] = [
    "median µs",
    "p99 µs",
    "load ms",
    "load MiB",
    "B/vertex",
    "peak MiB",
];

/// `r`'s cells under [`INSIDE_HEADER`].
fn inside_cells(r: &InsideReport) -> [String; 6] {
    let mem = r.memory.as_ref();
    [
        format!("{:.1}", r.all.median_us),
        format!("{:.1}", r.all.p99_us),
        format!("{:.1}", r.load.total_ms),
        mem.map_or("-".into(), |m| mib(m.load_delta_bytes)),
        mem.map_or("-".into(), |m| format!("{:.0}", m.bytes_per_vertex)),
        mem.map_or("-".into(), |m| mib(m.peak_bytes)),
    ]
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

/// The report of `bench match --workload` for people.
pub fn render_workloads(doc: &WorkloadsDocument) -> String {
    let mut rows = Vec::new();
    for w in &doc.workloads {
        let mut row = vec![
            format!("{}{}", w.name, if w.truncated { "*" } else { "" }),
            w.commands.to_string(),
            w.process
                .as_ref()
                .map_or("-".into(), |p| format!("{:.3}", p.median_s)),
            w.process
                .as_ref()
                .filter(|p| !p.runs_cpu_s.is_empty())
                .map_or("-".into(), |p| format!("{:.3}", p.median_cpu_s)),
            w.fluxion_s.map_or("-".into(), |f| match w.fluxion {
                Some(_) => format!("{f:.3}"),
                None => format!("{f:.1}†"),
            }),
            w.fluxion
                .as_ref()
                .filter(|f| !f.process.runs_cpu_s.is_empty())
                .map_or("-".into(), |f| format!("{:.3}", f.process.median_cpu_s)),
            w.speedup.map_or("-".into(), |s| format!("{s:.1}×")),
            w.cpu_speedup.map_or("-".into(), |s| format!("{s:.1}×")),
            w.fluxion.as_ref().map_or("-".into(), |f| {
                (if f.same_output { "yes" } else { "NO" }).into()
            }),
        ];
        row.extend(inside_cells(&w.inside));
        rows.push(row);
    }
    let mut header = vec![
        "workload",
        "matches",
        "process s",
        "CPU s",
        "Fluxion s",
        "Fluxion CPU s",
        "speed-up",
        "CPU speed-up",
        "same output",
    ];
    header.extend(INSIDE_HEADER);
    let mut out = table(1, &header, &rows);
    out.push('\n');
    out.push_str(&phase_table(
        doc.workloads.iter().map(|w| (w.name.as_str(), &w.inside)),
    ));
    let _ = writeln!(out, "bench inputs: {}", doc.bench_dir);
    let _ = writeln!(
        out,
        "process s: median of {} whole `shardsched query -L <graph> -S CA -P <policy> -t <tmp>` \
         runs (spawn to exit) with the README's stream on stdin; CPU s: user + system of \
         that child (getrusage of the waited-for children across its wait)",
        doc.repeat
    );
    if doc.workloads.iter().any(|w| w.fluxion.is_some()) {
        let _ = writeln!(
            out,
            "Fluxion s, Fluxion CPU s: its resource-query (--fluxion) with the same flags and \
             stream, each run right after one of ours; same output: its -t file and standard \
             output byte for byte ours in every run"
        );
    }
    if doc
        .workloads
        .iter()
        .any(|w| w.fluxion.is_none() && w.fluxion_s.is_some())
    {
        let _ = writeln!(
            out,
            "† Fluxion's figure from ../shared/bench/README.md (flux-sched fd257f71 on the \
             project's machine), not measured here: --fluxion PATH times it side by side"
        );
    }
    let runs = |p: &ProcessReport| {
        let wall: Vec<String> = p.runs_s.iter().map(|s| format!("{s:.3}")).collect();
        let cpu: Vec<String> = p.runs_cpu_s.iter().map(|s| format!("{s:.3}")).collect();
        format!("runs {} s wall; {} s CPU", wall.join(", "), cpu.join(", "))
    };
    for w in &doc.workloads {
        if let Some(p) = &w.process {
            let _ = writeln!(out, "  {}: {}", w.name, runs(p));
        }
        if let Some(f) = &w.fluxion {
            let _ = writeln!(out, "  {} (Fluxion): {}", w.name, runs(&f.process));
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

/// The report of an inside run for people.
pub fn render_inside(r: &InsideReport) -> String {
    let mut row = vec![
        r.source.clone(),
        r.policy.clone(),
        r.vertices.to_string(),
        r.all.calls.to_string(),
    ];
    row.extend(inside_cells(r));
    let mut header = vec!["graph", "policy", "vertices", "matches"];
    header.extend(INSIDE_HEADER);
    let mut out = table(1, &header, &[row]);
    out.push('\n');
    out.push_str(&phase_table([(r.source.as_str(), r)]));
    let _ = writeln!(out, "jobspec: {}", r.jobspec);
    let _ = writeln!(
        out,
        "load ms: graph {:.1} + Matcher::new {:.1}",
        r.load.graph_ms, r.load.state_ms
    );
    match r.memory {
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
    fn an_inside_report_reads_as_a_summary_then_its_phases() {
        let report = InsideReport {
            source: "generated 2 nodes".into(),
            policy: "first".into(),
            jobspec: "one exclusive node (built in)".into(),
            vertices: 40,
            load: Load {
                graph_ms: 1.0,
                state_ms: 0.5,
                total_ms: 1.5,
            },
            all: Latency::of(&[Duration::from_micros(3), Duration::from_micros(5)]),
            phases: vec![Phase {
                op: "allocate".into(),
                allocated: 2,
                latency: Latency::of(&[Duration::from_micros(3), Duration::from_micros(5)]),
                ..Phase::default()
            }],
            memory: None,
        };
        let text = render_inside(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "graph              policy  vertices  matches  median µs  p99 µs  load ms  load MiB  \
             B/vertex  peak MiB"
        );
        assert_eq!(
            lines[2],
            "generated 2 nodes   first        40        2        3.0     5.0      1.5         -         -         -"
        );
        assert_eq!(lines[4], "Per call of Matcher::run, by phase:");
        assert!(
            lines[7].starts_with("generated 2 nodes  allocate"),
            "{text}"
        );
        assert_eq!(lines[8], "");
        assert_eq!(lines[9], "jobspec: one exclusive node (built in)");
        assert!(text.ends_with("memory: not measured (/proc/self/status unavailable)\n"));
    }

    #[test]
    fn table_aligns() {
        let t = table(1, &["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "a    bb\n---  --\nxyz   1\n");
    }
}
