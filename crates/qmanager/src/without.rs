//! "What if these nodes left the queue": the live jobs that could never run on the queue's
//! definition without them (a move's dry run). Changes nothing.

use shardsched_matcher::{MatchOp, MatchOutcome};
use shardsched_resource::{Status, VertexId};

use crate::error::QueueError;
use crate::event::JobId;
use crate::queue::{QueueManager, State};

impl QueueManager {
    /// Pending and waiting jobs that would not fit the queue's definition without `gone`
    /// (the submit-time "fits the definition" check, on a copy of the definition with those
    /// nodes down), in job id order. The copy costs one pass over the graph: this is for an
    /// admin's question, not for scheduling.
    pub fn stranded_without(&self, gone: &[VertexId], now: i64) -> Result<Vec<JobId>, QueueError> {
        let mut definition = self.definition.clone();
        for &v in gone {
            if v.index() >= definition.graph.len() {
                return Err(QueueError::NoSuchVertex(v.0));
            }
            definition.graph.set_status(v, Status::Down);
        }
        let mut ids: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, job)| !matches!(job.state, State::Running { .. }))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        let mut stranded = Vec::new();
        for id in ids {
            let Some(job) = self.jobs.get(&id) else {
                continue;
            };
            // The job id does not matter: satisfiability records nothing.
            let fits = matches!(
                definition.run(MatchOp::Satisfiability, &job.jobspec, 0, now)?,
                MatchOutcome::Satisfiable(true)
            );
            if !fits {
                stranded.push(id);
            }
        }
        Ok(stranded)
    }
}

#[cfg(test)]
mod tests {
    use crate::JobRequest;

    fn job(id: u64, nodes: u64) -> JobRequest {
        crate::test_support::job(id, nodes, 10)
    }

    #[test]
    fn jobs_needing_more_nodes_than_would_be_left_are_stranded() {
        let mut qm = crate::test_support::easy_queue(3);
        let first = crate::test_support::first_node(&qm);
        qm.submit(job(1, 3)).expect("submit");
        qm.submit(job(2, 2)).expect("submit");
        assert_eq!(qm.stranded_without(&[first], 0).expect("dry run"), vec![1]);
        assert!(qm.stranded_without(&[], 0).expect("dry run").is_empty());
        // Nothing changed: job 1 still fits.
        assert!(qm.job(1).is_some());
    }
}
