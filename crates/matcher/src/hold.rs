//! Holds: a pseudo-allocation that keeps a whole node (its subtree) busy until a given time,
//! so that planning sees the node free only from then on.
//!
//! Why: a node moving into a queue is *reservable* from the time the donor expects it free,
//! but not *allocatable* before the coordinator hands it over. Holding it until that time
//! gives exactly this with the ordinary calendars: allocations now see it taken, and
//! reservations may start on it at the hold's end (which is a candidate time like a job's
//! end). A hold is recorded under a caller-chosen id, as a job would be, and removed with
//! [`Matcher::cancel`]. Work is proportional to the node's subtree, never the graph.

use shardsched_resource::VertexId;

use crate::alloc::depth_in;
use crate::{AllocVertex, Allocation, JobState, MatchError, Matcher};

impl Matcher {
    /// Holds node `node` (and everything under it) for `id` from `at` for `duration`
    /// seconds: its whole subtree taken exclusively, its ancestors shared, as a match taking
    /// the node whole would. Fails, recording nothing, if `id` already holds something or
    /// the calendars cannot take it (something else holds the node in that window).
    pub fn hold_node(
        &mut self,
        id: u64,
        node: VertexId,
        at: i64,
        duration: u64,
    ) -> Result<(), MatchError> {
        if self.jobs.contains_key(&id) {
            return Err(MatchError::DuplicateJob(id));
        }
        if node.index() >= self.graph.len() {
            return Err(MatchError::BadRequest(format!(
                "vertex {} is not in the graph",
                node.0
            )));
        }
        let g = &self.graph;
        // Children before parents: the subtree in post-order, then the ancestors upwards.
        let mut subtree: Vec<VertexId> = g.preorder(node).collect();
        subtree.reverse();
        let mut vertices: Vec<AllocVertex> = subtree
            .into_iter()
            .map(|v| AllocVertex {
                v,
                needs: g.size(v),
                exclusive: true,
                depth: depth_in(g, v),
            })
            .collect();
        let mut cur = node;
        while let Some(p) = g.parent(cur) {
            vertices.push(AllocVertex {
                v: p,
                needs: 1,
                exclusive: false,
                depth: depth_in(g, p),
            });
            cur = p;
        }
        let alloc = Allocation::new(vertices, at, duration);
        self.record(id, JobState::Allocated, alloc, None)
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::nodes;
    use crate::{MatchOp, MatchOutcome, Matcher};

    fn matcher() -> Matcher {
        crate::test_support::two_node_matcher()
    }

    #[test]
    fn a_held_node_is_reservable_from_the_hold_end_only() {
        let mut m = matcher();
        let node0 = m.vertex("/c0/node0").expect("node0");
        m.hold_node(u64::MAX, node0, 0, 100).expect("hold");
        // One node is free now: a one-node job gets it, not the held one.
        let MatchOutcome::Allocated(a) = m.run(MatchOp::Allocate, &nodes(1), 1, 0).expect("match")
        else {
            panic!("the free node should be allocated");
        };
        assert!(a.iter().all(|v| v.v != node0));
        // Both nodes: reserved at the hold's end... after job 1 (ends at 60) and the hold.
        let outcome = m
            .run(MatchOp::AllocateOrElseReserve, &nodes(2), 2, 0)
            .expect("match");
        assert!(
            matches!(&outcome, MatchOutcome::Reserved(r) if r.at == 100),
            "{outcome:?}"
        );
        // Released: the two-node job fits right after job 1.
        m.cancel(2).expect("cancel reservation");
        m.cancel(u64::MAX).expect("release the hold");
        let outcome = m
            .run(MatchOp::AllocateOrElseReserve, &nodes(2), 2, 0)
            .expect("match");
        assert!(
            matches!(&outcome, MatchOutcome::Reserved(r) if r.at == 60),
            "{outcome:?}"
        );
        assert!(m.hold_node(2, node0, 0, 10).is_err(), "id 2 is taken");
    }
}
