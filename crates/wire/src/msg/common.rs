//! Types shared by several peer pairs: job and node state, status rows, routes, refusals.

use std::fmt;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::policy::{MatchPolicy, QueuePolicy};
use crate::array::ArrayElement;
use crate::fluid::Fluid;
use crate::identity::{Op, Peer};
use crate::limits::REFUSAL_MESSAGE_BYTES_MAX;

pub use super::jobs_query::{JobList, JobsQuery, UserFilter};

/// A job id: a FLUID (see [`crate::fluid`]).
pub type JobId = Fluid;

/// A node's ownership generation, bumped and journaled by the coordinator on every ownership
/// change. A shard refuses a command about a node whose generation is older than one it has
/// already seen.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Generation(pub u64);

/// A move's id, assigned and journaled by the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MoveId(pub u64);

/// A node named together with the generation a command or report is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeGen {
    /// Node (host) name, e.g. `node17`.
    pub node: String,
    /// Its generation.
    pub generation: Generation,
}

/// An admin's flags on a node. They belong to the node, not to its owner: the coordinator
/// journals them and hands them to whichever shard owns the node (in the `Assignment` and in
/// a move's `Acquire`), so a drain or down survives restarts and travels with a moved node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeFlags {
    /// Marked down (failed), with the reason (may be empty).
    pub down: Option<String>,
    /// Drained (no new work; running jobs continue), with the reason (may be empty).
    pub drained: Option<String>,
}

/// A job's state. Lowercase words in JSON output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Accepted, waiting for resources (or for its queue to be started).
    Pending,
    /// Holding resources.
    Running,
    /// Ran to its end.
    Completed,
    /// Ended with an error.
    Failed,
    /// Cancelled before or while running.
    Cancelled,
}

/// A node's state as a shard or the coordinator sees it. Lowercase words in JSON output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Owned and allocatable.
    Up,
    /// Owned, failed.
    Down,
    /// Owned, drained by an admin: running jobs finish, no new ones start.
    Drained,
    /// Moving out: no new allocations, waiting for its jobs to end.
    Outgoing,
    /// Moving in: reservable from its expected free time, not allocatable yet.
    Incoming,
    /// Not owned by this shard.
    #[serde(rename = "not-owned")]
    NotOwned,
}

/// One row of a job list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    /// The job id.
    pub id: JobId,
    /// The queue it was submitted to.
    pub queue: String,
    /// The submitting certificate's name.
    pub owner: String,
    /// A short name (the command's first word, or the jobspec's name).
    pub name: String,
    /// Its state.
    pub state: JobState,
    /// Its urgency, 0..=31 (Flux's): pending jobs run by urgency, then submit time; 0 is
    /// held (its reason says so).
    pub urgency: u8,
    /// Nodes it holds or held, in graph order (empty while pending).
    pub nodes: Vec<String>,
    /// The fewest nodes its jobspec asks for, shown while it has none; `None` when it asks
    /// for slots only (`Jobspec::nodes_requested`).
    pub nodes_requested: Option<u64>,
    /// Submission time, milliseconds since the Unix epoch.
    pub submit_ms: u64,
    /// Start time, if it started.
    pub start_ms: Option<u64>,
    /// End time, if it ended.
    pub end_ms: Option<u64>,
    /// Requested duration, in milliseconds.
    pub duration_ms: u64,
    /// Why it is still pending, or why it failed; empty otherwise.
    pub reason: String,
    /// A pending job's reserved start, ms since the Unix epoch (the reason then says it is
    /// reserved; clients show this time as they like, e.g. local time and "in 4m10s").
    pub reserved_ms: Option<u64>,
    /// The array it is an element of, and its index there (`ID[N]`).
    pub array: Option<ArrayElement>,
    /// Not before this time (`submit --begin-time`), ms since the Unix epoch; a pending job
    /// waiting for it says `begin time` (clients show the time as they like).
    pub begin_ms: Option<u64>,
    /// A pending job's priority and its parts, while fair-share is on (docs/POLICIES.md,
    /// "Fair-share"); `None` otherwise (the queue orders by urgency).
    pub priority: Option<super::fairshare::JobPriority>,
}

/// One event in a job's history (Flux's eventlog, simplified).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    /// When, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Event name: `submit`, `alloc`, `start`, `finish`, `free`, `cancel`, `exception`, …
    pub name: String,
    /// Event context as a JSON object text (`{}` when empty).
    pub context_json: String,
}

/// Everything about one job — or, for a peer that is neither its owner nor an admin
/// ([`Peer::may_read_job`]), its summary only: the jobspec (command, environment), R and
/// events (where its output goes) are private.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The summary row.
    pub summary: JobSummary,
    /// The jobspec as submitted (canonical JSON); `None` when it is not the asker's to see.
    pub jobspec_json: Option<String>,
    /// The RFC 20 R document, once allocated (and the asker's to see).
    pub r_json: Option<String>,
    /// Its events, oldest first (empty when not the asker's to see).
    pub events: Vec<JobEvent>,
}

