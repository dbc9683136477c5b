//! What must hold across the core after every input: [`Core::invariants`], for property
//! tests and the simulator (release builds too), and checked after every transition in
//! debug builds ([`Core::debug_check`]). The move machine checks its own part
//! ([`MoveMachine::invariants`](crate::moves::MoveMachine::invariants)), and
//! `debug_assert!`s guard its node table's transitions (a generation never goes back, a
//! node is in one move at most, a node given to a queue is in its definition).

use std::collections::BTreeMap;

use super::Core;
use crate::config;

impl Core {
    /// Checks the core's invariants; the error names the first one broken:
    ///
    /// - the configuration keeps its rules, and every queue has a run-time state, a shard
    ///   slot and a generator id, no id naming two queues;
    /// - the node table holds exactly the cluster's nodes, in cluster order;
    /// - the move machine checks moves against the configuration's definitions;
    /// - no connection is registered for two queues;
    /// - every registered agent is a node's of the cluster;
    /// - the move machine's own invariants (owners inside definitions, one move per node).
    pub fn invariants(&self) -> Result<(), String> {
        config::check(&self.config)?;
        let queues = self.config.queues.len();
        if self.queues.len() != queues || self.shards.len() != queues {
            return Err(format!(
                "{queues} queues but {} run-time states and {} shard slots",
                self.queues.len(),
                self.shards.len()
            ));
        }
        let mut ids: BTreeMap<u16, &str> = BTreeMap::new();
        for (name, &id) in &self.generators {
            if let Some(other) = ids.insert(id, name) {
                return Err(format!("generator id {id} names both {other} and {name}"));
            }
        }
        if let Some(q) = self
            .config
            .queues
            .iter()
            .find(|q| !self.generators.contains_key(&q.name))
        {
            return Err(format!("queue {} has no generator id", q.name));
        }
        let nodes = self.moves.nodes();
        if nodes.len() != self.config.cluster.nodes.len() {
            return Err(format!(
                "the node table has {} nodes, the cluster {}",
                nodes.len(),
                self.config.cluster.nodes.len()
            ));
        }
        for (n, (name, _, _)) in nodes.iter().enumerate() {
            if self.config.cluster.nodes[n].name != name {
                return Err(format!("node table row {n} is {name}, not the cluster's"));
            }
        }
        for q in &self.config.queues {
            if !self
                .moves
                .definition_is(&q.name, &self.config.node_names(&q.definition))
            {
                return Err(format!(
                    "the move machine's definition of {} is not the configuration's",
                    q.name
                ));
            }
        }
        let mut conns = BTreeMap::new();
        for (q, link) in self.config.queues.iter().zip(&self.shards) {
            if let Some(link) = link
                && let Some(other) = conns.insert(link.conn, &q.name)
            {
                return Err(format!(
                    "connection {} is registered for {other} and {}",
                    link.conn.0, q.name
                ));
            }
        }
        if let Some(node) = self.agents.nodes().find(|n| !nodes.contains(n)) {
            return Err(format!(
                "an agent is registered for {node}, not a node of the cluster"
            ));
        }
        self.moves.invariants()
    }

    /// Called at the end of every transition (each input, each move step, each journal
    /// batch): in debug builds, so in every test, a broken invariant panics there, naming
    /// it. Release builds skip it; the simulator calls [`Core::invariants`] itself.
    pub(super) fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if let Err(broken) = self.invariants() {
            panic!("coordinator core invariant broken: {broken}");
        }
    }
}
