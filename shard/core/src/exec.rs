//! The `exec` executor's vocabulary, shared by the core and the driver: the layout of a job
//! directory and how a job's processes ended ([`JobEnd`]). The core turns a [`JobEnd`] into
//! the job's end; the driver (`shardsched_shard::exec`) writes and reads the files.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shardsched_jobspec::{Jobspec, Stream};
use shardsched_wire::msg::JobId;

use crate::job::JobRecord;

/// The directory under a shard's state directory that holds one directory per exec job.
pub const JOBS_DIR: &str = "jobs";
/// The launch description the shard writes for the supervisor.
pub const LAUNCH_FILE: &str = "launch.json";
/// The job's R.
pub const R_FILE: &str = "R.json";
/// The supervisor's pid.
pub const PID_FILE: &str = "supervisor.pid";
/// The job's standard output.
pub const STDOUT_FILE: &str = "stdout";
/// The job's standard error.
pub const STDERR_FILE: &str = "stderr";
/// A kill request from the shard (its text is the reason).
pub const CANCEL_FILE: &str = "cancel";
/// How the job ended, written by the supervisor.
pub const STATUS_FILE: &str = "status";
/// The supervisor's own messages.
pub const SUPERVISOR_LOG: &str = "supervisor.log";

/// The directory of job `id` under the shard's jobs directory (`<state-dir>/jobs`).
pub fn job_dir(jobs_dir: &Path, id: JobId) -> PathBuf {
    jobs_dir.join(id.to_string())
}

/// Where a job runs and where its output goes: its jobspec's `cwd` and output files, else
/// its directory. Computed in one place for the launch and for the `start` event that
/// `job info` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobFiles {
    /// The working directory.
    pub cwd: PathBuf,
    /// Standard output's file.
    pub stdout: PathBuf,
    /// Standard error's file.
    pub stderr: PathBuf,
}

impl JobFiles {
    /// The files of `job` (whose jobspec is `jobspec`) with its directory under `jobs_dir`:
    /// output templates filled in (`{{id}}`, `{{name}}`, `{{array_id}}`,
    /// `{{array_index}}`) and relative paths taken from its working directory.
    pub fn of(jobs_dir: &Path, job: &JobRecord, jobspec: &Jobspec) -> JobFiles {
        let dir = job_dir(jobs_dir, job.id);
        let cwd = jobspec
            .attributes
            .cwd()
            .map_or_else(|| dir.clone(), PathBuf::from);
        let file = |stream: Stream, default: &str| match jobspec.attributes.output(stream) {
            Some(template) => cwd.join(fill(template, job)),
            None => dir.join(default),
        };
        JobFiles {
            stdout: file(Stream::Stdout, STDOUT_FILE),
            stderr: file(Stream::Stderr, STDERR_FILE),
            cwd,
        }
    }
}

/// An output path template with the job's values in (a `/` in its name becomes `_`, so
/// the name never makes directories).
fn fill(template: &str, job: &JobRecord) -> String {
    let (array, index) = match job.array {
        Some(e) => (e.array.to_string(), e.index.to_string()),
        None => (job.id.to_string(), "0".to_owned()),
    };
    template
        .replace("{{id}}", &job.id.to_string())
        .replace("{{name}}", &job.name.replace('/', "_"))
        .replace("{{array_id}}", &array)
        .replace("{{array_index}}", &index)
}

/// Why a job's processes ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndCause {
    /// The command ended by itself (with any exit status).
    Completed,
    /// It reached its time limit and was killed.
    Timeout,
    /// It was killed on request (cancel, node down, or a SIGTERM to its supervisor).
    Cancelled,
    /// The command could not be started (not found, not executable, bad directory).
    Error,
    /// Its supervisor is gone without having written a status (found by `recover` or
    /// by the shard's watch).
    Lost,
}

/// How a job ended: what the supervisor writes to `status`, and what the core is told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEnd {
    /// Why.
    pub cause: EndCause,
    /// The command's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// Words for a person: the kill request's reason, the start error.
    #[serde(default)]
    pub note: String,
}

impl JobEnd {
    /// An end with no exit status (the command never ran, or nobody saw it end).
    pub fn without_status(cause: EndCause, note: impl Into<String>) -> JobEnd {
        JobEnd {
            cause,
            exit_code: None,
            signal: None,
            note: note.into(),
        }
    }

    /// Whether the command itself succeeded: it ended by itself with exit code 0.
    pub fn succeeded(&self) -> bool {
        self.cause == EndCause::Completed && self.exit_code == Some(0)
    }

    /// The exit status in a few words: `exit code 3`, `signal 15`, `no exit status`.
    pub fn status_text(&self) -> String {
        match (self.exit_code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "no exit status".to_owned(),
        }
    }

    /// The wait(2)-style status Flux puts in its `finish` event: code << 8, or the signal.
    pub fn wait_status(&self) -> Option<i32> {
        match (self.exit_code, self.signal) {
            (Some(code), _) => Some((code & 0xff) << 8),
            (None, Some(sig)) => Some(sig & 0x7f),
            (None, None) => None,
        }
    }
}

impl fmt::Display for EndCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndCause::Completed => "completed",
            EndCause::Timeout => "timeout",
            EndCause::Cancelled => "cancelled",
            EndCause::Error => "error",
            EndCause::Lost => "lost",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_naturally() {
        let exited = JobEnd {
            cause: EndCause::Completed,
            exit_code: Some(3),
            signal: None,
            note: String::new(),
        };
        assert!(!exited.succeeded());
        assert_eq!(exited.status_text(), "exit code 3");
        assert_eq!(exited.wait_status(), Some(3 << 8));
        let killed = JobEnd {
            cause: EndCause::Timeout,
            exit_code: None,
            signal: Some(15),
            note: String::new(),
        };
        assert_eq!(killed.status_text(), "killed by signal 15");
        assert_eq!(killed.wait_status(), Some(15));
        let json = serde_json::to_string(&killed).expect("json");
        assert!(json.contains("\"timeout\""), "{json}");
        let back: JobEnd = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, killed);
    }
}