impl JobInfo {
    /// The summary alone, for a peer that may not see the rest.
    pub fn summary_only(self) -> JobInfo {
        JobInfo {
            summary: self.summary,
            jobspec_json: None,
            r_json: None,
            events: Vec::new(),
        }
    }
}

/// One node in a resource list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Node name.
    pub name: String,
    /// Owning queue, if any.
    pub queue: Option<String>,
    /// Its state.
    pub state: NodeState,
    /// Its ownership generation.
    pub generation: Generation,
    /// Jobs currently holding resources on it.
    pub jobs_running: u32,
    /// Why it is down or drained, as the admin said (`None` when up, or when no reason
    /// was given).
    pub reason: Option<String>,
    /// Its cores and GPUs, and how many are free now (the owning shard's word; zeros for
    /// a node no shard reports).
    pub usage: NodeUsage,
}

/// A node's cores and GPUs, and how many no running job holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUsage {
    /// Cores.
    pub cores: u32,
    /// Cores no running job holds.
    pub cores_free: u32,
    /// GPUs.
    pub gpus: u32,
    /// GPUs no running job holds.
    pub gpus_free: u32,
}

impl NodeUsage {
    /// Whether running jobs hold some of it but not all its cores (sinfo's `mix`).
    pub fn is_mixed(&self) -> bool {
        self.is_used() && self.cores_free > 0
    }

    /// Whether running jobs hold any of it.
    pub fn is_used(&self) -> bool {
        self.cores_free < self.cores || self.gpus_free < self.gpus
    }
}

/// One queue in a queue list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStatus {
    /// Queue name.
    pub name: String,
    /// Accepting submissions.
    pub enabled: bool,
    /// Scheduling.
    pub started: bool,
    /// Queue policy.
    pub queue_policy: QueuePolicy,
    /// Match policy.
    pub match_policy: MatchPolicy,
    /// Nodes in its definition.
    pub nodes_defined: u32,
    /// Nodes it owns now.
    pub nodes_owned: u32,
    /// Owned nodes that are up.
    pub nodes_up: u32,
    /// Pending jobs.
    pub jobs_pending: u32,
    /// Running jobs.
    pub jobs_running: u32,
    /// Its shard is registered with the coordinator now (`false`: offline, e.g. restarting).
    pub online: bool,
    /// Its definition, as a hostlist (the nodes it may own). Filled in by the coordinator;
    /// empty in a shard's own report.
    pub definition: String,
    /// The nodes it owns now, as a hostlist (coordinator only, as `definition`).
    pub owned: String,
    /// Why an admin disabled it (empty when enabled or when none was given; coordinator
    /// only).
    pub reason: String,
    /// Why its pending jobs wait, counted by reason (from its shard's report).
    pub pending_reasons: PendingReasons,
}

/// How many of a queue's pending jobs wait for each reason, as its queue manager last said
/// (`job info` gives one job's): a fixed set of counters, so a report's size does not grow
/// with its jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReasons {
    /// Not considered yet: just submitted, beyond the queue depth, or behind a blocked head.
    pub queued: u32,
    /// Not enough free resources now (and no reservation).
    pub resources: u32,
    /// Reserved to start at a known time.
    pub reserved: u32,
    /// Not enough free resources now, and no time at which it fits could be found.
    pub no_reservation: u32,
    /// Fits the queue's definition but not what is up now (nodes down, drained or moved
    /// away).
    pub unavailable: u32,
    /// Held (urgency 0).
    pub held: u32,
    /// Waiting for its begin time.
    pub begin_time: u32,
    /// An array's element waiting for its array's limit (`%N`).
    pub array_limit: u32,
    /// Waiting for a dependency (or held by one never met).
    pub dependency: u32,
}

/// Where to reach one queue's shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Queue name (also the shard's certificate name).
    pub queue: String,
    /// The shard's QUIC address. (An IPv6 address travels without flow info or scope id:
    /// serde does not carry them, so a link-local address is not usable here.)
    pub address: SocketAddr,
    /// The FLUID generator id assigned to the shard: a job id's generator field names the
    /// shard that owns the job.
    pub generator_id: u16,
    /// Accepting submissions.
    pub enabled: bool,
    /// Scheduling.
    pub started: bool,
    /// Why an admin disabled the queue (empty when enabled or none was given): a client
    /// whose submit the shard refuses as disabled says it.
    pub reason: String,
}

/// The coordinator's routing table: queue → shard.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteTable {
    /// Bumped on every change, so a client can tell a fresh table from a stale one.
    pub epoch: u64,
    /// The queue a submit without `-q` goes to.
    pub default_queue: Option<String>,
    /// One entry per queue whose shard is registered.
    pub routes: Vec<Route>,
    /// Configured queues whose shard is not registered now (starting, restarting, or not
    /// running): a submit to one of them waits for its shard rather than failing at once.
    pub offline: Vec<String>,
}

/// A refusal: the server understood the request and will not do it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// What kind of refusal.
    pub code: RefusalCode,
    /// A sentence for a person.
    pub message: String,
}

