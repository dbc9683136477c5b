//! What the shard tells the coordinator about itself, computed from the node table and the
//! job side: the status report behind `queue list` and `resource list`, and what a
//! re-registering shard holds.

use shardsched_qmanager::WaitReason;
use shardsched_wire::msg::shard_coord::{HeldNode, ShardStatus};
use shardsched_wire::msg::{NodeGen, NodeState, NodeStatus, PendingReasons, QueueStatus};

use super::ShardCore;
use crate::job::{Hold, Reason};
use crate::nodes::Holding;

impl ShardCore {
    /// The status report as of `now_ms`: the queue's counters, every node up here (with
    /// its flag), then every node moving out or in. Whole: the task that sends it makes it
    /// a change to the last one sent ([`crate::status_rows`]).
    pub fn status(&self, now_ms: u64) -> ShardStatus {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let held = self.nodes_held();
        let (batch, factors_version) = self.usage_report();
        let row = |name: &str, state, generation, reason: Option<&str>| NodeStatus {
            name: name.to_owned(),
            queue: Some(self.queue.to_string()),
            state,
            generation,
            jobs_running: self.jobs.on(name),
            reason: reason.filter(|r| !r.is_empty()).map(str::to_owned),
            usage: self.node_usage(&held, name),
        };
        let mut nodes: Vec<NodeStatus> = Vec::new();
        let (mut owned, mut up) = (0, 0);
        for (name, generation) in self.up_nodes() {
            let entry = self.nodes.get(name);
            let down = entry.and_then(|e| e.down.as_deref());
            let drained = entry.and_then(|e| e.drained.as_deref());
            let (state, reason) = match (down, drained) {
                (Some(r), _) => (NodeState::Down, Some(r)),
                (None, Some(r)) => (NodeState::Drained, Some(r)),
                (None, None) => (NodeState::Up, None),
            };
            owned += 1;
            up += usize::from(state == NodeState::Up);
            nodes.push(row(name, state, generation, reason));
        }
        for (name, entry) in self.nodes.entries() {
            let state = match entry.holding {
                Holding::Outgoing { .. } => NodeState::Outgoing,
                Holding::Incoming { .. } => NodeState::Incoming,
                Holding::Owned | Holding::NotOwned => continue,
            };
            nodes.push(row(name, state, entry.generation, None));
        }
        ShardStatus {
            // Numbered by the task that sends it on a connection.
            seq: 0,
            time_ms: now_ms.max(self.now_ms),
            queue: QueueStatus {
                name: self.queue.to_string(),
                enabled: self.config.enabled,
                started: self.config.started,
                queue_policy: self.config.queue_policy,
                match_policy: self.config.match_policy,
                nodes_defined: count(self.cluster.definition.len()),
                nodes_owned: count(owned),
                nodes_up: count(up),
                jobs_pending: count(self.jobs.pending.len()),
                jobs_running: count(self.jobs.running.len()),
                online: true,
                definition: String::new(),
                owned: String::new(),
                reason: String::new(),
                pending_reasons: self.pending_reasons(),
            },
            nodes,
            nodes_complete: true,
            nodes_gone: Vec::new(),
            waiting_on: self.dependency_questions(),
            allowances: self.allowance_reports(),
            usage: batch,
            factors_version,
        }
    }

    /// The pending jobs counted by the reason the queue manager last gave each (a job not
    /// looked at yet counts as queued).
    fn pending_reasons(&self) -> PendingReasons {
        let mut counts = PendingReasons::default();
        for &id in &self.jobs.pending {
            let reason = self.jobs.table.get(id).map(|job| &job.reason);
            let counter = match reason {
                Some(Reason::Waiting(WaitReason::Resources)) => &mut counts.resources,
                Some(Reason::Waiting(WaitReason::Reserved { .. })) => &mut counts.reserved,
                Some(Reason::Waiting(WaitReason::NoReservation)) => &mut counts.no_reservation,
                Some(Reason::Waiting(WaitReason::Unavailable)) => &mut counts.unavailable,
                Some(Reason::Held(Hold::User | Hold::Limit(_))) => &mut counts.held,
                Some(Reason::Held(Hold::BeginTime)) => &mut counts.begin_time,
                Some(Reason::Held(Hold::ArrayLimit)) => &mut counts.array_limit,
                Some(Reason::Held(Hold::Dependency(_) | Hold::DependencyNever(..))) => {
                    &mut counts.dependency
                }
                Some(
                    Reason::Waiting(WaitReason::Queued | WaitReason::Held)
                    | Reason::None
                    | Reason::Text(_),
                )
                | None => &mut counts.queued,
            };
            *counter = counter.saturating_add(1);
        }
        counts
    }

    /// The nodes up here and those moving out, each marked allocated when a running job
    /// holds it: what a re-registering shard reports in `Register::held`.
    pub fn held(&self) -> Vec<HeldNode> {
        let outgoing = self.nodes.entries().filter_map(|(name, e)| {
            matches!(e.holding, Holding::Outgoing { .. }).then_some((name, e.generation))
        });
        self.up_nodes()
            .chain(outgoing)
            .map(|(name, generation)| HeldNode {
                node: NodeGen {
                    node: name.to_owned(),
                    generation,
                },
                allocated: self.jobs.on(name) > 0,
            })
            .collect()
    }
}
