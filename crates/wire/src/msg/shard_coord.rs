//! Shard → coordinator: registration, status reports, releases.
//!
//! A shard's certificate name is its queue's name; the coordinator refuses a registration for
//! any other queue. A restarting shard brings no node up until the [`Assignment`] it gets
//! back says what it owns; what it reports in [`Register::held`] are facts about live
//! allocations (never killed by reconciliation), not claims of ownership.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::common::{
    ClusterDescription, JobId, MoveId, NodeFlags, NodeGen, NodeStatus, QueueConfig, QueueStatus,
    Refusal, RefusalCode,
};
use super::coord_shard::IncomingNode;
use super::fairshare::{FairShareWeights, UsageBatch};
use super::quota::{AllowanceGrant, AllowanceReport, LimitTable};
use crate::identity::Op;
use crate::limits::JOB_NODES_MAX;
use crate::rpc::Rpc;

/// A request from a shard to the coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// "I am up": sent first on every (re)connection.
    Register(Register),
    /// Periodic and on-change status, for `queue list` and `resource list`.
    Status(Box<ShardStatus>),
    /// Nodes of a move that became free after the shard answered the move's `Release`.
    Released(Released),
    /// Where the node agents of these nodes listen (a shard that runs jobs through agents
    /// asks before its first launch on a node, and again when an agent cannot be reached).
    /// At most [`JOB_NODES_MAX`] nodes.
    Agents {
        /// The nodes.
        nodes: Vec<String>,
    },
}

/// Where a node's agent listens, as its last registration said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentAddress {
    /// The node.
    pub node: String,
    /// Its agent's address; `None`: no agent has registered for the node.
    pub address: Option<SocketAddr>,
}

/// A shard's registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Register {
    /// The queue this shard schedules (must equal the certificate name).
    pub queue: String,
    /// Where clients reach this shard (without IPv6 flow info or scope id, see
    /// [`Route::address`](super::common::Route::address)).
    pub listen: SocketAddr,
    /// Nodes the shard's journal says it owned before a restart, with live allocations
    /// marked. Empty on first start.
    pub held: Vec<HeldNode>,
    /// The highest job id in the shard's journal, so the coordinator can check that the
    /// generator id it hands back cannot repeat an id.
    pub last_job_id: Option<JobId>,
}

/// A node as a restarting shard remembers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldNode {
    /// Node and the newest generation the shard has seen for it.
    pub node: NodeGen,
    /// Whether a running job still holds resources on it.
    pub allocated: bool,
}

/// A shard's status report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardStatus {
    /// The report's number on its connection: 1 for the first, one more for each next
    /// one. The coordinator applies a report only above the last number it applied on that
    /// connection: a report whose answer timed out (so the next one was sent whole) and
    /// that arrives after that next one is dropped, not applied over newer rows.
    pub seq: u64,
    /// When the report was made, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The queue's counters.
    pub queue: QueueStatus,
    /// The nodes the shard owns or is receiving, with their state: every one when
    /// [`nodes_complete`](Self::nodes_complete), else only the rows that differ from the
    /// previous report on this connection.
    pub nodes: Vec<NodeStatus>,
    /// Whether [`nodes`](Self::nodes) lists every node: the first report on a connection,
    /// and the one after a report that may not have arrived. Otherwise the report is a
    /// change to the previous one, so that a shard of thousands of nodes where one moved
    /// sends one row, not thousands (and the coordinator's one task reads one).
    pub nodes_complete: bool,
    /// With an incomplete report: the nodes the previous report listed that this one does
    /// not (moved out, or no longer arriving).
    pub nodes_gone: Vec<String>,
    /// Jobs of other queues (or ended and forgotten here) that pending jobs of this shard
    /// wait on (docs/POLICIES.md): the coordinator answers with
    /// [`coord_shard::Request::Facts`](super::coord_shard::Request::Facts). At most
    /// [`DEPENDENCY_TARGETS_PER_ASK_MAX`](crate::limits::DEPENDENCY_TARGETS_PER_ASK_MAX).
    pub waiting_on: Vec<JobId>,
    /// The shard's allowances under per-user limits that span queues (docs/POLICIES.md,
    /// "Limits"): the coordinator answers with
    /// [`coord_shard::Request::Allowances`](super::coord_shard::Request::Allowances).
    pub allowances: Vec<AllowanceReport>,
    /// Fair-share usage counted since the last batch the coordinator acknowledged, sent
    /// again with every report until it is (docs/POLICIES.md, "Fair-share"); `None`
    /// when fair-share is off or nothing was counted.
    pub usage: Option<UsageBatch>,
    /// The version of the factor table the shard applied (0: none): the coordinator sends
    /// the current one when it differs.
    pub factors_version: u64,
}

