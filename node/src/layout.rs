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
//!   jobs/<job id>/            one per job on this node, owned by the job's user, mode 0700:
//!     plan.json               what the supervisor runs (agent): user, command, env, ranks,
//!                             cgroups, limits
//!     supervisor.pid          the supervisor's pid (agent at spawn, supervisor at start)
//!     group.pid               the first task's process group (supervisor)
//!     cancel                  a kill request, its text the reason (agent)
//!     status                  how it ended (supervisor; JobEnd JSON)
//!     task-<rank>.out/.err    each task's output, opened as the user
//!     hostfile                the job's nodes, `node:ntasks` per line
//!     pmi/fence-<E>.out/.in   a barrier's puts out to the other nodes, and the whole
//!                             space back (multi-node jobs)
//!     supervisor.log          the supervisor's own messages
//! ```

use std::path::{Path, PathBuf};

use shardsched_proto::msg::JobId;

/// The files the agent shares with a job's supervisor (`shardsched_process::plan`).
pub use shardsched_process::plan::{
    CANCEL_FILE, GROUP_FILE, PID_FILE, PLAN_FILE, PMI_DIR, STATUS_FILE, SUPERVISOR_LOG, fence_file,
    output_file,
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
/// Who launched a job, `{queue, generation}`, in its directory: written by agents before
/// the launch log (`launches.log`), and still read for the jobs they started.
pub const OWNER_FILE: &str = "owner.json";
/// The job's hostfile.
pub const HOSTFILE: &str = "hostfile";

/// A job's directory under the state directory.
pub fn job_dir(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join(JOBS_DIR).join(job.to_string())
}
