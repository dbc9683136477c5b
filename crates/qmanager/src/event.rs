//! What goes into a queue manager (a [`JobRequest`]) and what comes out ([`Event`]s and
//! [`JobView`]s).

use shardsched_jobspec::Jobspec;
use shardsched_matcher::Allocation;

/// A job id, unique within one queue manager (the shards use cluster-unique FLUIDs).
pub type JobId = u64;

/// The job table, the reservations and a re-plan's maps are the matcher's kind of map keyed
/// by job id (no reader here depends on its order).
pub(crate) use shardsched_matcher::JobMap;

/// A job as submitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRequest {
    pub id: JobId,
    pub jobspec: Jobspec,
    /// Higher runs first.
    pub priority: i64,
    /// Seconds; ties in priority are broken by submit time, then by arrival order.
    pub submit_time: i64,
    pub user: u32,
}

/// Why a job was refused at submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenyReason {
    /// The request could never fit the queue's definition, even with everything up and free.
    Unsatisfiable,
    /// It asks for a longer duration than the queue allows.
    DurationAboveMax { asked: u64, max: u64 },
    /// The matcher cannot read the request (e.g. a malformed constraint).
    Invalid(String),
}

impl std::fmt::Display for DenyReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DenyReason::Unsatisfiable => f.write_str("unsatisfiable: it can never fit the queue"),
            DenyReason::DurationAboveMax { asked, max } => {
                write!(f, "duration {asked} s is above the queue's maximum {max} s")
            }
            DenyReason::Invalid(why) => write!(f, "invalid request: {why}"),
        }
    }
}

/// Why a pending job has not started, as of the last cycle that considered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// Not considered yet (just submitted, beyond the queue depth, or behind a blocked head
    /// under fcfs).
    Queued,
    /// Not enough free resources now (and no reservation: beyond the reservation depth, or
    /// fcfs).
    Resources,
    /// Reserved to start at this time.
    Reserved { at: i64 },
    /// Not enough free resources now and no future time at which it fits could be found
    /// (e.g. behind jobs of unlimited duration).
    NoReservation,
    /// It fits the queue's definition but not the resources that are up now; it does not
    /// count against the queue depth and is retried when availability changes.
    Unavailable,
    /// Held by the caller ([`crate::QueueManager::hold`]): not considered until released.
    Held,
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::Queued => f.write_str("queued"),
            WaitReason::Resources => f.write_str("waiting for resources"),
            WaitReason::Reserved { at } => write!(f, "reserved to start at {at}"),
            WaitReason::NoReservation => f.write_str("waiting for resources; no start time found"),
            WaitReason::Unavailable => f.write_str("resources it needs are down or not owned"),
            WaitReason::Held => f.write_str("held"),
        }
    }
}

/// What the queue manager reports; see [`crate::QueueManager::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The job got its resources at `at` (R is built from `alloc`).
    Started {
        id: JobId,
        at: i64,
        alloc: Allocation,
    },
    /// The job is reserved to start at `at`; sent when a reservation is made or moves.
    Reserved { id: JobId, at: i64 },
    /// A pending job lost its reservation without starting: a re-plan gave it none, or the
    /// resources it needs went down (it then waits: [`WaitReason::Unavailable`]).
    Unreserved { id: JobId },
    /// The job was refused at submit; it is forgotten.
    Denied { id: JobId, reason: DenyReason },
    /// The job ended at `at`; its resources are free; it is forgotten.
    Completed { id: JobId, at: i64 },
    /// The job was cancelled (pending or running); it is forgotten.
    Cancelled { id: JobId },
}

impl Event {
    /// The job the event is about.
    pub fn id(&self) -> JobId {
        match self {
            Event::Started { id, .. }
            | Event::Reserved { id, .. }
            | Event::Unreserved { id }
            | Event::Denied { id, .. }
            | Event::Completed { id, .. }
            | Event::Cancelled { id } => *id,
        }
    }
}

/// Where a live job is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobView {
    Pending { reason: WaitReason },
    Running { start: i64, end: i64 },
}