/// Nodes of a move now free in the donor (no allocation left).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// The move.
    pub move_id: MoveId,
    /// The nodes, with the generation of the move's `Release`.
    pub nodes: Vec<NodeGen>,
}

/// The coordinator's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to [`Request::Register`].
    Registered(Box<Assignment>),
    /// Received (and journaled where it matters).
    Ack,
    /// Answer to [`Request::Agents`], one entry per node asked about, in order.
    Agents(Vec<AgentAddress>),
}

/// What a registered shard is, owns and runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The FLUID generator id for this shard's job ids.
    pub generator_id: u16,
    /// The whole cluster (the shard loads all of it; nodes it does not own stay unavailable).
    pub cluster: ClusterDescription,
    /// The queue's configuration.
    pub queue: QueueConfig,
    /// Nodes the shard owns now, with their generations.
    pub owned: Vec<NodeGen>,
    /// Nodes moving to this shard, reservable from their expected free time.
    pub incoming: Vec<(MoveId, IncomingNode)>,
    /// The admin flags (down, drained) of the nodes above that have any. They are the
    /// intent, both ways: a node above without an entry has no flag, whatever the shard's
    /// own journal remembers (a flag cleared while the shard was offline is cleared).
    pub flags: BTreeMap<String, NodeFlags>,
    /// Every limit (per user and per queue) the shard enforces.
    pub limits: LimitTable,
    /// Every allowance the coordinator's ledger grants this queue under a per-user limit
    /// (docs/POLICIES.md, "Limits"): what the shard holds from now on, whatever its own
    /// journal kept. A queue removed and added again with its old journal comes back
    /// holding nothing the coordinator has since lent to other queues.
    pub allowances: Vec<AllowanceGrant>,
    /// Fair-share's weights (`None`: fair-share is off: no usage is counted, priorities
    /// are urgencies).
    pub fairshare: Option<FairShareAssignment>,
}

/// Fair-share as a registering shard starts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairShareAssignment {
    /// The weights.
    pub weights: FairShareWeights,
    /// The last of this queue's usage batches the coordinator counted: the shard numbers
    /// its next batch above it.
    pub usage_seq: u64,
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Register(_) => "shard_coord.register",
            Request::Status(_) => "shard_coord.status",
            Request::Released(_) => "shard_coord.released",
            Request::Agents { .. } => "shard_coord.agents",
        }
    }

    fn op(&self) -> Op {
        Op::ShardReport
    }

    fn check(&self) -> Result<(), Refusal> {
        match self {
            Request::Agents { nodes } if nodes.len() > JOB_NODES_MAX => Err(Refusal::new(
                RefusalCode::Invalid,
                format!(
                    "{} nodes in one request, more than the limit of {JOB_NODES_MAX}",
                    nodes.len()
                ),
            )),
            Request::Status(status) => {
                super::deps::check_ids(&status.waiting_on)?;
                super::quota::check_users(status.allowances.iter().map(|a| a.user.as_str()))?;
                status.usage.as_ref().map_or(Ok(()), UsageBatch::check)
            }
            _ => Ok(()),
        }
    }
}
