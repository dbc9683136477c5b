//! What the shard tells the coordinator about itself: the status report behind `queue list`
//! and `resource list`, and what a re-registering shard holds.

use shardsched_proto::msg::shard_coord::{HeldNode, ShardStatus};
use shardsched_proto::msg::{NodeGen, NodeState, NodeStatus, QueueStatus};

use super::ShardCore;
use crate::moves::Holding;

impl ShardCore {
    /// The status report as of `now_ms`: the queue's counters and every owned node.
    pub fn status(&self, now_ms: u64) -> ShardStatus {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let mut nodes: Vec<NodeStatus> = self
            .owned
            .iter()
            .map(|(name, &generation)| {
                let (state, reason) = match (self.down.get(name), self.drained.get(name)) {
                    (Some(r), _) => (NodeState::Down, r),
                    (None, Some(r)) => (NodeState::Drained, r),
                    (None, None) => (NodeState::Up, &String::new()),
                };
                NodeStatus {
                    name: name.clone(),
                    queue: Some(self.queue.to_string()),
                    state,
                    generation,
                    jobs_running: self.node_jobs.get(name).copied().unwrap_or(0),
                    reason: Some(reason.clone()).filter(|r| !r.is_empty()),
                }
            })
            .collect();
        // Moving nodes: outgoing (still holding jobs) and incoming.
        for (name, entry) in self.moves.entries() {
            let state = match entry.holding {
                Holding::Outgoing { .. } => NodeState::Outgoing,
                Holding::Incoming { .. } => NodeState::Incoming,
                _ => continue,
            };
            nodes.push(NodeStatus {
                name: name.to_owned(),
                queue: Some(self.queue.to_string()),
                state,
                generation: entry.generation,
                jobs_running: self.node_jobs.get(name).copied().unwrap_or(0),
                reason: None,
            });
        }
        let up = self
            .owned
            .keys()
            .filter(|n| !self.down.contains_key(*n) && !self.drained.contains_key(*n))
            .count();
        ShardStatus {
            time_ms: now_ms.max(self.now_ms),
            queue: QueueStatus {
                name: self.queue.to_string(),
                enabled: self.config.enabled,
                started: self.config.started,
                queue_policy: self.config.queue_policy.clone(),
                match_policy: self.config.match_policy.clone(),
                nodes_defined: count(self.definition.len()),
                nodes_owned: count(self.owned.len()),
                nodes_up: count(up),
                jobs_pending: count(self.pending.len()),
                jobs_running: count(self.running.len()),
                online: true,
                definition: String::new(),
                owned: String::new(),
                reason: String::new(),
            },
            nodes,
        }
    }

    /// The owned nodes, each marked allocated when a running job holds it: what a
    /// re-registering shard reports in `Register::held`.
    pub fn held(&self) -> Vec<HeldNode> {
        let outgoing = self.moves.entries().filter_map(|(name, e)| {
            matches!(e.holding, Holding::Outgoing { .. }).then_some((name, e.generation))
        });
        self.owned
            .iter()
            .map(|(name, &generation)| (name.as_str(), generation))
            .chain(outgoing)
            .map(|(name, generation)| HeldNode {
                node: NodeGen {
                    node: name.to_owned(),
                    generation,
                },
                allocated: self.node_jobs.contains_key(name),
            })
            .collect()
    }
}
