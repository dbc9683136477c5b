//! Client (CLI: user or admin) → coordinator.
//!
//! The coordinator answers routing and cluster-wide status; clients then talk to shards
//! directly ([`client_shard`](super::client_shard)), so no single process serialises all
//! queues. There is no cancel forwarding: a job id's FLUID generator field names its shard
//! ([`RouteTable::job`]), so the client cancels at the shard, where the owner check is made
//! against the client's own certificate.

use serde::{Deserialize, Serialize};

use super::common::{JobList, JobsQuery, MoveId, NodeStatus, QueueStatus, RouteTable};
use crate::identity::Op;
use crate::rpc::Rpc;

/// A request to the coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The routing table. Any user or admin.
    Routes,
    /// Jobs across all shards (the coordinator asks each shard). Any user or admin.
    Jobs(JobsQuery),
    /// Every queue's status. Any user or admin.
    Queues,
    /// Every node's owner and state, optionally one queue's. Any user or admin.
    Resources {
        /// Only this queue's nodes, if given.
        queue: Option<String>,
    },
    /// Enable, disable, start or stop a queue. Admin only.
    QueueControl {
        /// The queue.
        queue: String,
        /// What to do.
        action: QueueAction,
    },
    /// Move nodes to a queue (from whichever started queues own them). Admin only.
    MoveNodes {
        /// Node names.
        nodes: Vec<String>,
        /// Receiving queue.
        to: String,
    },
    /// Mark nodes down (failed: their running jobs fail or are requeued, and they leave
    /// scheduling) or up again. The coordinator forwards it to the owning shards. Admin
    /// only.
    SetNodeState {
        /// Node names.
        nodes: Vec<String>,
        /// Down (`true`) or up.
        down: bool,
        /// Why, shown in `resource list` and in the failed jobs' reason (down only).
        reason: String,
    },
    /// Drain nodes (no new work on them; running jobs continue) or undrain them, in their
    /// owning queue, without moving them. The flag travels with a node that moves. Admin
    /// only.
    SetNodeDrain {
        /// Node names.
        nodes: Vec<String>,
        /// Drained (`true`) or not.
        drained: bool,
        /// Why, shown in `resource list` (drain only).
        reason: String,
    },
    /// Adds a queue at run time (`queue add`). Admin only.
    AddQueue(QueueSpec),
    /// Removes a queue (`queue remove`): refused while it has jobs or owns nodes; with
    /// `give_to`, its nodes are first moved to that queue. Admin only.
    RemoveQueue {
        /// The queue.
        queue: String,
        /// The queue that takes its nodes.
        give_to: Option<String>,
    },
    /// Changes a queue's definition, policies or limits (`queue update`); the fields left
    /// `None` keep their value. Admin only.
    UpdateQueue(QueueSpec),
    /// Re-reads the coordinator's configuration file (`reload`): it becomes authoritative
    /// again over run-time queue changes. Admin only.
    Reload,
}

/// A queue's definition, policies and limits as an admin gives them on the command line.
/// Names and durations travel as text and are checked by the coordinator, with the same
/// rules (and messages) as its configuration file (docs/CONFIG.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSpec {
    /// Queue name.
    pub name: String,
    /// The definition, as a hostlist (`node[0-15]`).
    pub nodes: Option<String>,
    /// Queue policy (`fcfs`, `easy`, `hybrid`, `conservative`).
    pub policy: Option<String>,
    /// Match policy (`first`, `low`, …).
    pub match_policy: Option<String>,
    /// Pending jobs considered per cycle (0: all).
    pub queue_depth: Option<u32>,
    /// Reservations made by `hybrid` (0: all considered).
    pub reservation_depth: Option<u32>,
    /// Duration of a job that names none (`"1h"`, `"90"`, `"unlimited"`).
    pub default_duration: Option<String>,
    /// Longest duration accepted.
    pub max_duration: Option<String>,
    /// Added stopped (`queue add --stopped`); ignored by an update.
    pub stopped: bool,
}

/// A queue change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueAction {
    /// Accept submissions.
    Enable,
    /// Refuse new submissions; queued jobs stay.
    Disable,
    /// Schedule. With `take`, move the nodes its definition shares with started queues to
    /// it; without, refuse if it overlaps a started queue.
    Start {
        /// Take shared nodes from started queues.
        take: bool,
    },
    /// Stop scheduling; running jobs are untouched, and nodes taken with `take` go back.
    Stop,
}

/// The coordinator's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to [`Request::Routes`].
    Routes(RouteTable),
    /// Answer to [`Request::Jobs`].
    Jobs(JobList),
    /// Answer to [`Request::Queues`].
    Queues(Vec<QueueStatus>),
    /// Answer to [`Request::Resources`].
    Resources(Vec<NodeStatus>),
    /// An admin change was accepted (and journaled); a move started if it has an id.
    Done {
        /// The move that carries the change out, if it needs one.
        move_id: Option<MoveId>,
    },
    /// Answer to a queue table change (add, remove, update, reload): what was done, one
    /// line per change, for the admin to read.
    Reconfigured {
        /// What changed (`added queue x`, `queue y: shard restarting`, …).
        changes: Vec<String>,
        /// The move that carries a `remove --give-to` out, if one started.
        move_id: Option<MoveId>,
    },
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Routes => "client_coord.routes",
            Request::Jobs(_) => "client_coord.jobs",
            Request::Queues => "client_coord.queues",
            Request::Resources { .. } => "client_coord.resources",
            Request::QueueControl { .. } => "client_coord.queue_control",
            Request::MoveNodes { .. } => "client_coord.move_nodes",
            Request::SetNodeState { .. } => "client_coord.set_node_state",
            Request::SetNodeDrain { .. } => "client_coord.set_node_drain",
            Request::AddQueue(_) => "client_coord.add_queue",
            Request::RemoveQueue { .. } => "client_coord.remove_queue",
            Request::UpdateQueue(_) => "client_coord.update_queue",
            Request::Reload => "client_coord.reload",
        }
    }

    fn op(&self) -> Op {
        match self {
            Request::Routes | Request::Jobs(_) | Request::Queues | Request::Resources { .. } => {
                Op::ReadStatus
            }
            Request::QueueControl { .. }
            | Request::AddQueue(_)
            | Request::RemoveQueue { .. }
            | Request::UpdateQueue(_)
            | Request::Reload => Op::AdminQueues,
            Request::MoveNodes { .. }
            | Request::SetNodeState { .. }
            | Request::SetNodeDrain { .. } => Op::AdminNodes,
        }
    }
}
