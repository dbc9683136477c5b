//! Node moves in the core: the [`NodeTable`](crate::nodes::NodeTable) decides, this
//! applies.
//!
//! Every coordinator command about a node goes through the node table, which answers and
//! lists [`Effect`](crate::nodes::Effect)s; [`ShardCore::apply_effects`]
//! (`core/placement.rs`) turns them into journal records, transitions and the node's place
//! in the queue manager. When an outgoing node's last allocation goes (job end, cancel,
//! kill after a node failure, requeue), [`ShardCore::settle_moves`] releases it: the entry
//! is journaled, a `released` [`Transition`] is queued, and the `Released` report waits in
//! [`ShardCore::take_released`] for the driver, which sends it once the batch is durable.
//!
//! Transitions ([`ShardCore::take_transitions`]) say when a node becomes usable by this
//! shard (`up`: owned and confirmed) or stops being usable (`down`), and when a donor let
//! go of it (`released`); the driver appends them to `transitions.log`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_wire::msg::coord_shard::IncomingNode;
use shardsched_wire::msg::coord_shard::{
    Acquire, CancelJobs, Incoming, Reclaim, Release, Response, Withdraw,
};
use shardsched_wire::msg::shard_coord::Released;
use shardsched_wire::msg::{Generation, JobId, MoveId, NodeFlags, NodeGen};

use super::ShardCore;
use crate::nodes::{Flag, Holding};

/// What happened to a node, for the transition log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionKind {
    /// The shard may allocate on it from now on (logged before it is used).
    Up,
    /// The shard no longer allocates on it (logged after it stopped).
    Down,
    /// The donor's last allocation on the outgoing node is gone (logged before `Released`
    /// is sent).
    Released,
}

impl TransitionKind {
    /// The word in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionKind::Up => "up",
            TransitionKind::Down => "down",
            TransitionKind::Released => "released",
        }
    }
}

/// One line of the transition log, without its timestamp (the driver adds it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The node.
    pub node: String,
    /// Up, down or released.
    pub kind: TransitionKind,
    /// The node's generation in this shard.
    pub generation: Generation,
    /// Why: `acquire`, `release`, `reclaim`, `withdraw`, `assignment`, `restart`, `job-end`.
    pub why: &'static str,
}

impl ShardCore {
    /// The donor's side of a move (see [`crate::nodes::NodeTable::handle_release`]).
    pub fn handle_release(&mut self, now_ms: u64, release: &Release) -> Response {
        self.observe(now_ms);
        let jobs = self.jobs_on(release.nodes.iter().map(|n| n.node.as_str()));
        let (response, effects) = self.nodes.handle_release(release, &jobs);
        self.apply_effects(effects, "release", true);
        response
    }

    /// The recipient learns of nodes coming: reservable from their expected free time.
    pub fn handle_incoming(&mut self, now_ms: u64, incoming: &Incoming) -> Response {
        self.observe(now_ms);
        self.warn_outside_graph(incoming.nodes.iter().map(|n| n.node.node.as_str()));
        let (response, effects) = self.nodes.handle_incoming(incoming);
        self.apply_effects(effects, "incoming", false);
        response
    }

    /// The recipient gets the nodes: up, with the flags the coordinator gives them.
    pub fn handle_acquire(&mut self, now_ms: u64, acquire: &Acquire) -> Response {
        self.observe(now_ms);
        self.take_owned(&acquire.nodes, &acquire.flags, "acquire")
    }

    /// `nodes` are this shard's now (an `Acquire`, or a `Reconfigure`'s granted nodes):
    /// up, with the coordinator's `flags`; `why` names the transition.
    pub(super) fn take_owned(
        &mut self,
        nodes: &[NodeGen],
        flags: &BTreeMap<String, NodeFlags>,
        why: &'static str,
    ) -> Response {
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        self.warn_outside_graph(names.iter().copied());
        let (response, effects) = self.nodes.own(nodes);
        self.set_flags(&names, flags);
        self.apply_effects(effects, why, false);
        response
    }

    /// The donor of a cancelled move gets its nodes back.
    pub fn handle_reclaim(&mut self, now_ms: u64, reclaim: &Reclaim) -> Response {
        self.observe(now_ms);
        self.warn_outside_graph(reclaim.nodes.iter().map(|n| n.node.as_str()));
        let (response, effects) = self.nodes.handle_reclaim(reclaim);
        self.apply_effects(effects, "reclaim", false);
        response
    }

    /// The recipient of a cancelled move forgets the nodes.
    pub fn handle_withdraw(&mut self, now_ms: u64, withdraw: &Withdraw) -> Response {
        self.observe(now_ms);
        let (response, effects) = self.nodes.handle_withdraw(withdraw);
        self.apply_effects(effects, "withdraw", false);
        response
    }

    /// Past a move's deadline: cancel the jobs still holding its outgoing nodes (in exec
    /// mode their processes die before their resources are freed, as for any cancel).
    pub fn handle_cancel_jobs(&mut self, now_ms: u64, cancel: &CancelJobs) -> Response {
        self.observe(now_ms);
        let jobs = self.jobs_on(cancel.nodes.iter().map(|n| n.node.as_str()));
        let (response, effects) = self.nodes.handle_cancel_jobs(cancel, &jobs);
        self.apply_effects(effects, "cancel-jobs", false);
        response
    }