/// Kinds of refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RefusalCode {
    /// The peer's role does not allow this (see [`Role::may`](crate::identity::Role::may)).
    Forbidden,
    /// No such job, queue or node.
    NotFound,
    /// The request is malformed at the application level (bad jobspec, bound exceeded).
    Invalid,
    /// A job that can never run in its queue.
    Denied,
    /// Not possible now for a reason that passes by itself: shard not registered,
    /// coordinator starting, a journal that cannot be written, too much in flight.
    Unavailable,
    /// A move command carrying an older generation than one already seen.
    Stale,
    /// The server failed.
    Internal,
    /// A rule refuses it in the present state, a decision rather than an outage: the queue
    /// is disabled, has jobs, owns nodes, its nodes are moving. Retrying does not help
    /// until an admin (or the jobs ending) changes that state; the message says what to do.
    Policy,
}

/// The format of a cluster description.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterFormat {
    /// Fluxion's GraphML generating recipe.
    Grug,
    /// JSON Graph Format.
    Jgf,
    /// An RFC 20 R document.
    Rv1exec,
    /// shardsched's TOML cluster spec (docs/CLUSTER_SPEC.md).
    Spec,
}

/// The whole cluster's resource graph, as text the resource crate reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterDescription {
    /// Its format.
    pub format: ClusterFormat,
    /// Its text.
    pub text: String,
    /// The resource types the shard loads from it (Fluxion's `load-allowlist`); empty: the
    /// default, `shardsched_resource::SCHEDULER_TYPES`.
    pub load_allowlist: Vec<String>,
}

/// One queue's configuration, as the coordinator hands it to the queue's shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueConfig {
    /// Queue name.
    pub name: String,
    /// Queue policy.
    pub queue_policy: QueuePolicy,
    /// Match policy.
    pub match_policy: MatchPolicy,
    /// How many pending jobs the policy looks at per cycle.
    pub queue_depth: u32,
    /// How many reservations the policy makes (easy: 1; conservative: queue depth).
    pub reservation_depth: u32,
    /// Duration given to a job that names none, in milliseconds.
    pub default_duration_ms: u64,
    /// Longest duration accepted, in milliseconds.
    pub max_duration_ms: u64,
    /// The nodes the queue may own (its definition, resolved to names).
    pub definition: Vec<String>,
    /// Accepting submissions.
    pub enabled: bool,
    /// Scheduling.
    pub started: bool,
    /// Most elements a job array may have, and the bound on its indices (the
    /// configuration's `array_elements_max`, at most
    /// [`ARRAY_ELEMENTS_MAX`](crate::limits::ARRAY_ELEMENTS_MAX)).
    pub array_elements_max: u32,
}

impl QueueConfig {
    /// Whether a shard running `self` can take `new` without a restart: the match policy
    /// and the durations are the same. (A match policy is its matcher's from the first
    /// match, and a pending job's duration was set from the queue's default at submit; a
    /// change of either restarts the shard, which restores every job from its journal and
    /// submits the pending ones again. The definition, the queue policy, the depths, the
    /// array bound and the enabled/started flags are taken by the running shard.)
    pub fn applies_in_place(&self, new: &QueueConfig) -> bool {
        (
            &self.name,
            self.match_policy,
            self.default_duration_ms,
            self.max_duration_ms,
        ) == (
            &new.name,
            new.match_policy,
            new.default_duration_ms,
            new.max_duration_ms,
        )
    }
}

impl JobState {
    /// The lowercase word (`pending`, `running`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Pending or running.
    pub fn is_active(self) -> bool {
        matches!(self, JobState::Pending | JobState::Running)
    }
}

impl NodeState {
    /// The lowercase word (`up`, `down`, …; `not-owned`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Up => "up",
            NodeState::Down => "down",
            NodeState::Drained => "drained",
            NodeState::Outgoing => "outgoing",
            NodeState::Incoming => "incoming",
            NodeState::NotOwned => "not-owned",
        }
    }
}

impl RouteTable {
    /// The route of a queue.
    pub fn queue(&self, queue: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.queue == queue)
    }

    /// The route of the shard that issued `id` (by its FLUID generator id).
    pub fn job(&self, id: JobId) -> Option<&Route> {
        let generator = id.generator_id();
        self.routes.iter().find(|r| r.generator_id == generator)
    }
}

impl Refusal {
    /// A refusal, cutting the message at [`REFUSAL_MESSAGE_BYTES_MAX`] bytes.
    pub fn new(code: RefusalCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > REFUSAL_MESSAGE_BYTES_MAX {
            let mut end = REFUSAL_MESSAGE_BYTES_MAX;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        Refusal { code, message }
    }

    /// The refusal for a peer whose role does not allow `op`.
    pub fn forbidden(peer: &Peer, op: Op) -> Self {
        Refusal::new(
            RefusalCode::Forbidden,
            format!(
                "{peer} may not {} (role {} lacks the authority)",
                op.describe(),
                peer.role
            ),
        )
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
