//! The agent's spare supervisors: [`SPARE_SUPERVISORS`] `shardsched-supervisor --spare`
//! processes started ahead of the launches, each waiting on a pipe for its job
//! (`shardsched_process::spare`). A launch hands a spare its job's directory and plan instead
//! of starting a supervisor then, which takes a process's exec and dynamic loading off the
//! launch's path (~2 ms of CPU each on the bench machine, 16 of them for a 16-node job
//! there); the replacement is started after the handoff, off that path.
//!
//! ```text
//! start ──► refill: the starter thread (at the lowest CPU priority when the agent is
//!           root) starts spares up to SPARE_SUPERVISORS, each in a cgroup of its own
//!           where the agent has them; each is ready once it says so
//! launch ─► take: the oldest ready spare, whose cgroup becomes the job's
//!        ─► hand: it takes the handoff line ─► it is the job's supervisor
//!           (none ready, or its pipe broken: the launch starts a supervisor itself)
//!        ─► refill: at once when no spare is left ready, else REFILL_SETTLE after the
//!           last take (the launch's own start first)
//! agent stops ─► stop: each spare's pipe closed ─► it exits, idle ─► its cgroup removed
//! agent gone ─► each spare's pipe ends (only the agent holds it) ─► the spare exits, idle
//!           (its empty cgroup is swept by the next agent's start)
//! ```
//!
//! A spare enters its cgroup when it starts, not at its handoff: moving a process into a
//! cgroup waits for an RCU grace period (5–8 ms on an idle host, `shardsched_node::cgroup`),
//! which a launch would otherwise wait for on every node of its job.
//!
//! The spares start at the lowest priority (nice 19) so that on a busy node their exec and
//! loading wait for the launches under way rather than slow them (a 16-node job on this
//! 2-core machine is 16 agents launching at once); a launch uses only a spare that said it
//! is loaded, and the handoff gives it back the agent's priority. Only an agent that may
//! raise a priority again (root) lowers it: otherwise the job would run at nice 19.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use shardsched_process::spare::{Handoff, READY_LINE, SPARE_FLAG};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::cgroup::{Hierarchy, JobCgroups};

/// How many spare supervisors an agent keeps waiting: one launch at a time takes one, and a
/// second covers a launch that comes before the first's replacement is up; a burst of
/// launches beyond them starts supervisors as before.
pub const SPARE_SUPERVISORS: usize = 2;

/// The CPU priority (nice value) spares start at, when the agent may restore the job's.
pub const SPARE_NICE: i32 = 19;

/// How long after a launch took a spare its replacement starts, while another spare is
/// still ready: a launch's supervisor and its tasks start in those milliseconds, and a
/// replacement's exec and loading (~1 ms of CPU, more than the handoff and the task's
/// exec together) would take the CPU from them — on a machine that runs every node, from
/// the other nodes' launches of the same job. A launch that leaves no spare ready has its
/// replacement started at once.
pub const REFILL_SETTLE: Duration = Duration::from_millis(50);

/// How long a stopping agent waits for its idle spares to exit before it leaves their
/// cgroups to the next agent's sweep.
const SPARE_EXIT_WAIT: Duration = Duration::from_secs(1);

/// How often a stopping agent looks whether the spares under way have started.
const STOP_POLL: Duration = Duration::from_millis(5);

/// A supervisor started ahead of its job, the pipe its job will come through, and the
/// cgroup it is in (the job's, once handed one).
#[derive(Debug)]
pub struct Spare {
    child: Child,
    input: ChildStdin,
    cgroup: Option<PathBuf>,
}

impl Spare {
    /// The unified cgroup this spare is in, made for it (none without a hierarchy).
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }
}

/// The spares waiting and those being started.
#[derive(Debug, Default)]
struct Pool {
    ready: VecDeque<Spare>,
    starting: usize,
    /// When a launch last took a spare.
    last_take: Option<Instant>,
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
    /// Where each spare gets a cgroup of its own, if the agent makes them.
    cgroups: Option<Hierarchy>,
    /// [`REFILL_SETTLE`] (a test's own).
    settle: Duration,
    pool: Mutex<Pool>,
    /// Asks the starter thread for one more spare (none until [`Spares::start`]).
    starter: Mutex<Option<mpsc::UnboundedSender<()>>>,
    /// Wakes a starter waiting out [`REFILL_SETTLE`]: a launch took the last ready spare.
    none_ready: Notify,
}

