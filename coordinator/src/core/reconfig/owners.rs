//! Owners across a queue table change: unassigned nodes taken by the queues that define
//! them, and a reloaded `owns` that differs from the owners now (said, never applied:
//! owners change only by moves).

use shardsched_proto::msg::Generation;
use shardsched_resource::encode_hostlist;

use crate::core::Core;
use crate::ownership::DurableNode;

impl Core {
    /// For each queue whose `owns` names nodes another queue owns now: a line saying so and
    /// the moves that would apply it (owners change only through moves).
    pub(super) fn owns_not_applied(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (qi, q) in self.config.queues.iter().enumerate() {
            let mut by_owner: Vec<(usize, Vec<String>)> = Vec::new();
            for &n in &q.owns {
                let Some(other) = self.owner[n].filter(|&o| o != qi) else {
                    continue;
                };
                let node = self.config.cluster.nodes[n].name.clone();
                match by_owner.iter_mut().find(|(o, _)| *o == other) {
                    Some((_, nodes)) => nodes.push(node),
                    None => by_owner.push((other, vec![node])),
                }
            }
            for (other, nodes) in by_owner {
                let hosts = encode_hostlist(&nodes);
                let other = &self.config.queues[other].name;
                lines.push(format!(
                    "queue {}: owns names {hosts}, which {other} owns now; owners change only \
                     by moves: `shardsched queue move {hosts} --from {other} --to {}`",
                    q.name, q.name
                ));
            }
        }
        lines
    }

    /// Gives node `n`, if no queue owns it, to queue `qi` (a new generation); its name.
    pub(super) fn take_unowned(&mut self, qi: usize, n: usize) -> Option<String> {
        if self.owner[n].is_some() {
            return None;
        }
        let name = self.config.queues[qi].name.clone();
        let node = self.config.cluster.nodes[n].name.clone();
        let generation = Generation(self.generation[n].0.saturating_add(1));
        if !self.moves.assign_unowned(&node, &name, generation) {
            return None;
        }
        self.owner[n] = Some(qi);
        self.generation[n] = generation;
        let flags = self.durable.nodes.get(&node).cloned().unwrap_or_default();
        self.durable.nodes.insert(
            node.clone(),
            DurableNode {
                owner: Some(name),
                generation: generation.0,
                moved: false,
                ..flags
            },
        );
        Some(node)
    }
}
