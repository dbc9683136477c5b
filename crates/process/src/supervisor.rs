//! A job's supervisor (`shardsched-supervisor DIR [PLAN]`, or a node agent's spare handed
//! the job: [`crate::spare`]): started by a node agent or by a shard's `exec` executor,
//! outliving it, it runs the host's tasks of one job (as the job's
//! user, inside the job's cgroup, when the plan says so), serves them PMI, and writes how
//! they ended.
//!
//! ```text
//! setsid; write supervisor.pid; read the plan (DIR/plan.json, or the PLAN path given)
//! join the job's cgroups (still root)         ─ every task inherits them
//! drop to the user: groups, gid, uid          ─ nothing after this runs as root
//! per task: a socketpair for PMI (PMI_FD), its output files opened as the user,
//!           spawned in its own process group in the working directory
//! write started (when each task's spawn returned, µs) and group.pid (the first task's
//! group; without a cgroup only)
//! serve PMI; wait for the first of:
//!   every task ended ───────────► leftovers in the cgroup: SIGTERM, grace, SIGKILL
//!   the time limit ─────────────► SIGTERM everything in the cgroup, grace, SIGKILL (timeout)
//!   SIGTERM, a cancel file ─────► the same                                        (cancelled)
//!   a task's PMI abort ─────────► the same                                        (cancelled)
//! write status (the highest task's end), atomically; exit
//! ```
//!
//! Its starter reports the job ended only once this status is written *and* nothing of the
//! job is left (the cgroup is empty, or the group of `group.pid` is gone): a job's
//! resources are never freed while one of its processes runs.
//!
//! It is its own small executable rather than a subcommand of `shardsched`, because one is
//! started per job on a node or per `exec` job: loading the whole scheduler's binary for
//! each was most of a launch's CPU time.

mod tasks;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use shardsched_node_core::pmi::{PmiNode, PmiOutput};
use shardsched_wire::msg::agent::{EndCause, JobEnd};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::FileError;
use crate::files::{
    group_alive, kill_reason, process_alive, read_json, read_pid, write_atomic, write_replace,
};
use crate::plan::{CANCEL_FILE, GROUP_FILE, PID_FILE, Plan, STATUS_FILE, fence_file, now_ms};
use tasks::{Task, TasksStarted, any_exit, start_task, write_carried_files};

/// How often the cancel file and incoming fences are looked for.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How often a dying job is looked at during its grace.
const GRACE_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How often a node agent's lease is looked at (a file read).
const LEASE_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// How long processes may outlive SIGKILL before the supervisor says so (Slurm's
/// `UnkillableStepTimeout` is 60 s by default).
const UNKILLABLE_WARN_AFTER: Duration = Duration::from_secs(60);

/// Most PMI lines queued from the tasks before a reader waits.
const PMI_LINES_QUEUED_MAX: usize = 1024;

/// Runs the job whose directory is `dir` and whose plan is `plan_path` to its end and
/// writes its status.
///
/// The plan is read as root, before the user switch: a root starter keeps it where only
/// root can write (a node agent: its state directory's `plans/`), never in the job user's
/// directory, where any process of that user could replace it between its write and this
/// read and name another user, root, or any cgroup.
pub fn supervise(dir: &Path, plan_path: &Path) -> Result<JobEnd, FileError> {
    let _ = rustix::process::setsid();
    let pid = std::process::id();
    // Its starter (agent or shard) writes it once this process is started; here too in
    // case the starter died before it could (a file less to make on every launch when it
    // did).
    let pid_file = dir.join(PID_FILE);
    if read_pid(&pid_file).ok().flatten() != Some(pid)
        && let Err(e) = write_replace(&pid_file, format!("{pid}\n").as_bytes())
    {
        eprintln!("cannot write the pid file: {e}");
    }
    let end = match read_json::<Plan>(plan_path) {
        Ok(Some(plan)) => match become_user(&plan, pid) {
            Ok(()) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| FileError::io(dir, e))?;
                runtime.block_on(run(dir, &plan))
            }
            Err(why) => JobEnd::without_status(EndCause::Error, why),
        },
        Ok(None) => JobEnd::without_status(
            EndCause::Error,
            format!("the plan {} is missing", plan_path.display()),
        ),
        Err(e) => JobEnd::without_status(EndCause::Error, e.to_string()),
    };
    write_end(dir, end)
}

