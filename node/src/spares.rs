//! The agent's spare supervisors: [`SPARE_SUPERVISORS`] `shardsched-supervisor --spare`
//! processes started ahead of the launches, each waiting on a pipe for its job
//! (`shardsched_process::spare`). A launch hands a spare its job's directory and plan instead
//! of starting a supervisor then, which takes a process's exec and dynamic loading off the
//! launch's path (~2 ms of CPU each on the bench machine, 16 of them for a 16-node job
//! there); the replacement is started after the handoff, off that path.
//!
//! ```text
//! start ──► refill: the starter thread (at the lowest CPU priority when the agent is
//!           root) starts spares up to SPARE_SUPERVISORS; each is ready once it says so
//! launch ─► hand: the oldest ready spare takes the handoff line ─► it is the job's supervisor
//!           (none ready, or its pipe broken: the launch starts a supervisor itself)
//!        ─► refill
//! agent gone ─► each spare's pipe ends (only the agent holds it) ─► the spare exits, idle
//! ```
//!
//! The spares start at the lowest priority (nice 19) so that on a busy node their exec and
//! loading wait for the launches under way rather than slow them (a 16-node job on this
//! 2-core machine is 16 agents launching at once); a launch uses only a spare that said it
//! is loaded, and the handoff gives it back the agent's priority. Only an agent that may
//! raise a priority again (root) lowers it: otherwise the job would run at nice 19.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use shardsched_process::spare::{Handoff, READY_LINE, SPARE_FLAG};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How many spare supervisors an agent keeps waiting: one launch at a time takes one, and a
/// second covers a launch that comes before the first's replacement is up; a burst of
/// launches beyond them starts supervisors as before.
pub const SPARE_SUPERVISORS: usize = 2;

/// The CPU priority (nice value) spares start at, when the agent may restore the job's.
pub const SPARE_NICE: i32 = 19;

/// A supervisor started ahead of its job, and the pipe its job will come through.
#[derive(Debug)]
struct Spare {
    child: Child,
    input: ChildStdin,
}

/// The spares waiting and those being started.
#[derive(Debug, Default)]
struct Pool {
    ready: VecDeque<Spare>,
    starting: usize,
}

/// The agent's spare supervisors (shared by its launches, which run on threads of their own).
#[derive(Debug)]
pub struct Spares {
    /// The supervisor's executable.
    supervisor: PathBuf,
    /// How many to keep ready (0: none, every launch starts its supervisor).
    wanted: usize,
    /// The priority jobs run at (the agent's), when spares start at [`SPARE_NICE`].
    job_nice: Option<i32>,
    pool: Mutex<Pool>,
    /// Asks the starter thread for one more spare (none until [`Spares::start`]).
    starter: Mutex<Option<mpsc::UnboundedSender<()>>>,
}

impl Spares {
    /// Spares of `supervisor`, `wanted` of them once [`start`](Self::start)ed; started at
    /// the lowest priority when `lower_priority` (the agent is root, so a spare can raise
    /// it back at its handoff).
    pub fn new(supervisor: PathBuf, wanted: usize, lower_priority: bool) -> Spares {
        let job_nice = lower_priority
            .then(|| rustix::process::getpriority_process(None).ok())
            .flatten();
        Spares {
            supervisor,
            wanted,
            job_nice,
            pool: Mutex::default(),
            starter: Mutex::default(),
        }
    }

    /// Starts the starter thread (inside the agent's tokio runtime, whose reactor watches
    /// the spares) and the first spares.
    pub fn start(self: &Arc<Self>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let runtime = tokio::runtime::Handle::current();
        let spares = Arc::clone(self);
        let started = std::thread::Builder::new()
            .name("spare-starter".to_owned())
            .spawn(move || {
                if spares.job_nice.is_some()
                    && let Err(e) = rustix::process::setpriority_process(None, SPARE_NICE)
                {
                    tracing::debug!(error = %e, "spares start at the agent's priority");
                }
                runtime.block_on(async move {
                    while rx.recv().await.is_some() {
                        let started = spares.start_one().await;
                        let mut pool = spares.lock();
                        pool.starting -= 1;
                        match started {
                            Ok(spare) => pool.ready.push_back(spare),
                            Err(e) => tracing::warn!(
                                supervisor = %spares.supervisor.display(),
                                error = %e,
                                "cannot start a spare supervisor; launches start their own"
                            ),
                        }
                    }
                });
            });
        match started {
            Ok(_) => {
                *self.starter.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
                self.refill();
            }
            Err(e) => tracing::warn!(error = %e, "no spare supervisors: cannot start their thread"),
        }
    }

    /// Asks for spares until `wanted` are ready or starting.
    pub fn refill(&self) {
        let starter = self.starter.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(starter) = starter.as_ref() else {
            return;
        };
        let mut pool = self.lock();
        let missing = self.wanted.saturating_sub(pool.ready.len() + pool.starting);
        for _ in 0..missing {
            if starter.send(()).is_ok() {
                pool.starting += 1;
            }
        }
    }

    /// Hands a job to a ready spare: the spare, now the job's supervisor, or `None` when no
    /// spare took it (none ready; one whose pipe is broken, which exited, is dropped).
    pub async fn hand(&self, dir: PathBuf, plan: PathBuf) -> Option<Child> {
        let handoff = Handoff {
            dir,
            plan,
            nice: self.job_nice,
        };
        let line = match handoff.line() {
            Ok(line) => line,
            Err(e) => {
                tracing::warn!(error = %e, "cannot hand a launch to a spare");
                return None;
            }
        };
        loop {
            let Spare { child, mut input } = self.lock().ready.pop_front()?;
            // Its priority back before it wakes: woken at nice 19 on a busy node, it would
            // wait behind every other runnable process to read the line and raise it.
            let pid = child
                .id()
                .and_then(|id| rustix::process::Pid::from_raw(id.cast_signed()));
            if let (Some(nice), Some(pid)) = (self.job_nice, pid)
                && let Err(e) = rustix::process::setpriority_process(Some(pid), nice)
            {
                tracing::debug!(error = %e, "a spare takes its priority back itself");
            }
            // One short line into an empty pipe: it does not wait. The pipe is closed
            // after it, so that a spare that reads more finds its end.
            match input.write_all(&line).await {
                Ok(()) => return Some(child),
                Err(e) => {
                    tracing::debug!(pid = ?child.id(), error = %e, "a spare supervisor is gone");
                }
            }
        }
    }

    /// Starts one spare and waits until it says it is loaded.
    async fn start_one(&self) -> std::io::Result<Spare> {
        let mut child = Command::new(&self.supervisor)
            .arg(SPARE_FLAG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // The agent's, until a handoff makes it the job's `supervisor.log`: what a spare
            // says before it has a job (a handoff it cannot read) is the agent's business.
            .stderr(Stdio::inherit())
            .kill_on_drop(false)
            .spawn()?;
        let (Some(input), Some(mut said)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the spare's pipes are missing"));
        };
        let mut ready = [0u8; READY_LINE.len()];
        said.read_exact(&mut ready).await?;
        if ready != READY_LINE {
            return Err(std::io::Error::other(
                "the spare said something else than ready",
            ));
        }
        Ok(Spare { child, input })
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
