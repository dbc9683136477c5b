//! The agent's executor: turns the core's actions into job directories, cgroups and
//! supervisors, watches them, and tells the core when a job's processes are all gone.
//!
//! ```text
//! Spawn ──► verify the signature (cluster CA) → the user (refused: root, low uids, unknown)
//!           → job directory (the user's, 0700) → launches.log (durable) → prolog
//!           → a ready spare supervisor (`spares`), whose cgroup becomes the job's, else
//!             a cgroup of the job's own → plans/<job>.json (root's, naming the cgroups)
//!           → the spare takes {DIR, PLAN}, else
//!             `shardsched-supervisor DIR PLAN` is started            ─► Spawned{pid}
//! Kill  ──► cancel file (the supervisor polls it)
//! a supervisor exits (its reaper thread wakes the agent), and every EXEC_POLL_INTERVAL
//! for supervisors an earlier agent started: each job, status written, or supervisor gone?
//!           → anything left in its cgroup is SIGKILLed; once the cgroup is empty:
//!             remove it, epilog                                     ─► Ended(end)
//! ```
//!
//! A job is never reported ended while a process of it runs on the node (item 5 of issue
//! 15: no job outlives its accounting), even when its supervisor was killed outright.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use shardsched_node_core::Recovered;
use shardsched_process::files::{read_json, read_pid, write_replace};
use shardsched_process::plan::supervisor_command;
use shardsched_process::watch::{Leftovers, RunningOrEnded, observe, remove_job_dirs};
use shardsched_proto::Credentials;
use shardsched_proto::msg::JobId;
use shardsched_proto::msg::agent::{EndCause, JobEnd, JobOnNode, NodeLaunch};
use shardsched_proto::sign::JobspecVerifier;

use crate::cgroup::{Hierarchy, JobCgroups, job_cgroup_name};
use crate::launch_log::{LaunchLog, Launcher};
use crate::layout::{
    HOSTFILE, JOBS_DIR, LEASE_DEADLINES_FILE, OWNER_FILE, PID_FILE, PLANS_DIR, STATUS_FILE,
    job_dir, plan_path,
};
use crate::plan::{self, Plan, hostfile};
use crate::site::{job_env, run_site_script};
use crate::spares::{SPARE_SUPERVISORS, Spare, Spares};
use crate::user::{RunAs, UserPolicy, resolve};
use shardsched_process::plan::LeaseWatch;

/// How often running jobs' directories are looked at.
pub const EXEC_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// What the executor needs to start jobs.
#[derive(Clone, Debug)]
pub struct ExecSettings {
    /// The agent's state directory.
    pub state_dir: PathBuf,
    /// The supervisor's executable (`shardsched-supervisor`, found beside `shardsched`),
    /// started once per job.
    pub supervisor: PathBuf,
    /// The agent's credentials (their CA verifies jobspec signatures: see
    /// [`JobspecVerifier`]).
    pub creds: Credentials,
    /// Whether the agent runs as root (then jobs run as their users).
    pub as_root: bool,
    /// Which users may run jobs.
    pub users: UserPolicy,
    /// The cgroup hierarchy, if any.
    pub cgroups: Option<Hierarchy>,
    /// The site's prolog, run as root before each job's tasks; a failure fails the launch.
    pub prolog: Option<PathBuf>,
    /// The site's epilog, run as root once a job's processes are gone.
    pub epilog: Option<PathBuf>,
}

/// Why a job's supervisor was not started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// The launch cannot run here (its signature, its user, its directory, its cgroup).
    Refused(String),
    /// The site's prolog failed: the job goes back to pending.
    Prolog(String),
}

impl From<String> for SpawnError {
    fn from(why: String) -> SpawnError {
        SpawnError::Refused(why)
    }
}

impl SpawnError {
    /// How the job ended on this node.
    pub fn end(self) -> JobEnd {
        match self {
            SpawnError::Refused(why) => JobEnd::without_status(EndCause::Error, why),
            SpawnError::Prolog(why) => JobEnd::without_status(EndCause::Prolog, why),
        }
    }
}

/// Called once a supervisor this agent started has exited (and been reaped).
pub type OnExit = Box<dyn FnOnce() + Send + 'static>;

/// The executor: its settings, and what it keeps from one launch to the next.
#[derive(Debug)]
pub struct Executor {
    /// Its settings.
    pub settings: ExecSettings,
    /// Checks each launch's signature against the CA (users' certificates remembered).
    verifier: JobspecVerifier,
    /// The durable record of the launches started here.
    log: LaunchLog,
    /// Supervisors started ahead of the launches (none until [`Executor::start_spares`]).
    spares: Arc<Spares>,
}

