//! Client (CLI: user or admin) → coordinator.
//!
//! The coordinator answers routing and cluster-wide status; clients then talk to shards
//! directly ([`client_shard`](super::client_shard)), so no single process serialises all
//! queues. There is no cancel forwarding: a job id's FLUID generator field names its shard
//! ([`RouteTable::job`]), so the client cancels at the shard, where the owner check is made
//! against the client's own certificate.

use serde::{Deserialize, Serialize};

use super::bounds;
use super::common::{
    Generation, JobId, JobList, JobsQuery, MoveId, NodeStatus, QueueStatus, Refusal, RouteTable,
};
use super::coord_shard::DryRunReport;
use super::history::{HistoryList, HistoryQuery, UsageQuery, UsageRow};
use super::policy::{MatchPolicy, QueuePolicy};
use super::quota::{LimitKind, LimitScope, LimitTable};
use crate::identity::Op;
use crate::limits::SPEC_TEXT_BYTES_MAX;
use crate::rpc::Rpc;

/// A request to the coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The routing table. Any user or admin.
    Routes,
    /// Jobs across all shards (the coordinator asks each shard). Any user or admin.
    Jobs(JobsQuery),
    /// Finished jobs from the coordinator's history store (`jobs --since`). Any user or
    /// admin.
    History(HistoryQuery),
    /// Usage sums by user from the history store (`shardsched usage`). Any user or admin.
    Usage(UsageQuery),
    /// Every queue's status. Any user or admin.
    Queues,
    /// Every node's owner and state, optionally one queue's, a page at a time (answered
    /// with [`Response::Resources`]). Any user or admin.
    Resources {
        /// Only this queue's nodes, if given.
        queue: Option<String>,
        /// The first row to send: 0 for the first page, then the answer's `next`.
        start: u32,
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
    /// [`Request::QueueControl`] with its extras: a reason (kept with a disable) and, for a
    /// stop, a queue to hand the stopped queue's owned nodes to (moves, as `--take` does).
    /// Admin only.
    QueueAdmin(QueueAdmin),
    /// Move nodes between two named queues, with a deadline, or only ask the donor what the
    /// move would do (`dry_run`: nothing changes; answered with [`Response::DryRun`]).
    /// Admin only.
    Move(MoveRequest),
    /// Cancel a move: its nodes not yet released go back to the donor. Answered with
    /// [`Response::Cancelled`]. Admin only.
    CancelMove {
        /// The move.
        move_id: MoveId,
    },
    /// Every unfinished move and the finished ones the coordinator still remembers.
    /// Answered with [`Response::Moves`]. Any user or admin.
    Moves,
    /// One move, unfinished or remembered: answered with [`Response::Moves`] holding it, or
    /// none when the coordinator has forgotten it (or never had it). Any user or admin.
    /// What waits for one move asks this: the whole list names every node of every
    /// remembered move (two 8,192-node moves are 16,384 rows).
    MoveOf {
        /// The move.
        move_id: MoveId,
    },
    /// Sets (`Some`) or removes (`None`) a limit (docs/POLICIES.md, "Limits"); journaled,
    /// then every shard is told. Answered with `Done`. Admin only.
    SetLimit {
        /// What it counts.
        kind: LimitKind,
        /// Whom it applies to.
        scope: LimitScope,
        /// The most allowed, or `None` to remove it.
        value: Option<u64>,
    },
    /// Every limit. Answered with [`Response::Limits`]. Any user or admin.
    Limits,
}

/// A queue's definition, policies and limits as an admin gives them on the command line.
/// The policies travel typed (the command line refuses an unknown name); the node list and
/// durations travel as text and are checked by the coordinator, with the same rules (and
/// messages) as its configuration file (docs/CONFIG.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSpec {
    /// Queue name.
    pub name: String,
    /// The definition, as a hostlist (`node[0-15]`).
    pub nodes: Option<String>,
    /// Queue policy.
    pub policy: Option<QueuePolicy>,
    /// Match policy.
    pub match_policy: Option<MatchPolicy>,
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
    /// Update only: the queue that takes the nodes the new definition leaves out and the
    /// queue owns (moved to it, as `queue move` would).
    pub give_to: Option<String>,
}

/// See [`Request::QueueAdmin`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueAdmin {
    /// The queue.
    pub queue: String,
    /// What to do.
    pub action: QueueAction,
    /// Why (kept with a disable; may be empty).
    pub reason: String,
    /// Stop only: move the queue's owned nodes to this queue.
    pub release_to: Option<String>,
}

/// See [`Request::Move`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveRequest {
    /// Node names.
    pub nodes: Vec<String>,
    /// Donor: every node must be owned by it.
    pub from: String,
    /// Recipient: every node must be in its definition.
    pub to: String,
    /// How long the donor's jobs may keep the nodes, in milliseconds from now; past it they
    /// are cancelled.
    pub deadline_ms: Option<u64>,
    /// Only ask the donor what releasing the nodes would do.
    pub dry_run: bool,
}

/// One move, for `queue moves`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveInfo {
    /// The move.
    pub move_id: MoveId,
    /// Donor.
    pub from: String,
    /// Recipient.
    pub to: String,
    /// `active`, `completed` or `cancelled`.
    pub status: String,
    /// When it was asked for, ms since the Unix epoch (coordinator clock).
    pub started_ms: u64,
    /// Its deadline, if any (ms since the Unix epoch).
    pub deadline_ms: Option<u64>,
    /// Its nodes, in natural order (`node2` before `node10`).
    pub nodes: Vec<MoveNodeInfo>,
}

