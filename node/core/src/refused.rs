//! Why the core refused a request. Each says what the agent knows, for the shard's log and
//! the job's reason.

use shardsched_wire::msg::{Generation, JobId};

/// A request the core refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The launch is for another node.
    #[error("this agent runs node {ours}, not {theirs}")]
    WrongNode {
        /// This agent's node.
        ours: String,
        /// The node the launch names.
        theirs: String,
    },
    /// The agent knows no owner yet (it has not registered with the coordinator).
    #[error("node {node} has no owner yet (its agent has not heard from the coordinator)")]
    NoOwner {
        /// The node.
        node: String,
    },
    /// The launch comes from a queue that does not own the node.
    #[error("node {node} is owned by {owner}, not {from}")]
    NotOwner {
        /// The node.
        node: String,
        /// Its owner.
        owner: String,
        /// Who asked.
        from: String,
    },
    /// The launch carries another generation than the owner's.
    #[error("node {node} is at generation {} for {queue}; the launch says {}", .ours.0, .theirs.0)]
    WrongGeneration {
        /// The node.
        node: String,
        /// Its owner.
        queue: String,
        /// The generation the agent knows.
        ours: Generation,
        /// The launch's.
        theirs: Generation,
    },
    /// Processes of another queue's job still run on the node.
    #[error("node {node} still runs job {job} of queue {queue}")]
    OtherQueueRuns {
        /// The node.
        node: String,
        /// That queue.
        queue: String,
        /// One of its jobs.
        job: JobId,
    },
    /// A kill from a shard that did not launch the job.
    #[error("job {job} was launched by {launcher}, not {from}")]
    NotLauncher {
        /// The job.
        job: JobId,
        /// Who launched it.
        launcher: String,
        /// Who asked.
        from: String,
    },
    /// The agent's table is full of live jobs and ends not yet seen.
    #[error("node {node} holds {max} jobs, its limit")]
    TableFull {
        /// The node.
        node: String,
        /// The limit.
        max: usize,
    },
    /// An owner at an older generation than the one the agent knows.
    #[error("stale owner {queue} at generation {}: node {node} is at {}", .theirs.0, .ours.0)]
    StaleOwner {
        /// The node.
        node: String,
        /// The queue named.
        queue: String,
        /// The generation the agent knows.
        ours: Generation,
        /// The one named.
        theirs: Generation,
    },
    /// Another owner at the same generation: the coordinator contradicts itself.
    #[error("node {node} is owned by {owner} at generation {}; {queue} at the same generation is refused", .generation.0)]
    ConflictingOwner {
        /// The node.
        node: String,
        /// The owner known.
        owner: String,
        /// The queue named.
        queue: String,
        /// The generation.
        generation: Generation,
    },
}