    /// What the coordinator's (re)registration answer says this shard owns and receives.
    /// `flags` (when given) are the coordinator's intent for every node listed: a listed
    /// node they do not name has no flag, so a drain or a failure cleared while this shard
    /// was offline is cleared here too (and one set meanwhile is set). `None` (a test's
    /// [`ShardCore::set_owned`]) leaves the shard's flags alone.
    pub fn apply_assignment(
        &mut self,
        owned: &[NodeGen],
        incoming: &[(MoveId, IncomingNode)],
        flags: Option<&BTreeMap<String, NodeFlags>>,
    ) {
        // The graph holds the definition and what the shard was handed when it was built; a
        // node outside it (the coordinator's definition changed, and the reconfiguration's
        // restart has not happened yet) waits for that restart, whose graph holds it.
        let known = |n: &str| self.cluster.vertices.contains_key(n);
        for n in owned
            .iter()
            .map(|n| &n.node)
            .chain(incoming.iter().map(|(_, n)| &n.node.node))
        {
            if !known(n) {
                tracing::warn!(node = %n, "handed a node outside this shard's graph; it is used once the shard restarts");
            }
        }
        let owned: Vec<NodeGen> = owned.iter().filter(|n| known(&n.node)).cloned().collect();
        let incoming: Vec<(MoveId, IncomingNode)> = incoming
            .iter()
            .filter(|(_, n)| known(&n.node.node))
            .cloned()
            .collect();
        let listed: Vec<String> = owned
            .iter()
            .map(|n| n.node.clone())
            .chain(incoming.iter().map(|(_, n)| n.node.node.clone()))
            .collect();
        let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
        if let Some(flags) = flags {
            self.set_flags(&listed, flags);
        }
        let effects = self.nodes.apply_assignment(&owned, &incoming);
        self.apply_effects(effects, "assignment", false);
    }

    /// The transitions since the last call, oldest first.
    pub fn take_transitions(&mut self) -> Vec<Transition> {
        std::mem::take(&mut self.outbox.transitions)
    }

    /// The `Released` reports since the last call, for the coordinator (send once the
    /// batch is durable; repeat until acknowledged: they are idempotent).
    pub fn take_released(&mut self) -> Vec<Released> {
        std::mem::take(&mut self.outbox.released)
    }

    /// Outgoing nodes whose last allocation went since the last call are released.
    pub(super) fn settle_moves(&mut self) {
        if self.jobs.freed.is_empty() {
            return;
        }
        let freed: Vec<String> = std::mem::take(&mut self.jobs.freed).into_iter().collect();
        let per_node = &self.jobs.per_node;
        // Only whether a job holds the node matters here, not which.
        let (released, effects) = self.nodes.allocations_gone(&freed, &|n: &str| {
            if per_node.contains_key(n) {
                vec![(shardsched_wire::Fluid(0), 0)]
            } else {
                Vec::new()
            }
        });
        self.apply_effects(effects, "job-end", true);
        self.outbox.released.extend(released);
    }

    /// After a restart: every outgoing node is looked at once (its jobs may have ended
    /// while the shard was down).
    pub(super) fn settle_all_outgoing(&mut self) {
        let outgoing: Vec<String> = self
            .nodes
            .entries()
            .filter(|(_, e)| matches!(e.holding, Holding::Outgoing { .. }))
            .map(|(n, _)| n.to_owned())
            .collect();
        self.jobs.freed.extend(outgoing);
        self.settle_moves();
    }

    /// The coordinator's flags for `nodes` replace the shard's own: a node `flags` does not
    /// name has none (the coordinator's flags are the intent, both ways).
    fn set_flags(&mut self, nodes: &[&str], flags: &BTreeMap<String, NodeFlags>) {
        for &name in nodes {
            let f = flags.get(name).cloned().unwrap_or_default();
            let went_down = f.down.is_some();
            if self.flag_node(name, Flag::Down, f.down, "assignment") && went_down {
                self.end_jobs_on_down_node(name);
            }
            self.flag_node(name, Flag::Drained, f.drained, "assignment");
        }
    }

    /// Running jobs holding each of `names`, with their planned ends (ms): one pass over
    /// the running jobs, whatever the number of nodes asked about.
    ///
    /// A planned end is the job's start plus its duration: the timeline the queue manager
    /// reserves on, here and in the recipient of a move. (Under `--time-scale` a sim job
    /// ends earlier, as a real job may end before its time limit; the node is released
    /// then.)
    pub(super) fn jobs_on<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> HashMap<String, Vec<(JobId, u64)>> {
        let wanted: BTreeSet<&str> = names.into_iter().collect();
        let mut out: HashMap<String, Vec<(JobId, u64)>> = HashMap::new();
        if wanted.iter().all(|n| self.jobs.on(n) == 0) {
            return out;
        }
        let mut running: Vec<&JobId> = self.jobs.running.keys().collect();
        running.sort_unstable();
        for &id in running {
            let Some(job) = self.jobs.table.get(id) else {
                continue;
            };
            let end = match (job.start_ms, job.duration_ms) {
                (Some(start), d) if d > 0 => start.saturating_add(d),
                // Unlimited, or not started (cannot be: it runs).
                _ => u64::MAX,
            };
            for node in &job.nodes {
                if wanted.contains(node.as_str()) {
                    out.entry(node.clone()).or_default().push((id, end));
                }
            }
        }
        out
    }
}
