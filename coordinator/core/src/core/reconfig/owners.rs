//! Owners across a queue table change: unassigned nodes taken by the queues that define
//! them, and a reloaded `owns` that differs from the owners now (said, never applied:
//! owners change only by moves).

use shardsched_resource::encode_hostlist;

use crate::core::Core;

impl Core {
    /// For each queue whose `owns` names nodes another queue owns now: a line saying so and
    /// the moves that would apply it (owners change only through moves).
    pub(super) fn owns_not_applied(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (qi, q) in self.config.queues.iter().enumerate() {
            for (other, nodes) in self.owned_elsewhere(qi, &q.owns) {
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
        let node = self.config.cluster.nodes[n].name.clone();
        let queue = &self.config.queues[qi].name;
        self.moves.assign_unowned(&node, queue).then_some(node)
    }
}
