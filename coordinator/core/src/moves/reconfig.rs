//! What a change of the queue table (`queue add|remove|update`, `reload`) needs from the
//! move machine: queue definitions that come and go, and nodes that nobody owned being
//! given to a queue. Neither starts a move: a node that changes hands between two queues
//! always goes through a move.

use super::nodes::NodeFlag;
use super::{MoveMachine, next_generation};

impl MoveMachine {
    /// Sets (`Some`) or forgets (`None`) a queue's definition, so that later moves check
    /// against it.
    pub fn set_definition(&mut self, queue: &str, nodes: Option<Vec<String>>) {
        match nodes {
            Some(nodes) => {
                self.state
                    .definitions
                    .insert(queue.to_owned(), nodes.into_iter().collect());
            }
            None => {
                self.state.definitions.remove(queue);
            }
        }
    }

    /// Whether the machine knows `queue` with exactly `nodes` as its definition.
    pub fn definition_is(&self, queue: &str, nodes: &[String]) -> bool {
        self.state
            .definitions
            .get(queue)
            .is_some_and(|d| d.len() == nodes.len() && nodes.iter().all(|n| d.contains(n)))
    }

    /// Gives an unassigned node that is in no move to `owner`, at a new generation (the
    /// caller journals it before any shard hears of it). Returns whether it did: a node
    /// that is owned or moving is left alone.
    pub fn assign_unowned(&mut self, node: &str, owner: &str) -> bool {
        let nodes = &mut self.state.nodes;
        let Some(intent) = nodes.get(node) else {
            return false;
        };
        if intent.owner.is_some() || nodes.moving(node).is_some() {
            return false;
        }
        debug_assert!(
            self.state
                .definitions
                .get(owner)
                .is_some_and(|d| d.contains(node)),
            "node {node} given to {owner}, outside its definition"
        );
        let generation = next_generation(Some(intent.generation));
        nodes.set_owner(node, Some(owner.to_owned()), generation, None);
        true
    }

    /// Sets or clears one admin flag of `node` (flags are the node's, whoever owns it);
    /// `None` when there is no such node, else whether anything changed.
    pub fn set_flag(&mut self, node: &str, flag: NodeFlag, value: Option<String>) -> Option<bool> {
        self.state.nodes.set_flag(node, flag, value)
    }

    /// Marks every owned node's owner as an admin's decision (see
    /// [`NodeTable::keep_owners`](super::NodeTable::keep_owners)).
    pub fn keep_owners(&mut self) {
        self.state.nodes.keep_owners();
    }

    /// The nodes whose intent changed since the last call, to journal.
    pub fn take_changed_nodes(&mut self) -> std::collections::BTreeSet<String> {
        self.state.nodes.take_changed()
    }

    /// Whether a queue is the donor or the recipient of an unfinished move.
    pub fn queue_in_move(&self, queue: &str) -> bool {
        self.state
            .active
            .values()
            .any(|m| !m.is_done() && (m.from == queue || m.to == queue))
    }
}
