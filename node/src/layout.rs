//! The agent's state directory (`--state-dir`) and its job directories.
//!
//! ```text
//! <state-dir>/
//!   cert.pem key.pem ca.pem   the agent's certificate (role node, named after the node)
//!   address                   where it listens (written at start)
//!   leases.json               the last renewal persisted per queue (node/core's lease)
//!   lease-deadlines.json      the same as deadlines, which the jobs' supervisors watch
//!   launches.log              {job, queue, generation} per launch: who launched each job
//!                             (durable before its supervisor starts; `launch_log`)
//!   plans/                    root's (whoever runs the agent), mode 0700: what the
//!     <job id>.json           supervisors run (agent): user, command, env, ranks, cgroups,
//!                             limits, output paths. Read as root by the supervisor before
//!                             it becomes the job's user, and by `job output`: never in a
//!                             directory the job's user can write (see docs/EXEC.md, Trust)
//!   jobs/<job id>/            one per job on this node, owned by the job's user, mode 0700:
//!     plan.json               (jobs started by agents before plans/: their plan)
//!     supervisor.pid          the supervisor's pid (agent at spawn, supervisor at start)
//!     group.pid               the first task's process group (supervisor)
//!     cancel                  a kill request, its text the reason (agent)
//!     status                  how it ended (supervisor; JobEnd JSON)
//!     started                 when each task started (its exec), `RANK µs` lines
//!                             (supervisor, once every task of the node started)
//!     task-<rank>.out/.err    each task's output, opened as the user; the agent reads it
//!                             for `job output` only as a regular file of the user's,
//!                             never through a symbolic link
//!     hostfile                the job's nodes, `node:ntasks` per line
//!     pmi/fence-<E>.out/.in   a barrier's puts out to the other nodes, and the whole
//!                             space back (multi-node jobs)
//!     supervisor.log          the supervisor's own messages
//! ```

use std::path::{Path, PathBuf};

use shardsched_proto::msg::JobId;

/// The files the agent shares with a job's supervisor (`shardsched_process::plan`).
pub use shardsched_process::plan::{
    CANCEL_FILE, GROUP_FILE, PID_FILE, PLAN_FILE, PMI_DIR, STATUS_FILE, SUPERVISOR_LOG,
    TASKS_STARTED_FILE, fence_file, output_file,
};

/// The file holding the agent's listening address.
pub const ADDRESS_FILE: &str = "address";
/// The persisted lease renewals.
pub const LEASES_FILE: &str = "leases.json";
/// The same as deadlines (renewal plus the lease), for the jobs' supervisors, which stop
/// their jobs themselves once their shard's has passed ([`shardsched_process::plan::LeaseWatch`]).
pub const LEASE_DEADLINES_FILE: &str = "lease-deadlines.json";
/// The directory of job directories.
pub const JOBS_DIR: &str = "jobs";
/// The directory of the jobs' plans, which only the agent's user (root) may write.
pub const PLANS_DIR: &str = "plans";
/// Who launched a job, `{queue, generation}`, in its directory: written by agents before
/// the launch log (`launches.log`), and still read for the jobs they started.
pub const OWNER_FILE: &str = "owner.json";
/// The job's hostfile.
pub const HOSTFILE: &str = "hostfile";

/// A job's directory under the state directory.
pub fn job_dir(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join(JOBS_DIR).join(job.to_string())
}

/// A job's plan, out of its user's reach (see [`PLANS_DIR`]).
pub fn plan_path(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join(PLANS_DIR).join(format!("{job}.json"))
}
