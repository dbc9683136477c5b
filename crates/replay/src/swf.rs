//! The Standard Workload Format (Parallel Workloads Archive): read a trace, and write it back
//! with the replayed waits filled in.
//!
//! One job a line, 18 whitespace-separated numeric fields, `-1` for unknown; lines starting
//! with `;` are header comments. Writing keeps every line byte for byte except field 3 (wait)
//! of each job and, for a job that never ran, field 11 (status 5, cancelled), so a replayed
//! trace diffs cleanly against its input. Every parse error names its line; no input makes the
//! parser panic.

use std::fmt;

/// Fields of a job line.
pub const SWF_FIELDS: usize = 18;
/// Longest line accepted, in bytes.
pub const SWF_LINE_BYTES_MAX: usize = 4096;
/// Most lines accepted in one file.
pub const SWF_LINES_MAX: usize = 50_000_000;
/// The status written for a job that never ran (SWF: 5 = cancelled).
pub const STATUS_NOT_RUN: i64 = 5;

/// Field numbers (1-based, as the SWF definition numbers them) the replay reads; they must
/// be integers. The others may be any number (some archives write fractions there).
const INTEGER_FIELDS: [usize; 9] = [1, 2, 3, 4, 5, 8, 9, 11, 12];
const FIELD_NAMES: [&str; SWF_FIELDS] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
];

/// A parse error, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SwfError {
    pub line: usize,
    pub message: String,
}

/// The fields of one job line that a replay uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwfJob {
    /// 0-based index of the line in [`Workload::lines`].
    pub line: usize,
    pub number: i64,
    pub submit: i64,
    pub wait: i64,
    pub run: i64,
    pub allocated_procs: i64,
    pub requested_procs: i64,
    pub requested_time: i64,
    pub status: i64,
    pub user: i64,
}

impl SwfJob {
    /// Processors asked for: the requested count (field 8), else the allocated one (field 5).
    pub fn procs(&self) -> Option<u64> {
        [self.requested_procs, self.allocated_procs]
            .into_iter()
            .find(|&p| p > 0)
            .and_then(|p| u64::try_from(p).ok())
    }

    /// The duration the scheduler plans with: the requested time (field 9), else the run
    /// time; at least 1 s (a duration of 0 would mean "unlimited" to the matcher).
    pub fn planned_duration(&self) -> Option<u64> {
        let d = if self.requested_time > 0 {
            self.requested_time
        } else if self.run >= 0 {
            self.run.max(1)
        } else {
            return None;
        };
        u64::try_from(d).ok()
    }

    /// How long the job really runs: its run time capped at the planned duration (the
    /// planned duration when the run time is unknown).
    pub fn actual_run(&self) -> Option<i64> {
        let planned = i64::try_from(self.planned_duration()?).ok()?;
        Some(if self.run >= 0 {
            self.run.min(planned)
        } else {
            planned
        })
    }
}

/// A parsed SWF file: every line as read, and the job lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    pub lines: Vec<String>,
    pub jobs: Vec<SwfJob>,
}

impl Workload {
    /// The header lines (`;` comments), without the `;`.
    pub fn header(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .filter_map(|l| l.trim_start().strip_prefix(';'))
    }
}

/// Parses raw bytes (which must be UTF-8).
pub fn parse_bytes(bytes: &[u8]) -> Result<Workload, SwfError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => {
            let upto = bytes.get(..e.valid_up_to()).unwrap_or_default();
            let line = 1 + upto.iter().filter(|&&b| b == b'\n').count();
            Err(SwfError {
                line,
                message: "not UTF-8 text".into(),
            })
        }
    }
}

/// Parses SWF text.
pub fn parse(text: &str) -> Result<Workload, SwfError> {
    let mut w = Workload::default();
    for (i, line) in text.lines().enumerate() {
        let err = |message: String| SwfError {
            line: i + 1,
            message,
        };
        if i >= SWF_LINES_MAX {
            return Err(err(format!("more than {SWF_LINES_MAX} lines")));
        }
        if line.len() > SWF_LINE_BYTES_MAX {
            return Err(err(format!("longer than {SWF_LINE_BYTES_MAX} bytes")));
        }
        let t = line.trim();
        if !t.is_empty() && !t.starts_with(';') {
            let f = parse_fields(t).map_err(err)?;
            w.jobs.push(SwfJob {
                line: i,
                number: f[0],
                submit: f[1],
                wait: f[2],
                run: f[3],
                allocated_procs: f[4],
                requested_procs: f[7],
                requested_time: f[8],
                status: f[10],
                user: f[11],
            });
        }
        w.lines.push(line.to_string());
    }
    Ok(w)
}

