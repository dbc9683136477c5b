//! Placing one job through the matcher, and the bookkeeping of what came out: started now,
//! reserved later, or blocked. The walk of module `cycle` decides which job to place and how.

use shardsched_matcher::{Allocation, MatchError, MatchOp, Placement};

use crate::error::QueueError;
use crate::event::{Event, JobId, WaitReason};
use crate::queue::{QueueManager, State};
use crate::reservations::Reserved;
use crate::whole::WholeNodes;

/// What placing a job came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    Started,
    Reserved(i64),
    Blocked,
}

/// Where a reservation search starts ([`QueueManager::search_from`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SearchFrom {
    pub(crate) at: i64,
    /// The untouched whole nodes put it later than the root's aggregates do
    /// ([`Stats::whole_node_skips`](crate::Stats::whole_node_skips), counted when searched).
    whole_skip: bool,
}

impl QueueManager {
    /// Starts job `id` now if it fits.
    pub(crate) fn try_allocate(&mut self, id: JobId, now: i64) -> Result<bool, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let duration = job.jobspec.attributes.duration;
        if !self.params.exhaustive && !self.root.may_fit(&self.matcher, &job.needs, now, duration) {
            self.stats.prefiltered += 1;
            return Ok(false);
        }
        self.allocate_now(id, now)
    }

    /// Asks the matcher for job `id` now, and starts it if it fits.
    fn allocate_now(&mut self, id: JobId, now: i64) -> Result<bool, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        self.stats.match_allocate += 1;
        match self
            .matcher
            .place(MatchOp::Allocate, &job.jobspec, id, now)?
        {
            Placement::Allocated { .. } => {
                self.start(id, now)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Starts job `id` now, or reserves its earliest start.
    pub(crate) fn allocate_or_reserve(
        &mut self,
        id: JobId,
        now: i64,
    ) -> Result<Attempt, QueueError> {
        let placed = self.match_or_reserve(id, now)?;
        self.settle(id, now, placed)
    }

    /// The matcher's half of [`QueueManager::allocate_or_reserve`]: the allocation (now or
    /// later) is recorded in the matcher, nothing in the queue yet, so that a caller may
    /// still take it back with `Matcher::cancel` (module `replan`).
    pub(crate) fn match_or_reserve(
        &mut self,
        id: JobId,
        now: i64,
    ) -> Result<Placement, QueueError> {
        let from = self.search_from(id, now)?;
        self.match_or_reserve_from(id, from)
    }

    /// The first instant the matcher's search for job `id` need try: the first at or after
    /// `now` that the root's aggregates (and, for whole nodes, the untouched nodes) admit
    /// it, as the calendars are now; `now` itself under `exhaustive`. The matcher answers
    /// no earlier.
    pub(crate) fn search_from(&mut self, id: JobId, now: i64) -> Result<SearchFrom, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        if self.params.exhaustive {
            return Ok(SearchFrom {
                at: now,
                whole_skip: false,
            });
        }
        let duration = job.jobspec.attributes.duration;
        let from = self
            .root
            .earliest_fit(&self.matcher, &job.needs, now, duration)
            .map_or(now, |t| t.max(now));
        let whole = WholeNodes::need(&job.jobspec).map(|k| {
            self.whole
                .search_start(&self.matcher, &self.root, k, &job.needs, from, duration)
        });
        Ok(SearchFrom {
            at: whole.unwrap_or(from),
            whole_skip: whole.is_some_and(|at| at > from),
        })
    }

    /// [`QueueManager::match_or_reserve`] with the search starting at `from`, which
    /// [`QueueManager::search_from`] gave for the calendars as they are.
    pub(crate) fn match_or_reserve_from(
        &mut self,
        id: JobId,
        from: SearchFrom,
    ) -> Result<Placement, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        if from.whole_skip {
            self.stats.whole_node_skips += 1;
        }
        self.stats.match_reserve += 1;
        // The allocation stays in the matcher: a reservation needs no copy of it.
        Ok(self
            .matcher
            .place(MatchOp::AllocateOrElseReserve, &job.jobspec, id, from.at)?)
    }

    /// The queue's half: job `id`, placed as `placed` by [`QueueManager::match_or_reserve`],
    /// starts, is reserved, or is blocked.
    pub(crate) fn settle(
        &mut self,
        id: JobId,
        now: i64,
        placed: Placement,
    ) -> Result<Attempt, QueueError> {
        match placed {
            Placement::Allocated { at } if at == now => {
                self.start(id, now)?;
                Ok(Attempt::Started)
            }
            // Allocated at `from` > now: the matcher holds it as it holds a reservation.
            Placement::Allocated { at } | Placement::Reserved { at } => {
                let end = self.matcher.job(id).map_or(at, |j| end_of(&j.alloc));
                self.note_reservation(id, at, end)?;
                Ok(Attempt::Reserved(at))
            }
            Placement::NoMatch { .. } | Placement::Satisfiable(_) => Ok(Attempt::Blocked),
        }
    }

    /// Records that job `id`, pending, holds the reservation at `at` the matcher just
    /// recorded over `[at, end)`.
    pub(crate) fn note_reservation(
        &mut self,
        id: JobId,
        at: i64,
        end: i64,
    ) -> Result<(), QueueError> {
        let key = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?.key;
        let held = self.root.held(&self.matcher, id);
        self.reservations
            .insert(id, Reserved { at, end, held, key });
        self.set_reason(id, WaitReason::Reserved { at })
    }

    /// Takes job `id`'s reservation out of the matcher and the queue; it is pending again.
    pub(crate) fn unreserve(&mut self, id: JobId) -> Result<Option<Reserved>, QueueError> {
        let (r, alloc) = self.unreserve_taking(id)?;
        self.matcher.recycle(alloc);
        Ok(r)
    }

    /// As [`QueueManager::unreserve`], handing back the allocation the matcher held.
    pub(crate) fn unreserve_taking(
        &mut self,
        id: JobId,
    ) -> Result<(Option<Reserved>, Allocation), QueueError> {
        let alloc = self.matcher.take(id)?;
        let r = self.reservations.remove(id);
        self.set_reason(id, WaitReason::Queued)?;
        Ok((r, alloc))
    }

    /// Starts job `id`, whose reservation at `at` is due, on the resources it was reserved:
    /// what a re-plan would do, since nothing else it could see changed (else the cycle would
    /// be a re-plan). `false` if it does not fit after all: only a re-plan may decide then.
    pub(crate) fn start_reserved(&mut self, id: JobId, now: i64) -> Result<bool, QueueError> {
        self.unreserve(id)?;
        self.allocate_now(id, now)
    }

    pub(crate) fn set_reason(&mut self, id: JobId, reason: WaitReason) -> Result<(), QueueError> {
        self.job_mut(id)?.state = State::Pending(reason);
        Ok(())
    }

    /// Job `id`, just allocated at `now` in the matcher, starts: its event carries a copy of
    /// the allocation (the matcher keeps its own to cancel it), or only its window when the
    /// caller asked for no vertices ([`QueueManager::set_started_allocations`]).
    fn start(&mut self, id: JobId, now: i64) -> Result<(), QueueError> {
        let held = || MatchError::Internal(format!("job {id} allocated but not held"));
        let alloc = if self.started_allocations {
            self.matcher.copy_allocation(id).ok_or_else(held)?
        } else {
            let a = &self.matcher.job(id).ok_or_else(held)?.alloc;
            Allocation::window(a.at, a.duration)
        };
        let job = self.jobs.get_mut(&id).ok_or(QueueError::NoSuchJob(id))?;
        let end = end_of(&alloc);
        job.state = State::Running { start: now, end };
        self.pending.remove(&job.key);
        self.needs.remove(&job.needs);
        self.running_ends.insert((end, id));
        self.stats.started += 1;
        self.events.push_back(Event::Started { id, at: now, alloc });
        Ok(())
    }
}

/// The end of an allocation's window.
pub(crate) fn end_of(a: &Allocation) -> i64 {
    a.at.saturating_add(i64::try_from(a.duration).unwrap_or(i64::MAX))
}
