//! What a job's supervisor runs ([`Plan`], `plan.json` in the job's directory, or where a
//! root starter keeps it out of the job user's reach: [`supervisor_command`]), the files
//! of that directory the supervisor and its starter share, and starting a supervisor.
//!
//! Both executors write a plan and start the same supervisor ([`crate::supervisor`], the
//! `shardsched-supervisor` binary): the node agent with a user to become, a cgroup to join
//! and the node's share of the job's tasks; the shard's `exec` executor with one task, run
//! as the shard's user, in the shard's environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde::{Deserialize, Serialize};
use shardsched_jobspec::CarriedFile;

use crate::FileError;
use crate::cgroups::JobCgroups;
use crate::files::{process_alive, read_json};

/// What the supervisor runs.
pub const PLAN_FILE: &str = "plan.json";
/// The supervisor's pid (written by its starter at spawn, and by itself at start).
pub const PID_FILE: &str = "supervisor.pid";
/// The process group of the first task on this node, written once it runs: what lets the
/// starter find and kill the job's processes should the supervisor be killed outright
/// (where there is no cgroup to find them by).
pub const GROUP_FILE: &str = "group.pid";
/// A kill request, its text the reason.
pub const CANCEL_FILE: &str = "cancel";
/// How the job ended (the supervisor's [`JobEnd`](shardsched_wire::msg::agent::JobEnd) as
/// JSON), written once, last.
pub const STATUS_FILE: &str = "status";
/// When each task on this host started (its spawn returned: exec'd), `RANK µs` lines of
/// CLOCK_REALTIME microseconds, written by the supervisor once every task started.
pub const TASKS_STARTED_FILE: &str = "started";
/// The supervisor's own messages (its standard error).
pub const SUPERVISOR_LOG: &str = "supervisor.log";
/// The PMI fences' directory.
pub const PMI_DIR: &str = "pmi";
/// A task's rank in the job, in its environment.
pub const TASK_RANK: &str = "SHARDSCHED_TASK_RANK";

/// The supervisor's executable, installed next to `shardsched`.
pub const SUPERVISOR_BIN: &str = "shardsched-supervisor";
/// What a supervisor's command line holds, besides its job directory's name (how a live
/// pid is told to be our supervisor and not a recycled one): in `shardsched-supervisor`,
/// and in the command lines of supervisors started by earlier versions (`shardsched
/// supervise DIR`, `shardsched node-supervise DIR`), which a restarted shard or agent
/// still recognises.
pub const SUPERVISOR_MARKER: &str = "supervis";

/// Who a job runs as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAs {
    /// The user's name (the certificate's).
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its supplementary groups (the primary one included).
    pub groups: Vec<u32>,
    /// Its home directory.
    pub home: String,
    /// Its shell.
    pub shell: String,
}

/// What a job's supervisor runs on this host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The job id (F58), for messages and the PMI space's name.
    pub job: String,
    /// The user to become; `None`: stay as the starter's own user.
    pub run_as: Option<RunAs>,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The working directory (entered as the user).
    pub cwd: PathBuf,
    /// Where every task's standard output goes (opened as the user); `None`: to
    /// `task-<rank>.out` in the job's directory.
    #[serde(default)]
    pub stdout: Option<PathBuf>,
    /// Where every task's standard error goes; `None`: `task-<rank>.err`.
    #[serde(default)]
    pub stderr: Option<PathBuf>,
    /// Whether named output files are truncated (the shard's `exec` jobs, one task each)
    /// rather than appended to (a node's tasks share them, as with Flux's shell).
    #[serde(default)]
    pub truncate_output: bool,
    /// The files the jobspec carries (a batch script), written into the job's directory
    /// as the user before the tasks start.
    #[serde(default)]
    pub files: Vec<CarriedFile>,
    /// Whether the tasks start from the supervisor's own environment (the shard's, for
    /// `exec` jobs) rather than an empty one; [`env`](Self::env) is added either way.
    #[serde(default)]
    pub inherit_env: bool,
    /// The variables every task gets.
    pub env: Vec<(String, String)>,
    /// The ranks of this host's tasks.
    pub ranks: Vec<u32>,
    /// How many tasks the whole job runs.
    pub size: u32,
    /// How many nodes the job runs on (more than one: barriers go through the agent).
    pub nnodes: usize,
    /// The time limit, ms (0: none).
    pub time_limit_ms: u64,
    /// SIGTERM-to-SIGKILL grace, ms.
    pub kill_grace_ms: u64,
    /// The job's cgroups on this node (none: its tasks are tracked by process group).
    #[serde(default)]
    pub cgroups: JobCgroups,
    /// Under a node agent: the lease the job's shard holds on this node, which the
    /// supervisor enforces too (`None` for the shard's own `exec` jobs).
    #[serde(default)]
    pub lease: Option<LeaseWatch>,
}

