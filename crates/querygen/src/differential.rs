//! The differential loop: for each case (generated from a seed, or read from a stored
//! corpus), run ours, get the oracle's output (run Fluxion's binary, or read what the
//! corpus stored), compare, tally, and keep failing cases for replay.
//!
//! Corpus layout: one folder per case (`case-000001`, …) with the case's files,
//! `case.json`, and Fluxion's outputs `fluxion.out` (the `-t` file) and `fluxion.stdout`;
//! a case Fluxion could not run has `fluxion.failed` with the reason instead.
//! `fluxion.offsets` holds, one a line, the length of Fluxion's `-t` output after each
//! command: with it a disagreement is pinned on the first command whose output differs
//! (ours is re-run on prefixes of the stream, by bisection) without running Fluxion again.

use std::path::{Path, PathBuf};

use crate::GenError;
use crate::case::{CaseInfo, generate};
use crate::report::{Outcome, Report, Verdict};
use crate::run::{Program, RunResult, commands_of, first_difference, normalize_stdout};
use crate::validate::check_output;

/// Where the expected outputs come from.
#[derive(Clone, Debug)]
pub enum Oracle {
    /// Nothing to compare with: only our own checks run.
    None,
    /// Fluxion's `resource-query`, run on every case.
    Binary(Program),
    /// A corpus folder of cases with Fluxion's stored outputs.
    Corpus(PathBuf),
}

/// Which cases to run: `policy=P`, `writer=W` or `feature=F`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub key: String,
    pub value: String,
}

impl Filter {
    /// Parses `KEY=VALUE` with KEY one of policy, writer, feature.
    pub fn parse(s: &str) -> Result<Filter, GenError> {
        match s.split_once('=') {
            Some((k @ ("policy" | "writer" | "feature"), v)) if !v.is_empty() => Ok(Filter {
                key: k.to_string(),
                value: v.to_string(),
            }),
            _ => Err(GenError::Usage(format!(
                "--only {s:?}: expected policy=P, writer=W or feature=F"
            ))),
        }
    }

    fn admits(&self, info: &CaseInfo) -> bool {
        match self.key.as_str() {
            "policy" => info.policy == self.value,
            "writer" => info.writer == self.value,
            _ => info.features.contains(&self.value),
        }
    }
}

/// What a differential run does.
#[derive(Clone, Debug)]
pub struct Options {
    pub ours: Program,
    pub oracle: Oracle,
    /// Seeds of the generated cases (a corpus brings its own cases).
    pub seeds: std::ops::Range<u64>,
    /// A folder for the run's own files (cases, outputs), reused case after case.
    pub scratch: PathBuf,
    /// Where failing cases are copied, one folder each, for replay.
    pub failures: Option<PathBuf>,
    /// With a binary oracle: keep every case and Fluxion's outputs here as a corpus.
    pub write_corpus: Option<PathBuf>,
    pub filter: Option<Filter>,
    /// Pin each disagreement on the first command whose output differs (re-runs ours on
    /// prefixes of the stream; with a binary oracle, Fluxion too).
    pub attribute: bool,
}

/// One case's outcome, handed to the caller's hook.
pub struct CaseOutcome<'a> {
    pub dir: &'a Path,
    pub info: &'a CaseInfo,
    pub ours: &'a RunResult,
    pub outcome: &'a Outcome,
}

/// The folder name of the case for `seed`.
pub fn case_folder(seed: u64) -> String {
    format!("case-{seed:06}")
}

/// The case folders of a corpus, in name order.
fn corpus_cases(dir: &Path) -> Result<Vec<PathBuf>, GenError> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| GenError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(crate::case::INFO_FILE).is_file())
        .collect();
    out.sort();
    Ok(out)
}

