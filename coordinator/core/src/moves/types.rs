//! The move machine's vocabulary: journal records, outputs, errors and the read view.

use serde::{Deserialize, Serialize};
use shardsched_wire::msg::coord_shard::{IncomingNode, Request};
use shardsched_wire::msg::{Generation, JobId, MoveId, NodeGen};

/// What the coordinator must make durable before the messages that depend on it go out.
///
/// A record carries the generations it gives nodes, so replaying the records over the
/// ownership of the previous run rebuilds every node's owner and generation exactly
/// ([`MoveMachine::recover`](super::MoveMachine::recover)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveRecord {
    /// A move began: each node's owner is now `to`, at the given (new) generation.
    Started {
        /// The move.
        move_id: MoveId,
        /// Donor queue.
        from: String,
        /// Recipient queue.
        to: String,
        /// The nodes with their new generations.
        nodes: Vec<NodeGen>,
        /// When the admin asked, ms since the Unix epoch.
        started_ms: u64,
        /// Past this time the donor's jobs still holding the nodes are cancelled.
        deadline_ms: Option<u64>,
    },
    /// The donor has no allocation left on these nodes: the recipient may bring them up.
    Released {
        /// The move.
        move_id: MoveId,
        /// The nodes, with the move's generation.
        nodes: Vec<NodeGen>,
    },
    /// The recipient acknowledged these nodes up: done for them.
    Acquired {
        /// The move.
        move_id: MoveId,
        /// The nodes, with the move's generation.
        nodes: Vec<NodeGen>,
    },
    /// The move was cancelled: these (not yet released) nodes belong to the donor again, at
    /// the given (new) generations.
    Cancelled {
        /// The move.
        move_id: MoveId,
        /// The returned nodes with their new generations.
        nodes: Vec<NodeGen>,
    },
    /// Donor and recipient both acknowledged the return of these nodes: done for them.
    Returned {
        /// The move.
        move_id: MoveId,
        /// The nodes, with their returned generation.
        nodes: Vec<NodeGen>,
    },
}

impl MoveRecord {
    /// The record's kind (`started`, `released`, `acquired`, `cancelled`, `returned`), as
    /// the driver's failpoints name it.
    pub fn kind(&self) -> &'static str {
        match self {
            MoveRecord::Started { .. } => "started",
            MoveRecord::Released { .. } => "released",
            MoveRecord::Acquired { .. } => "acquired",
            MoveRecord::Cancelled { .. } => "cancelled",
            MoveRecord::Returned { .. } => "returned",
        }
    }

    /// The move the record is about.
    pub fn move_id(&self) -> MoveId {
        match self {
            MoveRecord::Started { move_id, .. }
            | MoveRecord::Released { move_id, .. }
            | MoveRecord::Acquired { move_id, .. }
            | MoveRecord::Cancelled { move_id, .. }
            | MoveRecord::Returned { move_id, .. } => *move_id,
        }
    }
}

/// Identifies one journal record handed to the driver; the driver reports durability with
/// [`MoveMachine::journaled`](super::MoveMachine::journaled). Tokens grow by one per record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JournalToken(pub u64);

/// A command for one queue's shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The queue whose shard gets it (the driver drops it when that shard is not
    /// connected: everything unacknowledged is sent again on registration).
    pub queue: String,
    /// The command.
    pub request: Request,
}

/// What a (re)registered shard owns and receives, for its registration answer
/// (`Assignment.owned` / `.incoming`). Taken when the shard registered and released, like a
/// command, only once every record before it is durable: an assignment never names a
/// generation the journal does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardAssignment {
    /// The queue.
    pub queue: String,
    /// Nodes it may have up.
    pub owned: Vec<NodeGen>,
    /// Nodes on their way to it.
    pub incoming: Vec<(MoveId, IncomingNode)>,
}