/// Writes `end` as the status of the job in `dir`, the supervisor's last word.
pub fn write_end(dir: &Path, end: JobEnd) -> Result<JobEnd, FileError> {
    let text = serde_json::to_string(&end).map_err(|e| FileError::BadFile {
        path: dir.join(STATUS_FILE),
        message: e.to_string(),
    })?;
    // Replaced whole, but not fsync'd: only a crash of the host loses it, and that crash
    // ends the job's processes too, which its starter then reports as lost (a node
    // failure) unless the shard had heard of this end already.
    write_replace(&dir.join(STATUS_FILE), text.as_bytes())?;
    Ok(end)
}

/// Joins the job's cgroups, then becomes its user for good (groups, gid, uid: in that
/// order, while still allowed to). Runs before any thread exists.
fn become_user(plan: &Plan, pid: u32) -> Result<(), String> {
    plan.cgroups
        .attach(pid)
        .map_err(|e| format!("cannot join the job's cgroup: {e}"))?;
    let Some(user) = &plan.run_as else {
        return Ok(());
    };
    use nix::unistd::{Gid, Uid, setgid, setgroups, setuid};
    let groups: Vec<Gid> = user.groups.iter().map(|g| Gid::from_raw(*g)).collect();
    setgroups(&groups).map_err(|e| format!("cannot set the groups of {}: {e}", user.name))?;
    setgid(Gid::from_raw(user.gid)).map_err(|e| format!("cannot become gid {}: {e}", user.gid))?;
    setuid(Uid::from_raw(user.uid)).map_err(|e| format!("cannot become {}: {e}", user.name))?;
    if setuid(Uid::from_raw(0)).is_ok() && user.uid != 0 {
        return Err("could regain root after dropping it".to_owned());
    }
    Ok(())
}

/// Why the wait stopped.
enum Stop {
    AllEnded,
    Timeout,
    Cancel(String),
}