/// Runs every case; `hook` sees each outcome (tests add their own checks there).
pub fn run_all(opts: &Options, mut hook: impl FnMut(&CaseOutcome<'_>)) -> Result<Report, GenError> {
    std::fs::create_dir_all(&opts.scratch).map_err(|e| GenError::io(&opts.scratch, e))?;
    let mut report = Report::default();
    let dirs: Vec<(Option<u64>, PathBuf)> = match &opts.oracle {
        Oracle::Corpus(dir) => corpus_cases(dir)?.into_iter().map(|d| (None, d)).collect(),
        _ => opts
            .seeds
            .clone()
            .map(|s| {
                let parent = opts.write_corpus.as_ref().unwrap_or(&opts.scratch);
                (Some(s), parent.join(case_folder(s)))
            })
            .collect(),
    };
    for (seed, dir) in dirs {
        let info = match seed {
            Some(seed) => {
                let case = generate(seed);
                if opts.filter.as_ref().is_some_and(|f| !f.admits(&case.info)) {
                    continue;
                }
                let _ = std::fs::remove_dir_all(&dir);
                case.write_to(&dir)?;
                case.info
            }
            None => {
                let info = CaseInfo::read(&dir)?;
                if opts.filter.as_ref().is_some_and(|f| !f.admits(&info)) {
                    continue;
                }
                info
            }
        };
        let ours = opts.ours.run(&dir, &info, &opts.scratch, "ours")?;
        let expected = expected_output(opts, &dir, &info)?;
        let mut outcome = judge(&ours, expected.as_ref());
        if matches!(outcome.verdict, Verdict::Differ(_) | Verdict::OursFailed(_)) {
            if let Some(failures) = &opts.failures {
                save_failure(&dir, &opts.scratch, &failures.join(case_folder(info.seed)))?;
            }
            if opts.attribute
                && let Some(Ok(want)) = &expected
            {
                outcome.first_command = first_differing_command(opts, &dir, &info, &want.out)?;
            }
        }
        report.add(&info, &outcome);
        hook(&CaseOutcome {
            dir: &dir,
            info: &info,
            ours: &ours,
            outcome: &outcome,
        });
        if seed.is_some() && opts.write_corpus.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(report)
}

/// What Fluxion printed for a case.
struct FluxionOutput {
    /// The `-t` file.
    out: Vec<u8>,
    stdout: Vec<u8>,
    /// (`None` from a corpus stored without it.)
    stderr: Option<Vec<u8>>,
}

/// Fluxion's outputs for the case, or why there are none (`None`: no oracle).
type Expected = Option<Result<FluxionOutput, String>>;

fn expected_output(opts: &Options, dir: &Path, info: &CaseInfo) -> Result<Expected, GenError> {
    let read = |name: &str| {
        let p = dir.join(name);
        std::fs::read(&p).map_err(|e| GenError::io(&p, e))
    };
    Ok(match &opts.oracle {
        Oracle::None => None,
        Oracle::Corpus(_) => Some(match std::fs::read_to_string(dir.join("fluxion.failed")) {
            Ok(why) => Err(why.trim().to_string()),
            Err(_) => Ok(FluxionOutput {
                out: read("fluxion.out")?,
                stdout: read("fluxion.stdout")?,
                stderr: std::fs::read(dir.join("fluxion.stderr")).ok(),
            }),
        }),
        Oracle::Binary(fluxion) => {
            let r = fluxion.run(dir, info, &opts.scratch, "fluxion")?;
            let result = match r.failure() {
                Some(why) => Err(why),
                None => Ok(FluxionOutput {
                    out: r.out,
                    stdout: r.stdout,
                    stderr: Some(r.stderr),
                }),
            };
            if opts.write_corpus.is_some() {
                let write = |name: &str, bytes: &[u8]| {
                    let p = dir.join(name);
                    std::fs::write(&p, bytes).map_err(|e| GenError::io(&p, e))
                };
                match &result {
                    Ok(f) => {
                        write("fluxion.out", &f.out)?;
                        write("fluxion.stdout", &f.stdout)?;
                        write("fluxion.stderr", f.stderr.as_deref().unwrap_or_default())?;
                        let offsets = fluxion_offsets(fluxion, dir, info, &opts.scratch)?;
                        let text: String = offsets.iter().map(|o| format!("{o}\n")).collect();
                        write(OFFSETS_FILE, text.as_bytes())?;
                    }
                    Err(why) => write("fluxion.failed", format!("{why}\n").as_bytes())?,
                }
            }
            Some(result)
        }
    })
}

fn judge(ours: &RunResult, expected: Option<&Result<FluxionOutput, String>>) -> Outcome {
    let mut outcome = Outcome {
        verdict: Verdict::Unchecked,
        stdout_agrees: None,
        stderr_agrees: None,
        stderr_note: None,
        malformed: check_output(&ours.out).err(),
        first_command: None,
    };
    let want = match expected {
        None => return outcome,
        Some(Err(why)) => {
            outcome.verdict = Verdict::OracleFailed(why.clone());
            return outcome;
        }
        Some(Ok(w)) => w,
    };
    if let Some(why) = ours.failure() {
        outcome.verdict = Verdict::OursFailed(why);
        return outcome;
    }
    outcome.stdout_agrees = Some(normalize_stdout(&want.stdout) == normalize_stdout(&ours.stdout));
    if let Some(theirs) = &want.stderr {
        outcome.stderr_agrees = Some(*theirs == ours.stderr);
        outcome.stderr_note = first_line_differing(theirs, &ours.stderr);
    }
    outcome.verdict = match first_difference(&want.out, &ours.out) {
        None => Verdict::Agree,
        Some(d) => Verdict::Differ(d),
    };
    outcome
}

/// The file of a corpus case with Fluxion's output length after each command.
const OFFSETS_FILE: &str = "fluxion.offsets";

/// The length of Fluxion's `-t` output after each command of the case's stream.
fn fluxion_offsets(
    fluxion: &Program,
    dir: &Path,
    info: &CaseInfo,
    scratch: &Path,
) -> Result<Vec<usize>, GenError> {
    let n = stream_len(dir)?;
    (1..=n)
        .map(|k| {
            Ok(fluxion
                .run_prefix(dir, info, k, scratch, "fluxion-prefix")?
                .out
                .len())
        })
        .collect()
}

fn stream_len(dir: &Path) -> Result<usize, GenError> {
    let p = dir.join(crate::case::COMMANDS_FILE);
    let text = std::fs::read_to_string(&p).map_err(|e| GenError::io(&p, e))?;
    Ok(commands_of(&text).len())
}

/// The first command after which ours' `-t` output stops being a prefix of Fluxion's
/// (`want`), found by bisection over prefixes of the stream: outputs only grow command by
/// command, so once they part they stay apart.
fn first_differing_command(
    opts: &Options,
    dir: &Path,
    info: &CaseInfo,
    want: &[u8],
) -> Result<Option<String>, GenError> {
    let offsets: Vec<usize> = match &opts.oracle {
        Oracle::Binary(fluxion) => fluxion_offsets(fluxion, dir, info, &opts.scratch)?,
        Oracle::Corpus(_) => match std::fs::read_to_string(dir.join(OFFSETS_FILE)) {
            Ok(text) => text.lines().filter_map(|l| l.trim().parse().ok()).collect(),
            Err(_) => return Ok(None),
        },
        Oracle::None => return Ok(None),
    };
    let p = dir.join(crate::case::COMMANDS_FILE);
    let stream = std::fs::read_to_string(&p).map_err(|e| GenError::io(&p, e))?;
    let commands = commands_of(&stream);
    if offsets.len() != commands.len() || commands.is_empty() {
        return Ok(None);
    }
    let agrees = |k: usize| -> Result<bool, GenError> {
        let ours = opts
            .ours
            .run_prefix(dir, info, k, &opts.scratch, "ours-prefix")?;
        let end = offsets[k - 1].min(want.len());
        Ok(ours.failure().is_none() && ours.out == want[..end])
    };
    // Invariant: the first `lo` commands agree, the first `hi` do not.
    let (mut lo, mut hi) = (0, commands.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if agrees(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(commands[hi - 1].to_string()))
}

/// Copies the case folder and both outputs into `to`, with a note on how to replay it.
fn save_failure(dir: &Path, scratch: &Path, to: &Path) -> Result<(), GenError> {
    std::fs::create_dir_all(to).map_err(|e| GenError::io(to, e))?;
    let copy = |from: &Path, name: &str| {
        if from.is_file() {
            let dest = to.join(name);
            std::fs::copy(from, &dest).map_err(|e| GenError::io(&dest, e))?;
        }
        Ok::<(), GenError>(())
    };
    // The scratch outputs first: a corpus case's own `fluxion.*` files then replace them.
    for tag in ["ours", "fluxion"] {
        for ext in ["out", "stdout", "stderr"] {
            let name = format!("{tag}.{ext}");
            copy(&scratch.join(&name), &name)?;
        }
    }
    for entry in std::fs::read_dir(dir).map_err(|e| GenError::io(dir, e))? {
        let path = entry.map_err(|e| GenError::io(dir, e))?.path();
        if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
            copy(&path, name)?;
        }
    }
    let info = CaseInfo::read(dir)?;
    let note = format!(
        "Replay in this folder:\n  {}\n  {}\nthen compare ours.out with fluxion.out.\n",
        info.command_line("shardsched query", "ours.out"),
        info.command_line("$FLUXION_RESOURCE_QUERY", "fluxion.out"),
    );
    let p = to.join("REPLAY.txt");
    std::fs::write(&p, note).map_err(|e| GenError::io(&p, e))
}

/// The first line where two standard errors differ (Fluxion's, else ours, `<` / `>`),
/// control characters escaped; `None` when they agree.
fn first_line_differing(theirs: &[u8], ours: &[u8]) -> Option<String> {
    let d = first_difference(theirs, ours)?;
    Some(match (d.want, d.got) {
        (Some(line), _) => format!("< {}", line.escape_debug()),
        (None, line) => format!("> {}", line.unwrap_or_default().escape_debug()),
    })
}