/// Why a move request was refused. Every variant names what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    /// No such queue.
    #[error("no queue named {0:?}")]
    NoSuchQueue(String),
    /// Donor and recipient are the same queue.
    #[error("a move needs two different queues (both are {0:?})")]
    SameQueue(String),
    /// The move names no node.
    #[error("a move needs at least one node")]
    NoNodes,
    /// Too many nodes in one move.
    #[error("a move may name at most {max} nodes ({count} given)")]
    TooManyNodes {
        /// Nodes given.
        count: usize,
        /// [`MOVE_NODES_MAX`](super::limits::MOVE_NODES_MAX).
        max: usize,
    },
    /// Nodes not in the cluster.
    #[error("no such node in the cluster: {0}")]
    NoSuchNode(String),
    /// Nodes not owned by the donor.
    #[error("not owned by queue {queue}: {nodes} ({owners})")]
    NotOwned {
        /// The donor.
        queue: String,
        /// The nodes (hostlist).
        nodes: String,
        /// Who owns them instead (`debug owns node0; node5 is unassigned`).
        owners: String,
    },
    /// Nodes outside the recipient's definition.
    #[error(
        "{nodes} not in queue {queue}'s definition: \
         `shardsched queue update {queue} --nodes {wider}` adds them"
    )]
    NotInDefinition {
        /// The recipient.
        queue: String,
        /// The nodes (hostlist).
        nodes: String,
        /// The recipient's definition with them (hostlist).
        wider: String,
    },
    /// Nodes already in an unfinished move (a node takes part in one move at a time).
    #[error(
        "already moving: {nodes} (move {move_id}: wait until `shardsched queue moves` shows it \
         done, or `shardsched queue move --cancel {move_id}`)"
    )]
    AlreadyMoving {
        /// The nodes (hostlist).
        nodes: String,
        /// One of the moves holding them.
        move_id: u64,
    },
    /// Too many unfinished moves, or the journal queue is full.
    #[error("too many moves in progress ({0}); try again when some have finished")]
    Busy(String),
    /// No such move (or it finished and was forgotten).
    #[error("no move {0} in progress")]
    NoSuchMove(u64),
}

/// A journal could not be replayed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecoverError {
    /// A record does not fit the state the records before it built.
    #[error("move journal record {index} ({move_id:?}): {reason}")]
    Inconsistent {
        /// Position of the record in the replayed sequence, from 0.
        index: usize,
        /// Its move.
        move_id: MoveId,
        /// What does not fit.
        reason: String,
    },
}

/// Where a move stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MoveStatus {
    /// Some node is still on its way.
    Active,
    /// Every node came up in the recipient.
    Completed,
    /// Cancelled; every node is either up in the recipient (released before the
    /// cancellation) or back in the donor.
    Cancelled,
}

/// One move, for `queue moves`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveView {
    /// The move.
    pub move_id: MoveId,
    /// Donor.
    pub from: String,
    /// Recipient.
    pub to: String,
    /// When asked, ms since the Unix epoch.
    pub started_ms: u64,
    /// Deadline, if any.
    pub deadline_ms: Option<u64>,
    /// Where it stands.
    pub status: MoveStatus,
    /// Its nodes, in natural order (`node2` before `node10`).
    pub nodes: Vec<MoveNodeView>,
}

/// One node of a move, for `queue moves`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveNodeView {
    /// Node name.
    pub node: String,
    /// The generation its current step carries.
    pub generation: Generation,
    /// Its step.
    pub state: MoveNodeState,
    /// When its release was recorded, ms since the Unix epoch (coordinator clock; `None`
    /// before, and for a release recorded before a coordinator restart: not journaled).
    pub released_ms: Option<u64>,
    /// When its acquisition by the recipient was recorded (as `released_ms`).
    pub acquired_ms: Option<u64>,
}

/// A node's step in a move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MoveNodeState {
    /// Still in the donor, taking no new work; its jobs run to their end.
    Outgoing {
        /// When it will be free: the end its donor expects of its jobs, or the move's
        /// deadline if earlier (`None`: not answered yet).
        expected_free_ms: Option<u64>,
        /// The jobs the donor said hold it.
        jobs: Vec<JobId>,
    },
    /// Released by the donor (journaled), being brought up in the recipient.
    Released,
    /// Up in the recipient.
    Up,
    /// Cancelled before its release: being given back to the donor.
    Returning,
    /// Back in the donor.
    Returned,
}

/// A node of an unfinished move, as [`MoveMachine::moving_node`](super::MoveMachine::moving_node)
/// finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MovingNode<'a> {
    /// The move.
    pub move_id: MoveId,
    /// Donor.
    pub from: &'a str,
    /// Recipient.
    pub to: &'a str,
    /// Where it is.
    pub step: MovingStep,
}

/// How long one node's step of a move took (coordinator clock), taken from the record that
/// completes the step: the driver counts it once that record is durable. The work is per
/// node of the record, never per node of the moves the coordinator remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepTook {
    /// `release` (request → the donor's release recorded) or `acquire` (release → the
    /// recipient's acknowledgement recorded): the metric's label.
    pub step: &'static str,
    /// Milliseconds.
    pub took_ms: u64,
}

/// Where a moving node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MovingStep {
    /// Still in the donor: outgoing, or returning to it after a cancel.
    InDonor,
    /// Released by the donor, not yet up in the recipient.
    Released,
}
