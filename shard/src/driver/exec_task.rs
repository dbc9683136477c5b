//! The exec task: launches supervisors for the jobs the core started, passes kill
//! requests on, and watches job directories for their status files.
//!
//! ```text
//! loop:
//!   a request from the core task ─► Launch: job directory + `shardsched-supervisor DIR`
//!                                   Kill:   cancel file (the supervisor looks for it)
//!                                   Forget: remove the job's directories (retention)
//!                                   Watch:  a running job a restart brought back (launched
//!                                           now if it has no directory yet)
//!   a supervisor launched here exits (its reaper thread says so) ─► its status file
//!   every EXEC_POLL_INTERVAL ─────► each job whose supervisor is not this process's child
//!                                   (an earlier shard's), or that left processes behind:
//!                                   status file? supervisor gone?
//!   ended jobs ───────────────────► Command::JobEnded to the core task (try_send: this task
//!                                   never waits on the core, which may be waiting on it;
//!                                   what does not fit is sent on the next round)
//! ```
//!
//! The status files are the ground truth, so a job launched by an earlier shard process is
//! watched exactly like one launched here (without a child handle, through its pid file).
//! A job launched here is heard from as soon as its supervisor exits, not at the next
//! poll: the supervisor writes the status before it exits.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

use shardsched_proto::failpoint;
use shardsched_proto::msg::JobId;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::core_task::Command;
use crate::agents::AgentsOptions;
use crate::exec::launch::{Leftovers, Prepared, observe};
use crate::exec::{
    EndCause, ExecError, JOBS_DIR, JobEnd, RunningOrEnded, job_dir, launch, remove_job_dirs,
    request_kill,
};
use crate::job::JobRecord;
use crate::limits::{EXEC_POLL_INTERVAL, KILL_GRACE};

/// How a shard runs jobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Executor {
    /// Simulated (see [`crate::CoreOptions::time_scale`]).
    #[default]
    Sim,
    /// Really run on this host, each under a supervisor (see [`crate::exec`]).
    Exec(ExecOptions),
    /// Really run on the nodes allocated, by their node agents (see [`crate::agents`]).
    Agents(AgentsOptions),
}

/// The exec executor's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOptions {
    /// The supervisor's executable (`shardsched-supervisor`, beside `shardsched`), started
    /// once per job.
    pub supervisor: PathBuf,
    /// SIGTERM-to-SIGKILL grace for a job's process group ([`KILL_GRACE`] by default).
    pub kill_grace: Duration,
}

impl ExecOptions {
    /// The settings for `supervisor` with the default grace.
    pub fn new(supervisor: PathBuf) -> ExecOptions {
        ExecOptions {
            supervisor,
            kill_grace: KILL_GRACE,
        }
    }
}

/// The generation the shard holds each of a job's nodes at (what a node agent checks a
/// launch against; the exec executor has no use for it).
pub(crate) use shardsched_shard_core::agents::Generations;

/// A request from the core task.
#[derive(Debug)]
pub(crate) enum ExecRequest {
    /// Launch this job (it just started).
    Launch(Box<JobRecord>, Generations),
    /// Kill this job's processes.
    Kill {
        /// The job.
        id: JobId,
        /// Why.
        why: String,
    },
    /// Remove the directory of a job the shard forgot (retention).
    Forget(JobId),
    /// Watch a job a restarted shard found running: launched by an earlier shard process,
    /// or, when it has no directory (that process died between journaling the start and
    /// launching), launched now.
    Watch(Box<JobRecord>, Generations),
}

/// A job being watched.
struct Watched {
    dir: PathBuf,
    /// Whether its supervisor is a child of this process that has not exited yet (then its
    /// reaper thread says when it does, and the poll leaves it alone).
    child_running: bool,
}

/// The jobs directory of a shard's state directory.
pub(crate) fn jobs_dir(state_dir: &Path) -> PathBuf {
    state_dir.join(JOBS_DIR)
}

/// Runs the exec task (`run`) on a thread of its own, with a runtime of its own. Its
/// launches block — a job's files and their fsyncs, the supervisor's start, its reaper
/// thread — and on the shard's one runtime thread (`telemetry::runtime`) they would hold up
/// the core's task and every connection for as long: measured with the task on that
/// thread, a burst of exec submits (benches/peer) ran at 50 jobs/s against 64 on a
/// multi-threaded runtime. The thread ends with the task, when the core's side of its
/// channel is dropped.
pub(crate) fn start_thread(
    task: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let span = tracing::Span::current();
    std::thread::Builder::new()
        .name("exec".to_owned())
        .spawn(move || {
            let _entered = span.entered();
            runtime.block_on(task);
        })?;
    Ok(())
}

