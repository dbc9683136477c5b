//! The shard's side of the `exec` executor: from a started job to a launched supervisor,
//! kill requests, and reading job directories back (for the watch, and after a restart).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde::{Deserialize, Serialize};
use shardsched_jobspec::CarriedFile;
use shardsched_proto::msg::JobId;

use super::env::{JobFacts, job_variables};
use super::files::{self, group_alive, process_alive, read_json, read_pid, write_atomic};
use super::rset::RSummary;
use super::{
    CANCEL_FILE, EndCause, ExecError, GROUP_FILE, JOBS_DIR, JobEnd, JobFiles, LAUNCH_FILE,
    PID_FILE, R_FILE, STATUS_FILE, SUPERVISOR_LOG, job_dir,
};
use crate::job::JobRecord;

/// The subcommand of the `shardsched` binary that runs a supervisor.
pub const SUPERVISE_SUBCOMMAND: &str = "supervise";

/// What the supervisor runs: written by the shard to `launch.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The job id (F58), for messages.
    pub job: String,
    /// The program and its arguments (the jobspec's `tasks[0].command`).
    pub command: Vec<String>,
    /// Variables added to the supervisor's (the shard's) environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Where standard output goes ([`STDOUT_FILE`] in the job directory when absent).
    #[serde(default)]
    pub stdout: Option<PathBuf>,
    /// Where standard error goes ([`STDERR_FILE`] in the job directory when absent).
    #[serde(default)]
    pub stderr: Option<PathBuf>,
    /// The time limit, ms (0: none).
    pub time_limit_ms: u64,
    /// SIGTERM-to-SIGKILL grace, ms.
    pub kill_grace_ms: u64,
}

/// A job ready to launch: its directory, launch description and R.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The job.
    pub id: JobId,
    /// Its directory.
    pub dir: PathBuf,
    /// What the supervisor runs.
    pub spec: LaunchSpec,
    /// Its R, for `R.json`.
    pub r_json: String,
    /// The files its jobspec carries (a batch script), written into its directory.
    pub files: Vec<CarriedFile>,
}

/// A job directory as read back: its supervisor still runs, or the job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunningOrEnded {
    /// The supervisor (this pid) is alive and has not written a status.
    Running {
        /// The supervisor's pid.
        pid: u32,
    },
    /// The status file says how it ended, or (cause [`EndCause::Lost`]) the supervisor is
    /// gone without writing one.
    Ended(JobEnd),
}

impl Prepared {
    /// Everything needed to launch `job` (which must have started: it has its R) of
    /// `queue` with its directory under `jobs_dir`. Pure: no file is touched.
    pub fn for_job(
        jobs_dir: &Path,
        queue: &str,
        job: &JobRecord,
        kill_grace: Duration,
    ) -> Result<Prepared, ExecError> {
        let fail = |message: String| ExecError::Launch {
            job: job.id.to_string(),
            message,
        };
        let jobspec = shardsched_jobspec::parse_json(&job.jobspec_json)
            .map_err(|e| fail(format!("jobspec: {e}")))?;
        let run = shardsched_jobspec::Execution::of(&jobspec).map_err(fail)?;
        let dir = job_dir(jobs_dir, job.id);
        let command = run.command_in(&dir);
        let r_json = job
            .r_json
            .as_deref()
            .ok_or_else(|| fail("the job has no R (it was not allocated)".to_owned()))?;
        let r = RSummary::parse(r_json).map_err(fail)?;
        // The jobspec's environment (checked when it was parsed), then ours.
        let mut env = run.environment.clone();
        let files = JobFiles::of(jobs_dir, job, &run);
        let r_path = dir.join(R_FILE);
        env.extend(job_variables(&JobFacts {
            id: job.id,
            queue,
            r: &r,
            r_path: &r_path,
            dir: &dir,
            time_limit_ms: job.duration_ms,
            array: job.array,
        }));
        Ok(Prepared {
            id: job.id,
            spec: LaunchSpec {
                job: job.id.to_string(),
                command,
                env,
                cwd: files.cwd,
                stdout: Some(files.stdout),
                stderr: Some(files.stderr),
                time_limit_ms: job.duration_ms,
                kill_grace_ms: u64::try_from(kill_grace.as_millis()).unwrap_or(u64::MAX),
            },
            dir,
            r_json: r_json.to_owned(),
            files: run.files,
        })
    }
}

