//! Client (CLI: user or admin) → shard: submit, list, inspect, cancel, change urgency, read a
//! job's output.
//!
//! The job's owner is the submitting certificate's name. A retried submit with the same
//! idempotency key from the same owner returns the original job (`duplicate: true`); keys of
//! different owners never collide because the shard keys its table by (owner, key).

use serde::{Deserialize, Serialize};

use super::agent::JobSignature;
use super::common::{JobId, JobInfo, JobList, JobsQuery, Refusal, RefusalCode};
pub use super::shard_node::OutputChunk;
use crate::array::ArraySpec;
use crate::identity::Op;
use crate::limits::{
    IDEMPOTENCY_KEY_BYTES, JOBSPEC_BYTES_MAX, OUTPUT_CHUNK_BYTES_MAX, URGENCY_USER_MAX,
};
use crate::rpc::Rpc;

/// A request to a shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Submit a job to the shard's queue.
    Submit(Submit),
    /// The shard's jobs.
    Jobs(JobsQuery),
    /// One job in full.
    JobInfo {
        /// The job.
        id: JobId,
    },
    /// Cancel jobs (each must be the peer's own, unless the peer is an admin); an array's
    /// id cancels all its elements.
    Cancel {
        /// The jobs, at most [`IDS_PER_REQUEST_MAX`](crate::limits::IDS_PER_REQUEST_MAX).
        ids: Vec<JobId>,
    },
    /// Change pending jobs' urgency: hold, release, or set (each must be the peer's own,
    /// unless the peer is an admin; above [`URGENCY_USER_MAX`] admins only).
    Urgency {
        /// The jobs, at most [`IDS_PER_REQUEST_MAX`](crate::limits::IDS_PER_REQUEST_MAX).
        ids: Vec<JobId>,
        /// What to do to each.
        change: UrgencyChange,
    },
    /// Part of what a job's task wrote (the peer's own job, unless the peer is an admin):
    /// the shard reads it on the node that ran the task (through its agent), or from the
    /// job's directory under the exec executor.
    Output(OutputQuery),
}

/// A change of urgency (Flux's `flux job urgency`, Slurm's `scontrol hold|release`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UrgencyChange {
    /// Set it to this (0..=[`URGENCY_MAX`](crate::limits::URGENCY_MAX); 0 holds the job).
    Set(u8),
    /// Hold the job: urgency 0.
    Hold,
    /// Release a held job: urgency back to the default; a job that is not held keeps its
    /// urgency.
    Release,
}

/// Which part of which task's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputQuery {
    /// The job.
    pub job: JobId,
    /// The task's rank (0 under the exec executor, which runs one command).
    pub task: u32,
    /// Standard error rather than standard output.
    pub stderr: bool,
    /// From this byte.
    pub offset: u64,
    /// At most this many bytes, at most [`OUTPUT_CHUNK_BYTES_MAX`].
    pub max_bytes: u32,
}

/// A submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submit {
    /// Chosen at random by the client once per logical submission and reused on retry.
    pub idempotency_key: IdempotencyKey,
    /// The RFC 14 jobspec as canonical JSON (the CLI turns YAML and shorthand into it). The
    /// shard parses and validates it: the wire does not trust its structure.
    pub jobspec_json: String,
    /// Urgency, 0..=[`URGENCY_MAX`](crate::limits::URGENCY_MAX) (Flux's): pending jobs run by urgency (higher first),
    /// then submit time; 0 submits the job held; above [`URGENCY_USER_MAX`] admins only.
    /// [`URGENCY_DEFAULT`](crate::limits::URGENCY_DEFAULT) when absent.
    pub urgency: Option<u8>,
    /// Submit a job array: one element per index, each a job `ID[N]` of this jobspec
    /// ([`crate::array`]); the answer's id is the array's.
    pub array: Option<ArraySpec>,
    /// The submitter's signature of `jobspec_json`: node agents run the job as the
    /// signer only with it (docs/EXEC.md). Clients always sign; a shard that runs jobs
    /// through agents refuses a submit without one.
    pub signature: Option<JobSignature>,
}

/// A client-chosen key that makes a retried submit safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IdempotencyKey(pub [u8; IDEMPOTENCY_KEY_BYTES]);

