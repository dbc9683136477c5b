//! A re-plan that re-places only what may move.
//!
//! When calendar time was freed since the last cycle (jobs ended early, a running job or a
//! reservation was cancelled), the cycle walks the pending order as a full re-plan would,
//! but a reservation is left in the matcher when rule 1 of module `keep` proves the re-plan
//! would put it back where it is. Any other job is placed again under rule 2: the
//! reservations held for jobs after it that it could meet are cancelled first (the walk
//! places them again when it reaches them), so that the matcher answers what it would
//! answer with all of them cancelled. [`Replanning`] carries what changed so far in the
//! views of the jobs not yet placed, and what each cancelled reservation was.

use shardsched_matcher::{Allocation, Placement};

use crate::error::QueueError;
use crate::event::{JobId, JobMap};
use crate::keep::{Change, Delta};
use crate::place::{Attempt, end_of};
use crate::queue::{Key, QueueManager};
use crate::shapes::planning_window;

/// The state of one re-plan walk (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Replanning {
    /// What changed in the views of the jobs the walk has not placed yet.
    pub(crate) delta: Delta,
    /// Start of each reservation cancelled by this cycle: only new or moved ones are
    /// announced.
    pub(crate) old: JobMap<i64>,
    /// What each reservation cancelled and not yet placed again was.
    before: JobMap<Before>,
}

/// A cancelled reservation, to tell whether placing it again moved it.
#[derive(Debug)]
struct Before {
    at: i64,
    end: i64,
    /// Its allocation, taken out of the matcher (given back to it after).
    alloc: Option<Allocation>,
}

impl Replanning {
    /// A re-plan of views changed by `delta` since the last cycle.
    pub(crate) fn new(delta: Delta) -> Replanning {
        Replanning {
            delta,
            ..Replanning::default()
        }
    }
}

impl QueueManager {
    /// Cancels job `id`'s reservation for the re-plan to place it again, remembering what it
    /// was.
    pub(crate) fn unreserve_for_replan(
        &mut self,
        id: JobId,
        rp: &mut Replanning,
    ) -> Result<(), QueueError> {
        match self.unreserve_taking(id)? {
            (Some(r), alloc) => {
                rp.old.insert(id, r.at);
                rp.before.insert(
                    id,
                    Before {
                        at: r.at,
                        end: r.end,
                        alloc: Some(alloc),
                    },
                );
                self.stats.reservations_replanned += 1;
            }
            (None, alloc) => self.matcher.recycle(alloc),
        }
        Ok(())
    }

    /// Cancels the reservations starting before `before` held for jobs after `after` in walk
    /// order (every job when `None`): the tail a placement must not see (rule 2). Returns
    /// how many it cancelled.
    pub(crate) fn cancel_tail(
        &mut self,
        after: Option<Key>,
        before: i64,
        rp: &mut Replanning,
    ) -> Result<usize, QueueError> {
        let tail: Vec<JobId> = self.tail_starting_before(after, before).collect();
        for &id in &tail {
            self.unreserve_for_replan(id, rp)?;
        }
        Ok(tail.len())
    }