/// The lease a node agent's shard holds on a job, as the supervisor watches it.
///
/// The agent stops a shard's jobs when the shard has not been heard from for the lease, and
/// the shard takes them as gone some time after that. An agent that is stopped (SIGSTOP),
/// hung or dead cannot stop anything, so the supervisor, which outlives it, stops the job
/// itself once the lease has run out: the deadline in the agent's file (written when the
/// agent persists a renewal, never later than the real one) or, until that says later, the
/// launch's own (a launch renews the lease).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseWatch {
    /// The agent's lease deadlines: queue name → ms since the Unix epoch.
    pub deadlines_file: PathBuf,
    /// The queue whose shard launched the job.
    pub queue: String,
    /// When the lease the launch renewed runs out, ms since the Unix epoch.
    pub launch_deadline_ms: u64,
}

/// Now, ms since the Unix epoch: the clock a node agent keeps its leases in, and so the one
/// its jobs' supervisors read their deadlines with.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl LeaseWatch {
    /// Whether the lease has run out at `now_ms` (ms since the Unix epoch), and if so why.
    pub fn expired(&self, now_ms: u64) -> Option<String> {
        let persisted = read_json::<BTreeMap<String, u64>>(&self.deadlines_file)
            .ok()
            .flatten()
            .and_then(|deadlines| deadlines.get(&self.queue).copied());
        let deadline = persisted.unwrap_or(0).max(self.launch_deadline_ms);
        (now_ms > deadline).then(|| {
            format!(
                "lease expired: the node agent has not renewed queue {}'s lease for {} ms past \
                 its end (stopped by the job's supervisor)",
                self.queue,
                now_ms - deadline
            )
        })
    }
}

/// A task's output file in its job directory.
pub fn output_file(dir: &Path, rank: u32, stderr: bool) -> PathBuf {
    dir.join(format!(
        "task-{rank}.{}",
        if stderr { "err" } else { "out" }
    ))
}

/// A barrier's file in a job directory: its puts going out, or the whole space coming in.
pub fn fence_file(dir: &Path, epoch: u32, incoming: bool) -> PathBuf {
    dir.join(PMI_DIR).join(format!(
        "fence-{epoch}.{}",
        if incoming { "in" } else { "out" }
    ))
}

/// The supervisor's executable beside `program` (the running `shardsched`); an error
/// naming the path it looked at when it is not there.
pub fn supervisor_path(program: &Path) -> Result<PathBuf, FileError> {
    let path = program.with_file_name(SUPERVISOR_BIN);
    if path.is_file() {
        Ok(path)
    } else {
        Err(FileError::BadFile {
            path,
            message: format!(
                "the job supervisor is missing: install {SUPERVISOR_BIN} next to {}",
                program.display()
            ),
        })
    }
}

