//! How much of each node the running jobs hold: the cores and GPUs `resource list` shows
//! free per node (and sinfo's `mix` for a node partly used), reported with the status.
//!
//! Totals come from the graph, counted once when the core is built; what is held is read
//! from the running jobs' allocations in the matcher (their only record) when a report is
//! made, so nothing here must be kept in step with the jobs.

use std::collections::HashMap;

use shardsched_resource::{ResourceGraph, VertexId};
use shardsched_wire::msg::NodeUsage;

use super::ShardCore;

/// Each node's cores and GPUs (size summed over its subtree), by name.
pub(super) fn capacity(
    graph: &ResourceGraph,
    nodes: impl IntoIterator<Item = (String, VertexId)>,
) -> HashMap<String, NodeUsage> {
    let (core, gpu) = (graph.sym("core"), graph.sym("gpu"));
    nodes
        .into_iter()
        .map(|(name, v)| {
            let mut usage = NodeUsage::default();
            for u in graph.preorder(v) {
                let size = u32::try_from(graph.size(u)).unwrap_or(0);
                if Some(graph.kind(u)) == core {
                    usage.cores += size;
                } else if Some(graph.kind(u)) == gpu {
                    usage.gpus += size;
                }
            }
            usage.cores_free = usage.cores;
            usage.gpus_free = usage.gpus;
            (name, usage)
        })
        .collect()
}

impl ShardCore {
    /// The cores an allocation holds (what fair-share counts a running job by).
    pub(super) fn cores_of(&self, alloc: &shardsched_matcher::Allocation) -> u64 {
        let graph = &self.qm.matcher().graph;
        let Some(core) = graph.sym("core") else {
            return 0;
        };
        alloc
            .iter()
            .filter(|a| graph.kind(a.v) == core)
            .map(|a| u64::try_from(a.needs).unwrap_or(0))
            .fold(0, u64::saturating_add)
    }

    /// A node's cores and GPUs with what the running jobs hold of them taken away, given
    /// `held` ([`ShardCore::nodes_held`]).
    pub(super) fn node_usage(&self, held: &HashMap<&str, NodeUsage>, node: &str) -> NodeUsage {
        held.get(node)
            .or_else(|| self.cluster.capacity.get(node))
            .copied()
            .unwrap_or_default()
    }

    /// The usage of every node a running job holds cores or GPUs of; the others are at
    /// their capacity. Only those: the status report asks for every node every 250 ms
    /// while anything changes, and a queue may have thousands idle.
    pub(super) fn nodes_held(&self) -> HashMap<&str, NodeUsage> {
        let mut usage: HashMap<&str, NodeUsage> = HashMap::new();
        let matcher = self.qm.matcher();
        let graph = &matcher.graph;
        let (core, gpu, node) = (graph.sym("core"), graph.sym("gpu"), graph.sym("node"));
        let Some(node) = node else {
            return usage;
        };
        for id in self.jobs.running.keys() {
            let Some(job) = matcher.job(id.0) else {
                continue;
            };
            for a in &job.alloc {
                let kind = Some(graph.kind(a.v));
                if kind != core && kind != gpu {
                    continue;
                }
                let Some(n) = graph.ancestor_of_kind(a.v, node) else {
                    continue;
                };
                let name = graph.name(n);
                let Some(capacity) = self.cluster.capacity.get(name) else {
                    continue;
                };
                let u = usage.entry(name).or_insert(*capacity);
                let held = u32::try_from(a.needs).unwrap_or(0);
                if kind == core {
                    u.cores_free = u.cores_free.saturating_sub(held);
                } else {
                    u.gpus_free = u.gpus_free.saturating_sub(held);
                }
            }
        }
        usage
    }
}