impl Executor {
    /// The executor of `settings`: the CA's verifier built, the launch log opened (and
    /// compacted to the jobs whose directories are still there).
    pub fn open(settings: ExecSettings) -> Result<Executor, String> {
        let verifier = JobspecVerifier::new(&settings.creds).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&settings.state_dir)
            .map_err(|e| format!("cannot make {}: {e}", settings.state_dir.display()))?;
        make_private_dir(&settings.state_dir.join(PLANS_DIR))?;
        let log = LaunchLog::open(&settings.state_dir, |job| {
            job_dir(&settings.state_dir, job).is_dir()
        })
        .map_err(|e| format!("the launch log: {e}"))?;
        if let Some(hierarchy) = &settings.cgroups {
            hierarchy.sweep_spares();
        }
        let spares = Arc::new(Spares::new(
            settings.supervisor.clone(),
            SPARE_SUPERVISORS,
            settings.as_root,
            settings.cgroups.clone(),
        ));
        Ok(Executor {
            settings,
            verifier,
            log,
            spares,
        })
    }

    /// Starts the spare supervisors (in the agent's runtime); launches keep them topped up.
    pub fn start_spares(&self) {
        self.spares.start();
    }

    /// Stops the idle spare supervisors and removes their cgroups (the agent is stopping).
    pub async fn stop_spares(&self) {
        self.spares.stop().await;
    }

    /// How a job's processes are found once its supervisor is gone: by its cgroup when the
    /// agent makes them, else by its process group.
    fn leftovers(&self) -> Leftovers {
        match self.settings.cgroups {
            Some(_) => Leftovers::InCgroup,
            None => Leftovers::ByGroup,
        }
    }

    /// The cgroups of job `job` (none without a hierarchy): those its plan names, if they
    /// are this agent's, else those named after the job (a launch that failed before its
    /// plan was written made none but these).
    fn cgroups_of(&self, job: JobId) -> JobCgroups {
        let Some(hierarchy) = &self.settings.cgroups else {
            return JobCgroups::default();
        };
        match read_json::<Plan>(&plan_path(&self.settings.state_dir, job)) {
            Ok(Some(plan)) if hierarchy.owns(&plan.cgroups) => plan.cgroups,
            Ok(Some(plan)) => {
                tracing::warn!(job = %job, cgroups = ?plan.cgroups, "a plan names cgroups that are not this agent's; not used");
                hierarchy.of_job(&job_cgroup_name(job))
            }
            _ => hierarchy.of_job(&job_cgroup_name(job)),
        }
    }

    /// Prepares and starts a job's supervisor; its pid, or why not. `on_exit` is called when
    /// the supervisor exits, so that its job's end is looked at then rather than at the next
    /// poll.
    pub async fn spawn(
        &self,
        queue: &str,
        launch: &NodeLaunch,
        lease_deadline_ms: u64,
        on_exit: OnExit,
    ) -> Result<u32, SpawnError> {
        let settings = &self.settings;
        let signer = self
            .verifier
            .verify(&launch.signed)
            .map_err(|e| e.to_string())?;
        let run_as: Option<RunAs> = if settings.as_root {
            Some(resolve(&signer.name, &settings.users)?)
        } else {
            None
        };
        let dir = job_dir(&settings.state_dir, launch.job);
        shardsched_process::watch::set_aside(&dir, self.leftovers()).map_err(|e| e.to_string())?;
        make_job_dir(&dir, run_as.as_ref())?;
        let owner = Launcher {
            queue: queue.to_owned(),
            generation: launch.generation,
        };
        // The durable record that this node started the job (`recover` reads it), before
        // anything of the job runs; the files of the launch are only read while the job's
        // processes run, which a crash of the node ends too, so they are replaced atomically
        // without fsyncs (each a journal commit of the file system).
        self.log
            .record(launch.job, &owner)
            .map_err(|e| e.to_string())?;
        write_replace(&dir.join(HOSTFILE), hostfile(launch).as_bytes())
            .map_err(|e| e.to_string())?;
        let me = launch
            .this_node()
            .ok_or_else(|| "the launch does not name this node".to_owned())?;
        if let Some(prolog) = &settings.prolog {
            run_site_script(
                prolog,
                &job_env(&launch.job.to_string(), &signer.name, &me.node),
            )
            .await
            .map_err(|why| {
                SpawnError::Prolog(format!(
                    "prolog failed on {} for job {}: {why}",
                    me.node, launch.job
                ))
            })?;
        }
        let lease = LeaseWatch {
            deadlines_file: std::path::absolute(settings.state_dir.join(LEASE_DEADLINES_FILE))
                .map_err(|e| format!("cannot name the lease deadlines file: {e}"))?,
            queue: queue.to_owned(),
            launch_deadline_ms: lease_deadline_ms,
        };
        let spare = self.spares.take();
        let made = match (&settings.cgroups, spare.as_ref().and_then(Spare::cgroup)) {
            (Some(hierarchy), Some(spares)) => {
                hierarchy.restrict(spares.to_owned(), &me.cores, &me.gpus)
            }
            (Some(hierarchy), None) => {
                hierarchy.create(&job_cgroup_name(launch.job), &me.cores, &me.gpus)
            }
            (None, _) => Ok(JobCgroups::default()),
        };
        let cgroups = match made {
            Ok(cgroups) => cgroups,
            Err(e) => {
                if let Some(spare) = spare {
                    self.spares.discard(spare, JobCgroups::default());
                }
                return Err(SpawnError::Refused(format!(
                    "cannot make the job's cgroup: {e}"
                )));
            }
        };
        let plan_file = match write_plan(settings, launch, run_as, &dir, cgroups.clone(), lease) {
            Ok(plan_file) => plan_file,
            Err(why) => {
                // Nothing of the job runs: a failed launch leaves no cgroup behind.
                match spare {
                    Some(spare) => self.spares.discard(spare, cgroups),
                    None => remove_unused(launch.job, &cgroups),
                }
                return Err(SpawnError::Refused(why));
            }
        };
        let started = self
            .start_supervisor(&dir, &plan_file, spare, on_exit)
            .await;
        if started.is_err() {
            remove_unused(launch.job, &cgroups);
        }
        started.map_err(SpawnError::Refused)
    }

    /// Whether job `job` has ended on this node, with every process gone: `Some(end)` then (its
    /// cgroups removed, its epilog run by the caller). A job whose supervisor is gone without
    /// a status, or that left processes behind, has them SIGKILLed here and is looked at again
    /// on the next poll.
    pub fn check_ended(&self, job: JobId) -> Option<JobEnd> {
        let dir = job_dir(&self.settings.state_dir, job);
        let end = match observe(&dir, self.leftovers()) {
            Ok(RunningOrEnded::Running { .. }) => return None,
            Ok(RunningOrEnded::Ended(end)) => end,
            Err(e) => JobEnd::without_status(EndCause::Lost, e.to_string()),
        };
        let cgroups = self.cgroups_of(job);
        if cgroups.populated() {
            if let Err(e) = cgroups.kill_all() {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot kill what is left of a job");
            }
            return None;
        }
        if let Err(e) = cgroups.remove() {
            tracing::debug!(dir = %dir.display(), error = %e, "cannot remove a job's cgroup yet");
            return None;
        }
        Some(end)
    }

    /// Every job a restarted agent finds in its state directory, running or ended: each job
    /// directory of a launch the log records (or, for a launch of an earlier agent, its
    /// directory's `owner.json` names).
    pub fn recover(&self) -> Vec<Recovered> {
        let state_dir = &self.settings.state_dir;
        let Ok(entries) = fs::read_dir(state_dir.join(JOBS_DIR)) else {
            return Vec::new();
        };
        let launchers = self.log.launchers();
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let Some(job) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<JobId>().ok())
            else {
                continue;
            };
            let dir = entry.path();
            let launcher = match launchers.get(&job) {
                Some(launcher) => launcher.clone(),
                None => match read_json::<Launcher>(&dir.join(OWNER_FILE)) {
                    Ok(Some(launcher)) => launcher,
                    _ => continue,
                },
            };
            let state = match read_json::<JobEnd>(&dir.join(STATUS_FILE)) {
                Ok(Some(end)) => JobOnNode::Ended(end),
                _ => match read_pid(&dir.join(PID_FILE)).ok().flatten() {
                    Some(pid) => JobOnNode::Running {
                        supervisor_pid: pid,
                    },
                    None => JobOnNode::Launching,
                },
            };
            found.push(Recovered {
                job,
                queue: launcher.queue,
                generation: launcher.generation,
                state,
            });
        }
        found.sort_by_key(|r| r.job);
        found
    }

    /// Removes a forgotten job's directories (and its earlier runs'); the launch log no
    /// longer names it.
    pub fn remove_files(&self, job: JobId) {
        let jobs_dir = self.settings.state_dir.join(JOBS_DIR);
        match remove_job_dirs(&jobs_dir, job, self.leftovers()) {
            Ok(()) => {
                let plan = plan_path(&self.settings.state_dir, job);
                if let Err(e) = fs::remove_file(&plan)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(job = %job, error = %e, "cannot remove a forgotten job's plan");
                }
                self.log.forget(job)
            }
            Err(e) => {
                tracing::warn!(job = %job, error = %e, "cannot remove a forgotten job's directory")
            }
        }
    }
}

