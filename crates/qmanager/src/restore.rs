//! A restart: jobs that were running when the process stopped come back on exactly the
//! resources they held, without a match.

use shardsched_matcher::Allocation;

use crate::error::QueueError;
use crate::event::JobRequest;
use crate::queue::{QueueManager, State};
use crate::shapes::Shapes;

impl QueueManager {
    /// Re-creates job `req` as running since `start` on `alloc` (its allocation before the
    /// restart, resolved in this graph). No event is emitted: the caller already knows the
    /// job runs. The next [`QueueManager::schedule`] re-plans reservations around it. Fails
    /// if the job is already known or the matcher cannot take the allocation.
    pub fn restore_running(
        &mut self,
        mut req: JobRequest,
        start: i64,
        alloc: Allocation,
    ) -> Result<(), QueueError> {
        let id = req.id;
        if self.jobs.contains_key(&id) {
            return Err(QueueError::DuplicateJob(id));
        }
        req.jobspec.attributes.duration = alloc.duration;
        let needs = self.root.needs(&self.matcher, &req.jobspec)?;
        let shape = Shapes::key(&req.jobspec);
        let end = alloc
            .at
            .saturating_add(i64::try_from(alloc.duration).unwrap_or(i64::MAX));
        self.matcher.restore(id, alloc)?;
        self.insert_job(req, shape, needs, State::Running { start, end });
        self.running_ends.insert((end, id));
        self.replan = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use shardsched_matcher::StoredAllocation;

    use crate::test_support::{easy_queue, job};
    use crate::{Event, QueueManager};

    fn queue() -> QueueManager {
        easy_queue(4)
    }

    #[test]
    fn a_restored_job_holds_its_nodes_and_completes() {
        let mut live = queue();
        live.submit(job(1, 3, 100)).expect("submit");
        live.schedule(0).expect("schedule");
        let alloc = std::iter::from_fn(|| live.poll_event())
            .find_map(|e| match e {
                Event::Started { alloc, .. } => Some(alloc),
                _ => None,
            })
            .expect("started");
        let stored = StoredAllocation::from_allocation(&live.matcher().graph, &alloc);

        let mut restarted = queue();
        let resolved = stored.resolve(&restarted.matcher().graph).expect("resolve");
        restarted
            .restore_running(job(1, 3, 100), 0, resolved)
            .expect("restore");
        assert_eq!(restarted.running_len(), 1);
        // Only one node is left: a 2-node job waits for job 1's end, as it would have.
        restarted.submit(job(2, 2, 10)).expect("submit");
        restarted.schedule(5).expect("schedule");
        let events: Vec<Event> = std::iter::from_fn(|| restarted.poll_event()).collect();
        assert!(
            events.contains(&Event::Reserved { id: 2, at: 100 }),
            "{events:?}"
        );
        restarted.complete(1, 100).expect("complete");
        restarted.schedule(100).expect("schedule");
        let events: Vec<Event> = std::iter::from_fn(|| restarted.poll_event()).collect();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Started { id: 2, .. })),
            "{events:?}"
        );
        assert!(restarted.restore_running(job(2, 1, 1), 0, alloc).is_err());
    }
}
