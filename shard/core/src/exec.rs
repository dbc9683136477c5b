//! The `exec` executor's vocabulary, shared by the core and the driver: the layout of a job
//! directory and how a job's processes ended ([`JobEnd`]). The core turns a [`JobEnd`] into
//! the job's end; the driver (`shardsched_shard::exec`) writes and reads the files.

use std::path::{Path, PathBuf};

use shardsched_jobspec::{Execution, Stream, TemplateValues};
use shardsched_wire::msg::JobId;

use crate::job::JobRecord;

/// The directory under a shard's state directory that holds one directory per exec job.
pub const JOBS_DIR: &str = "jobs";
/// The job's R.
pub const R_FILE: &str = "R.json";
/// The supervisor's pid.
pub const PID_FILE: &str = "supervisor.pid";
/// The job's process group id (its command's pid), written by the supervisor as soon as
/// the command runs: what lets the shard find and kill the job's processes when the
/// supervisor is gone.
pub const GROUP_FILE: &str = "group.pid";
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
    /// The files of `job` (whose jobspec says `run`) with its directory under `jobs_dir`:
    /// output templates filled in (`{{id}}`, `{{name}}`, `{{array_id}}`,
    /// `{{array_index}}`) and relative paths taken from its working directory.
    pub fn of(jobs_dir: &Path, job: &JobRecord, run: &Execution) -> JobFiles {
        let dir = job_dir(jobs_dir, job.id);
        let cwd = run.cwd.clone().unwrap_or_else(|| dir.clone());
        let (id, array_id, array_index) = template_ids(job);
        let values = TemplateValues {
            id: &id,
            name: &job.name,
            array_id: &array_id,
            array_index: &array_index,
        };
        let file = |stream: Stream, default: &str| {
            run.output_path(stream, &cwd, &values)
                .unwrap_or_else(|| dir.join(default))
        };
        JobFiles {
            stdout: file(Stream::Stdout, STDOUT_FILE),
            stderr: file(Stream::Stderr, STDERR_FILE),
            cwd,
        }
    }
}

/// A job's id, its array's id and its index there, as output templates name them (an
/// element of no array is its own array's element 0).
fn template_ids(job: &JobRecord) -> (String, String, String) {
    match job.array {
        Some(e) => (job.id.to_string(), e.array.to_string(), e.index.to_string()),
        None => (job.id.to_string(), job.id.to_string(), "0".to_owned()),
    }
}

/// How a job ended (the supervisor's `status` file): the wire's types, shared with node
/// agents, which report the same.
pub use shardsched_wire::msg::agent::{EndCause, JobEnd};
