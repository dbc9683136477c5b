//! The supervisor: the small process (`shardsched supervise DIR`) that runs one `exec` job
//! and outlives the shard that started it.
//!
//! ```text
//! setsid                                  its own session: no terminal signals, and not in
//!                                         the shard's process group
//! write supervisor.pid; read launch.json
//! spawn the command in its own process group, stdout/stderr to files
//! wait for the first of:
//!   the command ends ─────────────► leftovers of its group: SIGTERM, grace, SIGKILL
//!   the time limit ───────────────► SIGTERM the group, grace, SIGKILL     (timeout)
//!   SIGTERM, or a `cancel` file ──► the same                              (cancelled)
//! write status (atomically); exit
//! ```
//!
//! A job's processes never outlive it: whatever is left in its process group when the
//! command ends gets the same SIGTERM-grace-SIGKILL treatment. (A process that leaves the
//! group with `setsid` escapes, as it would escape Slurm's process-group tracking.)

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal as SignalStream, SignalKind, signal};
use tokio::time::Instant;

use super::files::{group_alive, kill_reason, read_json, write_atomic};
use super::{
    CANCEL_FILE, EndCause, ExecError, GROUP_FILE, JobEnd, LAUNCH_FILE, LaunchSpec, PID_FILE,
    STATUS_FILE, STDERR_FILE, STDOUT_FILE,
};
use crate::limits::SUPERVISOR_POLL_INTERVAL;

/// How often a dying process group is looked at during its grace period.
const GROUP_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Supervises the job whose directory is `dir` until it ends, writes its status, and
/// returns it. Errors are the supervisor's own (its runtime could not start, or its status
/// file could not be written); a job that cannot start is a status with
/// [`EndCause::Error`].
pub fn supervise(dir: &Path) -> Result<JobEnd, ExecError> {
    // Fails with EPERM only if we already lead a process group: then we are detached.
    let _ = rustix::process::setsid();
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    if let Err(e) = write_atomic(&dir.join(PID_FILE), format!("{pid}\n").as_bytes()) {
        // The shard wrote it too; the job runs either way.
        tracing::warn!(error = %e, "cannot write the pid file");
    }
    let end = match read_json::<LaunchSpec>(&dir.join(LAUNCH_FILE)) {
        Ok(Some(spec)) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| ExecError::io(dir, e))?;
            runtime.block_on(run(dir, &spec))
        }
        Ok(None) => JobEnd::without_status(
            EndCause::Error,
            format!("{} is missing", dir.join(LAUNCH_FILE).display()),
        ),
        Err(e) => JobEnd::without_status(EndCause::Error, e.to_string()),
    };
    let text = serde_json::to_string(&end)
        .map_err(|e| ExecError::bad_file(dir.join(STATUS_FILE), e.to_string()))?;
    write_atomic(&dir.join(STATUS_FILE), text.as_bytes())?;
    Ok(end)
}

/// Why the wait for the command stopped.
enum Stop {
    Exited(std::io::Result<ExitStatus>),
    Timeout,
    Cancel(String),
}

