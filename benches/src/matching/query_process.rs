//! One reference workload as a whole process: `shardsched query` spawned with the
//! workload's command stream on stdin, timed from spawn to exit, its CPU time read from
//! `/proc/self/stat` across its wait, its outcomes counted in its output.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::workloads::Workload;

/// One whole `shardsched query` run.
pub struct ProcessRun {
    /// Spawn to exit.
    pub elapsed: Duration,
    /// User + system CPU time of the process; `None` where /proc/self/stat is unavailable.
    pub cpu_s: Option<f64>,
    /// Allocated, reserved and no-match outcomes in its output.
    pub counts: (usize, usize, usize),
    /// The command, for the report.
    pub command: String,
}

/// Spawns `shardsched query -L GRAPH -S CA -P POLICY -t OUT` in the bench folder with
/// `stream` on stdin, timed from spawn to exit; then counts outcomes in OUT.
pub fn run_query_process(exe: &Path, dir: &Path, w: &Workload, stream: &str) -> Result<ProcessRun> {
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
