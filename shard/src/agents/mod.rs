//! The `agents` executor: a shard's jobs run on the nodes they were allocated, started by
//! each node's agent (`shardsched node`) as the user who signed the submit.
//!
//! ```text
//!  core task                 agents task (this module)                node agents
//!  ─────────                 ─────────────────────────                ───────────
//!  Launch(job) ────────────► addresses from the coordinator (once) ─► Launch{job, node rank,
//!                            one NodeLaunch per node (launch.rs)       generation, signed
//!                                                                      jobspec, every node}
//!  Kill(job, why) ─────────► Kill to every node of the job ─────────► SIGTERM, grace, SIGKILL
//!                            Renew to every agent with our jobs ────► report: per job,
//!                            (a quarter of its lease)                   launching, running,
//!  JobEnded(worst end) ◄──── every node's share ended ◄───────────────  stopping, ended
//!  Forget(job) ────────────► Forget to its nodes ───────────────────► files removed
//! ```
//!
//! **A job ends when every node says so.** The core hears of a job's end only once each of
//! its nodes' agents reported its processes there gone (a cgroup empty), with the highest
//! task's status ([`JobEnd::worst`](shardsched_proto::msg::agent::JobEnd::worst)); until
//! then the job holds its resources. The one exception is an agent that cannot be reached:
//! its lease runs out (it kills the job's tasks itself when it has not heard from this shard
//! for the lease), so once the shard has not heard from it for the lease plus the kill
//! grace, the tasks are taken as killed and the node's share ends as `lost`. The coordinator
//! marks such a node down meanwhile, and does not hand it to another queue until its agent
//! reports it clean.
//!
//! **A launch runs once.** A launch whose answer was lost is not sent again blindly: the
//! agent's next report says whether it has the job; only a job it does not know is launched
//! again. A restarted shard watches its running jobs the same way.

pub mod launch;
mod links;
mod runs;
pub(crate) mod task;

use std::time::Duration;

use crate::limits::KILL_GRACE;

/// The agents executor's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentsOptions {
    /// SIGTERM-to-SIGKILL grace the agents give a job's tasks ([`KILL_GRACE`] by default).
    pub kill_grace: Duration,
}

impl Default for AgentsOptions {
    fn default() -> Self {
        AgentsOptions {
            kill_grace: KILL_GRACE,
        }
    }
}
