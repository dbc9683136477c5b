//! The `exec` executor: jobs really run, as processes on this host, each under its own
//! supervisor process that outlives the shard.
//!
//! ```text
//!  shard (driver)                          supervisor (`shardsched-supervisor DIR`)     job
//!  ─────────────                           ───────────────────────────────────────      ───
//!  core says Launch(id)
//!  write DIR/plan.json, DIR/R.json ──────► setsid; write DIR/supervisor.pid
//!  spawn `shardsched-supervisor DIR`       spawn the command, own process group ──────► runs
//!                                          wait for: its end │ time limit │ cancel
//!  core says Kill(id):                       time limit / cancel: SIGTERM the group,
//!  write DIR/cancel ─────────────────────►   KILL_GRACE, SIGKILL the group
//!                                          write DIR/status; exit
//!  the supervisor exits (its reaper wakes
//!  the exec task): read DIR/status ◄───────┘
//!  core.handle_job_ended(now, id, end)
//! ```
//!
//! The supervisor is the node agents' one (`shardsched_process::supervisor`), given a plan
//! of one task, run as the shard's user in the shard's environment, with no cgroup.
//!
//! **Files are the ground truth.** Everything the shard and a supervisor tell each other
//! goes through the job directory `<state-dir>/jobs/<job id>/`, so a supervisor started by
//! an earlier shard process (one that was killed and restarted) is watched, cancelled and
//! heard from exactly like one started by this process: [`recover`] reads the directories
//! back. Files are replaced whole ([`files::write_replace`]), so a reader never sees half
//! of one; the pid file is also made durable ([`files::write_atomic`]), so that a job whose
//! host crashed is reported lost rather than launched twice.
//!
//! | file | written by | what |
//! |---|---|---|
//! | `plan.json` | shard | the [`Plan`]: command, environment, time limit, grace |
//! | `R.json` | shard | the job's RFC 20 R (`SHARDSCHED_JOB_R` points here) |
//! | `supervisor.pid` | shard, supervisor | its pid: written by the shard as soon as it is spawned, and again by the supervisor first thing |
//! | `group.pid` | supervisor | the job's process group, once its command runs |
//! | `stdout`, `stderr` | the job | its output |
//! | `cancel` | shard | a kill request, with its reason |
//! | `status` | supervisor | the [`JobEnd`], written once, last |
//! | `supervisor.log` | supervisor | its own errors |
//!
//! Jobs run as the shard's user, with the shard's environment plus the `SHARDSCHED_*`
//! variables of [`env`](mod@env) (docs/EXEC.md).

pub mod env;
pub mod launch;
pub mod rset;

use std::path::{Path, PathBuf};

/// The file and process helpers (atomic writes, bounded reads, liveness), shared with the
/// node agent.
pub use shardsched_process::files;

pub use launch::{RunningOrEnded, launch, recover, remove_job_dirs, request_kill};
pub use shardsched_process::plan::{PLAN_FILE, Plan};
pub use shardsched_shard_core::exec::{
    CANCEL_FILE, EndCause, GROUP_FILE, JOBS_DIR, JobEnd, JobFiles, PID_FILE, R_FILE, STATUS_FILE,
    STDERR_FILE, STDOUT_FILE, SUPERVISOR_LOG, job_dir,
};

/// Something went wrong launching, watching or supervising a job.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A file or directory of a job could not be read or written, or is not what it
    /// should be.
    #[error(transparent)]
    File(#[from] shardsched_process::FileError),
    /// The job cannot be launched as described (no command, an unreadable R).
    #[error("job {job}: {message}")]
    Launch {
        /// The job.
        job: String,
        /// Why.
        message: String,
    },
}

impl ExecError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ExecError {
        ExecError::File(shardsched_process::FileError::io(path, source))
    }

    pub(crate) fn bad_file(path: PathBuf, message: String) -> ExecError {
        ExecError::File(shardsched_process::FileError::BadFile { path, message })
    }
}