/// Creates the job's directory with its `R.json` and `launch.json`, and starts
/// `program supervise DIR` (`program` is the `shardsched` binary). The supervisor puts
/// itself in its own session; the caller must reap the returned child (it exits when the
/// job ends). A directory left by an earlier run of the same job (a requeued job) is kept
/// as `DIR.run-N`.
pub fn launch(program: &Path, prepared: &Prepared) -> Result<Child, ExecError> {
    let dir = &prepared.dir;
    if dir.exists() {
        set_aside(dir)?;
    }
    fs::create_dir_all(dir).map_err(|e| ExecError::io(dir, e))?;
    write_atomic(&dir.join(R_FILE), prepared.r_json.as_bytes())?;
    for file in &prepared.files {
        let path = dir.join(&file.name);
        write_atomic(&path, file.data.as_bytes())?;
        fs::set_permissions(&path, fs::Permissions::from_mode(file.mode))
            .map_err(|e| ExecError::io(&path, e))?;
    }
    let spec = serde_json::to_vec_pretty(&prepared.spec)
        .map_err(|e| ExecError::bad_file(dir.join(LAUNCH_FILE), e.to_string()))?;
    write_atomic(&dir.join(LAUNCH_FILE), &spec)?;
    let log_path = dir.join(SUPERVISOR_LOG);
    let log = fs::File::create(&log_path).map_err(|e| ExecError::io(&log_path, e))?;
    let child = Command::new(program)
        .arg(SUPERVISE_SUBCOMMAND)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| ExecError::io(program, e))?;
    // `spawn` returns once the supervisor's program runs, so from here on the pid file
    // names a live supervisor (the supervisor writes the same pid again when it starts):
    // a shard that dies now leaves a directory `recover` reads as running, not lost.
    write_atomic(&dir.join(PID_FILE), format!("{}\n", child.id()).as_bytes())?;
    Ok(child)
}

/// Moves an earlier run's directory aside. Refused while its supervisor still runs.
fn set_aside(dir: &Path) -> Result<(), ExecError> {
    if let RunningOrEnded::Running { pid } = observe(dir)? {
        return Err(ExecError::bad_file(
            dir.to_owned(),
            format!("an earlier run's supervisor (pid {pid}) is still running"),
        ));
    }
    Ok(files::set_aside(dir)?)
}

/// Removes the directory of job `id` under `jobs_dir` and those of its earlier runs
/// (`ID.run-1`, `ID.run-2`, …), once the shard forgot the job. A directory whose supervisor
/// has not written its status is left alone (and is an error): its job may still run.
pub fn remove_job_dirs(jobs_dir: &Path, id: JobId) -> Result<(), ExecError> {
    let dir = job_dir(jobs_dir, id);
    if dir.exists() {
        if let RunningOrEnded::Running { pid } = observe(&dir)? {
            return Err(ExecError::bad_file(
                dir,
                format!("not removed: its supervisor (pid {pid}) still runs"),
            ));
        }
        fs::remove_dir_all(&dir).map_err(|e| ExecError::io(&dir, e))?;
    }
    let name = id.to_string();
    for run in 1u32.. {
        let aside = jobs_dir.join(format!("{name}.run-{run}"));
        if !aside.exists() {
            break;
        }
        fs::remove_dir_all(&aside).map_err(|e| ExecError::io(&aside, e))?;
    }
    Ok(())
}

/// Asks the job in `dir` to stop: writes the `cancel` file with `why` (the ground truth,
/// which the supervisor also polls), then wakes the supervisor with SIGTERM. A job whose
/// supervisor is already gone needs nothing more.
pub fn request_kill(dir: &Path, why: &str) -> Result<(), ExecError> {
    if dir.join(STATUS_FILE).exists() {
        return Ok(());
    }
    write_atomic(&dir.join(CANCEL_FILE), why.as_bytes())?;
    if let Some(pid) = read_pid(&dir.join(PID_FILE))?
        && supervisor_alive(dir, pid)
        && let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw)
    {
        match kill_process(raw, Signal::TERM) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(e) => return Err(ExecError::io(dir, e.into())),
        }
    }
    Ok(())
}

