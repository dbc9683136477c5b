//! What the shard tells the coordinator about itself: the status report behind `queue list`
//! and `resource list`, and what a re-registering shard holds.

use shardsched_proto::msg::shard_coord::{HeldNode, ShardStatus};
use shardsched_proto::msg::{NodeGen, NodeState, NodeStatus, QueueStatus};

use super::ShardCore;

impl ShardCore {
    /// The status report as of `now_ms`: the queue's counters and every owned node.
    pub fn status(&self, now_ms: u64) -> ShardStatus {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let nodes = self
            .owned
            .iter()
            .map(|(name, &generation)| {
                let down = self.down.get(name);
                NodeStatus {
                    name: name.clone(),
                    queue: Some(self.queue.to_string()),
                    state: if down.is_some() {
                        NodeState::Down
                    } else {
                        NodeState::Up
                    },
                    generation,
                    jobs_running: self.node_jobs.get(name).copied().unwrap_or(0),
                    reason: down.filter(|r| !r.is_empty()).cloned(),
                }
            })
            .collect();
        let up = self
            .owned
            .keys()
            .filter(|n| !self.down.contains_key(*n))
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
            },
            nodes,
        }
    }

    /// The owned nodes, each marked allocated when a running job holds it: what a
    /// re-registering shard reports in `Register::held`.
    pub fn held(&self) -> Vec<HeldNode> {
        self.owned
            .iter()
            .map(|(name, &generation)| HeldNode {
                node: NodeGen {
                    node: name.clone(),
                    generation,
                },
                allocated: self.node_jobs.contains_key(name),
            })
            .collect()
    }
}
