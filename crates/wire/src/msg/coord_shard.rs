//! Coordinator → shard: move commands and status fan-out.
//!
//! These travel on the connection the shard opened to register (the coordinator opens the
//! streams), so the coordinator never dials shards. Every move message carries
//! (move id, node, generation) and is idempotent: the coordinator re-sends after any crash,
//! and a shard answers a repeat the way it answered the first. A shard ignores a node whose
//! generation is older than one it has seen, and says so in `stale`.
//!
//! The move, step by step (docs/ARCHITECTURE.md, "The move protocol"):
//! 1. donor ← [`Release`]: node outgoing at once; reply says which nodes are free now and
//!    when the others are expected free; later frees come as
//!    [`shard_coord::Request::Released`](super::shard_coord::Request::Released);
//! 2. recipient ← [`Incoming`]: reservable from the expected free time, not allocatable;
//! 3. recipient ← [`Acquire`] (after the coordinator journaled the release): node up.
//!
//! A cancelled move returns the nodes not yet released: donor ← [`Reclaim`] (node up again,
//! new generation), recipient ← [`Withdraw`] (forget the incoming node). Past a move's
//! deadline, donor ← [`CancelJobs`]: cancel the jobs still holding the nodes, so that they
//! are released.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bounds;
use super::common::{JobId, JobList, JobsQuery, MoveId, NodeFlags, NodeGen, QueueConfig, Refusal};
use super::deps::JobFact;
use super::fairshare::FairShareUpdate;
use super::history::{HistoryPull, HistoryRecord};
use super::quota::{AllowanceGrant, LimitTable};
use crate::identity::Op;
use crate::rpc::Rpc;

/// A command from the coordinator to a shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Donor: stop allocating on these nodes and give them up as their jobs end.
    Release(Release),
    /// Recipient: these nodes are coming, expect them free at the given times.
    Incoming(Incoming),
    /// Recipient: these nodes are yours now; bring them up.
    Acquire(Acquire),
    /// Donor of a cancelled move: these nodes are yours again (new generation); bring them
    /// back up.
    Reclaim(Reclaim),
    /// Recipient of a cancelled move: these nodes are not coming; forget them.
    Withdraw(Withdraw),
    /// Donor, past the move's deadline: cancel the jobs still holding these nodes.
    CancelJobs(CancelJobs),
    /// Enable/disable submissions, start/stop scheduling.
    SetQueueState {
        /// Accept submissions.
        enabled: bool,
        /// Schedule.
        started: bool,
    },
    /// The shard's jobs, for a cluster-wide `jobs` list.
    Jobs(JobsQuery),
    /// What the shard knows of these jobs of its own, which jobs of other queues wait on
    /// (docs/POLICIES.md). Answered with [`Response::JobFacts`].
    JobFacts {
        /// The jobs (at most
        /// [`DEPENDENCY_TARGETS_PER_ASK_MAX`](crate::limits::DEPENDENCY_TARGETS_PER_ASK_MAX)).
        ids: Vec<JobId>,
    },
    /// What is known of jobs of other queues this shard's pending jobs wait on (its status
    /// report's `waiting_on`). Answered with `Ack`; safe to repeat or lose (the next report
    /// asks again).
    Facts(Vec<JobFact>),
    /// The shard's ended jobs after a cursor, oldest end first, for the coordinator's
    /// history store. Answered with [`Response::History`].
    History(HistoryPull),
    /// Mark nodes down (their running jobs fail, or are requeued when they allow it; the
    /// nodes leave scheduling) or up again. Answered with `Ack` once applied.
    SetNodeState {
        /// Node names.
        nodes: Vec<String>,
        /// Down (`true`) or up.
        down: bool,
        /// Why (down only; may be empty).
        reason: String,
    },
    /// Donor of a planned move: what releasing these nodes would do, changing nothing
    /// (`queue move --dry-run`). Answered with [`Response::DryRun`].
    DryRunRelease {
        /// Node names.
        nodes: Vec<String>,
    },
    /// Drain nodes (no new work on them; running jobs continue) or undrain them. Answered
    /// with `Ack` once applied.
    SetNodeDrain {
        /// Node names.
        nodes: Vec<String>,
        /// Drained (`true`) or not.
        drained: bool,
        /// Why (drain only; may be empty).
        reason: String,
    },
    /// The queue's configuration changed (policies, depths, durations or definition: `queue
    /// update`, `reload`). When the match policy and durations are the same, the shard
    /// applies it in place ([`QueueConfig::applies_in_place`]): its graph gains the
    /// subtrees of the added nodes and loses those of removed nodes it does not hold, it
    /// takes the nodes granted, and its next pass plans under the new queue policy and
    /// depths; then `Ack`. Otherwise (or when it cannot: see
    /// docs/CONFIG.md) it acknowledges, stops cleanly and exits with its restart status, so
    /// that its supervisor starts it again at once; it then registers, gets this
    /// configuration in its assignment and restores its jobs from its journal.
    Reconfigure(Box<Reconfigure>),
    /// The queue is being removed: disable submissions if, and only if, no job is pending
    /// or running, in one step (`Ack`), else refuse (`Policy`) and change nothing. A
    /// removal refused for jobs never leaves the queue disabled, and no submit can slip in
    /// between the check and the disable.
    DisableIfIdle,
    /// The limits changed (`limits set`): enforce these from now on. Answered with `Ack`.
    SetLimits(LimitTable),
    /// Allowances under per-user limits (docs/POLICIES.md, "Limits"), each durable at the
    /// coordinator before it is sent. Answered with `Ack`; safe to repeat, reorder or lose.
    Allowances(Vec<AllowanceGrant>),
    /// Fair-share (docs/POLICIES.md, "Fair-share"): the last usage batch counted, and the
    /// factors when the shard's are older. Answered with `Ack`; safe to repeat, reorder
    /// or lose.
    FairShare(FairShareUpdate),
}