/// Reads a job directory: the status if written, else whether its supervisor (from the pid
/// file) still runs. A supervisor gone without a status (killed outright) leaves its job
/// running while a process of the job's group lives: those are killed (SIGKILL), and the
/// job is reported ended, as lost, only once none is left, so its resources are never
/// given to another job while its processes still use them.
pub fn observe(dir: &Path) -> Result<RunningOrEnded, ExecError> {
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
    let group = read_pid(&dir.join(GROUP_FILE))?;
    if let Some(pgid) = group
        && group_alive(pgid)
    {
        if let Some(raw) = i32::try_from(pgid).ok().and_then(Pid::from_raw) {
            let _ = kill_process_group(raw, Signal::KILL);
        }
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

/// Whether `pid` is the supervisor of the job in `dir`: alive, running `supervise` on a
/// directory of that name.
fn supervisor_alive(dir: &Path, pid: u32) -> bool {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    process_alive(pid, &[SUPERVISE_SUBCOMMAND, &name])
}

/// Every exec job a shard with this state directory launched, read back from
/// `<state_dir>/jobs/`: which supervisors still run and how the others' jobs ended (a
/// restarted shard calls this to re-watch the first and report the second). Ordered by
/// job id. Directories of earlier runs (`ID.run-N`) and names that are not job ids are
/// skipped. A job directory that cannot be read (a corrupted status file) is reported as
/// ended, [`EndCause::Lost`], with the error naming the file: one bad directory does not
/// keep a shard from starting. Only an unreadable jobs directory is an error.
pub fn recover(state_dir: &Path) -> Result<Vec<(JobId, RunningOrEnded)>, ExecError> {
    let jobs_dir = state_dir.join(JOBS_DIR);
    let entries = match fs::read_dir(&jobs_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ExecError::io(&jobs_dir, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ExecError::io(&jobs_dir, e))?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.parse::<JobId>().ok()) else {
            continue;
        };
        if entry.path().is_dir() {
            let state = observe(&entry.path()).unwrap_or_else(|e| {
                RunningOrEnded::Ended(JobEnd::without_status(EndCause::Lost, e.to_string()))
            });
            found.push((id, state));
        }
    }
    found.sort_by_key(|(id, _)| *id);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardsched_proto::Fluid;

    #[test]
    fn recover_reads_ended_and_lost_jobs_and_skips_the_rest() {
        let state = std::env::temp_dir().join(format!(
            "shardsched-exec-recover-unit-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&state);
        let jobs = state.join(JOBS_DIR);
        assert!(recover(&state).expect("no jobs dir yet").is_empty());
        let (done, garbled, orphan) = (Fluid(7 << 30), Fluid(8 << 30), Fluid(9 << 30));
        for id in [done, garbled, orphan] {
            fs::create_dir_all(job_dir(&jobs, id)).expect("dir");
        }
        let end = JobEnd {
            cause: EndCause::Timeout,
            exit_code: None,
            signal: Some(15),
            note: "time limit of 1 s reached".into(),
        };
        let status = serde_json::to_string(&end).expect("json");
        write_atomic(&job_dir(&jobs, done).join(STATUS_FILE), status.as_bytes()).expect("write");
        fs::write(job_dir(&jobs, garbled).join(STATUS_FILE), "{\"cause\":").expect("write");
        fs::create_dir_all(jobs.join(format!("{done}.run-1"))).expect("dir");
        fs::create_dir_all(jobs.join("not-a-job")).expect("dir");

        let found = recover(&state).expect("recover");
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0], (done, RunningOrEnded::Ended(end)));
        let RunningOrEnded::Ended(bad) = &found[1].1 else {
            panic!("{found:?}");
        };
        assert_eq!(bad.cause, EndCause::Lost);
        assert!(bad.note.contains(STATUS_FILE), "{}", bad.note);
        let RunningOrEnded::Ended(lost) = &found[2].1 else {
            panic!("{found:?}");
        };
        assert!(lost.note.contains("never started"), "{}", lost.note);

        // Forgotten jobs take their directories (and their earlier runs') with them.
        remove_job_dirs(&jobs, done).expect("remove");
        remove_job_dirs(&jobs, orphan).expect("remove");
        assert!(!job_dir(&jobs, done).exists());
        assert!(!jobs.join(format!("{done}.run-1")).exists());
        assert!(!job_dir(&jobs, orphan).exists());
        assert!(job_dir(&jobs, garbled).exists());
        let _ = fs::remove_dir_all(&state);
    }
}