impl Spares {
    /// Spares of `supervisor`, `wanted` of them once [`start`](Self::start)ed, each in a
    /// cgroup of its own under `cgroups`; started at the lowest priority when
    /// `lower_priority` (the agent is root, so a spare can raise it back at its handoff).
    pub fn new(
        supervisor: PathBuf,
        wanted: usize,
        lower_priority: bool,
        cgroups: Option<Hierarchy>,
    ) -> Spares {
        let job_nice = lower_priority
            .then(|| rustix::process::getpriority_process(None).ok())
            .flatten();
        Spares {
            supervisor,
            wanted,
            job_nice,
            cgroups,
            settle: REFILL_SETTLE,
            pool: Mutex::default(),
            starter: Mutex::default(),
            none_ready: Notify::new(),
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
                        spares.settle().await;
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

    /// The oldest ready spare, for a launch to hand its job to ([`Spares::hand`]); its
    /// cgroup is the job's from here on.
    pub fn take(&self) -> Option<Spare> {
        let mut pool = self.lock();
        let spare = pool.ready.pop_front();
        pool.last_take = Some(Instant::now());
        if pool.ready.is_empty() {
            self.none_ready.notify_one();
        }
        spare
    }

    /// Waits until [`REFILL_SETTLE`] has passed since the last launch took a spare, until
    /// no spare is ready, or until the agent stops.
    async fn settle(&self) {
        loop {
            if self.stopping() {
                return;
            }
            let until = {
                let pool = self.lock();
                match pool.last_take {
                    Some(taken) if !pool.ready.is_empty() => taken + self.settle,
                    _ => return,
                }
            };
            if until <= Instant::now() {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                () = self.none_ready.notified() => {}
            }
        }
    }

    /// Hands a job to `spare`: the spare, now the job's supervisor, or `None` when it could
    /// not take it (its pipe is broken: it exited; its cgroup, empty, is still the job's).
    pub async fn hand(&self, spare: Spare, dir: PathBuf, plan: PathBuf) -> Option<Child> {
        let handoff = Handoff {
            dir,
            plan,
            nice: self.job_nice,
        };
        let line = match handoff.line() {
            Ok(line) => line,
            Err(e) => {
                // Let go (it exits at its pipe's end); its cgroup stays the job's, for the
                // supervisor the launch starts instead.
                tracing::warn!(error = %e, "cannot hand a launch to a spare");
                drop(spare);
                return None;
            }
        };
        let Spare {
            child, mut input, ..
        } = spare;
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
            Ok(()) => Some(child),
            Err(e) => {
                tracing::debug!(pid = ?child.id(), error = %e, "a spare supervisor is gone");
                None
            }
        }
    }

    /// Lets go of a spare taken for a launch that did not happen: its pipe closed, it
    /// exits, and then `cgroups` (those made for the launch) and its own are removed.
    pub fn discard(&self, spare: Spare, cgroups: JobCgroups) {
        let Spare {
            mut child,
            input,
            cgroup,
        } = spare;
        drop(input);
        self.refill();
        tokio::spawn(async move {
            let _ = child.wait().await;
            let own = JobCgroups {
                unified: cgroup,
                v1: Vec::new(),
            };
            for made in [cgroups, own] {
                if let Err(e) = made.remove() {
                    tracing::warn!(error = %e, "cannot remove a discarded spare's cgroup");
                }
            }
        });
    }

    /// Stops the idle spares (the agent is stopping): no more are started, those under way
    /// are waited for, then each one's pipe is closed, it exits, and its cgroup is removed;
    /// a spare slower than [`SPARE_EXIT_WAIT`] leaves its cgroup to the next agent's sweep.
    pub async fn stop(&self) {
        drop(
            self.starter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.none_ready.notify_one();
        let deadline = tokio::time::Instant::now() + SPARE_EXIT_WAIT;
        while self.lock().starting > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(STOP_POLL).await;
        }
        let idle: Vec<Spare> = self.lock().ready.drain(..).collect();
        // Every pipe closed first, so that they all exit at once.
        let exiting: Vec<(Child, Option<PathBuf>)> = idle
            .into_iter()
            .map(
                |Spare {
                     child,
                     input,
                     cgroup,
                 }| {
                    drop(input);
                    (child, cgroup)
                },
            )
            .collect();
        for (mut child, cgroup) in exiting {
            let exited = tokio::time::timeout(SPARE_EXIT_WAIT, child.wait()).await;
            if let (Ok(_), Some(dir)) = (exited, cgroup) {
                let _ = std::fs::remove_dir(dir);
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
        let cgroup = child
            .id()
            .and_then(|pid| self.at_job_priority(|| self.enter_cgroup(pid)));
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
        Ok(Spare {
            child,
            input,
            cgroup,
        })
    }

    /// Runs `f`, a cgroup change, on the starter thread at the jobs' priority rather than
    /// nice 19. Making a cgroup holds the kernel's cgroup lock, and moving a process into
    /// one holds the lock every fork, exec, exit and new thread on the host waits for;
    /// held by a starved nice-19 thread on a loaded host, it can stall every process there
    /// (the likely cause of agents silent past their heartbeat timeout when the suite ran
    /// twice beside `.ci/run` with the move at nice 19).
    fn at_job_priority<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(nice) = self.job_nice else {
            return f();
        };
        let raised = rustix::process::setpriority_process(None, nice);
        let out = f();
        if raised.is_ok() {
            let _ = rustix::process::setpriority_process(None, SPARE_NICE);
        }
        out
    }

    /// Makes spare `pid` a cgroup of its own and moves it in, if the agent makes cgroups;
    /// none when it cannot (that spare's job then gets one of its own at launch).
    fn enter_cgroup(&self, pid: u32) -> Option<PathBuf> {
        let dir = match self.cgroups.as_ref()?.create_spare(pid) {
            Ok(dir) => dir,
            Err(e) => {
                tracing::warn!(error = %e, "cannot make a spare supervisor's cgroup");
                return None;
            }
        };
        let own = JobCgroups {
            unified: Some(dir.clone()),
            v1: Vec::new(),
        };
        match own.attach(pid) {
            Ok(()) => Some(dir),
            Err(e) => {
                tracing::warn!(cgroup = %dir.display(), error = %e, "a spare cannot enter its cgroup");
                let _ = std::fs::remove_dir(dir);
                None
            }
        }
    }

    fn stopping(&self) -> bool {
        self.starter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for `shardsched-supervisor --spare`: says it is ready, waits for its
    /// handoff line (or its pipe's end) and exits.
    fn fake_supervisor(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("spare.sh");
        std::fs::write(&path, "#!/bin/sh\necho ready\nread line\n").expect("script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("mode");
        path
    }

    /// Waits until at least `n` spares are ready.
    async fn until_ready(spares: &Spares, n: usize) {
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            while spares.lock().ready.len() < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "never {n} spares ready");
    }

    /// A launch that leaves a spare ready has its replacement wait out the settle (here an
    /// hour: it must not come during the test); one that takes the last ready spare has
    /// its replacement started at once; a stopping agent does not wait for the settle.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replacement_waits_for_the_launch_unless_none_is_left() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut spares = Spares::new(fake_supervisor(dir.path()), 2, false, None);
        spares.settle = Duration::from_secs(3600);
        let spares = Arc::new(spares);
        spares.start();
        until_ready(&spares, 2).await;

        let first = spares.take().expect("a spare");
        spares.refill();
        let second = spares.take().expect("another spare");
        spares.refill();
        // The second take left none ready: one replacement starts at once; the other waits
        // out the settle behind it, with that one ready.
        until_ready(&spares, 1).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(spares.lock().ready.len(), 1, "a replacement did not wait");
        assert_eq!(spares.lock().starting, 1);

        let stopped = tokio::time::timeout(Duration::from_secs(60), spares.stop()).await;
        assert!(stopped.is_ok(), "stop waited for the settle");
        drop((first, second));
    }
}