/// A queue's new configuration, with what the change gave the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconfigure {
    /// The configuration.
    pub config: QueueConfig,
    /// Nodes no queue owned that the change made this queue's (a grown definition), each
    /// with its new generation: a shard that applies the change in place brings them up,
    /// one that restarts gets them in its assignment.
    pub granted: Vec<NodeGen>,
    /// The admin flags (down, drained) of the granted nodes that have any.
    pub flags: BTreeMap<String, NodeFlags>,
}

/// Release nodes for a move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The move.
    pub move_id: MoveId,
    /// The nodes, each with its new generation.
    pub nodes: Vec<NodeGen>,
}

/// Announce incoming nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Incoming {
    /// The move.
    pub move_id: MoveId,
    /// The nodes.
    pub nodes: Vec<IncomingNode>,
}

/// One incoming node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncomingNode {
    /// Node and new generation.
    pub node: NodeGen,
    /// When the donor expects it free, milliseconds since the Unix epoch (`None`: unknown,
    /// do not reserve it).
    pub expected_free_ms: Option<u64>,
}

/// Hand nodes over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acquire {
    /// The move.
    pub move_id: MoveId,
    /// The nodes, with the move's generation.
    pub nodes: Vec<NodeGen>,
    /// The admin flags of those nodes that have any (down, drained): the recipient brings
    /// such a node up with them.
    pub flags: BTreeMap<String, NodeFlags>,
}

/// Give back the not-yet-released nodes of a cancelled move to the donor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reclaim {
    /// The cancelled move.
    pub move_id: MoveId,
    /// The nodes, each with the generation the cancellation gave it.
    pub nodes: Vec<NodeGen>,
}

/// Tell the recipient of a cancelled move that these nodes are not coming.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withdraw {
    /// The cancelled move.
    pub move_id: MoveId,
    /// The nodes, each with the generation the cancellation gave it.
    pub nodes: Vec<NodeGen>,
}

/// Past a move's deadline: cancel the jobs still holding the nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelJobs {
    /// The move.
    pub move_id: MoveId,
    /// The nodes, with the move's generation (a node whose generation moved on is stale).
    pub nodes: Vec<NodeGen>,
}

/// The shard's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to [`Request::Release`]: each node's state, plus nodes ignored as stale.
    Releasing {
        /// One entry per non-stale node.
        nodes: Vec<ReleaseState>,
        /// Nodes whose generation was older than one the shard has seen.
        stale: Vec<StaleNode>,
    },
    /// Done (journaled); nodes ignored as stale are listed.
    Ack {
        /// Nodes whose generation was older than one the shard has seen.
        stale: Vec<StaleNode>,
    },
    /// Answer to [`Request::Jobs`].
    Jobs(JobList),
    /// Answer to [`Request::History`]: fewer records than asked means there are no more.
    History(Vec<HistoryRecord>),
    /// Answer to [`Request::DryRunRelease`].
    DryRun(DryRunReport),
    /// Answer to [`Request::JobFacts`], one per job asked about.
    JobFacts(Vec<JobFact>),
}

/// What releasing some nodes would do in their donor, as of now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DryRunReport {
    /// Per node: when it would be free, and the running jobs holding it.
    pub nodes: Vec<NodeRelease>,
    /// When all of them would be free (the latest of the above).
    pub all_free: FreeAt,
    /// Pending jobs of the donor that could never run without these nodes.
    pub stranded: Vec<JobId>,
}

/// One node of a [`DryRunReport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRelease {
    /// Node name.
    pub node: String,
    /// When it would be free.
    pub free: FreeAt,
    /// Running jobs holding it.
    pub jobs: Vec<JobId>,
}

/// A node's release state in the donor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseState {
    /// Node and generation.
    pub node: NodeGen,
    /// When it is free.
    pub free: FreeAt,
    /// The jobs still holding it (empty when [`FreeAt::Now`]), for `queue moves`.
    pub jobs: Vec<super::common::JobId>,
}

/// When a released node is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FreeAt {
    /// No allocation on it: released now.
    Now,
    /// Its last running job is expected to end then (milliseconds since the Unix epoch).
    Expected(u64),
}

