//! Errors of the shard's core. A job the queue refuses is not an error: it is a
//! [`Refusal`](shardsched_wire::msg::Refusal) returned to the client. These are setup
//! failures (a cluster description or queue configuration the shard cannot use), journal
//! records that do not restore, and failures of the queue manager underneath.

use shardsched_qmanager::QueueError;

/// The core could not be built or driven.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The cluster description in the assignment could not be read.
    #[error("cluster description: {0}")]
    Cluster(String),
    /// The queue configuration in the assignment is not usable.
    #[error("queue configuration: {0}")]
    QueueConfig(String),
    /// A shard option is out of range (e.g. a time scale that is not a positive number).
    #[error("option: {0}")]
    Option(String),
    /// The generator id does not fit a FLUID.
    #[error("job id generator: {0}")]
    Generator(#[from] shardsched_wire::fluid::FluidError),
    /// The journal's jobs could not be brought back (a vertex the cluster no longer has, a
    /// record that no longer parses).
    #[error("restoring from the journal: {0}")]
    Restore(String),
    /// The queue manager failed (a matcher failure, or a bug in how the core drives it).
    #[error("queue manager: {0}")]
    Queue(#[from] QueueError),
}
