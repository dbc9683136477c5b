//! Running a resource-query-compatible program on a case folder, and comparing outputs.
//!
//! The program runs in the case folder (its files are named relative to it) with
//! `cmds.in` on standard input; its `-t` output, standard output and standard error go to
//! files in a scratch folder, so no pipe can fill up and stall it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::GenError;
use crate::case::{COMMANDS_FILE, CaseInfo};

/// How long one run may take before it counts as hung: generous, as test binaries run side
/// by side on a loaded machine (a generated case takes well under a second).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A program with resource-query's command line, and the words that come before its flags
/// (`shardsched` + `query`, or Fluxion's `resource-query` alone).
#[derive(Clone, Debug)]
pub struct Program {
    pub path: PathBuf,
    pub pre_args: Vec<String>,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    /// Killed by a signal (a crash).
    Signal,
    TimedOut,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The `-t` file (empty when the program never wrote it).
    pub out: Vec<u8>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit: Exit,
}

impl RunResult {
    /// Why the run failed as a process (crash, panic, hang, non-zero exit), if it did.
    pub fn failure(&self) -> Option<String> {
        let stderr = String::from_utf8_lossy(&self.stderr);
        if stderr.contains("panicked") {
            let line = stderr
                .lines()
                .find(|l| l.contains("panicked"))
                .unwrap_or_default();
            return Some(format!("panic: {line}"));
        }
        match self.exit {
            Exit::Code(0) => None,
            Exit::Code(c) => Some(format!(
                "exit status {c}: {}",
                stderr.lines().next().unwrap_or_default()
            )),
            Exit::Signal => Some("killed by a signal".to_string()),
            Exit::TimedOut => Some(format!("no answer within {}s", RUN_TIMEOUT.as_secs())),
        }
    }
}

impl Program {
    /// Runs the program on the case in `case_dir`; its outputs go to `scratch/<tag>.*`.
    pub fn run(
        &self,
        case_dir: &Path,
        info: &CaseInfo,
        scratch: &Path,
        tag: &str,
    ) -> Result<RunResult, GenError> {
        self.run_with(case_dir, info, &case_dir.join(COMMANDS_FILE), scratch, tag)
    }

    /// As [`Program::run`] with only the first `k` commands of the stream (then `quit`).
    pub fn run_prefix(
        &self,
        case_dir: &Path,
        info: &CaseInfo,
        k: usize,
        scratch: &Path,
        tag: &str,
    ) -> Result<RunResult, GenError> {
        let all = case_dir.join(COMMANDS_FILE);
        let text = std::fs::read_to_string(&all).map_err(|e| GenError::io(&all, e))?;
        let mut prefix: String = commands_of(&text)
            .into_iter()
            .take(k)
            .map(|l| format!("{l}\n"))
            .collect();
        prefix.push_str("quit\n");
        self.run_stream(case_dir, info, &prefix, scratch, tag)
    }

    /// As [`Program::run`] with `stream` on standard input instead of the case's own.
    pub fn run_stream(
        &self,
        case_dir: &Path,
        info: &CaseInfo,
        stream: &str,
        scratch: &Path,
        tag: &str,
    ) -> Result<RunResult, GenError> {
        let path = scratch.join(format!("{tag}.in"));
        std::fs::write(&path, stream).map_err(|e| GenError::io(&path, e))?;
        self.run_with(case_dir, info, &path, scratch, tag)
    }

