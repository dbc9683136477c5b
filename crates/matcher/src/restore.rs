//! Re-creating an allocation after a restart: an [`Allocation`] stored outside the process by
//! vertex *paths* (vertex ids are positions in one build of the graph and need not survive a
//! change of the cluster description), and [`Matcher::restore`], which records it in the
//! calendars exactly as the match that made it did.

use shardsched_resource::ResourceGraph;

use crate::alloc::depth_in;
use crate::{AllocVertex, Allocation, JobState, MatchError, Matcher, Placement};

/// One vertex of a [`StoredAllocation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredVertex {
    /// Containment path, e.g. `/cluster0/node3/core7`.
    pub path: String,
    /// Units taken.
    pub needs: i64,
    /// Taken exclusively.
    pub exclusive: bool,
}

/// An allocation in a form that survives the process: vertices by path, in the
/// allocation's own (writer) order, and its window in the matcher's seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAllocation {
    /// The vertices, children before parents.
    pub vertices: Vec<StoredVertex>,
    /// Start, seconds.
    pub at: i64,
    /// Length, seconds.
    pub duration: u64,
}

impl StoredAllocation {
    /// The stored form of `alloc`, a match in `graph`.
    pub fn from_allocation(graph: &ResourceGraph, alloc: &Allocation) -> StoredAllocation {
        StoredAllocation {
            vertices: alloc
                .iter()
                .map(|a| StoredVertex {
                    path: graph.path(a.v),
                    needs: a.needs,
                    exclusive: a.exclusive,
                })
                .collect(),
            at: alloc.at,
            duration: alloc.duration,
        }
    }

    /// The allocation in `graph`: every path must name a vertex of it
    /// ([`MatchError::NoSuchPath`] names the first that does not).
    pub fn resolve(&self, graph: &ResourceGraph) -> Result<Allocation, MatchError> {
        let vertices = self
            .vertices
            .iter()
            .map(|s| {
                let v = graph
                    .find_path(&s.path)
                    .ok_or_else(|| MatchError::NoSuchPath(s.path.clone()))?;
                Ok(AllocVertex {
                    v,
                    needs: s.needs,
                    exclusive: s.exclusive,
                    depth: depth_in(graph, v),
                })
            })
            .collect::<Result<Vec<_>, MatchError>>()?;
        Ok(Allocation::new(vertices, self.at, self.duration))
    }
}

impl Matcher {
    /// Records `alloc` for job `jobid` as allocated, exactly as a match would have — the
    /// calendars, the job, its end — without matching: the restart of a process whose jobs
    /// were running. Vertex status is not consulted (a running job's allocation is a fact,
    /// even on a node that is down now). Fails, recording nothing, if the job already holds
    /// resources or the calendars cannot take the allocation.
    pub fn restore(&mut self, jobid: u64, alloc: Allocation) -> Result<(), MatchError> {
        self.record_new(jobid, JobState::Allocated, alloc, None)?;
        Ok(())
    }

    /// Records `alloc` for a job not held yet, as `state`, without matching (a restore, or
    /// `update`'s given vertex set): refuses a job id already held and a vertex outside the
    /// graph, recording nothing. With `learn`, `first`'s order learns as from a match
    /// ([`Matcher::record_match`]).
    pub(crate) fn record_new(
        &mut self,
        jobid: u64,
        state: JobState,
        alloc: Allocation,
        learn: Option<i64>,
    ) -> Result<Placement, MatchError> {
        if self.jobs.contains_key(&jobid) {
            return Err(MatchError::DuplicateJob(jobid));
        }
        // The listings this state kept hold its own vertices: only the entries to check.
        let outside = |a: &AllocVertex| a.v.index() >= self.graph.len();
        let bad = if alloc.lists_from(self.state.kept_listings()) {
            alloc.entries().iter().copied().find(outside)
        } else {
            alloc.iter().find(outside)
        };
        if let Some(bad) = bad {
            return Err(MatchError::BadRequest(format!(
                "vertex {} is not in the graph",
                bad.v.0
            )));
        }
        self.record(jobid, state, alloc, learn)
    }
}

#[cfg(test)]
mod tests {
    use crate::{MatchOp, MatchOutcome};

    use super::*;

    fn matcher() -> Matcher {
        crate::test_support::two_node_matcher()
    }

    fn one_node() -> shardsched_jobspec::Jobspec {
        shardsched_jobspec::parse(
            "version: 9999\nresources: [{type: slot, count: 1, label: s, with: [{type: node, count: 1}]}]\ntasks: [{command: [app], slot: s, count: {per_slot: 1}}]\nattributes: {system: {duration: 60}}",
        )
        .expect("jobspec")
    }

    #[test]
    fn a_restored_allocation_holds_exactly_what_the_match_held() {
        let mut live = matcher();
        let MatchOutcome::Allocated(a) = live
            .run(MatchOp::Allocate, &one_node(), 1, 100)
            .expect("match")
        else {
            panic!("no allocation");
        };
        let stored = StoredAllocation::from_allocation(&live.graph, &a);
        assert!(
            stored.vertices.iter().any(|v| v.path == "/c0/node0"),
            "{stored:?}"
        );

        let mut restarted = matcher();
        let resolved = stored.resolve(&restarted.graph).expect("resolve");
        assert_eq!(resolved, a);
        restarted.restore(1, resolved.clone()).expect("restore");
        assert!(matches!(
            restarted.restore(1, resolved),
            Err(MatchError::DuplicateJob(1))
        ));
        // The next job goes where it would have gone in the live matcher.
        let next_live = live
            .run(MatchOp::AllocateOrElseReserve, &one_node(), 2, 100)
            .expect("match");
        let next_restarted = restarted
            .run(MatchOp::AllocateOrElseReserve, &one_node(), 2, 100)
            .expect("match");
        assert_eq!(next_live, next_restarted);
        let third = restarted
            .run(MatchOp::AllocateOrElseReserve, &one_node(), 3, 100)
            .expect("match");
        assert!(
            matches!(third, MatchOutcome::Reserved(ref r) if r.at == 160),
            "{third:?}"
        );
    }

    #[test]
    fn a_taken_reservation_put_back_answers_later_matches_as_before() {
        let mut m = matcher();
        for id in 1..=3 {
            m.run(MatchOp::AllocateOrElseReserve, &one_node(), id, 100)
                .expect("match");
        }
        let mut untouched = m.clone();
        let held = m.job(3).expect("job 3").alloc.clone();
        assert_eq!(held.at, 160, "job 3 is reserved");
        let taken = m.take(3).expect("take");
        assert_eq!(taken, held);
        assert!(m.job(3).is_none());
        assert!(matches!(m.take(3), Err(MatchError::NoSuchJob(3))));
        m.restore(3, taken).expect("restore");
        // Span ids differ (a record made again gets a new one); what later matches see does
        // not.
        for id in 4..=6 {
            assert_eq!(
                m.run(MatchOp::AllocateOrElseReserve, &one_node(), id, 100),
                untouched.run(MatchOp::AllocateOrElseReserve, &one_node(), id, 100)
            );
        }
    }

    #[test]
    fn an_unknown_path_is_refused_by_name() {
        let m = matcher();
        let stored = StoredAllocation {
            vertices: vec![StoredVertex {
                path: "/c0/node9".into(),
                needs: 1,
                exclusive: true,
            }],
            at: 0,
            duration: 10,
        };
        assert_eq!(
            stored.resolve(&m.graph),
            Err(MatchError::NoSuchPath("/c0/node9".into()))
        );
    }
}
