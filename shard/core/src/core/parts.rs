//! The parts a [`ShardCore`](super::ShardCore) is made of, each the one owner of its
//! state: the cluster's node index, the job side, the ids it hands out, and the outbox the
//! driver empties after every batch. (The node table is [`crate::nodes::NodeTable`]; the
//! queue manager is the qmanager crate's.)

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use shardsched_resource::VertexId;
use shardsched_wire::FluidGenerator;
use shardsched_wire::msg::shard_coord::Released;
use shardsched_wire::msg::{ClusterDescription, JobId, NodeUsage};

use super::deps::Waiting;
use super::exec::{EndAs, ExecAction};
use super::moving::Transition;
use crate::journal::JournalRecord;
use crate::table::JobTable;

/// The queue's nodes as its graph has them (the cluster cut to its definition), and which
/// of them the queue may own.
#[derive(Debug)]
pub(super) struct Cluster {
    /// Every node of the queue's graph, by name: its definition's, and those the
    /// coordinator had handed it when the graph was built.
    pub(super) vertices: BTreeMap<String, VertexId>,
    /// Nodes the queue may own: its configured definition, plus any node an assignment or
    /// a move handed it (the coordinator's word; logged when it is news).
    pub(super) definition: BTreeSet<String>,
    /// Every node's cores and GPUs (`core/usage.rs`).
    pub(super) capacity: HashMap<String, NodeUsage>,
    /// The resource types of the whole cluster as loaded (a denial names the types a
    /// jobspec asks for that are not among them).
    pub(super) loaded: BTreeSet<String>,
    /// The cluster as the coordinator described it at registration (a cluster spec, a few
    /// kilobytes), to cut the nodes a new definition adds from (`core/redefine.rs`);
    /// `None` for a core built on a graph, which restarts for a new definition.
    pub(super) description: Option<Arc<ClusterDescription>>,
}

/// The job side: every job's record, and the live sets that mirror the queue manager's
/// view of its jobs (checked by `ShardCore::invariants`).
#[derive(Debug)]
pub(super) struct Jobs {
    /// Every job the shard knows, live and retained finished.
    pub(super) table: JobTable,
    /// Live pending jobs (in the pending order or waiting for nodes).
    pub(super) pending: BTreeSet<JobId>,
    /// Running jobs → the time their sim run ends, ms.
    pub(super) running: HashMap<JobId, u64>,
    /// The same, ordered by end (sim executor only).
    pub(super) sim_ends: BTreeSet<(u64, JobId)>,
    /// Running jobs per node name.
    pub(super) per_node: HashMap<String, u32>,
    /// Nodes whose last running job ended since the node table was last told.
    pub(super) freed: BTreeSet<String>,
    /// Exec and agents executors: nodes of running jobs that outlived their allocation's
    /// span (Slurm's *completing*): kept out of the queue manager's reach until the jobs'
    /// ends are reported (`core/placement.rs`).
    pub(super) completing: BTreeSet<String>,
    /// Exec executor: running jobs whose processes the core asked to kill, and how each is
    /// recorded once they are gone.
    pub(super) kill_requested: HashMap<JobId, EndAs>,
    /// Jobs the queue manager is about to report ended that must be recorded otherwise than
    /// completed or cancelled (see `core/exec.rs`).
    pub(super) end_as: HashMap<JobId, EndAs>,
    /// Arrays with elements in the table (`core/arrays.rs`).
    pub(super) arrays: BTreeMap<JobId, ArrayState>,
    /// Pending jobs whose begin time has not come, by that time (`core/holds.rs`).
    pub(super) deferred: BTreeSet<(u64, JobId)>,
    /// Pending jobs with a dependency not met yet (`core/deps.rs`).
    pub(super) deps: BTreeMap<JobId, Waiting>,
}

/// An array, while any of its elements is in the table (`core/arrays.rs`).
#[derive(Debug)]
pub(super) struct ArrayState {
    /// Its elements, in index order.
    pub(super) elements: Vec<JobId>,
    /// At most this many elements admitted at once; 0: no limit (the sets stay empty).
    pub(super) max_running: u32,
    /// Elements the limit lets the queue manager consider: running, or pending and not
    /// held by their owner.
    pub(super) admitted: BTreeSet<JobId>,
    /// Pending elements not admitted (held by their owner, or waiting for a slot).
    pub(super) waiting: BTreeSet<JobId>,
}

/// The ids the core hands out, and the users it numbers for the queue manager.
#[derive(Debug)]
pub(super) struct Ids {
    /// The FLUID generator.
    pub(super) generator: FluidGenerator,
    /// The highest job id issued.
    pub(super) last: Option<JobId>,
    /// Owner name → the queue manager's numeric user.
    pub(super) users: HashMap<String, u32>,
}

/// What the core produced for the driver since it last looked, oldest first.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Changes to make durable.
    pub(super) journal: Vec<JournalRecord>,
    /// The last id the journal was told of.
    pub(super) journaled_last_id: Option<JobId>,
    /// Up/down/released transitions for the driver's log.
    pub(super) transitions: Vec<Transition>,
    /// `Released` reports for the coordinator.
    pub(super) released: Vec<Released>,
    /// Exec executor: launches, kills and forgotten jobs.
    pub(super) exec_actions: Vec<ExecAction>,
    /// Records held back one batch by the mutant `ack-before-journal` (empty otherwise).
    pub(super) deferred: Vec<JournalRecord>,
    /// Why the process must restart to take a new configuration, once this batch is out
    /// (`core/redefine.rs`).
    pub(super) restart: Option<String>,
}

impl Jobs {
    /// An empty job side keeping at most `retained` finished jobs.
    pub(super) fn new(retained: usize) -> Jobs {
        Jobs {
            table: JobTable::new(retained),
            pending: BTreeSet::new(),
            running: HashMap::new(),
            sim_ends: BTreeSet::new(),
            per_node: HashMap::new(),
            freed: BTreeSet::new(),
            completing: BTreeSet::new(),
            kill_requested: HashMap::new(),
            end_as: HashMap::new(),
            arrays: BTreeMap::new(),
            deferred: BTreeSet::new(),
            deps: BTreeMap::new(),
        }
    }

    /// Live jobs: pending and running.
    pub(super) fn live(&self) -> usize {
        self.pending.len() + self.running.len()
    }

    /// A job started on (or came back running on) `nodes`.
    pub(super) fn count_on(&mut self, nodes: &[String]) {
        for node in nodes {
            *self.per_node.entry(node.clone()).or_default() += 1;
        }
    }

    /// A running job left `nodes`: a node with no running job left is freed.
    pub(super) fn uncount_on(&mut self, nodes: &[String]) {
        for node in nodes {
            if let Some(count) = self.per_node.get_mut(node) {
                *count -= 1;
                if *count == 0 {
                    self.per_node.remove(node);
                    self.freed.insert(node.clone());
                }
            }
        }
    }

    /// Running jobs on `node`.
    pub(super) fn on(&self, node: &str) -> u32 {
        self.per_node.get(node).copied().unwrap_or(0)
    }
}

impl Ids {
    /// The queue manager's number for `owner`, numbered in order of first appearance.
    pub(super) fn user(&mut self, owner: &str) -> u32 {
        let next = u32::try_from(self.users.len()).unwrap_or(u32::MAX);
        *self.users.entry(owner.to_owned()).or_insert(next)
    }
}