    fn run_with(
        &self,
        case_dir: &Path,
        info: &CaseInfo,
        stdin_path: &Path,
        scratch: &Path,
        tag: &str,
    ) -> Result<RunResult, GenError> {
        let case_dir = std::path::absolute(case_dir).map_err(|e| GenError::io(case_dir, e))?;
        let scratch = std::path::absolute(scratch).map_err(|e| GenError::io(scratch, e))?;
        let out = scratch.join(format!("{tag}.out"));
        let stdout = scratch.join(format!("{tag}.stdout"));
        let stderr = scratch.join(format!("{tag}.stderr"));
        let _ = std::fs::remove_file(&out);
        let create = |p: &Path| std::fs::File::create(p).map_err(|e| GenError::io(p, e));
        let stdin = std::fs::File::open(stdin_path).map_err(|e| GenError::io(stdin_path, e))?;
        let mut child = Command::new(&self.path)
            .args(&self.pre_args)
            .args(&info.args)
            .arg("-t")
            .arg(&out)
            .current_dir(&case_dir)
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(create(&stdout)?))
            .stderr(Stdio::from(create(&stderr)?))
            .spawn()
            .map_err(|e| GenError::io(&self.path, e))?;
        let started = Instant::now();
        let exit = loop {
            match child.try_wait().map_err(|e| GenError::io(&self.path, e))? {
                Some(status) => break status.code().map_or(Exit::Signal, Exit::Code),
                None if started.elapsed() > RUN_TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Exit::TimedOut;
                }
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        };
        let read = |p: &Path| std::fs::read(p).unwrap_or_default();
        Ok(RunResult {
            out: read(&out),
            stdout: read(&stdout),
            stderr: read(&stderr),
            exit,
        })
    }
}

/// The commands of a stream, without its final `quit`.
pub fn commands_of(stream: &str) -> Vec<&str> {
    stream.lines().take_while(|l| l.trim() != "quit").collect()
}

/// The first line where two outputs differ (1-based), with both lines (`None` past the
/// end of that output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub line: usize,
    pub want: Option<String>,
    pub got: Option<String>,
}

/// Where `got` first differs from `want`, or `None` when they are byte-identical.
pub fn first_difference(want: &[u8], got: &[u8]) -> Option<Difference> {
    if want == got {
        return None;
    }
    let w: Vec<&[u8]> = want.split_inclusive(|&b| b == b'\n').collect();
    let g: Vec<&[u8]> = got.split_inclusive(|&b| b == b'\n').collect();
    let show = |l: Option<&&[u8]>| l.map(|l| String::from_utf8_lossy(l).trim_end().to_string());
    let line = (0..w.len().max(g.len()))
        .find(|&i| w.get(i) != g.get(i))
        .unwrap_or(0);
    Some(Difference {
        line: line + 1,
        want: show(w.get(line)),
        got: show(g.get(line)),
    })
}

/// Standard output with what differs from run to run taken out: `stat`'s match times and
/// the elapsed-time field that ends each `info`/`list` line.
pub fn normalize_stdout(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let mut out = String::new();
    for line in text.lines() {
        if line.contains("Match Time:") || line.starts_with("INFO: ELAPSE=") {
            continue;
        }
        let is_job_line = line.starts_with("INFO: ")
            && (line.contains(", ALLOCATED, ")
                || line.contains(", RESERVED, ")
                || line.contains(", CANCELED, "));
        match line.rsplit_once(", ") {
            Some((head, _)) if is_job_line => out.push_str(head),
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_difference_names_the_line_and_both_sides() {
        assert_eq!(first_difference(b"a\nb\n", b"a\nb\n"), None);
        let d = first_difference(b"a\nb\nc\n", b"a\nx\n").expect("differs");
        assert_eq!(d.line, 2);
        assert_eq!(d.want.as_deref(), Some("b"));
        assert_eq!(d.got.as_deref(), Some("x"));
        let d = first_difference(b"a\n", b"a\nmore\n").expect("differs");
        assert_eq!((d.line, d.want), (2, None));
        // A missing final newline is a difference too.
        assert!(first_difference(b"a\n", b"a").is_some());
    }

    #[test]
    fn stdout_normalization_drops_times_only() {
        let raw = b"INFO: 1, ALLOCATED, 0, j0.yaml, 0.000123\nINFO: Num. of Jobs Matched: 1\nINFO: Min. Match Time: 0.1\n";
        assert_eq!(
            normalize_stdout(raw),
            "INFO: 1, ALLOCATED, 0, j0.yaml\nINFO: Num. of Jobs Matched: 1\n"
        );
    }
}
