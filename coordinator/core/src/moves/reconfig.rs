//! What a change of the queue table (`queue add|remove|update`, `reload`) needs from the
//! move machine: queue definitions that come and go, and nodes that nobody owned being
//! given to a queue. Neither starts a move: a node that changes hands between two queues
//! always goes through a move.

use shardsched_wire::msg::Generation;

use super::MoveMachine;

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

    /// Gives an unassigned node that is in no move to `owner` at `generation` (the caller
    /// journals it before any shard hears of it). Returns whether it did: a node that is
    /// owned or moving is left alone.
    pub fn assign_unowned(&mut self, node: &str, owner: &str, generation: Generation) -> bool {
        match self.state.nodes.get_mut(node) {
            Some(intent) if intent.owner.is_none() && intent.moving.is_none() => {
                intent.owner = Some(owner.to_owned());
                intent.generation = generation;
                true
            }
            _ => false,
        }
    }

    /// Whether a queue is the donor or the recipient of an unfinished move.
    pub fn queue_in_move(&self, queue: &str) -> bool {
        self.state
            .active
            .values()
            .any(|m| !m.is_done() && (m.from == queue || m.to == queue))
    }
}
