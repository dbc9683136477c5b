//! A job directory as its starter (the shard's `exec` executor, a node agent) reads it back:
//! whether its supervisor still runs or how the job ended, kill requests, and moving aside
//! or removing the directories of earlier runs. The files are the ground truth, so a
//! supervisor started by an earlier process (one that was killed and restarted) is read,
//! cancelled and heard from exactly like one started by this process.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use shardsched_wire::msg::JobId;
use shardsched_wire::msg::agent::{EndCause, JobEnd};

use crate::FileError;
use crate::files::{self, kill_group_of_user, read_json, read_pid, write_atomic};
use crate::plan::{CANCEL_FILE, GROUP_FILE, PID_FILE, STATUS_FILE, supervisor_alive};

/// A job directory as read back: its supervisor still runs, or the job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunningOrEnded {
    /// The supervisor (this pid) is alive and has not written a status, or it is gone and
    /// processes of the job are still being killed.
    Running {
        /// The supervisor's pid.
        pid: u32,
    },
    /// The status file says how it ended, or (cause [`EndCause::Lost`]) the supervisor is
    /// gone without writing one.
    Ended(JobEnd),
}

/// How a job's processes are found once its supervisor is gone without a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftovers {
    /// By the process group its supervisor wrote in `group.pid`, killed here (only its
    /// processes of the job directory's owner, since the job could have written another
    /// group): the shard's `exec` jobs, and a node agent's without a cgroup hierarchy.
    ByGroup,
    /// By the job's cgroup, which the caller looks at and kills: a node agent's jobs, whose
    /// directories belong to the job's user, so that a root agent must never signal a
    /// process group read from one (`group.pid` is not read).
    InCgroup,
}

/// Reads a job directory: the status if written, else whether its supervisor (from the pid
/// file) still runs. A supervisor gone without a status (killed outright) leaves its job
/// running while a process of the job's group lives ([`Leftovers::ByGroup`]): those are
/// killed (SIGKILL), and the job is reported ended, as lost, only once none is left, so its
/// resources are never given to another job while its processes still use them. With
/// [`Leftovers::InCgroup`] it is reported lost at once, and the caller holds it until its
/// cgroup is empty (`shardsched_node::executor`).
pub fn observe(dir: &Path, leftovers: Leftovers) -> Result<RunningOrEnded, FileError> {
    if let Some(end) = read_json::<JobEnd>(&dir.join(STATUS_FILE))? {
        return Ok(RunningOrEnded::Ended(end));
    }
    let pid = read_pid(&dir.join(PID_FILE))?;
    if let Some(pid) = pid
        && supervisor_alive(dir, pid)
    {
        return Ok(RunningOrEnded::Running { pid });
    }
    // It may have written its status and exited since we looked.
    if let Some(end) = read_json::<JobEnd>(&dir.join(STATUS_FILE))? {
        return Ok(RunningOrEnded::Ended(end));
    }
    // Killed outright: its job's processes may live on. They are killed, and the job is
    // taken as running (holding its resources) until none is left.
    let group = match leftovers {
        Leftovers::ByGroup => read_pid(&dir.join(GROUP_FILE))?,
        Leftovers::InCgroup => None,
    };
    // Only the processes of the directory's owner (the job's user): a job could write
    // another group into its `group.pid`.
    let owner = fs::metadata(dir).map(|m| m.uid());
    if let Some(pgid) = group
        && let Ok(uid) = owner
        && kill_group_of_user(pgid, uid)
    {
        return Ok(RunningOrEnded::Running {
            pid: pid.unwrap_or(pgid),
        });
    }
    let mut note = match pid {
        Some(pid) => format!("its supervisor (pid {pid}) is gone without writing a status"),
        None => "its supervisor never started (no supervisor.pid)".to_owned(),
    };
    if group.is_some() {
        note.push_str("; no process of the job is left");
    }
    Ok(RunningOrEnded::Ended(JobEnd::without_status(
        EndCause::Lost,
        note,
    )))
}

/// Asks the job in `dir` to stop: writes the `cancel` file with `why`, which its supervisor
/// looks for every few milliseconds. (No signal: one sent before the supervisor catches
/// SIGTERM would kill it outright, and its job would end as lost.) A job that already
/// ended, or whose directory is gone, needs nothing.
pub fn request_kill(dir: &Path, why: &str) -> Result<(), FileError> {
    if !dir.exists() || dir.join(STATUS_FILE).exists() {
        return Ok(());
    }
    write_atomic(&dir.join(CANCEL_FILE), why.as_bytes())
}

/// Moves an earlier run's directory aside (a requeued job) as `DIR.run-N`. Refused while
/// its supervisor still runs.
pub fn set_aside(dir: &Path, leftovers: Leftovers) -> Result<(), FileError> {
    if !dir.exists() {
        return Ok(());
    }
    if let RunningOrEnded::Running { pid } = observe(dir, leftovers)? {
        return Err(FileError::BadFile {
            path: dir.to_owned(),
            message: format!("an earlier run's supervisor (pid {pid}) is still running"),
        });
    }
    files::set_aside(dir)
}

/// Removes the directory of job `id` under `jobs_dir` and those of its earlier runs
/// (`ID.run-1`, `ID.run-2`, …), once the job is forgotten. A directory whose supervisor
/// has not written its status is left alone (and is an error): its job may still run.
pub fn remove_job_dirs(jobs_dir: &Path, id: JobId, leftovers: Leftovers) -> Result<(), FileError> {
    let name = id.to_string();
    let dir = jobs_dir.join(&name);
    if dir.exists() {
        if let RunningOrEnded::Running { pid } = observe(&dir, leftovers)? {
            return Err(FileError::BadFile {
                path: dir,
                message: format!("not removed: its supervisor (pid {pid}) still runs"),
            });
        }
        fs::remove_dir_all(&dir).map_err(|e| FileError::io(&dir, e))?;
    }
    for run in 1u32.. {
        let aside = jobs_dir.join(format!("{name}.run-{run}"));
        if !aside.exists() {
            break;
        }
        fs::remove_dir_all(&aside).map_err(|e| FileError::io(&aside, e))?;
    }
    Ok(())
}
