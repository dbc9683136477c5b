//! `shardsched differential` (hidden, for developers): runs random resource-query cases
//! through `shardsched query` and Fluxion's `resource-query`, and prints how often the two
//! agree byte for byte, overall and per policy, writer and feature.
//!
//! The oracle is Fluxion's binary (`--fluxion`, else `FLUXION_RESOURCE_QUERY`) or a stored
//! corpus of cases with Fluxion's outputs (`--corpus`). Without either, ours still runs on
//! every case and the command reports crashes and malformed output. The generator and the
//! loop live in `shardsched-querygen`; docs/MATCHING.md says how to use this.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use shardsched_querygen::differential::{Filter, Options, Oracle, run_all};
use shardsched_querygen::run::Program;

/// The environment variable naming Fluxion's resource-query binary.
pub const FLUXION_ENV: &str = "FLUXION_RESOURCE_QUERY";

/// Flags of `shardsched differential`.
#[derive(Args, Debug, Clone)]
pub struct DifferentialArgs {
    /// How many cases to generate (seeds SEED .. SEED+CASES).
    #[arg(long, default_value_t = 200)]
    pub cases: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fluxion's resource-query binary (default: $FLUXION_RESOURCE_QUERY).
    #[arg(long)]
    pub fluxion: Option<PathBuf>,
    /// Compare with a stored corpus (cases + Fluxion's outputs) instead of generating.
    #[arg(long, conflicts_with = "write_corpus")]
    pub corpus: Option<PathBuf>,
    /// Keep every generated case with Fluxion's outputs in this folder (a corpus).
    #[arg(long)]
    pub write_corpus: Option<PathBuf>,
    /// Copy failing cases here, one folder each, with both outputs and a replay note.
    #[arg(long)]
    pub failures: Option<PathBuf>,
    /// Only cases with policy=P, writer=W or feature=F.
    #[arg(long)]
    pub only: Option<String>,
    /// How many failures to show.
    #[arg(long, default_value_t = 8)]
    pub show: usize,
    /// Do not pin disagreements on the first differing command (saves re-running ours on
    /// prefixes of each failing stream).
    #[arg(long)]
    pub no_attribution: bool,
    /// Also write the whole report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `shardsched differential`.
pub fn main(args: &DifferentialArgs) -> Result<()> {
    let ours = Program {
        path: std::env::current_exe().context("locating this shardsched binary")?,
        pre_args: vec!["query".to_string()],
    };
    let fluxion = args
        .fluxion
        .clone()
        .or_else(|| std::env::var_os(FLUXION_ENV).map(PathBuf::from));
    let oracle = match (&args.corpus, fluxion) {
        (Some(dir), _) => Oracle::Corpus(dir.clone()),
        (None, Some(path)) => Oracle::Binary(Program {
            path,
            pre_args: Vec::new(),
        }),
        (None, None) => {
            anyhow::ensure!(
                args.write_corpus.is_none(),
                "--write-corpus needs Fluxion's binary (--fluxion or {FLUXION_ENV})"
            );
            println!(
                "no oracle (--corpus, --fluxion or {FLUXION_ENV}): running ours alone, \
                 checking for crashes and malformed output"
            );
            Oracle::None
        }
    };
    let scratch = tempfile::tempdir().context("creating a scratch folder")?;
    let opts = Options {
        ours,
        oracle: oracle.clone(),
        seeds: args.seed..args.seed.saturating_add(args.cases),
        scratch: scratch.path().to_path_buf(),
        failures: args.failures.clone(),
        write_corpus: args.write_corpus.clone(),
        filter: args.only.as_deref().map(Filter::parse).transpose()?,
        attribute: !args.no_attribution,
    };
    let source = match &oracle {
        Oracle::Corpus(dir) => format!("corpus {}", dir.display()),
        Oracle::Binary(p) => format!(
            "seeds {}..{}, oracle {}",
            opts.seeds.start,
            opts.seeds.end,
            p.path.display()
        ),
        Oracle::None => format!("seeds {}..{}", opts.seeds.start, opts.seeds.end),
    };
    println!("differential: {source}");
    let report = run_all(&opts, |_| {})?;
    print!("{}", report.render(args.show));
    if let Some(dir) = &args.failures
        && (!report.examples.is_empty() || !report.ours_failed.is_empty())
    {
        println!("failing cases saved under {}", dir.display());
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