/// A node a shard ignored because its generation was old.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleNode {
    /// Node and the generation the command carried.
    pub node: NodeGen,
    /// The newer generation the shard has seen.
    pub seen: super::common::Generation,
}

impl Request {
    /// The step of a move this command is (`release`, `incoming`, `acquire`, `reclaim`,
    /// `withdraw`, `cancel_jobs`): the name in the failpoints of both ends
    /// (`coord.move.before_send_<step>`, `shard.<step>.before_apply`, …). `None` for a
    /// command that is no move step.
    pub fn move_step(&self) -> Option<&'static str> {
        Some(match self {
            Request::Release(_) => "release",
            Request::Incoming(_) => "incoming",
            Request::Acquire(_) => "acquire",
            Request::Reclaim(_) => "reclaim",
            Request::Withdraw(_) => "withdraw",
            Request::CancelJobs(_) => "cancel_jobs",
            _ => return None,
        })
    }

    /// A move command's move and node names (`None` for the other requests): what its log
    /// lines are tagged with, on both ends.
    pub fn move_nodes(&self) -> Option<(MoveId, Vec<&str>)> {
        fn names(nodes: &[NodeGen]) -> Vec<&str> {
            nodes.iter().map(|n| n.node.as_str()).collect()
        }
        match self {
            Request::Release(r) => Some((r.move_id, names(&r.nodes))),
            Request::Incoming(r) => Some((
                r.move_id,
                r.nodes.iter().map(|n| n.node.node.as_str()).collect(),
            )),
            Request::Acquire(r) => Some((r.move_id, names(&r.nodes))),
            Request::Reclaim(r) => Some((r.move_id, names(&r.nodes))),
            Request::Withdraw(r) => Some((r.move_id, names(&r.nodes))),
            Request::CancelJobs(r) => Some((r.move_id, names(&r.nodes))),
            Request::SetQueueState { .. }
            | Request::Jobs(_)
            | Request::JobFacts { .. }
            | Request::Facts(_)
            | Request::History(_)
            | Request::SetNodeState { .. }
            | Request::SetNodeDrain { .. }
            | Request::DryRunRelease { .. }
            | Request::Reconfigure(_)
            | Request::DisableIfIdle
            | Request::SetLimits(_)
            | Request::Allowances(_)
            | Request::FairShare(_) => None,
        }
    }
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Release(_) => "coord_shard.release",
            Request::Incoming(_) => "coord_shard.incoming",
            Request::Acquire(_) => "coord_shard.acquire",
            Request::Reclaim(_) => "coord_shard.reclaim",
            Request::Withdraw(_) => "coord_shard.withdraw",
            Request::CancelJobs(_) => "coord_shard.cancel_jobs",
            Request::SetQueueState { .. } => "coord_shard.set_queue_state",
            Request::Jobs(_) => "coord_shard.jobs",
            Request::JobFacts { .. } => "coord_shard.job_facts",
            Request::Facts(_) => "coord_shard.facts",
            Request::History(_) => "coord_shard.history",
            Request::SetNodeState { .. } => "coord_shard.set_node_state",
            Request::SetNodeDrain { .. } => "coord_shard.set_node_drain",
            Request::DryRunRelease { .. } => "coord_shard.dry_run_release",
            Request::Reconfigure(_) => "coord_shard.reconfigure",
            Request::DisableIfIdle => "coord_shard.disable_if_idle",
            Request::SetLimits(_) => "coord_shard.set_limits",
            Request::Allowances(_) => "coord_shard.allowances",
            Request::FairShare(_) => "coord_shard.fairshare",
        }
    }

    fn op(&self) -> Op {
        Op::ShardCommand
    }

    /// The flags' reasons and node lists within their bounds ([`bounds`]), as from a client:
    /// a shard journals what it is told, so it checks too.
    fn check(&self) -> Result<(), Refusal> {
        match self {
            Request::SetNodeState { nodes, reason, .. }
            | Request::SetNodeDrain { nodes, reason, .. } => {
                bounds::reason(reason)?;
                bounds::nodes(nodes)
            }
            Request::DryRunRelease { nodes } => bounds::nodes(nodes),
            Request::Acquire(acquire) => check_flags(&acquire.flags),
            Request::Reconfigure(change) => {
                bounds::nodes(&change.config.definition)?;
                check_flags(&change.flags)
            }
            Request::Jobs(query) => bounds::jobs_query(query),
            Request::JobFacts { ids } => super::deps::check_ids(ids),
            Request::Facts(facts) => super::deps::check_len(facts.len()),
            Request::SetLimits(limits) => limits.check(),
            Request::Allowances(grants) => {
                super::quota::check_users(grants.iter().map(|g| g.user.as_str()))
            }
            Request::FairShare(update) => update.check(),
            _ => Ok(()),
        }
    }
}

/// The reasons of admin flags within their bound.
fn check_flags(flags: &BTreeMap<String, NodeFlags>) -> Result<(), Refusal> {
    flags.values().try_for_each(|f| {
        [&f.down, &f.drained]
            .into_iter()
            .flatten()
            .try_for_each(|r| bounds::reason(r))
    })
}