/// The exec task: launches the jobs the core hands it, watches their supervisors, and
/// tells the core of their ends. Runs until the core task drops its sender (or the core
/// task is gone).
pub(crate) async fn run(
    queue: String,
    options: ExecOptions,
    jobs_dir: PathBuf,
    mut requests: mpsc::Receiver<ExecRequest>,
    commands: mpsc::Sender<Command>,
) {
    let mut watched: BTreeMap<JobId, Watched> = BTreeMap::new();
    // The supervisors launched here that exited, from their reaper threads.
    let (exited_tx, mut exited) = mpsc::unbounded_channel::<JobId>();
    let mut ended: VecDeque<(JobId, JobEnd)> = VecDeque::new();
    let mut tick = tokio::time::interval(EXEC_POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            request = requests.recv() => match request {
                None => break,
                Some(ExecRequest::Launch(job, _)) => {
                    launch_one(&queue, &options, &jobs_dir, &job, &exited_tx, &mut watched, &mut ended);
                }
                Some(ExecRequest::Kill { id, why }) => {
                    if failpoint::any_armed() {
                        // A kill answered (and journaled) but not carried out yet: a fault
                        // test stops the shard here. Hit off the async threads, so that the
                        // rest of the shard (the answer on its way) goes on meanwhile.
                        let point = || failpoint::hit("shard.kill.before_exec");
                        let _ = tokio::task::spawn_blocking(point).await;
                    }
                    if let Err(e) = request_kill(&job_dir(&jobs_dir, id), &why) {
                        tracing::warn!(%queue, job = %id, error = %e, "cannot ask the job to stop");
                    }
                }
                Some(ExecRequest::Forget(id)) => {
                    if let Err(e) = remove_job_dirs(&jobs_dir, id) {
                        tracing::warn!(%queue, job = %id, error = %e, "cannot remove a forgotten job's directory");
                    }
                }
                Some(ExecRequest::Watch(job, _)) => {
                    let dir = job_dir(&jobs_dir, job.id);
                    if dir.exists() {
                        watched.entry(job.id).or_insert(Watched { dir, child_running: false });
                    } else {
                        tracing::info!(%queue, job = %job.id, "a running job was never launched; launching it");
                        launch_one(&queue, &options, &jobs_dir, &job, &exited_tx, &mut watched, &mut ended);
                    }
                }
            },
            Some(id) = exited.recv() => {
                if let Some(watch) = watched.get_mut(&id) {
                    watch.child_running = false;
                    look_at(id, &mut watched, &mut ended);
                }
            }
            _ = tick.tick() => {
                let polled: Vec<JobId> = watched
                    .iter()
                    .filter(|(_, w)| !w.child_running)
                    .map(|(id, _)| *id)
                    .collect();
                for id in polled {
                    look_at(id, &mut watched, &mut ended);
                }
            }
        }
        if !deliver(&mut ended, &commands) {
            break;
        }
    }
    tracing::debug!(%queue, watched = watched.len(), "exec task stopped; supervisors keep running");
}

/// Whether watched job `id` ended; if so it moves to `ended`.
fn look_at(
    id: JobId,
    watched: &mut BTreeMap<JobId, Watched>,
    ended: &mut VecDeque<(JobId, JobEnd)>,
) {
    let Some(watch) = watched.get(&id) else {
        return;
    };
    let end = match observe(&watch.dir, Leftovers::ByGroup) {
        Ok(RunningOrEnded::Running { .. }) => return,
        Ok(RunningOrEnded::Ended(end)) => end,
        Err(e) => JobEnd::without_status(EndCause::Lost, e.to_string()),
    };
    watched.remove(&id);
    ended.push_back((id, end));
}

/// Launches one job and watches it; a launch that fails is an end ([`EndCause::Error`]).
fn launch_one(
    queue: &str,
    options: &ExecOptions,
    jobs_dir: &Path,
    job: &JobRecord,
    exited: &mpsc::UnboundedSender<JobId>,
    watched: &mut BTreeMap<JobId, Watched>,
    ended: &mut VecDeque<(JobId, JobEnd)>,
) {
    match start(queue, options, jobs_dir, job, exited) {
        Ok(watch) => {
            tracing::debug!(%queue, job = %job.id, dir = %watch.dir.display(), "launched");
            watched.insert(job.id, watch);
        }
        Err(e) => {
            tracing::warn!(%queue, job = %job.id, error = %e, "cannot launch");
            ended.push_back((
                job.id,
                JobEnd::without_status(EndCause::Error, e.to_string()),
            ));
        }
    }
}

/// Prepares and launches one job; a thread of its own reaps its supervisor and says when
/// it exited.
fn start(
    queue: &str,
    options: &ExecOptions,
    jobs_dir: &Path,
    job: &JobRecord,
    exited: &mpsc::UnboundedSender<JobId>,
) -> Result<Watched, ExecError> {
    let prepared = Prepared::for_job(jobs_dir, queue, job, options.kill_grace)?;
    let mut child = launch(&options.supervisor, &prepared)?;
    let (id, exited) = (job.id, exited.clone());
    let reaper = std::thread::Builder::new()
        .name("exec-reaper".to_owned())
        .spawn(move || {
            let _ = child.wait();
            let _ = exited.send(id);
        });
    if let Err(e) = &reaper {
        // The job runs all the same; the poll hears of its end.
        tracing::warn!(%queue, job = %job.id, error = %e, "cannot start a reaper thread");
    }
    Ok(Watched {
        dir: prepared.dir,
        child_running: reaper.is_ok(),
    })
}

/// Hands ended jobs to the core task without waiting; returns false when it is gone.
pub(crate) fn deliver(
    ended: &mut VecDeque<(JobId, JobEnd)>,
    commands: &mpsc::Sender<Command>,
) -> bool {
    while let Some((id, end)) = ended.pop_front() {
        match commands.try_send(Command::JobEnded { id, end }) {
            Ok(()) => {}
            Err(TrySendError::Full(Command::JobEnded { id, end })) => {
                ended.push_front((id, end));
                return true;
            }
            Err(TrySendError::Full(_)) => return true,
            Err(TrySendError::Closed(_)) => return false,
        }
    }
    true
}
