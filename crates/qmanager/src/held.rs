//! Jobs held out of the pending order: a user's hold (urgency 0), a begin time not reached,
//! an array's limit on its running elements — whatever the caller decides makes a job
//! ineligible for now.
//!
//! A held job is still the queue's: it was judged at submit (a job that could never fit is
//! denied, held or not), it keeps its key (priority, submit time, arrival), and it counts
//! nowhere else: not in the pending order, not against the queue depth, not in the
//! reservations. [`QueueManager::release`] puts it back through the same door as a waiting
//! job, so it comes back to the place its key gives it, as if it had never left. Holding is
//! eligibility only: the policies' cycles (and their re-plans) never see a held job.

use crate::error::QueueError;
use crate::event::{JobId, WaitReason};
use crate::queue::{QueueManager, State};

impl QueueManager {
    /// Holds pending or waiting job `id`: it leaves the pending order (and its reservation,
    /// if it had one) until [`QueueManager::release`]. Holding a held job does nothing; a
    /// running job cannot be held ([`QueueError::NotPending`]).
    pub fn hold(&mut self, id: JobId) -> Result<(), QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let key = job.key;
        match job.state {
            State::Held => return Ok(()),
            State::Running { .. } => return Err(QueueError::NotPending(id)),
            State::Waiting => {
                self.waiting.remove(&key);
            }
            State::Pending(reason) => {
                self.leave_pending(id)?;
                if matches!(reason, WaitReason::Reserved { .. }) {
                    self.replan = true;
                } else {
                    // The queue-depth window or the fcfs head may have moved.
                    self.retry = true;
                }
            }
        }
        self.job_mut(id)?.state = State::Held;
        self.held += 1;
        Ok(())
    }

    /// Lets held job `id` back at `now`: into the pending order at the place its key gives
    /// it, or aside (waiting) if what is up cannot hold it now. Releasing a job that is not
    /// held does nothing.
    pub fn release(&mut self, id: JobId, now: i64) -> Result<(), QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        if job.state != State::Held {
            return Ok(());
        }
        let key = job.key;
        self.held -= 1;
        self.job_mut(id)?.state = State::Waiting;
        self.waiting.insert(key, id);
        self.admit_if_up(id, now)
    }

    /// Jobs held now.
    pub fn held_len(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{easy_queue, job};
    use crate::{Event, JobRequest, JobView, QueueError, WaitReason};

    fn started(qm: &mut crate::QueueManager, now: i64) -> Vec<u64> {
        qm.schedule(now).expect("schedule");
        std::iter::from_fn(|| qm.poll_event())
            .filter_map(|e| match e {
                Event::Started { id, .. } => Some(id),
                _ => None,
            })
            .collect()
    }

    fn at(id: u64, nodes: u64, submit_time: i64) -> JobRequest {
        JobRequest {
            submit_time,
            ..job(id, nodes, 10)
        }
    }

    #[test]
    fn a_held_job_is_skipped_and_comes_back_to_its_place_when_released() {
        let mut qm = easy_queue(1);
        qm.submit(at(1, 1, 0)).expect("submit");
        qm.submit(at(2, 1, 1)).expect("submit");
        qm.submit(at(3, 1, 2)).expect("submit");
        qm.hold(1).expect("hold");
        qm.hold(1).expect("holding twice is harmless");
        assert_eq!(
            qm.job(1),
            Some(JobView::Pending {
                reason: WaitReason::Held
            })
        );
        assert_eq!((qm.pending_len(), qm.held_len()), (2, 1));
        assert_eq!(started(&mut qm, 0), vec![2], "the held job is passed over");
        qm.release(1, 5).expect("release");
        qm.complete(2, 10).expect("complete");
        assert_eq!(
            started(&mut qm, 10),
            vec![1],
            "released, it runs before job 3, submitted after it"
        );
        assert_eq!(qm.held_len(), 0);
    }

    #[test]
    fn holding_a_reserved_job_gives_its_reservation_back_and_running_jobs_are_not_held() {
        let mut qm = easy_queue(2);
        qm.submit(at(1, 2, 0)).expect("submit");
        qm.submit(at(2, 2, 0)).expect("submit");
        assert_eq!(started(&mut qm, 0), vec![1]);
        assert!(matches!(
            qm.job(2),
            Some(JobView::Pending {
                reason: WaitReason::Reserved { .. }
            })
        ));
        qm.hold(2).expect("hold");
        assert_eq!(qm.reservations().count(), 0);
        assert_eq!(qm.hold(1), Err(QueueError::NotPending(1)));
        qm.cancel(2).expect("a held job can be cancelled");
        assert_eq!(qm.held_len(), 0);
        qm.release(1, 0)
            .expect("releasing a job that is not held does nothing");
    }
}
