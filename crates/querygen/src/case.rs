//! One random case: a graph file, a few jobspec files, a command stream and the flags of a
//! run (policy, writer, traverser, prune filters, load format), written to a folder that
//! both `shardsched query` and Fluxion's `resource-query` run in.
//!
//! Everything in a case folder is named relative to it (`-L graph.graphml`, `match allocate
//! j0.yaml`), so a folder can be moved, stored in a corpus and replayed by hand:
//! `cd CASE && resource-query $(cat args) -t out < cmds.in` (see [`Case::command_line`]).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::GenError;
use crate::commands::{
    PARTIAL_R_FILE, UPDATE_R_FILE, random_commands, with_partial_cancels, with_update,
};
use crate::graph::random_graph;
use crate::jobspec::random_jobspec;

/// The policies Fluxion's resource-query accepts, with `variation` drawn less often as it
/// needs `perf_class` properties, and `locality` (`high` but for the top-level choice)
/// drawn last in place of `high` ([`LOCALITY_SHARE`]).
pub const POLICIES: [&str; 8] = [
    "first",
    "firstnodex",
    "high",
    "low",
    "hinode",
    "lonode",
    "hinodex",
    "lonodex",
];

/// The writers Fluxion's resource-query accepts, with how often each is drawn; the last two
/// (the shorthand forms) only in extended cases.
pub const WRITERS: [(&str, u32); 8] = [
    ("simple", 30),
    ("pretty_simple", 12),
    ("jgf", 12),
    ("rlite", 12),
    ("rv1", 10),
    ("rv1_nosched", 12),
    ("jgf_shorthand", 4),
    ("rv1_shorthand", 4),
];

/// How many of [`WRITERS`] (the first ones) a core-tier case draws from.
const CORE_WRITERS: usize = 6;

/// Prune filter sets drawn for `--prune-filters` (otherwise Fluxion's default).
const PRUNE_FILTERS: [&str; 5] = [
    "ALL:core",
    "ALL:core,ALL:gpu",
    "ALL:node",
    "ALL:core,ALL:node,ALL:gpu",
    "ALL:core,rack:node",
];

/// Most jobspec files one case has.
pub const CASE_JOBSPECS_MAX: usize = 4;

/// What a case folder's `case.json` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseInfo {
    pub seed: u64,
    /// Flags for the query (without `-t`), file names relative to the case folder.
    pub args: Vec<String>,
    pub policy: String,
    pub writer: String,
    pub features: BTreeSet<String>,
}

/// A generated case: its description and its files (name relative to the folder, text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub info: CaseInfo,
    pub files: Vec<(String, String)>,
}

/// The name of the command stream file in a case folder.
pub const COMMANDS_FILE: &str = "cmds.in";
/// The name of the description file in a case folder.
pub const INFO_FILE: &str = "case.json";

fn weighted<'a>(rng: &mut ChaCha8Rng, items: &[(&'a str, u32)]) -> &'a str {
    items
        .choose_weighted(rng, |(_, w)| *w)
        .map(|(s, _)| *s)
        .unwrap_or(items[0].0)
}

/// Share of cases that may use features beyond the core tier of the conformance cases
/// (`-T flexible` and its slots, `variation`, the shorthand writers, `find`, `multi-match`,
/// `without_allocating`, `cancel … stats`); the others are tagged `tier:core`.
pub const EXTENDED_SHARE: f64 = 0.35;

/// Share of extended cases whose stream gives part of a job back (`partial-cancel` with an
/// rv1exec R naming some node ranks).
pub const PARTIAL_CANCEL_SHARE: f64 = 0.3;

/// Share of extended cases whose stream records a job from an R (`update … jgf` naming a
/// node taken whole).
pub const UPDATE_SHARE: f64 = 0.25;

/// Share of the cases that drew `high` run with `locality` instead.
pub const LOCALITY_SHARE: f64 = 0.5;

