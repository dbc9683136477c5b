//! Errors of the queue manager. A job the queue refuses is not an error: it is a
//! [`crate::Event::Denied`]. These are mistakes of the caller (unknown ids, time running
//! backwards, bad parameters) and failures of the matcher underneath.

use shardsched_matcher::MatchError;

use crate::JobId;

/// What can go wrong when driving a [`crate::QueueManager`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueueError {
    #[error("bad queue parameters: {0}")]
    BadParams(String),
    #[error("job {0} was already submitted")]
    DuplicateJob(JobId),
    #[error("no job {0} in the queue")]
    NoSuchJob(JobId),
    #[error("job {0} is not pending")]
    NotPending(JobId),
    #[error("job {0} is not running")]
    NotRunning(JobId),
    #[error("job {0} holds resources there")]
    InUse(JobId),
    #[error("no vertex {0} in the resource graph")]
    NoSuchVertex(u32),
    #[error("time went backwards: schedule({now}) after schedule({last})")]
    TimeWentBackwards { now: i64, last: i64 },
    #[error("matcher: {0}")]
    Match(#[from] MatchError),
}
