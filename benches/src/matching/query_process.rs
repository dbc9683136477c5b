//! One reference workload as a whole process: `shardsched query` (or Fluxion's
//! resource-query, side by side) spawned with the workload's command stream on stdin, timed
//! from spawn to exit, its CPU time read from `getrusage(RUSAGE_CHILDREN)` across its wait,
//! its outputs kept for comparison and its outcomes counted.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::resource::{UsageWho, getrusage};

use super::workloads::Workload;

/// The program a whole-process run times: both take the same flags and the same stream.
#[derive(Debug, Clone, Copy)]
pub enum QueryProgram<'a> {
    /// This binary, as `shardsched query`.
    Ours(&'a Path),
    /// Fluxion's resource-query.
    Fluxion(&'a Path),
}

impl QueryProgram<'_> {
    fn path(&self) -> &Path {
        match self {
            QueryProgram::Ours(p) | QueryProgram::Fluxion(p) => p,
        }
    }

    /// What the report calls it, and what comes before the flags.
    fn name_and_leading_args(&self) -> (&'static str, &'static [&'static str]) {
        match self {
            QueryProgram::Ours(_) => ("shardsched", &["query"]),
            QueryProgram::Fluxion(_) => ("resource-query", &[]),
        }
    }
}

/// One whole run.
pub struct ProcessRun {
    /// Spawn to exit.
    pub elapsed: Duration,
    /// User + system CPU time of the process; `None` where `getrusage` fails.
    pub cpu_s: Option<f64>,
    /// Allocated, reserved and no-match outcomes in its output.
    pub counts: (usize, usize, usize),
    /// Its `-t` file and its standard output, to compare with the other program's.
    pub output: Vec<u8>,
    pub stdout: Vec<u8>,
    /// The command, for the report.
    pub command: String,
}

/// The command stream's file in a workload's scratch folder.
pub const STREAM_FILE: &str = "stream";

/// Spawns `program` with `-L GRAPH -S CA -P POLICY -t OUT` in the bench folder and the
/// stream file of `scratch` (the workload's scratch folder, [`STREAM_FILE`]) on stdin, timed
/// from spawn to exit; then reads its outputs back from `scratch` and counts outcomes.
pub fn run_query_process(
    program: QueryProgram<'_>,
    dir: &Path,
    w: &Workload,
    scratch: &Path,
) -> Result<ProcessRun> {
    let (name, leading) = program.name_and_leading_args();
    let stream = scratch.join(STREAM_FILE);
    let (out, stdout_path) = (
        scratch.join(format!("{name}.out")),
        scratch.join(format!("{name}.stdout")),
    );
    // An earlier run's output must not pass for this one's.
    let _ = std::fs::remove_file(&out);
    let stdin_file =
        File::open(&stream).with_context(|| format!("opening {}", stream.display()))?;
    let flags = ["-L", w.graph, "-S", "CA", "-P", w.policy, "-t"];
    let command = format!(
        "(cd {}; {name} {} OUT < stream > STDOUT)",
        dir.display(),
        leading
            .iter()
            .chain(&flags)
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    );
    let stdout_file = File::create(&stdout_path)
        .with_context(|| format!("creating {}", stdout_path.display()))?;
    let cpu_before = children_cpu_s();
    let started = Instant::now();
    let mut child = Command::new(program.path())
        .args(leading)
        .args(flags)
        .arg(&out)
        .current_dir(dir)
        .stdin(stdin_file)
        .stdout(stdout_file)
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", program.path().display()))?;
    let mut stderr = child.stderr.take().context("child stderr")?;
    // Drain stderr while waiting: a child writing errors must never block on us.
    let (err_text, status) = std::thread::scope(|s| {
        let reader = s.spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let status = child.wait();
        (reader.join(), status)
    });
    let elapsed = started.elapsed();
    let cpu_s = match (cpu_before, children_cpu_s()) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    let status = status.with_context(|| format!("waiting for {name}"))?;
    let err_text = err_text.unwrap_or_default();
    if !status.success() {
        bail!("{name} failed ({status}): {}", err_text.trim());
    }
    if !err_text.trim().is_empty() {
        bail!(
            "{name} reported errors, the run is not valid: {}",
            err_text.lines().take(5).collect::<Vec<_>>().join("; ")
        );
    }
    let output =
        std::fs::read(&out).with_context(|| format!("reading {name}'s {}", out.display()))?;
    let stdout = std::fs::read(&stdout_path)
        .with_context(|| format!("reading {name}'s {}", stdout_path.display()))?;
    let text = String::from_utf8_lossy(&output);
    let count = |needle: &str| text.lines().filter(|l| *l == needle).count();
    let counts = (
        count("INFO: RESOURCES=ALLOCATED"),
        count("INFO: RESOURCES=RESERVED"),
        count("INFO: No matching resources found"),
    );
    Ok(ProcessRun {
        elapsed,
        cpu_s,
        counts,
        output,
        stdout,
        command,
    })
}

/// CPU seconds (user + system) of this process's waited-for children, to the microsecond.
/// The difference across a `wait` is that child's CPU time, with no race (the kernel adds
/// it when the child is reaped).
fn children_cpu_s() -> Option<f64> {
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).ok()?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(seconds(usage.user_time()) + seconds(usage.system_time()))
}

/// Where two programs' outputs of the same stream first differ, as
/// `"-t file, line N: ours «…», Fluxion's «…»"`; `None` when both are byte for byte the
/// same.
pub fn first_difference(ours: &ProcessRun, theirs: &ProcessRun) -> Option<String> {
    [
        ("-t file", &ours.output, &theirs.output),
        ("standard output", &ours.stdout, &theirs.stdout),
    ]
    .into_iter()
    .find(|(_, a, b)| a != b)
    .map(|(what, a, b)| {
        let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
        let mut lines = a.lines().zip(b.lines()).enumerate();
        if let Some((i, (x, y))) = lines.find(|(_, (x, y))| x != y) {
            return format!(
                "{what}, line {}: ours {:?}, Fluxion's {:?}",
                i + 1,
                shorten(x),
                shorten(y)
            );
        }
        match (a.lines().count(), b.lines().count()) {
            (ours, theirs) if ours != theirs => {
                format!("{what}: ours has {ours} lines, Fluxion's {theirs}")
            }
            _ => format!("{what}: the same lines, other line endings"),
        }
    })
}

/// At most 120 characters of a line, for a report.
fn shorten(line: &str) -> String {
    line.chars().take(120).collect()
}
