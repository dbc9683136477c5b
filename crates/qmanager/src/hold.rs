//! Nodes held until a time: up for planning, busy in the calendars until the hold ends.
//!
//! Why: a node moving into this queue is reservable from the time its donor expects it
//! free, but must not be allocated before it is handed over. [`QueueManager::hold_node`]
//! brings it up under a pseudo-allocation ending then (see `Matcher::hold_node`), so
//! reservations can be planned on it from that time and nothing starts on it before;
//! [`QueueManager::release_hold`] lifts it. If the time passes before the hand-over, the
//! caller holds it again further on. A hold is not a job: no event, no job view; it shows
//! in the matcher under [`hold_id`].

use shardsched_resource::VertexId;

use crate::error::QueueError;
use crate::event::{Event, JobId, WaitReason};
use crate::queue::{QueueManager, State};

/// The matcher id a hold on vertex `v` is recorded under: from the top of the id space
/// down, where job ids (FLUIDs, timestamps in their high bits) never are.
pub fn hold_id(v: VertexId) -> JobId {
    u64::MAX - u64::from(v.0)
}

/// Whether matcher id `id` is a hold rather than a job (for checkers walking the matcher).
pub fn is_hold_id(id: JobId, graph_len: usize) -> bool {
    id > u64::MAX - graph_len as u64
}

impl QueueManager {
    /// Holds node `v` from `now` until `until` (seconds; at least one second from now) and
    /// marks it up: reservations may start on it from `until`, nothing starts on it before.
    /// A hold already on it is replaced. Fails if something else holds the node then.
    pub fn hold_node(&mut self, v: VertexId, now: i64, until: i64) -> Result<(), QueueError> {
        if v.index() >= self.matcher.graph.len() {
            return Err(QueueError::NoSuchVertex(v.0));
        }
        let id = hold_id(v);
        if let Some(end) = self.hold_end(v) {
            self.matcher.cancel(id)?;
            self.hold_ends.remove(&(end, id));
        }
        let until = until.max(now.saturating_add(1));
        let duration = u64::try_from(until - now).unwrap_or(1);
        if self.matcher.hold_node(id, v, now, duration).is_err() {
            // Reservations were planned on the node from the old hold's end: they go (the
            // next cycle re-plans them after the new one), then the hold fits.
            self.drop_reservations()?;
            self.matcher.hold_node(id, v, now, duration)?;
        }
        if let Some(end) = self.hold_end(v) {
            // A later job may start to fit when the hold ends (module `keep`).
            self.hold_ends.insert((end, id));
        }
        self.replan = true;
        self.set_availability(v, true)
    }

    /// Cancels every reservation (announced as lost; the next cycle re-plans).
    pub(crate) fn drop_reservations(&mut self) -> Result<(), QueueError> {
        let reserved: Vec<JobId> = self.reservations.by_start().map(|(_, id)| id).collect();
        for id in reserved {
            self.matcher.cancel(id)?;
            self.reservations.remove(id);
            self.job_mut(id)?.state = State::Pending(WaitReason::Queued);
            self.events.push_back(Event::Unreserved { id });
        }
        Ok(())
    }

    /// The end of the hold on `v`, if it is held.
    pub fn hold_end(&self, v: VertexId) -> Option<i64> {
        self.matcher.job(hold_id(v)).map(|j| {
            j.alloc
                .at
                .saturating_add(i64::try_from(j.alloc.duration).unwrap_or(i64::MAX))
        })
    }

    /// Lifts the hold on `v` (its availability is left as it is); `false` if there was none.
    pub fn release_hold(&mut self, v: VertexId) -> Result<bool, QueueError> {
        let id = hold_id(v);
        let Some(end) = self.hold_end(v) else {
            return Ok(false);
        };
        self.matcher.cancel(id)?;
        self.hold_ends.remove(&(end, id));
        self.replan = true;
        self.retry = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use crate::Event;
    use crate::test_support::{easy_queue, first_node, job};

    #[test]
    fn a_held_node_is_reserved_at_the_hold_end_and_allocated_once_released() {
        let mut qm = easy_queue(2);
        let v = first_node(&qm);
        qm.set_availability(v, false).expect("down");
        qm.hold_node(v, 0, 100).expect("hold");
        assert_eq!(qm.hold_end(v), Some(100));
        qm.submit(job(1, 2, 50)).expect("submit");
        qm.schedule(0).expect("schedule");
        let events: Vec<Event> = std::iter::from_fn(|| qm.poll_event()).collect();
        assert!(
            events.contains(&Event::Reserved { id: 1, at: 100 }),
            "{events:?}"
        );
        // Pushed further before the hand-over: the reservation moves with it.
        qm.hold_node(v, 1, 150).expect("hold again");
        qm.schedule(1).expect("schedule");
        let events: Vec<Event> = std::iter::from_fn(|| qm.poll_event()).collect();
        assert!(
            events.contains(&Event::Reserved { id: 1, at: 150 }),
            "{events:?}"
        );
        assert!(qm.release_hold(v).expect("release"));
        assert!(!qm.release_hold(v).expect("release again"));
        qm.schedule(1).expect("schedule");
        let events: Vec<Event> = std::iter::from_fn(|| qm.poll_event()).collect();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Started { id: 1, .. })),
            "{events:?}"
        );
    }
}