    fn tail_starting_before(
        &self,
        after: Option<Key>,
        before: i64,
    ) -> impl Iterator<Item = JobId> + '_ {
        self.reservations
            .starting_before(before)
            .map(|(_, id)| id)
            .filter(move |&id| {
                after.is_none_or(|k| self.reservations.get(id).is_some_and(|r| r.key > k))
            })
    }

    /// Places pending job `id` (reserved by nobody) as the re-plan would: rule 2 of module
    /// `keep`. Records in `rp` how its view changed the views behind it.
    pub(crate) fn place_in_replan(
        &mut self,
        id: JobId,
        now: i64,
        rp: &mut Replanning,
    ) -> Result<Attempt, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let (key, duration) = (job.key, job.jobspec.attributes.duration);
        let mut before = rp.before.remove(&id);
        if let Some(b) = before.as_mut()
            && self.stays(id, b.at, b.end, now, &rp.delta)
            && let Some(alloc) = b.alloc.take()
        {
            // Cancelled as the tail of a job before it, yet it would come back as it was
            // (rule 1): put it back without a match.
            if self.restore_reservation(id, alloc)? {
                self.stats.reservations_kept += 1;
                return Ok(Attempt::Reserved(b.at));
            }
        }
        // Its old placement still fits where only freed time met it: the answer ends by then.
        let bound = before
            .as_ref()
            .filter(|b| b.at >= now && !rp.delta.taken_meets(b.at, b.end))
            .map(|b| b.end);
        // The match answers no earlier than it searches from, so its window ends no earlier
        // than one starting there: a tail reservation starting before that end (and before
        // `bound`) is cancelled after the match unless the answer proves exact despite it
        // (module `keep`, rule 2). Cancelled first, it costs no match made in vain; the
        // search then starts where the calendars without it admit the job.
        let mut from = self.search_from(id, now)?;
        let least = from
            .at
            .saturating_add(i64::try_from(planning_window(from.at, duration)).unwrap_or(i64::MAX))
            .min(bound.unwrap_or(i64::MAX));
        if self.cancel_tail(Some(key), least, rp)? > 0 {
            from = self.search_from(id, now)?;
        }
        let mut placed = self.match_or_reserve_from(id, from)?;
        let window = self.placed_window(id, &placed);
        let reach = window
            .map_or(i64::MAX, |w| w.1)
            .min(bound.unwrap_or(i64::MAX));
        if self.tail_starting_before(Some(key), reach).next().is_some()
            && !window.is_some_and(|(at, end)| self.exact_despite_tail(id, now, at, end))
        {
            if placed_in_matcher(&placed) {
                self.matcher.cancel(id)?;
            }
            self.cancel_tail(Some(key), reach, rp)?;
            placed = self.match_or_reserve(id, now)?;
        }
        let attempt = self.settle(id, now, placed)?;
        self.note_change(id, before, attempt, rp);
        Ok(attempt)
    }

    /// Records `alloc`, job `id`'s reservation as it was, back in the matcher; `false` if
    /// the matcher refuses it (then nothing is recorded).
    fn restore_reservation(&mut self, id: JobId, alloc: Allocation) -> Result<bool, QueueError> {
        let (at, end) = (alloc.at, end_of(&alloc));
        if self.matcher.restore(id, alloc).is_err() {
            return Ok(false);
        }
        self.note_reservation(id, at, end)?;
        Ok(true)
    }

    /// The window `[start, end)` of the allocation `placed` of job `id`; `None` when nothing
    /// was placed.
    fn placed_window(&self, id: JobId, placed: &Placement) -> Option<(i64, i64)> {
        if !placed_in_matcher(placed) {
            return None;
        }
        self.matcher.job(id).map(|j| (j.alloc.at, end_of(&j.alloc)))
    }

    /// Job `id` was placed again as `attempt`; `before` is the reservation it had. A new
    /// window is taken and the old one freed, unless it came back identical.
    fn note_change(
        &mut self,
        id: JobId,
        before: Option<Before>,
        attempt: Attempt,
        rp: &mut Replanning,
    ) {
        let now_held = match attempt {
            Attempt::Blocked => None,
            Attempt::Started | Attempt::Reserved(_) => self.matcher.job(id).map(|j| &j.alloc),
        };
        let same = match (&before, now_held) {
            (Some(b), Some(a)) => b.alloc.as_ref() == Some(a),
            _ => false,
        };
        if !same {
            if let Some(b) = &before {
                rp.delta.push(b.at, b.end, Change::Freed);
            }
            if let Some(a) = now_held {
                rp.delta.push(a.at, end_of(a), Change::Taken);
            }
        }
        if let Some(alloc) = before.and_then(|b| b.alloc) {
            self.matcher.recycle(alloc);
        }
    }

    /// Gives back the copies of reservations cancelled and never placed again.
    pub(crate) fn finish_replan(&mut self, rp: &mut Replanning) {
        for (_, b) in rp.before.drain() {
            if let Some(alloc) = b.alloc {
                self.matcher.recycle(alloc);
            }
        }
    }
}

fn placed_in_matcher(p: &Placement) -> bool {
    matches!(p, Placement::Allocated { .. } | Placement::Reserved { .. })
}
