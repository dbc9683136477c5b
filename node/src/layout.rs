//! The agent's state directory (`--state-dir`) and its job directories.
//!
//! ```text
//! <state-dir>/
//!   cert.pem key.pem ca.pem   the agent's certificate (role node, named after the node)
//!   address                   where it listens (written at start)
//!   leases.json               the last renewal persisted per queue (node/core's lease)
//!   jobs/<job id>/            one per job on this node, owned by the job's user, mode 0700:
//!     owner.json              {queue, generation}: who launched it (written by the agent)
//!     plan.json               what the supervisor runs (agent): user, command, env, ranks,
//!                             cgroups, limits
//!     cgroups.json            the cgroup directories the agent created for it
//!     supervisor.pid          the supervisor's pid (agent at spawn, supervisor at start)
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

/// The file holding the agent's listening address.
pub const ADDRESS_FILE: &str = "address";
/// The persisted lease renewals.
pub const LEASES_FILE: &str = "leases.json";
/// The directory of job directories.
pub const JOBS_DIR: &str = "jobs";
/// Who launched a job: `{queue, generation}`.
pub const OWNER_FILE: &str = "owner.json";
/// What the supervisor runs.
pub const PLAN_FILE: &str = "plan.json";
/// The cgroups the agent created for a job.
pub const CGROUPS_FILE: &str = "cgroups.json";
/// The supervisor's pid.
pub const PID_FILE: &str = "supervisor.pid";
/// A kill request.
pub const CANCEL_FILE: &str = "cancel";
/// How the job ended on this node.
pub const STATUS_FILE: &str = "status";
/// The job's hostfile.
pub const HOSTFILE: &str = "hostfile";
/// The supervisor's log.
pub const SUPERVISOR_LOG: &str = "supervisor.log";
/// The PMI fences' directory.
pub const PMI_DIR: &str = "pmi";
/// The subcommand of the `shardsched` binary that runs a job's supervisor on a node.
pub const SUPERVISE_SUBCOMMAND: &str = "node-supervise";

/// A job's directory under the state directory.
pub fn job_dir(state_dir: &Path, job: JobId) -> PathBuf {
    state_dir.join(JOBS_DIR).join(job.to_string())
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