/// The case for `seed`: the same seed gives the same bytes.
pub fn generate(seed: u64) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut features: BTreeSet<&'static str> = BTreeSet::new();
    let extended = rng.random_bool(EXTENDED_SHARE);
    features.insert(if extended {
        "tier:extended"
    } else {
        "tier:core"
    });
    let graph = random_graph(&mut rng);
    let mut files = Vec::new();
    let mut args = Vec::new();
    if rng.random_bool(0.25) {
        features.insert("jgf");
        let shuffle_edges = rng.random_bool(0.3);
        let shuffle_ranks = rng.random_bool(0.2);
        if shuffle_edges {
            features.insert("jgf-edge-order");
        }
        if shuffle_ranks {
            features.insert("jgf-ranks");
        }
        files.push((
            "graph.json".to_string(),
            graph.to_jgf(&mut rng, shuffle_edges, shuffle_ranks),
        ));
        args.extend(["-L", "graph.json", "-f", "jgf"].map(String::from));
    } else {
        features.insert("grug");
        files.push(("graph.graphml".to_string(), graph.to_grug()));
        args.extend(["-L", "graph.graphml"].map(String::from));
    }
    if rng.random_bool(0.5) {
        args.extend(["-S", "CA"].map(String::from));
    }
    let mut policy = if extended && rng.random_bool(0.1) {
        features.insert("variation");
        "variation"
    } else {
        POLICIES.choose(&mut rng).copied().unwrap_or("first")
    };
    let policy_arg = args.len() + 1;
    args.extend(["-P".to_string(), policy.to_string()]);
    let writer = if extended {
        weighted(&mut rng, &WRITERS)
    } else {
        weighted(&mut rng, &WRITERS[..CORE_WRITERS])
    };
    args.extend(["-F".to_string(), writer.to_string()]);

    let jobspecs = rng.random_range(1..=CASE_JOBSPECS_MAX);
    let mut names = Vec::new();
    for k in 0..jobspecs {
        let (js, f) = random_jobspec(&mut rng, &graph.root, extended);
        features.extend(f);
        let name = format!("j{k}.yaml");
        files.push((name.clone(), js.to_yaml()));
        names.push(name);
    }
    let alternatives = features.contains("or-slots") || features.contains("xor-slots");
    if extended && (alternatives || rng.random_bool(0.15)) {
        features.insert("flexible");
        args.extend(["-T", "flexible"].map(String::from));
    }
    if rng.random_bool(0.12) {
        features.insert("prune-filters");
        let filters = PRUNE_FILTERS
            .choose(&mut rng)
            .copied()
            .unwrap_or("ALL:core");
        args.push(format!("--prune-filters={filters}"));
    }
    let (mut commands, f) =
        random_commands(&mut rng, &graph, &names, extended, policy == "variation");
    features.extend(f);
    // Drawn last, so that the cases without it are the ones earlier generators made.
    if extended
        && rng.random_bool(PARTIAL_CANCEL_SHARE)
        && let Some((spliced, r)) = with_partial_cancels(&mut rng, &graph, &commands)
    {
        features.insert("partial-cancel");
        commands = spliced;
        files.push((PARTIAL_R_FILE.to_string(), r));
    }
    // Drawn after that, for the same reason. A JGF graph with its ranks shuffled gives its
    // vertices other ranks than the recipe's, which the R would name.
    if extended
        && rng.random_bool(UPDATE_SHARE)
        && !features.contains("jgf-ranks")
        && let Some((spliced, r)) = with_update(&mut rng, &graph, &commands)
    {
        features.insert("update");
        commands = spliced;
        files.push((UPDATE_R_FILE.to_string(), r));
    }
    // Drawn last of all: `high`'s cases without it are the ones earlier generators made.
    if policy == "high" && rng.random_bool(LOCALITY_SHARE) {
        policy = "locality";
        args[policy_arg] = policy.to_string();
    }
    files.push((COMMANDS_FILE.to_string(), commands));
    Case {
        info: CaseInfo {
            seed,
            args,
            policy: policy.to_string(),
            writer: writer.to_string(),
            features: features.into_iter().map(String::from).collect(),
        },
        files,
    }
}

impl Case {
    /// Writes the case's files and `case.json` into `dir` (created if missing).
    pub fn write_to(&self, dir: &Path) -> Result<(), GenError> {
        std::fs::create_dir_all(dir).map_err(|e| GenError::io(dir, e))?;
        for (name, text) in &self.files {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(|e| GenError::io(&p, e))?;
        }
        let p = dir.join(INFO_FILE);
        let json = serde_json::to_string_pretty(&self.info).map_err(GenError::Json)?;
        std::fs::write(&p, json + "\n").map_err(|e| GenError::io(&p, e))?;
        Ok(())
    }
}

impl CaseInfo {
    /// Reads `case.json` of the case folder `dir`.
    pub fn read(dir: &Path) -> Result<CaseInfo, GenError> {
        let p = dir.join(INFO_FILE);
        let text = std::fs::read_to_string(&p).map_err(|e| GenError::io(&p, e))?;
        serde_json::from_str(&text).map_err(GenError::Json)
    }

    /// The shell line that replays the case in its folder with `program` (output to `out`).
    pub fn command_line(&self, program: &str, out: &str) -> String {
        let mut s = program.to_string();
        for a in &self.args {
            let _ = write!(s, " {a}");
        }
        let _ = write!(s, " -t {out} < {COMMANDS_FILE}");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_case_other_seed_other_case() {
        assert_eq!(generate(42), generate(42));
        assert_ne!(generate(42).files, generate(43).files);
    }

    #[test]
    fn core_cases_use_no_extended_feature() {
        for seed in 0..300 {
            let info = generate(seed).info;
            if info.features.contains("tier:core") {
                for f in [
                    "flexible",
                    "find",
                    "multi-match",
                    "cancel-stats",
                    "variation",
                    "partial-cancel",
                    "update",
                ] {
                    assert!(!info.features.contains(f), "seed {seed}: {f}");
                }
                assert!(!info.writer.ends_with("_shorthand"), "seed {seed}");
            }
        }
    }

    #[test]
    fn every_policy_and_writer_is_drawn() {
        let cases: Vec<CaseInfo> = (0..400).map(|s| generate(s).info).collect();
        for p in POLICIES.iter().chain(&["locality"]) {
            assert!(cases.iter().any(|c| c.policy == *p), "{p} never drawn");
        }
        for c in cases.iter().filter(|c| c.policy == "locality") {
            let p = c.args.iter().position(|a| a == "-P");
            assert_eq!(
                p.and_then(|p| c.args.get(p + 1)).map(String::as_str),
                Some("locality")
            );
        }
        for (w, _) in WRITERS {
            assert!(cases.iter().any(|c| c.writer == w), "{w} never drawn");
        }
        for f in [
            "jgf",
            "grug",
            "flexible",
            "or-slots",
            "xor-slots",
            "v1",
            "find",
            "partial-cancel",
            "update",
        ] {
            assert!(
                cases.iter().any(|c| c.features.contains(f)),
                "{f} never drawn"
            );
        }
    }

    #[test]
    fn a_written_case_reads_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let case = generate(5);
        case.write_to(dir.path()).expect("written");
        assert_eq!(CaseInfo::read(dir.path()).expect("read"), case.info);
        let cmds = std::fs::read_to_string(dir.path().join(COMMANDS_FILE)).expect("cmds");
        assert!(cmds.ends_with("quit\n"), "{cmds}");
    }
}