async fn run(dir: &Path, spec: &LaunchSpec) -> JobEnd {
    // Before the command starts, so that a cancel sent at once is not the default action
    // (which would kill the supervisor and orphan the job).
    let term = match signal(SignalKind::terminate()) {
        Ok(term) => Some(term),
        Err(e) => {
            tracing::warn!(error = %e, "cannot catch SIGTERM; cancel files still work");
            None
        }
    };
    let Some((program, args)) = spec.command.split_first() else {
        return JobEnd::without_status(EndCause::Error, "the job has no command");
    };
    let open = |path: &Option<PathBuf>, name: &str| {
        let path = path.clone().unwrap_or_else(|| dir.join(name));
        std::fs::File::create(&path).map_err(|e| {
            JobEnd::without_status(EndCause::Error, ExecError::io(&path, e).to_string())
        })
    };
    let (stdout, stderr) = match (
        open(&spec.stdout, STDOUT_FILE),
        open(&spec.stderr, STDERR_FILE),
    ) {
        (Ok(out), Ok(err)) => (out, err),
        (Err(end), _) | (_, Err(end)) => return end,
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(false);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return JobEnd::without_status(
                EndCause::Error,
                format!("cannot start {program:?} in {}: {e}", spec.cwd.display()),
            );
        }
    };
    let Some(pgid) = child.id() else {
        return JobEnd::without_status(EndCause::Lost, "the command ended before it was seen");
    };
    // Should this supervisor be killed outright, the shard finds the group here and kills
    // it before it frees the job's resources.
    if let Err(e) = write_atomic(&dir.join(GROUP_FILE), format!("{pgid}\n").as_bytes()) {
        tracing::warn!(error = %e, "cannot write the job's process group");
    }
    let grace = Duration::from_millis(spec.kill_grace_ms);
    let deadline = (spec.time_limit_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(spec.time_limit_ms));
    let stop = wait(dir, &mut child, deadline, term).await;
    let (cause, note, status) = match stop {
        Stop::Exited(status) => {
            if group_alive(pgid) {
                terminate_group(pgid, &mut child, grace).await;
            }
            match status {
                Ok(status) => (EndCause::Completed, String::new(), Some(status)),
                Err(e) => (
                    EndCause::Lost,
                    format!("waiting for the command: {e}"),
                    None,
                ),
            }
        }
        Stop::Timeout => {
            let status = terminate_group(pgid, &mut child, grace).await;
            let note = format!(
                "time limit of {} s reached",
                spec.time_limit_ms.div_ceil(1000)
            );
            (EndCause::Timeout, note, status)
        }
        Stop::Cancel(why) => {
            let status = terminate_group(pgid, &mut child, grace).await;
            (EndCause::Cancelled, why, status)
        }
    };
    use std::os::unix::process::ExitStatusExt;
    JobEnd {
        cause,
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        note,
    }
}

/// Waits for the command to end, its deadline, a SIGTERM or a cancel file.
async fn wait(
    dir: &Path,
    child: &mut Child,
    deadline: Option<Instant>,
    mut term: Option<SignalStream>,
) -> Stop {
    let mut poll = tokio::time::interval(SUPERVISOR_POLL_INTERVAL);
    loop {
        tokio::select! {
            status = child.wait() => return Stop::Exited(status),
            () = until(deadline) => return Stop::Timeout,
            Some(()) = async { term.as_mut()?.recv().await } => {
                let why = cancel_reason(dir)
                    .unwrap_or_else(|| "its supervisor received SIGTERM".to_owned());
                return Stop::Cancel(why);
            }
            _ = poll.tick() => {
                if let Some(why) = cancel_reason(dir) {
                    return Stop::Cancel(why);
                }
            }
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The reason in the shard's cancel file, if there is one.
fn cancel_reason(dir: &Path) -> Option<String> {
    kill_reason(&dir.join(CANCEL_FILE))
}

/// SIGTERM to the group, then up to `grace` for the command and every other process of
/// the group to go, then SIGKILL to what is left. Returns the command's exit status.
async fn terminate_group(pgid: u32, child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + grace;
    signal_group(pgid, Signal::TERM);
    let mut status = tokio::time::timeout_at(deadline, child.wait())
        .await
        .ok()
        .and_then(Result::ok);
    while group_alive(pgid) && Instant::now() < deadline {
        tokio::time::sleep(GROUP_POLL_INTERVAL).await;
    }
    if status.is_none() || group_alive(pgid) {
        signal_group(pgid, Signal::KILL);
        if status.is_none() {
            status = child.wait().await.ok();
        }
    }
    status
}

fn signal_group(pgid: u32, sig: Signal) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    match kill_process_group(pid, sig) {
        Ok(()) => {}
        // The group is already gone.
        Err(rustix::io::Errno::SRCH) => {}
        Err(e) => tracing::warn!(pgid, error = %e, "cannot signal the job's process group"),
    }
}
