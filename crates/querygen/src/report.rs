//! Tallies of a differential run: agreement overall and per policy, writer and feature,
//! process failures, and the first differing line of a few disagreements.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::case::CaseInfo;
use crate::run::Difference;

/// How one case came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The `-t` outputs are byte-identical.
    Agree,
    /// They differ; where first.
    Differ(Difference),
    /// Ours crashed, panicked, hung or exited non-zero (and so disagrees).
    OursFailed(String),
    /// The oracle failed: the case says nothing and is left out of the rates.
    OracleFailed(String),
    /// No oracle: only our own checks ran.
    Unchecked,
}

/// How one case came out, with what the comparison found besides the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: Verdict,
    /// Whether the standard outputs agree (times taken out); `None` when not compared.
    pub stdout_agrees: Option<bool>,
    /// Whether the standard errors agree; `None` when not compared (a corpus stored
    /// without Fluxion's).
    pub stderr_agrees: Option<bool>,
    /// Where they differ: the first line that does, Fluxion's or ours.
    pub stderr_note: Option<String>,
    /// Why our `-t` output is not well-formed, if it is not.
    pub malformed: Option<String>,
    /// For a disagreement: the first command after which the outputs differ.
    pub first_command: Option<String>,
}

/// The kind of a command line for tallies: `match allocate`, `cancel stats`, `set-status`.
pub fn command_kind(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        [c @ ("match" | "multi-match"), sub, ..] => format!("{c} {sub}"),
        ["cancel", _, "stats"] => "cancel stats".to_string(),
        [c, ..] => c.to_string(),
        [] => String::new(),
    }
}

/// Agreeing cases out of those compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub agree: u64,
    pub total: u64,
}

impl Tally {
    fn add(&mut self, agree: bool) {
        self.total += 1;
        self.agree += u64::from(agree);
    }

    /// `a/b (p%)`.
    pub fn show(&self) -> String {
        let pct = if self.total == 0 {
            0.0
        } else {
            100.0 * self.agree as f64 / self.total as f64
        };
        format!("{}/{} ({pct:.1}%)", self.agree, self.total)
    }
}

/// A disagreement kept for the summary.
#[derive(Clone, Debug, Serialize)]
pub struct Example {
    pub seed: u64,
    pub policy: String,
    pub writer: String,
    pub line: usize,
    pub fluxion: Option<String>,
    pub ours: Option<String>,
    /// The first command after which the outputs differ, when known.
    pub command: Option<String>,
}

/// Most examples a report keeps.
pub const REPORT_EXAMPLES_MAX: usize = 50;

/// Everything a differential run found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// `-t` outputs byte-identical.
    pub overall: Tally,
    /// Standard outputs identical once run-to-run times are taken out.
    pub stdout: Tally,
    /// Standard errors identical.
    pub stderr: Tally,
    pub by_policy: BTreeMap<String, Tally>,
    pub by_writer: BTreeMap<String, Tally>,
    pub by_feature: BTreeMap<String, Tally>,
    /// (seed, why) for cases where our process failed.
    pub ours_failed: Vec<(u64, String)>,
    /// (seed, why) for cases the oracle could not run (left out of the rates).
    pub oracle_failed: Vec<(u64, String)>,
    /// (seed, why) for `-t` outputs of ours that are not well-formed.
    pub malformed: Vec<(u64, String)>,
    /// (seed, first line of Fluxion's standard error) for cases whose standard errors
    /// differ, at most [`REPORT_EXAMPLES_MAX`].
    pub stderr_differs: Vec<(u64, String)>,
    /// Cases run with no oracle to compare with.
    pub unchecked: u64,
    /// Disagreements by the kind of the first command whose output differs.
    pub by_first_command: BTreeMap<String, u64>,
    pub examples: Vec<Example>,
}

impl Report {
    /// Adds one case.
    pub fn add(&mut self, info: &CaseInfo, outcome: &Outcome) {
        if let Some(why) = &outcome.malformed {
            self.malformed.push((info.seed, why.clone()));
        }
        if let Some(c) = &outcome.first_command {
            *self.by_first_command.entry(command_kind(c)).or_default() += 1;
        }
        let agree = match &outcome.verdict {
            Verdict::Agree => true,
            Verdict::Differ(d) => {
                if self.examples.len() < REPORT_EXAMPLES_MAX {
                    self.examples.push(Example {
                        seed: info.seed,
                        policy: info.policy.clone(),
                        writer: info.writer.clone(),
                        line: d.line,
                        fluxion: d.want.clone(),
                        ours: d.got.clone(),
                        command: outcome.first_command.clone(),
                    });
                }
                false
            }
            Verdict::OursFailed(why) => {
                self.ours_failed.push((info.seed, why.clone()));
                false
            }
            Verdict::OracleFailed(why) => {
                self.oracle_failed.push((info.seed, why.clone()));
                return;
            }
            Verdict::Unchecked => {
                self.unchecked += 1;
                return;
            }
        };
        self.overall.add(agree);
        if let Some(s) = outcome.stdout_agrees {
            self.stdout.add(s);
        }
        if let Some(s) = outcome.stderr_agrees {
            self.stderr.add(s);
            if !s && self.stderr_differs.len() < REPORT_EXAMPLES_MAX {
                self.stderr_differs
                    .push((info.seed, outcome.stderr_note.clone().unwrap_or_default()));
            }
        }
        self.by_policy
            .entry(info.policy.clone())
            .or_default()
            .add(agree);
        self.by_writer
            .entry(info.writer.clone())
            .or_default()
            .add(agree);
        for f in &info.features {
            self.by_feature.entry(f.clone()).or_default().add(agree);
        }
    }