/// The 18 fields of a job line (non-integer fields read as 0; the replay does not use them).
fn parse_fields(line: &str) -> Result<[i64; SWF_FIELDS], String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() != SWF_FIELDS {
        return Err(format!(
            "expected {SWF_FIELDS} fields, found {}",
            tokens.len()
        ));
    }
    let mut out = [0i64; SWF_FIELDS];
    for (k, tok) in tokens.iter().enumerate() {
        let n = k + 1;
        if let Ok(v) = tok.parse::<i64>() {
            out[k] = v;
        } else if INTEGER_FIELDS.contains(&n) || !tok.parse::<f64>().is_ok_and(f64::is_finite) {
            let kind = if INTEGER_FIELDS.contains(&n) {
                "an integer"
            } else {
                "a number"
            };
            return Err(format!(
                "field {n} ({}): expected {kind}, found {:?}",
                FIELD_NAMES[k], tok
            ));
        }
    }
    Ok(out)
}

/// What became of one job, for [`write_with_waits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Started after waiting this many seconds.
    Waited(i64),
    /// Denied or never started: wait stays -1, status becomes 5.
    NotRun,
}

/// The workload's lines with field 3 of job `k` set from `fates[k]` (jobs past the end of
/// `fates` are written unchanged), newline-terminated.
pub fn write_with_waits(w: &Workload, fates: &[Fate]) -> String {
    let mut by_line: Vec<Option<Fate>> = vec![None; w.lines.len()];
    for (job, fate) in w.jobs.iter().zip(fates) {
        if let Some(slot) = by_line.get_mut(job.line) {
            *slot = Some(*fate);
        }
    }
    let mut out = String::with_capacity(w.lines.iter().map(|l| l.len() + 8).sum());
    for (line, fate) in w.lines.iter().zip(by_line) {
        match fate {
            None => out.push_str(line),
            Some(Fate::Waited(wait)) => out.push_str(&replace_fields(line, &[(3, wait)])),
            Some(Fate::NotRun) => {
                out.push_str(&replace_fields(line, &[(3, -1), (11, STATUS_NOT_RUN)]));
            }
        }
        out.push('\n');
    }
    out
}

/// `line` with the given (1-based) fields replaced, all other bytes kept.
fn replace_fields(line: &str, fields: &[(usize, i64)]) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    let mut field = 0;
    let mut rest = line;
    while !rest.is_empty() {
        let ws = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..ws]);
        rest = &rest[ws..];
        if rest.is_empty() {
            break;
        }
        let tok_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        field += 1;
        match fields.iter().find(|(n, _)| *n == field) {
            Some((_, v)) => out.push_str(&v.to_string()),
            None => out.push_str(&rest[..tok_len]),
        }
        rest = &rest[tok_len..];
    }
    out
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TRACE: &str = "; Version: 2.2\n;  MaxNodes: 4\n\n\
        1 0 -1 100 2 -1 -1 2 200 -1 1 7 1 -1 1 1 -1 -1\n\
        2   5 -1 50 -1 12.5 -1 3 -1 -1 1 8 1 -1 1 1 -1 -1\n";

    #[test]
    fn reads_jobs_and_keeps_headers() {
        let w = parse(TRACE).unwrap();
        assert_eq!(w.lines.len(), 5);
        assert_eq!(w.jobs.len(), 2);
        assert_eq!(
            w.header().collect::<Vec<_>>(),
            vec![" Version: 2.2", "  MaxNodes: 4"]
        );
        let j = w.jobs[1];
        assert_eq!((j.line, j.submit, j.run, j.procs()), (4, 5, 50, Some(3)));
        assert_eq!(j.planned_duration(), Some(50));
        assert_eq!(w.jobs[0].actual_run(), Some(100));
    }

    #[test]
    fn run_time_is_capped_and_zero_is_planned_as_one_second() {
        let j = |run, req| SwfJob {
            line: 0,
            number: 1,
            submit: 0,
            wait: -1,
            run,
            allocated_procs: 1,
            requested_procs: 1,
            requested_time: req,
            status: 1,
            user: 1,
        };
        assert_eq!(j(500, 100).actual_run(), Some(100));
        assert_eq!(j(-1, 100).actual_run(), Some(100));
        assert_eq!(j(0, -1).planned_duration(), Some(1));
        assert_eq!(j(0, -1).actual_run(), Some(0));
        assert_eq!(j(-1, -1).planned_duration(), None);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let e = parse("; h\n1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: expected 18 fields, found 17");
        let e = parse("1 0 -1 x 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: field 4 (run time): expected an integer, found \"x\""
        );
        let e = parse("1 0 -1 1 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 NaN\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert_eq!(parse_bytes(b"; ok\n\xff\n").unwrap_err().line, 2);
    }

    #[test]
    fn writes_waits_in_place() {
        let w = parse(TRACE).unwrap();
        let out = write_with_waits(&w, &[Fate::Waited(7), Fate::NotRun]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "; Version: 2.2");
        assert_eq!(lines[2], "");
        assert_eq!(lines[3], "1 0 7 100 2 -1 -1 2 200 -1 1 7 1 -1 1 1 -1 -1");
        assert_eq!(
            lines[4],
            "2   5 -1 50 -1 12.5 -1 3 -1 -1 5 8 1 -1 1 1 -1 -1"
        );
        let again = parse(&out).unwrap();
        assert_eq!(again.jobs[0].wait, 7);
        assert_eq!(again.jobs[1].status, STATUS_NOT_RUN);
    }
}
