//! Shard → node agent: launch a job's share on the node, kill it, renew the lease, read a
//! task's output.
//!
//! The agent accepts a launch only from its node's owner at the owner's generation, and
//! only while no task of another shard remains on the node; a kill only from the shard that
//! launched the job. Every request from a shard renews that shard's **lease**: an agent that
//! has not heard from the shard of its running tasks for half the heartbeat timeout kills
//! them, so that by the time the coordinator marks the node down (and the shard requeues),
//! nothing of the job runs there any more. A shard therefore sends [`Request::Renew`] to the
//! agents of its running jobs at least every few seconds; its answer is the agent's report,
//! from which the shard learns how the job's processes ended.
//!
//! **A job's end is pushed**: a renewal names the report the shard last had
//! ([`AgentReport::digest`]) and how long the agent may hold it; an agent whose report is
//! still that one answers only when it changes (a job started or ended) or when the hold
//! runs out, so the shard hears of an end the moment the agent sees it, and the shard's
//! next renewal waits again. Every answer is the whole table, so a lost one costs nothing
//! but time: the next renewal brings the same news.

use serde::{Deserialize, Serialize};

use super::agent::{AgentReport, NodeLaunch, check_kill_reason};
use super::common::{JobId, Refusal, RefusalCode};
use crate::identity::Op;
use crate::limits::{AGENT_JOBS_MAX, OUTPUT_CHUNK_BYTES_MAX, RENEW_HOLD_MS_MAX};
use crate::rpc::Rpc;

/// A request from a shard to a node agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Start this node's tasks of a job.
    Launch(Box<NodeLaunch>),
    /// Stop a job's tasks on this node (SIGTERM, its grace, SIGKILL).
    Kill {
        /// The job.
        job: JobId,
        /// Why (it ends in the job's status).
        why: String,
    },
    /// Renew the lease; `seen` are ended jobs whose end the shard has recorded (the agent
    /// stops reporting them). The lease is renewed when the request arrives, whenever it is
    /// answered.
    Renew {
        /// Ended jobs the shard has recorded, at most [`AGENT_JOBS_MAX`].
        seen: Vec<JobId>,
        /// The [`AgentReport::digest`] of the last report the shard has: while the agent's
        /// report is still that one, it may hold the answer. `None`: answer at once.
        since: Option<u64>,
        /// Longest the answer may be held, ms, at most [`RENEW_HOLD_MS_MAX`].
        hold_ms: u32,
    },
    /// Remove the files (output) of jobs the shard forgot.
    Forget {
        /// The jobs, at most [`AGENT_JOBS_MAX`].
        jobs: Vec<JobId>,
    },
    /// Part of a task's output.
    Output(OutputRequest),
}

/// Which part of which task's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputRequest {
    /// The job.
    pub job: JobId,
    /// The task's rank.
    pub rank: u32,
    /// Standard error rather than standard output.
    pub stderr: bool,
    /// From this byte.
    pub offset: u64,
    /// At most this many bytes, at most [`OUTPUT_CHUNK_BYTES_MAX`].
    pub max_bytes: u32,
}

/// Part of a task's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// The bytes from the requested offset.
    pub bytes: Vec<u8>,
    /// Whether the task has ended and these are its last bytes (nothing more will come).
    pub complete: bool,
}

/// The agent's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The launch is accepted; its progress is in the reports.
    Launched,
    /// The job is being stopped (or had ended).
    Killing,
    /// The agent's table (answer to [`Request::Renew`]).
    Report(AgentReport),
    /// The files are removed.
    Forgotten,
    /// Answer to [`Request::Output`].
    Output(OutputChunk),
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Launch(_) => "shard_node.launch",
            Request::Kill { .. } => "shard_node.kill",
            Request::Renew { .. } => "shard_node.renew",
            Request::Forget { .. } => "shard_node.forget",
            Request::Output(_) => "shard_node.output",
        }
    }

    fn op(&self) -> Op {
        Op::AgentLaunch
    }

    fn check(&self) -> Result<(), Refusal> {
        let too_many = |n: usize| {
            Err(Refusal::new(
                RefusalCode::Invalid,
                format!("{n} jobs in one request, more than the limit of {AGENT_JOBS_MAX}"),
            ))
        };
        match self {
            Request::Launch(launch) => launch.check(),
            Request::Kill { why, .. } => check_kill_reason(why),
            Request::Renew { hold_ms, .. } if *hold_ms > RENEW_HOLD_MS_MAX => Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "a renewal held for {hold_ms} ms, more than the limit of {RENEW_HOLD_MS_MAX}"
                ),
            )),
            Request::Renew { seen: jobs, .. } | Request::Forget { jobs } => {
                if jobs.len() > AGENT_JOBS_MAX {
                    too_many(jobs.len())
                } else {
                    Ok(())
                }
            }
            Request::Output(req) => {
                if req.max_bytes > OUTPUT_CHUNK_BYTES_MAX {
                    Err(Refusal::new(
                        RefusalCode::Invalid,
                        format!(
                            "{} bytes of output asked for, more than the limit of \
                             {OUTPUT_CHUNK_BYTES_MAX}",
                            req.max_bytes
                        ),
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}