/// The shard's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The job was accepted (journaled) — or had been, for a retry.
    Submitted {
        /// Its id.
        id: JobId,
        /// This key had already been used by this owner: `id` is the earlier job.
        duplicate: bool,
    },
    /// Answer to [`Request::Jobs`].
    Jobs(JobList),
    /// Answer to [`Request::JobInfo`].
    JobInfo(Box<JobInfo>),
    /// Answer to [`Request::Cancel`], one outcome per id, in request order.
    Cancelled(Vec<CancelOutcome>),
    /// Answer to [`Request::Urgency`], one outcome per id, in request order.
    Urgency(Vec<UrgencyOutcome>),
    /// Answer to [`Request::Output`].
    Output(OutputChunk),
}

/// What happened to one job of an urgency request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrgencyOutcome {
    /// The job.
    pub id: JobId,
    /// What happened.
    pub result: UrgencyResult,
}

/// What happened to one job of an urgency request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UrgencyResult {
    /// Its urgency is now this (unchanged if it already was).
    Set(u8),
    /// It is running or has ended: urgency orders pending jobs only.
    NotPending,
    /// No such job in this shard.
    NotFound,
    /// It belongs to someone else and the peer is not an admin.
    Forbidden,
}

/// What happened to one job of a cancel request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelOutcome {
    /// The job.
    pub id: JobId,
    /// What happened.
    pub result: CancelResult,
}

/// What happened to one job of a cancel request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelResult {
    /// Cancelled now (its resources are freed).
    Cancelled,
    /// It had already ended.
    AlreadyInactive,
    /// No such job in this shard.
    NotFound,
    /// It belongs to someone else and the peer is not an admin.
    Forbidden,
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Submit(_) => "client_shard.submit",
            Request::Jobs(_) => "client_shard.jobs",
            Request::JobInfo { .. } => "client_shard.job_info",
            Request::Cancel { .. } => "client_shard.cancel",
            Request::Urgency { .. } => "client_shard.urgency",
            Request::Output(_) => "client_shard.output",
        }
    }

    /// Cancel and urgency changes need only [`Op::CancelOwn`] here; the shard checks each
    /// job's owner with [`Peer::may_cancel`](crate::identity::Peer::may_cancel). An
    /// urgency above [`URGENCY_USER_MAX`] needs [`Op::RaiseUrgency`].
    fn op(&self) -> Op {
        match self {
            Request::Submit(s) if s.urgency.is_some_and(|u| u > URGENCY_USER_MAX) => {
                Op::RaiseUrgency
            }
            Request::Urgency {
                change: UrgencyChange::Set(u),
                ..
            } if *u > URGENCY_USER_MAX => Op::RaiseUrgency,
            Request::Submit(_) => Op::Submit,
            Request::Jobs(_) | Request::JobInfo { .. } | Request::Output(_) => Op::ReadStatus,
            Request::Cancel { .. } | Request::Urgency { .. } => Op::CancelOwn,
        }
    }

    fn check(&self) -> Result<(), Refusal> {
        match self {
            Request::Submit(s) if s.jobspec_json.len() > JOBSPEC_BYTES_MAX => Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "jobspec is {} bytes, more than the {JOBSPEC_BYTES_MAX}-byte limit",
                    s.jobspec_json.len()
                ),
            )),
            Request::Submit(s) => {
                super::bounds::urgency(s.urgency.unwrap_or(0))?;
                s.array.as_ref().map_or(Ok(()), super::bounds::array)?;
                s.signature.as_ref().map_or(Ok(()), JobSignature::check)
            }
            Request::Jobs(query) => super::bounds::jobs_query(query),
            Request::Cancel { ids } => super::bounds::ids("cancel", ids),
            Request::Urgency { ids, change } => {
                super::bounds::ids("urgency change", ids)?;
                match change {
                    UrgencyChange::Set(u) => super::bounds::urgency(*u),
                    UrgencyChange::Hold | UrgencyChange::Release => Ok(()),
                }
            }
            Request::Output(query) if query.max_bytes > OUTPUT_CHUNK_BYTES_MAX => {
                Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!(
                        "{} bytes of output asked for, more than the limit of \
                         {OUTPUT_CHUNK_BYTES_MAX}",
                        query.max_bytes
                    ),
                ))
            }
            Request::JobInfo { .. } | Request::Output(_) => Ok(()),
        }
    }
}
