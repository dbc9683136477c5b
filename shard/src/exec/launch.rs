//! The shard's side of the `exec` executor: from a started job to a launched supervisor,
//! kill requests, and reading job directories back (for the watch, and after a restart).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use shardsched_process::plan::{PLAN_FILE, Plan, spawn_supervisor};
use shardsched_proto::msg::JobId;

use super::env::{JobFacts, job_variables};
use super::files::{write_atomic, write_replace};
use super::rset::RSummary;
use super::{EndCause, ExecError, JOBS_DIR, JobEnd, JobFiles, PID_FILE, R_FILE, job_dir};
use crate::job::JobRecord;

pub use shardsched_process::watch::{Leftovers, RunningOrEnded, observe, request_kill, set_aside};

/// A job ready to launch: its directory, its supervisor's plan and its R.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The job.
    pub id: JobId,
    /// Its directory.
    pub dir: PathBuf,
    /// What the supervisor runs: the job's one task, as the shard's user, in the shard's
    /// environment plus the job's variables.
    pub plan: Plan,
    /// Its R, for `R.json`.
    pub r_json: String,
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
            restarts: job.restarts(),
        }));
        Ok(Prepared {
            id: job.id,
            plan: Plan {
                job: job.id.to_string(),
                run_as: None,
                command,
                cwd: files.cwd,
                stdout: Some(files.stdout),
                stderr: Some(files.stderr),
                truncate_output: true,
                files: run.files,
                inherit_env: true,
                env,
                ranks: vec![0],
                size: 1,
                nnodes: 1,
                time_limit_ms: job.duration_ms,
                kill_grace_ms: u64::try_from(kill_grace.as_millis()).unwrap_or(u64::MAX),
                cgroups: Default::default(),
                lease: None,
            },
            dir,
            r_json: r_json.to_owned(),
        })
    }
}

/// Creates the job's directory with its `R.json` and `plan.json`, and starts
/// `supervisor DIR` (the `shardsched-supervisor` binary). The supervisor puts itself in its
/// own session; the caller must reap the returned child (it exits when the job ends). A
/// directory left by an earlier run of the same job (a requeued job) is kept as
/// `DIR.run-N`.
pub fn launch(supervisor: &Path, prepared: &Prepared) -> Result<Child, ExecError> {
    let dir = &prepared.dir;
    set_aside(dir, Leftovers::ByGroup)?;
    fs::create_dir_all(dir).map_err(|e| ExecError::io(dir, e))?;
    // Read only while the job runs (a crash of the host ends it too): replaced whole,
    // without fsyncs. The supervisor writes the job's carried files itself.
    write_replace(&dir.join(R_FILE), prepared.r_json.as_bytes())?;
    let plan = serde_json::to_vec(&prepared.plan)
        .map_err(|e| ExecError::bad_file(dir.join(PLAN_FILE), e.to_string()))?;
    write_replace(&dir.join(PLAN_FILE), &plan)?;
    let child = spawn_supervisor(supervisor, dir)?;
    // `spawn` returns once the supervisor's program runs, so from here on the pid file
    // names a live supervisor (the supervisor writes the same pid again when it starts):
    // a shard that dies now leaves a directory `recover` reads as running, not lost. The
    // one durable write of a launch: after a crash of the host, a job with this file is
    // reported lost, where one without a directory would be launched again.
    write_atomic(&dir.join(PID_FILE), format!("{}\n", child.id()).as_bytes())?;
    Ok(child)
}

/// Removes the directory of job `id` under `jobs_dir` and those of its earlier runs
/// (`ID.run-1`, `ID.run-2`, …), once the shard forgot the job. A directory whose supervisor
/// has not written its status is left alone (and is an error): its job may still run.
pub fn remove_job_dirs(jobs_dir: &Path, id: JobId) -> Result<(), ExecError> {
    Ok(shardsched_process::watch::remove_job_dirs(
        jobs_dir,
        id,
        Leftovers::ByGroup,
    )?)
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
            let state = observe(&entry.path(), Leftovers::ByGroup).unwrap_or_else(|e| {
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
    use crate::exec::STATUS_FILE;
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