    /// The human summary, with at most `show` examples.
    pub fn render(&self, show: usize) -> String {
        let mut s = String::new();
        if self.overall.total > 0 {
            let _ = writeln!(
                s,
                "agreement (-t output byte-identical): {}",
                self.overall.show()
            );
            let _ = writeln!(
                s,
                "standard output (times taken out):    {}",
                self.stdout.show()
            );
            if self.stderr.total > 0 {
                let _ = writeln!(
                    s,
                    "standard error:                       {}",
                    self.stderr.show()
                );
            }
            for (title, map) in [
                ("policy", &self.by_policy),
                ("writer", &self.by_writer),
                ("feature", &self.by_feature),
            ] {
                let _ = writeln!(s, "by {title}:");
                for (k, t) in map {
                    let _ = writeln!(s, "  {k:<22} {}", t.show());
                }
            }
        }
        if !self.by_first_command.is_empty() {
            let _ = writeln!(
                s,
                "disagreements by the first command whose output differs:"
            );
            let mut kinds: Vec<_> = self.by_first_command.iter().collect();
            kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (k, n) in kinds {
                let _ = writeln!(s, "  {k:<36} {n}");
            }
        }
        if self.unchecked > 0 {
            let _ = writeln!(
                s,
                "{} cases run without an oracle (our own checks only)",
                self.unchecked
            );
        }
        for (title, list) in [
            ("our process failed", &self.ours_failed),
            ("malformed output of ours", &self.malformed),
            ("oracle failed (left out)", &self.oracle_failed),
            ("standard error differs", &self.stderr_differs),
        ] {
            if !list.is_empty() {
                let _ = writeln!(s, "{title}: {} cases", list.len());
                for (seed, why) in list.iter().take(show.max(1)) {
                    let _ = writeln!(s, "  seed {seed}: {why}");
                }
            }
        }
        if !self.examples.is_empty() && show > 0 {
            let _ = writeln!(s, "first differing lines (fluxion / ours):");
            for e in self.examples.iter().take(show) {
                let after = e
                    .command
                    .as_deref()
                    .map(|c| format!(", after `{c}`"))
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "  seed {} (-P {} -F {}) line {}{after}:\n    {}\n    {}",
                    e.seed,
                    e.policy,
                    e.writer,
                    e.line,
                    clip(e.fluxion.as_deref()),
                    clip(e.ours.as_deref()),
                );
            }
        }
        s
    }
}

/// Longest line shown in a summary (JSON writers print whole allocations on one line).
const SHOWN_LINE_CHARS_MAX: usize = 240;

fn clip(line: Option<&str>) -> String {
    match line {
        None => "<end of output>".to_string(),
        Some(l) if l.chars().count() > SHOWN_LINE_CHARS_MAX => {
            let head: String = l.chars().take(SHOWN_LINE_CHARS_MAX).collect();
            format!("{head}…")
        }
        Some(l) => l.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(seed: u64, policy: &str) -> CaseInfo {
        CaseInfo {
            seed,
            args: Vec::new(),
            policy: policy.to_string(),
            writer: "simple".to_string(),
            features: ["grug".to_string()].into(),
        }
    }

    #[test]
    fn oracle_failures_and_unchecked_cases_stay_out_of_the_rates() {
        let mut r = Report::default();
        let outcome = |verdict, first_command: Option<&str>| Outcome {
            verdict,
            stdout_agrees: Some(true),
            stderr_agrees: Some(true),
            stderr_note: None,
            malformed: None,
            first_command: first_command.map(String::from),
        };
        r.add(&info(1, "first"), &outcome(Verdict::Agree, None));
        let d = Difference {
            line: 2,
            want: Some("a".into()),
            got: None,
        };
        r.add(
            &info(2, "first"),
            &outcome(Verdict::Differ(d), Some("cancel 3 stats")),
        );
        r.add(
            &info(3, "low"),
            &outcome(Verdict::OursFailed("panic".into()), None),
        );
        r.add(
            &info(4, "low"),
            &outcome(Verdict::OracleFailed("crash".into()), None),
        );
        r.add(&info(5, "low"), &outcome(Verdict::Unchecked, None));
        assert_eq!(r.overall, Tally { agree: 1, total: 3 });
        assert_eq!(r.by_policy["first"], Tally { agree: 1, total: 2 });
        assert_eq!(r.by_policy["low"], Tally { agree: 0, total: 1 });
        assert_eq!(r.by_feature["grug"].total, 3);
        assert_eq!((r.unchecked, r.oracle_failed.len()), (1, 1));
        assert_eq!(r.by_first_command["cancel stats"], 1);
        let text = r.render(5);
        assert!(
            text.contains("seed 2 (-P first -F simple) line 2, after `cancel 3 stats`:"),
            "{text}"
        );
    }

    #[test]
    fn command_kinds_keep_the_subcommand() {
        assert_eq!(command_kind("match allocate j0.yaml"), "match allocate");
        assert_eq!(
            command_kind("multi-match allocate a b"),
            "multi-match allocate"
        );
        assert_eq!(command_kind("cancel 4 stats"), "cancel stats");
        assert_eq!(command_kind("set-status /c0/node0 down"), "set-status");
    }
}