/// One node of a [`MoveInfo`]. Times are ms since the Unix epoch on the coordinator's clock,
/// as it saw each step (absent for steps not taken, and for steps taken before a coordinator
/// restart: they are not journaled).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveNodeInfo {
    /// Node name.
    pub node: String,
    /// The generation its current step carries.
    pub generation: Generation,
    /// `outgoing`, `released`, `up`, `returning` or `returned`.
    pub state: String,
    /// Outgoing: when it will be free (its jobs' expected end, or the deadline if earlier).
    pub expected_free_ms: Option<u64>,
    /// Outgoing: the donor's jobs still holding it.
    pub jobs: Vec<JobId>,
    /// When the move was asked for.
    pub requested_ms: u64,
    /// When its release was journaled.
    pub released_ms: Option<u64>,
    /// When the recipient's acknowledgement of `Acquire` was journaled.
    pub acquired_ms: Option<u64>,
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
    /// Answer to [`Request::History`].
    History(HistoryList),
    /// Answer to [`Request::Usage`]: one row per user, by name.
    Usage(Vec<UsageRow>),
    /// Answer to [`Request::Queues`].
    Queues(Vec<QueueStatus>),
    /// Answer to [`Request::Resources`]: the rows from `start` that fit one reply
    /// ([`LIST_REPLY_BYTES_MAX`](crate::limits::LIST_REPLY_BYTES_MAX)), in cluster order.
    Resources {
        /// The rows.
        nodes: Vec<NodeStatus>,
        /// More rows follow: ask again with this `start`.
        next: Option<u32>,
    },
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
    /// Answer to a dry-run [`Request::Move`]: the donor's report.
    DryRun(DryRunReport),
    /// Answer to [`Request::CancelMove`]: the nodes going back to the donor.
    Cancelled {
        /// Node names (empty: every node was already released).
        returned: Vec<String>,
    },
    /// Answer to [`Request::Moves`]: the moves by id, nodes in natural order (`node2`
    /// before `node10`); when the node rows would not fit one response, the oldest finished
    /// moves are left out first (and `truncated` is set).
    Moves {
        /// The moves.
        moves: Vec<MoveInfo>,
        /// Moves were left out.
        truncated: bool,
    },
    /// Answer to [`Request::Limits`].
    Limits(LimitTable),
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Routes => "client_coord.routes",
            Request::Jobs(_) => "client_coord.jobs",
            Request::History(_) => "client_coord.history",
            Request::Usage(_) => "client_coord.usage",
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
            Request::QueueAdmin(_) => "client_coord.queue_admin",
            Request::Move(_) => "client_coord.move",
            Request::CancelMove { .. } => "client_coord.cancel_move",
            Request::Moves => "client_coord.moves",
            Request::MoveOf { .. } => "client_coord.move_of",
            Request::SetLimit { .. } => "client_coord.set_limit",
            Request::Limits => "client_coord.limits",
        }
    }

    fn op(&self) -> Op {
        match self {
            Request::Routes
            | Request::Jobs(_)
            | Request::History(_)
            | Request::Usage(_)
            | Request::Queues
            | Request::Resources { .. }
            | Request::Moves
            | Request::MoveOf { .. }
            | Request::Limits => Op::ReadStatus,
            Request::SetLimit { .. } => Op::AdminQueues,
            Request::QueueControl { .. }
            | Request::QueueAdmin(_)
            | Request::AddQueue(_)
            | Request::RemoveQueue { .. }
            | Request::UpdateQueue(_)
            | Request::Reload => Op::AdminQueues,
            Request::MoveNodes { .. }
            | Request::Move(_)
            | Request::CancelMove { .. }
            | Request::SetNodeState { .. }
            | Request::SetNodeDrain { .. } => Op::AdminNodes,
        }
    }

    /// Reasons, names, node lists and queue specifications within their bounds
    /// ([`bounds`]).
    fn check(&self) -> Result<(), Refusal> {
        let queue = |name: &str| bounds::name("the queue name", name);
        match self {
            Request::Routes | Request::Queues | Request::Moves | Request::Reload => Ok(()),
            Request::CancelMove { .. } | Request::MoveOf { .. } | Request::Limits => Ok(()),
            Request::SetLimit { kind, scope, value } => {
                LimitTable::default().set(*kind, scope.clone(), *value)
            }
            Request::Jobs(query) => bounds::jobs_query(query),
            Request::History(query) => bounds::jobs_query(&query.jobs),
            Request::Usage(query) => bounds::user_filter(&query.user),
            Request::Resources { queue: q, .. } => bounds::name_opt("the queue name", q.as_deref()),
            Request::QueueControl { queue: q, .. } => queue(q),
            Request::QueueAdmin(admin) => {
                queue(&admin.queue)?;
                bounds::name_opt("the queue name", admin.release_to.as_deref())?;
                bounds::reason(&admin.reason)
            }
            Request::MoveNodes { nodes, to } => {
                queue(to)?;
                bounds::nodes(nodes)
            }
            Request::Move(m) => {
                queue(&m.from)?;
                queue(&m.to)?;
                bounds::nodes(&m.nodes)
            }
            Request::SetNodeState { nodes, reason, .. }
            | Request::SetNodeDrain { nodes, reason, .. } => {
                bounds::reason(reason)?;
                bounds::nodes(nodes)
            }
            Request::AddQueue(spec) | Request::UpdateQueue(spec) => {
                queue(&spec.name)?;
                let texts = [
                    ("the node list", &spec.nodes),
                    ("the default duration", &spec.default_duration),
                    ("the maximum duration", &spec.max_duration),
                ];
                texts.into_iter().try_for_each(|(what, text)| {
                    text.as_deref()
                        .map_or(Ok(()), |t| bounds::text(what, t, SPEC_TEXT_BYTES_MAX))
                })
            }
            Request::RemoveQueue { queue: q, give_to } => {
                queue(q)?;
                bounds::name_opt("the queue name", give_to.as_deref())
            }
        }
    }
}
