//! Client (CLI: user or admin) → shard: submit, list, inspect, cancel.
//!
//! The job's owner is the submitting certificate's name. A retried submit with the same
//! idempotency key from the same owner returns the original job (`duplicate: true`); keys of
//! different owners never collide because the shard keys its table by (owner, key).

use serde::{Deserialize, Serialize};

use super::common::{JobId, JobInfo, JobList, JobsQuery, Refusal, RefusalCode};
use crate::identity::Op;
use crate::limits::{IDEMPOTENCY_KEY_BYTES, IDS_PER_REQUEST_MAX, JOBSPEC_BYTES_MAX};
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
    /// Cancel jobs (each must be the peer's own, unless the peer is an admin).
    Cancel {
        /// The jobs, at most [`IDS_PER_REQUEST_MAX`].
        ids: Vec<JobId>,
    },
}

/// A submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submit {
    /// Chosen at random by the client once per logical submission and reused on retry.
    pub idempotency_key: IdempotencyKey,
    /// The RFC 14 jobspec as canonical JSON (the CLI turns YAML and shorthand into it). The
    /// shard parses and validates it: the wire does not trust its structure.
    pub jobspec_json: String,
    /// Priority within the queue (higher first); the queue's default when absent.
    pub priority: Option<u32>,
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
        }
    }

    /// Cancel needs only [`Op::CancelOwn`] here; the shard checks each job's owner with
    /// [`Peer::may_cancel`](crate::identity::Peer::may_cancel).
    fn op(&self) -> Op {
        match self {
            Request::Submit(_) => Op::Submit,
            Request::Jobs(_) | Request::JobInfo { .. } => Op::ReadStatus,
            Request::Cancel { .. } => Op::CancelOwn,
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
            Request::Jobs(query) => super::bounds::jobs_query(query),
            Request::Cancel { ids } if ids.len() > IDS_PER_REQUEST_MAX => Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "{} job ids in one cancel, more than the limit of {IDS_PER_REQUEST_MAX}",
                    ids.len()
                ),
            )),
            _ => Ok(()),
        }
    }
}
