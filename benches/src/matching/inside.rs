//! The inside view of a matching run: load the graph, run the matches through
//! [`Matcher::run`] timing each call, and read this process's memory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use shardsched_jobspec::Jobspec;
use shardsched_matcher::{MatchOp, MatchOutcome, MatchPolicy, Matcher, PruneFilters};
use shardsched_resource::{GraphFormat, ResourceGraph, generated_cluster, read_graph_file};

use super::report::{InsideReport, Latency, Load, MEMORY_METHOD, Memory, Phase};

/// Where the graph of an inside run comes from.
pub enum GraphSource {
    /// A generated cluster of this many nodes.
    Generated(usize),
    /// A graph file, in this format.
    File(PathBuf, GraphFormat),
}

impl GraphSource {
    /// What the report calls it.
    pub fn label(&self) -> String {
        match self {
            GraphSource::Generated(n) => format!("generated {n} nodes"),
            GraphSource::File(p, _) => p.display().to_string(),
        }
    }

    /// Reads or generates the graph.
    pub fn load(&self) -> Result<ResourceGraph> {
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
pub fn measure(
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
