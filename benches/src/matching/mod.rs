//! `shardsched bench match`: the tools that measure matching, so that optimisations are judged by
//! numbers taken the same way before and after.
//!
//! `bench match` answers two questions (issues 2 and 7):
//!
//! - **How long does the work take as a whole process?** That is the figure Fluxion's
//!   resource-query was measured by, so for the three reference workloads of
//!   `../shared/bench/README.md` we spawn this very binary as `shardsched query` with the
//!   README's command stream on stdin and time it end to end (exec, graph load, every match,
//!   output), several times, reporting the median. With `--fluxion PATH`, Fluxion's
//!   resource-query runs right after each of ours on the same stream, so the speed-up is
//!   taken on one machine in the same minutes (wall and CPU time), and the two programs'
//!   outputs are compared byte for byte.
//! - **Where does that time go?** A second, fresh process loads the graph and runs the same
//!   stream through [`Matcher::run`](shardsched_matcher::Matcher::run) — the entry point
//!   `query`, replay and the shards use, so no benchmark-only fast path can flatter the
//!   numbers — timing every call for median and p99, timing the load, and reading its own
//!   memory from `/proc/self/status`. It runs in a fresh process (this binary again, with
//!   `--graph … --json`) so that one workload's freed memory cannot hide in the next one's
//!   RSS delta and the peak (VmHWM) belongs to one
//!   workload alone.
//!
//! Without `--workload`, `bench match --nodes N` (a generated cluster) or `--graph FILE` runs
//! M allocates and then R allocate-or-reserves in-process and prints the same inside figures.
//!
//! The flags and the dispatch are here; the reference workloads in [`workloads`] (each
//! whole `shardsched query` process in [`query_process`]), the inside run in [`inside`],
//! the report and its tables in [`report`].

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{ArgGroup, Args, ValueEnum};
use shardsched_matcher::{MatchPolicy, PruneFilters};
use shardsched_resource::GraphFormat;

use crate::inputs::NODE_EXCL;

pub mod inside;
pub mod query_process;
pub mod report;
pub mod workloads;

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
    /// Fluxion's resource-query, timed side by side with `shardsched query`: each
    /// repetition runs ours, then it, on the same stream, and their `-t` files and standard
    /// outputs are compared byte for byte. Without it the speed-up is against the figures
    /// of ../shared/bench/README.md.
    #[arg(long, value_name = "PATH", requires = "workload")]
    pub fluxion: Option<PathBuf>,
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

/// `shardsched bench match`.
pub fn main(args: &MatchArgs) -> Result<()> {
    if let Some(name) = args.workload {
        return workloads::run(args, name);
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
            inside::GraphSource::File(path.clone(), format)
        }
        (None, Some(n)) => inside::GraphSource::Generated(
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
            NODE_EXCL.to_string(),
            "one exclusive node (built in)".to_string(),
        ),
    };
    let js = shardsched_jobspec::parse(&js_text).with_context(|| js_label.clone())?;
    let policy = MatchPolicy::parse(&args.policy).context("--policy")?;
    let filters =
        PruneFilters::parse(args.prune_filters.trim_matches('"')).context("--prune-filters")?;
    let report = inside::measure(
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
        print!("{}", report::render_inside(&report));
    }
    Ok(())
}
