//! A spare supervisor (`shardsched-supervisor --spare`): a supervisor a node agent starts
//! *before* it has a job for it, so that a launch does not wait for a process's exec and
//! dynamic loading (about 2 ms of CPU each on the bench machine, most of a launch's cost
//! beyond the task's own).
//!
//! ```text
//! agent: spawn `shardsched-supervisor --spare` (at the lowest CPU priority when it can
//!        restore it: root), its stdin a pipe the agent alone holds
//! spare: one line on stdout, "ready" (loaded: the agent hands jobs only to ready spares)
//!        wait on stdin for one line, a Handoff {dir, plan, nice}  (JSON, ≤ HANDOFF_BYTES_MAX)
//!   EOF before a whole line (the agent is gone, or dropped it) ─► exit 0, having done nothing
//!   a line that does not parse                                  ─► exit 2, having done nothing
//!   a Handoff ─► its CPU priority back to the agent's (nice); chdir DIR; DIR/supervisor.log
//!                becomes its stderr; then exactly what `shardsched-supervisor DIR PLAN`
//!                does (crate::supervisor::supervise)
//! ```
//!
//! The lowest priority keeps a spare's own start (its exec and loading) from taking the CPU
//! from the launches under way on a busy node; the handoff gives the job the agent's.
//!
//! A spare runs nothing before it has a plan its agent gave it: a spare holds no job
//! directory and no pid file, so a restarted agent, which recovers its jobs from their
//! directories, never takes one for a job. Until its handoff it stays in its agent's
//! process group (the supervisor's `setsid` comes with the plan), so a signal to the agent's
//! group reaches its spares too.
//!
//! A handed-off spare's command line names no job directory (it was started before there
//! was one), so the check that a pid is a job's supervisor and not a recycled one
//! ([`crate::plan::supervisor_alive`]) takes a spare by its working directory instead: the
//! job's directory, entered as the first thing after the handoff.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::FileError;

/// The argument that makes `shardsched-supervisor` a spare.
pub const SPARE_FLAG: &str = "--spare";

/// The longest handoff line a spare reads, in bytes (two paths and a little JSON).
pub const HANDOFF_BYTES_MAX: u64 = 16 * 1024;

/// What an agent hands a spare: the job's directory and its plan, both absolute (a spare
/// enters the directory before it reads the plan).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    /// The job's directory.
    pub dir: PathBuf,
    /// The job's plan, where only root writes (see [`crate::supervisor::supervise`]).
    pub plan: PathBuf,
    /// The CPU priority (nice value) to run the job at, when the spare was started at
    /// another; `None`: as it is.
    #[serde(default)]
    pub nice: Option<i32>,
}

/// What a spare writes on its standard output once it is loaded and waiting.
pub const READY_LINE: &[u8] = b"ready\n";

/// Says on `out` that this spare is loaded and waiting for its handoff.
pub fn announce_ready(mut out: impl std::io::Write) -> std::io::Result<()> {
    out.write_all(READY_LINE)?;
    out.flush()
}

impl Handoff {
    /// The handoff as the spare reads it: one JSON line.
    pub fn line(&self) -> Result<Vec<u8>, FileError> {
        let mut line = serde_json::to_vec(self).map_err(|e| FileError::BadFile {
            path: self.dir.clone(),
            message: format!("cannot encode the handoff: {e}"),
        })?;
        line.push(b'\n');
        Ok(line)
    }
}

/// Why a spare stops without running anything.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// Its stdin could not be read.
    #[error("reading the handoff: {0}")]
    Io(#[from] std::io::Error),
    /// The line is longer than [`HANDOFF_BYTES_MAX`] or not a [`Handoff`].
    #[error("the handoff is not one: {0}")]
    Bad(String),
}