/// Starts the supervisor of the job in `dir` (whose plan is written there): `supervisor
/// DIR`, its standard error to the directory's [`SUPERVISOR_LOG`]. The caller reaps the
/// child.
pub fn spawn_supervisor(supervisor: &Path, dir: &Path) -> Result<Child, FileError> {
    supervisor_command(supervisor, dir, None)?
        .spawn()
        .map_err(|e| FileError::io(supervisor, e))
}

/// The command that starts the supervisor of the job in `dir` ([`spawn_supervisor`]'s),
/// for a starter that reaps its children another way (a node agent, through tokio):
/// `supervisor DIR [PLAN]`, where `plan` is the plan's path when it is not `DIR/plan.json`
/// (a root agent keeps it out of the job user's directory: see [`default_plan`]).
pub fn supervisor_command(
    supervisor: &Path,
    dir: &Path,
    plan: Option<&Path>,
) -> Result<Command, FileError> {
    let log_path = dir.join(SUPERVISOR_LOG);
    let log = crate::files::create_anew(&log_path).map_err(|e| FileError::io(&log_path, e))?;
    let mut command = Command::new(supervisor);
    command
        .arg(dir)
        .args(plan)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    Ok(command)
}

/// Where the plan of the job in `dir` is when its starter names no other path: in the
/// directory (the shard's `exec` jobs, which run as the shard's own user, and jobs started
/// by node agents before plans moved out of the job's directory).
pub fn default_plan(dir: &Path) -> PathBuf {
    dir.join(PLAN_FILE)
}

/// Whether `pid` is the supervisor of the job in `dir`: alive, and running a supervisor on
/// a directory of that name, or a spare supervisor handed this job (its command line names
/// no directory: it works in this one, [`crate::spare`]).
pub fn supervisor_alive(dir: &Path, pid: u32) -> bool {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    process_alive(pid, &[SUPERVISOR_MARKER, &name])
        || (process_alive(pid, &[SUPERVISOR_MARKER, crate::spare::SPARE_FLAG])
            && crate::spare::works_in(pid, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_runs_out_at_the_later_of_the_launch_and_the_agents_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let watch = LeaseWatch {
            deadlines_file: dir.path().join("lease-deadlines.json"),
            queue: "alpha".into(),
            launch_deadline_ms: 1_000,
        };
        // No file yet: the launch's deadline.
        assert_eq!(watch.expired(1_000), None);
        assert!(watch.expired(1_001).is_some());
        // The agent renewed it later; another queue's deadline does not count.
        std::fs::write(&watch.deadlines_file, r#"{"alpha": 5000, "beta": 9000}"#).expect("write");
        assert_eq!(watch.expired(5_000), None);
        let why = watch.expired(5_250).expect("expired");
        assert!(why.contains("queue alpha's lease for 250 ms"), "{why}");
        // A file written before the launch does not shorten it.
        std::fs::write(&watch.deadlines_file, r#"{"alpha": 500}"#).expect("write");
        assert_eq!(watch.expired(900), None);
    }

    #[test]
    fn the_supervisor_log_is_made_anew_and_the_plan_passed_when_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("root-file");
        std::fs::write(&target, b"kept").expect("write");
        let log = dir.path().join(SUPERVISOR_LOG);
        std::os::unix::fs::symlink(&target, &log).expect("symlink");
        let plan = dir.path().join("elsewhere.json");
        let command =
            supervisor_command(Path::new("/bin/true"), dir.path(), Some(&plan)).expect("command");
        assert_eq!(std::fs::read(&target).expect("read"), b"kept");
        assert!(!log.is_symlink(), "the planted link was replaced");
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args, [dir.path().as_os_str(), plan.as_os_str()]);
        assert_eq!(default_plan(dir.path()), dir.path().join(PLAN_FILE));
    }

    #[test]
    fn the_marker_is_in_every_supervisor_command_line() {
        for name in [SUPERVISOR_BIN, "supervise", "node-supervise"] {
            assert!(name.contains(SUPERVISOR_MARKER), "{name}");
        }
    }
}
