//! The reference workloads of `../shared/bench/README.md`, each measured from inside (in a
//! fresh process of this binary) and as whole `shardsched query` processes.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use shardsched_histogram::nearest_rank;

use super::query_process::{
    ProcessRun, QueryProgram, STREAM_FILE, first_difference, run_query_process,
};
use super::report::{
    self, FluxionReport, InsideReport, ProcessReport, WorkloadReport, WorkloadsDocument,
};
use super::{MatchArgs, WorkloadName};
use crate::inputs::find_bench_dir;

/// One reference workload: `allocate` × `match allocate JOBSPEC`, then
/// `reserve` × `match allocate_orelse_reserve JOBSPEC`, then `quit`.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// The README's name.
    pub name: &'static str,
    /// Graph file in the bench folder.
    pub graph: &'static str,
    /// Match policy.
    pub policy: &'static str,
    /// Jobspec file in the bench folder.
    pub jobspec: &'static str,
    /// `match allocate` commands.
    pub allocate: usize,
    /// `match allocate_orelse_reserve` commands after them.
    pub reserve: usize,
    /// Fluxion resource-query (flux-sched fd257f71), whole process, on the project machine.
    pub fluxion_s: f64,
}

/// The README's table, in its order.
pub const WORKLOADS: [Workload; 3] = [
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

/// `bench match --workload NAME`: each chosen workload inside and as whole processes.
pub fn run(args: &MatchArgs, name: WorkloadName) -> Result<()> {
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
    let dir = find_bench_dir(args.bench_dir.as_deref(), Path::new("../shared/bench"))
        .map_err(anyhow::Error::msg)?;
    let exe = std::env::current_exe().context("locating this executable")?;
    // The runs start in the bench folder: a relative path is the caller's.
    let fluxion = match &args.fluxion {
        Some(path) => {
            let absolute = std::path::absolute(path)
                .with_context(|| format!("--fluxion {}", path.display()))?;
            if !absolute.is_file() {
                bail!("--fluxion {}: no such file", path.display());
            }
            Some(absolute)
        }
        None => None,
    };
    let mut doc = WorkloadsDocument {
        bench_dir: dir.display().to_string(),
        repeat: args.repeat,
        loadavg_start: loadavg(),
        loadavg_end: None,
        workloads: Vec::new(),
    };
    for w in chosen {
        doc.workloads
            .push(run_workload(args, &exe, fluxion.as_deref(), &dir, w)?);
    }
    doc.loadavg_end = loadavg();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", report::render_workloads(&doc));
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

fn run_workload(
    args: &MatchArgs,
    exe: &Path,
    fluxion_exe: Option<&Path>,
    dir: &Path,
    w: &Workload,
) -> Result<WorkloadReport> {
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
    let (process, fluxion) = if args.repeat == 0 {
        (None, None)
    } else {
        // The stream is a file, as `< stream` in a shell gives it, the same for both
        // programs; it and every run's outputs live in a scratch folder removed at the end.
        let scratch = tempfile::Builder::new()
            .prefix("shardsched-bench-")
            .tempdir()
            .context("making a scratch folder")?;
        let stream = scratch.path().join(STREAM_FILE);
        std::fs::write(&stream, command_stream(w, allocate, reserve))
            .with_context(|| format!("writing {}", stream.display()))?;
        let mut ours = Runs::default();
        let mut fluxion = fluxion_exe.map(|_| Runs::default());
        let mut difference = None;
        for rep in 0..args.repeat {
            eprintln!(
                "bench match: {}: whole process {}/{}…",
                w.name,
                rep + 1,
                args.repeat
            );
            let run = run_query_process(QueryProgram::Ours(exe), dir, w, scratch.path())?;
            if let (Some(path), Some(theirs)) = (fluxion_exe, &mut fluxion) {
                let their_run =
                    run_query_process(QueryProgram::Fluxion(path), dir, w, scratch.path())?;
                difference = difference.or_else(|| first_difference(&run, &their_run));
                theirs.add(their_run);
            }
            ours.add(run);
        }
        let inside_counts = inside.phases.iter().fold((0, 0, 0), |acc, p| {
            (acc.0 + p.allocated, acc.1 + p.reserved, acc.2 + p.no_match)
        });
        if ours.counts != inside_counts {
            warnings.push(format!(
                "query output has allocated/reserved/no-match {:?} but the inside run \
                 had {inside_counts:?}: the two runs did different work",
                ours.counts
            ));
        }
        if let Some(difference) = &difference {
            warnings.push(format!(
                "shardsched query and Fluxion's resource-query printed different outputs: \
                 {difference}"
            ));
        }
        let fluxion = fluxion.map(|runs| FluxionReport {
            process: runs.report(),
            same_output: difference.is_none(),
        });
        (Some(ours.report()), fluxion)
    };
    let fluxion_s = match &fluxion {
        Some(f) => Some(f.process.median_s),
        None => (!truncated).then_some(w.fluxion_s),
    };
    let speedup = match (&process, fluxion_s) {
        (Some(p), Some(f)) if p.median_s > 0.0 => Some(f / p.median_s),
        _ => None,
    };
    let cpu_speedup = match (&process, &fluxion) {
        (Some(p), Some(f)) if p.median_cpu_s > 0.0 && !f.process.runs_cpu_s.is_empty() => {
            Some(f.process.median_cpu_s / p.median_cpu_s)
        }
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
        fluxion,
        cpu_speedup,
        inside,
        warnings,
    })
}

/// The whole-process runs of one program on one workload.
#[derive(Default)]
struct Runs {
    wall_s: Vec<f64>,
    cpu_s: Vec<f64>,
    counts: (usize, usize, usize),
    command: String,
}

impl Runs {
    fn add(&mut self, run: ProcessRun) {
        self.wall_s.push(run.elapsed.as_secs_f64());
        self.cpu_s.extend(run.cpu_s);
        self.counts = run.counts;
        self.command = run.command;
    }

    fn report(self) -> ProcessReport {
        let mut sorted = self.wall_s.clone();
        sorted.sort_by(f64::total_cmp);
        let mut sorted_cpu = self.cpu_s.clone();
        sorted_cpu.sort_by(f64::total_cmp);
        ProcessReport {
            command: self.command,
            median_s: nearest_rank(&sorted, 0.5),
            median_cpu_s: nearest_rank(&sorted_cpu, 0.5),
            runs_cpu_s: self.cpu_s,
            min_s: sorted.first().copied().unwrap_or(0.0),
            max_s: sorted.last().copied().unwrap_or(0.0),
            runs_s: self.wall_s,
            allocated: self.counts.0,
            reserved: self.counts.1,
            no_match: self.counts.2,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