/// Writes the job's plan (to run in `cgroups`) where only root writes; its path.
fn write_plan(
    settings: &ExecSettings,
    launch: &NodeLaunch,
    run_as: Option<RunAs>,
    dir: &Path,
    cgroups: JobCgroups,
    lease: LeaseWatch,
) -> Result<PathBuf, String> {
    let plan = Plan {
        lease: Some(lease),
        ..plan::prepare(launch, run_as, dir, cgroups)?
    };
    // Out of the job user's directory: the supervisor reads it as root (docs/EXEC.md, Trust).
    let plan_file = plan_path(&settings.state_dir, launch.job);
    write_json(&plan_file, &plan)?;
    Ok(plan_file)
}

impl Executor {
    /// Starts the supervisor of the job in `dir` on its plan: hands it to a spare if one is
    /// ready (then starts a replacement), else starts one. Its pid, or why not.
    async fn start_supervisor(
        &self,
        dir: &Path,
        plan_file: &Path,
        spare: Option<Spare>,
        on_exit: OnExit,
    ) -> Result<u32, String> {
        // A path that cannot be made absolute (the agent's directory gone) only loses the
        // spare (let go, it exits; its cgroup stays the job's): the supervisor started
        // below takes the paths as they are.
        let handed = match (
            spare,
            std::path::absolute(dir),
            std::path::absolute(plan_file),
        ) {
            (Some(spare), Ok(dir), Ok(plan)) => self.spares.hand(spare, dir, plan).await,
            _ => None,
        };
        self.spares.refill();
        let mut child = match handed {
            Some(child) => child,
            None => supervisor_command(&self.settings.supervisor, dir, Some(plan_file))
                .map(tokio::process::Command::from)
                .map_err(|e| e.to_string())
                .and_then(|mut command| command.spawn().map_err(|e| e.to_string()))
                .map_err(|e| format!("cannot start the supervisor: {e}"))?,
        };
        let pid = child
            .id()
            .ok_or("the supervisor exited before it could be watched")?;
        // Reaped as soon as it exits (tokio waits on a pidfd: no thread per job), so that it
        // does not stay a zombie; the supervisor may outlive this agent.
        tokio::spawn(async move {
            let _ = child.wait().await;
            on_exit();
        });
        write_replace(&dir.join(PID_FILE), format!("{pid}\n").as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(pid)
    }
}

/// Removes the cgroups of a launch that failed before anything of it ran.
fn remove_unused(job: JobId, cgroups: &JobCgroups) {
    if let Err(e) = cgroups.remove() {
        tracing::warn!(job = %job, error = %e, "cannot remove the job's cgroups");
    }
}

/// Asks a job's supervisor to stop (the cancel file it looks for every few milliseconds).
pub fn request_kill(state_dir: &Path, job: JobId, why: &str) {
    if let Err(e) = shardsched_process::watch::request_kill(&job_dir(state_dir, job), why) {
        tracing::warn!(job = %job, error = %e, "cannot write the cancel file");
    }
}

/// The job's directory, owned by its user, mode 0700 (its plan holds its environment).
/// Makes the state directory and its `jobs` directory searchable (not readable) by
/// everyone (0711): a job's supervisor and tasks, once they are the job's user, reach their
/// own directory (0700, the user's) through them. An ancestor that others cannot search
/// would stop every user's job: the agent says which at start.
pub fn open_jobs_dir(state_dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let jobs = state_dir.join(JOBS_DIR);
    fs::create_dir_all(&jobs).map_err(|e| format!("cannot make {}: {e}", jobs.display()))?;
    for dir in [state_dir, jobs.as_path()] {
        let mode = fs::metadata(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .permissions()
            .mode();
        let searchable = fs::Permissions::from_mode((mode & 0o7700) | 0o011);
        fs::set_permissions(dir, searchable)
            .map_err(|e| format!("cannot make {} searchable: {e}", dir.display()))?;
    }
    let absolute = fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_owned());
    for ancestor in absolute.ancestors().skip(1) {
        let closed = fs::metadata(ancestor).is_ok_and(|m| m.permissions().mode() & 0o001 == 0);
        if closed {
            tracing::warn!(
                directory = %ancestor.display(),
                "others cannot search this directory: jobs of users other than root cannot \
                 reach their directories under the state directory"
            );
        }
    }
    Ok(())
}

/// Makes `dir` (the plans' directory) readable and writable by the agent's user only, 0700,
/// whatever its mode was.
fn make_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("cannot make {} private: {e}", dir.display()))
}

fn make_job_dir(dir: &Path, run_as: Option<&RunAs>) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    if let Some(user) = run_as {
        nix::unistd::chown(
            dir,
            Some(nix::unistd::Uid::from_raw(user.uid)),
            Some(nix::unistd::Gid::from_raw(user.gid)),
        )
        .map_err(|e| format!("cannot give {} to {}: {e}", dir.display(), user.name))?;
    }
    Ok(())
}

/// Writes a launch's file that needs no fsync (see [`spawn`]).
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
    write_replace(path, &bytes).map_err(|e| e.to_string())
}