/// Waits for the handoff on `input`: `None` when it ends before a whole line (the agent is
/// gone), which is not an error.
pub fn wait_for_handoff(input: impl Read) -> Result<Option<Handoff>, HandoffError> {
    let mut line = Vec::new();
    BufReader::new(input.take(HANDOFF_BYTES_MAX + 1)).read_until(b'\n', &mut line)?;
    if line.len() as u64 > HANDOFF_BYTES_MAX {
        return Err(HandoffError::Bad(format!(
            "longer than {HANDOFF_BYTES_MAX} bytes"
        )));
    }
    if line.pop() != Some(b'\n') {
        return Ok(None);
    }
    let handoff: Handoff =
        serde_json::from_slice(&line).map_err(|e| HandoffError::Bad(e.to_string()))?;
    if !handoff.dir.is_absolute() || !handoff.plan.is_absolute() {
        return Err(HandoffError::Bad(format!(
            "{} and {} must both be absolute",
            handoff.dir.display(),
            handoff.plan.display()
        )));
    }
    Ok(Some(handoff))
}

/// Takes the job of `handoff` on: enters its directory and makes its `supervisor.log` this
/// process's standard error (as a supervisor started for the job has it), while still the
/// agent's user. An error is the job's: its caller writes it as the job's status.
pub fn take_on(handoff: &Handoff) -> Result<(), String> {
    if let Some(nice) = handoff.nice {
        rustix::process::setpriority_process(None, nice)
            .map_err(|e| format!("cannot run at CPU priority {nice}: {e}"))?;
    }
    std::env::set_current_dir(&handoff.dir)
        .map_err(|e| format!("cannot enter {}: {e}", handoff.dir.display()))?;
    let log_path = handoff.dir.join(crate::plan::SUPERVISOR_LOG);
    let log = crate::files::create_anew(&log_path)
        .map_err(|e| format!("cannot make {}: {e}", log_path.display()))?;
    rustix::stdio::dup2_stderr(&log)
        .map_err(|e| format!("cannot write to {}: {e}", log_path.display()))
}

/// Ends the job of `handoff` without running it, as an error saying `why` (what
/// [`take_on`] could not do), written where its agent reads its end.
pub fn refuse(handoff: &Handoff, why: String) -> Result<(), FileError> {
    let end = shardsched_wire::msg::agent::JobEnd::without_status(
        shardsched_wire::msg::agent::EndCause::Error,
        why,
    );
    crate::supervisor::write_end(&handoff.dir, end).map(drop)
}

/// Whether `pid`'s working directory is `dir` (the same file, however either is named).
pub fn works_in(pid: u32, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let cwd = std::fs::metadata(Path::new("/proc").join(pid.to_string()).join("cwd"));
    match (cwd, std::fs::metadata(dir)) {
        (Ok(cwd), Ok(dir)) => cwd.dev() == dir.dev() && cwd.ino() == dir.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handoff() -> Handoff {
        Handoff {
            dir: PathBuf::from("/state/jobs/f1"),
            plan: PathBuf::from("/state/plans/f1.json"),
            nice: Some(0),
        }
    }

    #[test]
    fn a_handoff_reads_back_from_its_line() {
        let line = handoff().line().expect("line");
        assert_eq!(
            wait_for_handoff(line.as_slice()).expect("read"),
            Some(handoff())
        );
    }

    #[test]
    fn an_agent_gone_before_a_whole_line_is_no_handoff() {
        assert_eq!(wait_for_handoff(&b""[..]).expect("read"), None);
        let line = handoff().line().expect("line");
        let cut = &line[..line.len() - 1];
        assert_eq!(wait_for_handoff(cut).expect("read"), None);
    }

    #[test]
    fn bad_or_long_or_relative_handoffs_are_refused() {
        assert!(matches!(
            wait_for_handoff(&b"{\"dir\": 1}\n"[..]),
            Err(HandoffError::Bad(_))
        ));
        let long = vec![b'x'; HANDOFF_BYTES_MAX as usize + 10];
        assert!(matches!(
            wait_for_handoff(long.as_slice()),
            Err(HandoffError::Bad(_))
        ));
        let relative = Handoff {
            dir: PathBuf::from("jobs/f1"),
            ..handoff()
        };
        let line = relative.line().expect("line");
        assert!(matches!(
            wait_for_handoff(line.as_slice()),
            Err(HandoffError::Bad(_))
        ));
    }

    #[test]
    fn a_process_works_in_its_current_directory_only() {
        let here = std::env::current_dir().expect("cwd");
        assert!(works_in(std::process::id(), &here));
        let elsewhere = tempfile::tempdir().expect("temp dir");
        assert!(!works_in(std::process::id(), elsewhere.path()));
    }
}