async fn run(dir: &Path, plan: &Plan) -> JobEnd {
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => Some(term),
        Err(e) => {
            eprintln!("cannot catch SIGTERM ({e}); cancel files still work");
            None
        }
    };
    let (lines_tx, mut lines) = mpsc::channel::<(u32, String)>(PMI_LINES_QUEUED_MAX);
    let mut tasks: BTreeMap<u32, Task> = BTreeMap::new();
    let mut writers: BTreeMap<u32, OwnedWriteHalf> = BTreeMap::new();
    if let Err(why) = write_carried_files(dir, plan) {
        return JobEnd::without_status(EndCause::Error, why);
    }
    let mut started = TasksStarted::default();
    for &rank in &plan.ranks {
        match start_task(dir, plan, rank, &lines_tx) {
            Ok((task, writer)) => {
                started.record(rank);
                tasks.insert(rank, task);
                writers.insert(rank, writer);
            }
            Err(why) => {
                stop_all(plan, &mut tasks).await;
                return JobEnd::without_status(EndCause::Error, why);
            }
        }
    }
    drop(lines_tx);
    started.write(dir);
    // Should this supervisor be killed outright, its starter finds the first task's group
    // here and kills it before it frees the job's resources. Only without a cgroup to find
    // the job's processes by: with one, its starter looks there (a node agent never reads
    // this file, which the job's user could write).
    if plan.cgroups.unified.is_none()
        && let Some(task) = tasks.values().next()
        && let Err(e) = write_replace(&dir.join(GROUP_FILE), format!("{}\n", task.pgid).as_bytes())
    {
        eprintln!("cannot write the job's process group: {e}");
    }
    let mut pmi = PmiNode::new(&plan.job, plan.size, plan.ranks.iter().copied());
    let mut waiting_fence: Option<u32> = None;
    let deadline = (plan.time_limit_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(plan.time_limit_ms));
    let mut poll = tokio::time::interval(POLL_INTERVAL);
    let mut next_lease_check = Instant::now();
    let stop = loop {
        if tasks.values().all(|t| t.status.is_some()) {
            break Stop::AllEnded;
        }
        tokio::select! {
            () = any_exit(&mut tasks) => {}
            Some((rank, line)) = lines.recv() => {
                let outputs = pmi.handle_line(rank, &line);
                if let Some(stop) = apply(dir, plan, &mut pmi, outputs, &mut writers, &mut waiting_fence).await {
                    break stop;
                }
            }
            () = until(deadline) => break Stop::Timeout,
            Some(()) = async { term.as_mut()?.recv().await } => {
                break Stop::Cancel(cancel_reason(dir).unwrap_or_else(|| "its supervisor received SIGTERM".to_owned()));
            }
            _ = poll.tick() => {
                if let Some(why) = cancel_reason(dir) {
                    break Stop::Cancel(why);
                }
                if let Some(lease) = &plan.lease
                    && Instant::now() >= next_lease_check
                {
                    next_lease_check = Instant::now() + LEASE_CHECK_INTERVAL;
                    if let Some(why) = lease.expired(now_ms()) {
                        break Stop::Cancel(why);
                    }
                }
                if let Some(epoch) = waiting_fence
                    && let Ok(Some(kvs)) = read_json::<Vec<(String, String)>>(&fence_file(dir, epoch, true))
                {
                    waiting_fence = None;
                    let outputs = pmi.fence_done(epoch, kvs);
                    if let Some(stop) = apply(dir, plan, &mut pmi, outputs, &mut writers, &mut waiting_fence).await {
                        break stop;
                    }
                }
            }
        }
    };
    let (cause, note) = match stop {
        Stop::AllEnded => (EndCause::Completed, String::new()),
        Stop::Timeout => (
            EndCause::Timeout,
            format!(
                "time limit of {} s reached",
                plan.time_limit_ms.div_ceil(1000)
            ),
        ),
        Stop::Cancel(why) => (EndCause::Cancelled, why),
    };
    // Whatever is left of the job on this node goes: tasks still running, and anything a
    // task left behind (in the cgroup, or in a task's process group without one).
    stop_all(plan, &mut tasks).await;
    let mut end: Option<JobEnd> = None;
    for task in tasks.values() {
        let one = JobEnd {
            cause,
            exit_code: task.status.and_then(|s| s.code()),
            signal: task.status.and_then(|s| s.signal()),
            note: note.clone(),
        };
        end = Some(match end {
            None => one,
            Some(so_far) => so_far.worst(one),
        });
    }
    end.unwrap_or_else(|| JobEnd::without_status(cause, note))
}

/// Carries out what the PMI state machine asked; a stop when a task aborted.
async fn apply(
    dir: &Path,
    plan: &Plan,
    pmi: &mut PmiNode,
    outputs: Vec<PmiOutput>,
    writers: &mut BTreeMap<u32, OwnedWriteHalf>,
    waiting_fence: &mut Option<u32>,
) -> Option<Stop> {
    let mut queue = outputs;
    while !queue.is_empty() {
        let mut next = Vec::new();
        for output in queue {
            match output {
                PmiOutput::Reply { rank, line } => {
                    if let Some(writer) = writers.get_mut(&rank) {
                        let _ = writer.write_all(format!("{line}\n").as_bytes()).await;
                    }
                }
                PmiOutput::Fence(fence) if plan.nnodes <= 1 => {
                    next.extend(pmi.fence_done(fence.epoch, fence.kvs));
                }
                PmiOutput::Fence(fence) => {
                    let path = fence_file(dir, fence.epoch, false);
                    let written = path
                        .parent()
                        .map(std::fs::create_dir_all)
                        .transpose()
                        .map_err(|e| e.to_string())
                        .and_then(|_| serde_json::to_vec(&fence.kvs).map_err(|e| e.to_string()))
                        .and_then(|bytes| write_atomic(&path, &bytes).map_err(|e| e.to_string()));
                    if let Err(e) = written {
                        return Some(Stop::Cancel(format!("PMI barrier failed: {e}")));
                    }
                    *waiting_fence = Some(fence.epoch);
                }
                PmiOutput::Abort { rank, message } => {
                    return Some(Stop::Cancel(format!(
                        "task {rank} called PMI abort: {message}"
                    )));
                }
            }
        }
        queue = next;
    }
    None
}

/// SIGTERM to every process of the job on this node but this one, up to the grace for them
/// to go, then SIGKILL to what is left; reaps the tasks.
async fn stop_all(plan: &Plan, tasks: &mut BTreeMap<u32, Task>) {
    let me = std::process::id();
    let use_cgroup = plan.cgroups.unified.is_some();
    let alive = |tasks: &BTreeMap<u32, Task>| {
        if use_cgroup {
            plan.cgroups.pids().iter().any(|p| *p != me)
        } else {
            tasks.values().any(|t| group_alive(t.pgid))
        }
    };
    // The pids signalled in the cgroup: a process leaves `cgroup.procs` early in its exit,
    // before it is gone, so the end waits for each of them by its pid too.
    let mut signalled: Vec<u32> = Vec::new();
    let mut signal_all = |tasks: &BTreeMap<u32, Task>, sig: rustix::process::Signal| {
        if use_cgroup {
            for pid in plan.cgroups.pids().into_iter().filter(|p| *p != me) {
                send(pid, sig, false);
                signalled.push(pid);
            }
        } else {
            for task in tasks.values() {
                send(task.pgid, sig, true);
            }
        }
    };
    if alive(tasks) {
        signal_all(tasks, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_millis(plan.kill_grace_ms);
        while Instant::now() < deadline {
            reap(tasks);
            if !alive(tasks) {
                break;
            }
            tokio::time::sleep(GRACE_POLL_INTERVAL).await;
        }
        signal_all(tasks, rustix::process::Signal::KILL);
        // A process SIGKILLed is not gone yet: it leaves when the kernel has finished its
        // exit, later on a loaded node (or never, stuck in an uninterruptible wait). The
        // job's end is what frees the node, to this queue or to a move's recipient, so it
        // waits until nothing of the job is left, however long that takes. (A pid reused
        // meanwhile by another process only makes it wait for that one too.)
        signalled.sort_unstable();
        signalled.dedup();
        let since = Instant::now();
        let mut warned = false;
        loop {
            reap(tasks);
            signalled.retain(|&pid| process_alive(pid, &[]));
            if signalled.is_empty() && !alive(tasks) {
                break;
            }
            if !warned && since.elapsed() >= UNKILLABLE_WARN_AFTER {
                warned = true;
                eprintln!(
                    "shardsched: processes of this job outlive SIGKILL by {} s; its end waits for them",
                    UNKILLABLE_WARN_AFTER.as_secs()
                );
            }
            tokio::time::sleep(GRACE_POLL_INTERVAL).await;
        }
    }
    for task in tasks.values_mut() {
        if task.status.is_none() {
            task.status = task.child.wait().await.ok();
        }
    }
}

fn reap(tasks: &mut BTreeMap<u32, Task>) {
    for task in tasks.values_mut() {
        if task.status.is_none()
            && let Ok(Some(status)) = task.child.try_wait()
        {
            task.status = Some(status);
        }
    }
}

fn send(id: u32, sig: rustix::process::Signal, group: bool) {
    let Some(pid) = i32::try_from(id)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = if group {
        rustix::process::kill_process_group(pid, sig)
    } else {
        rustix::process::kill_process(pid, sig)
    };
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn cancel_reason(dir: &Path) -> Option<String> {
    kill_reason(&dir.join(CANCEL_FILE))
}
