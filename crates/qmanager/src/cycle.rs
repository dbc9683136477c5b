//! One scheduling cycle: walk the pending jobs in order and apply the policy.
//!
//! The definition of a cycle is Fluxion's: cancel every reservation, then walk the pending
//! order (at most queue-depth jobs); fcfs stops at the first job that cannot start now; the
//! backfill policies give the first *reservation depth* blocked jobs a reservation
//! (allocate-or-else-reserve) and let every later job start only now (plain allocate), where
//! the reservations already in the calendars guarantee it delays none of them.
//!
//! Doing all of that on every cycle would make each cycle cost a match per considered job,
//! most of them answering exactly as last time. So a cycle first asks what can have changed
//! since the last one ([`CycleKind`]) and does only the work whose answer can differ:
//!
//! - **Replan** (the full definition) when the order changed (priority change, a job
//!   entering ahead of where the last walk got to, a job back from waiting), when a reserved
//!   job was cancelled, or when availability changed. When calendar time in the future was
//!   freed (a running job ended before its planned end or was cancelled), only the
//!   reservations that may move into it are re-planned: from the first one in walk order
//!   that the aggregates cannot prove stays (module `keep`); the ones before it would be put
//!   back where they are.
//! - **Retry** when time up to now was freed (a job ended at or after its planned end, a
//!   planned end passed): every considered job that could not start is tried again, but the
//!   reservations stay. Re-planning them would give the same answer: the calendar after
//!   `now` is unchanged, and each reservation was already the earliest fit after the last
//!   cycle, at a time later than `now`. Also when jobs ended early but no reservation can
//!   use the time they freed (module `keep`). And when a reservation is due (its start has
//!   come): a re-plan would start it now on the resources it holds and put the others back,
//!   so the walk does just that (and falls back to a re-plan if it somehow does not fit).
//! - **Continue** when only new jobs arrived behind the last walk, or the last walk stopped at
//!   the queue depth after starting jobs (they left the queue, so the window reaches further):
//!   the walk resumes where it stopped, with the same reservations and the depth it used less
//!   the jobs that started; the jobs it already passed would get the same answer as last
//!   time, since nothing was freed.
//! - **Idle** otherwise: nothing can have changed.
//!
//! Within a walk, the root's aggregate calendars (module `shapes`) answer the questions they
//! can: a job is matched now only if they say it may fit, the walk stops as soon as no
//! pending job's need fits what is free now, and a reservation search starts at the first
//! instant they admit the job (the matcher is asked with that instant as its `now`: it then
//! tries exactly the candidate instants it would have reached anyway, minus the ones that
//! cannot fit). [`crate::Params::exhaustive`] turns all of this off; the tests check that it
//! changes no start time.

use std::collections::HashMap;
use std::ops::Bound;

use shardsched_matcher::{Allocation, MatchError, MatchOp, Placement};

use crate::error::QueueError;
use crate::event::{Event, JobId, WaitReason};
use crate::keep::Replan;
use crate::params::QueuePolicy;
use crate::queue::{Key, QueueManager, State};

/// What a cycle had to do; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CycleKind {
    Idle,
    Continue,
    Retry,
    Replan,
}

/// How far the last walk over the pending order got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Walk {
    /// Jobs counted against the queue depth.
    considered: usize,
    /// Reservations held by the jobs walked.
    reservations: usize,
    /// fcfs met a job that cannot start.
    stopped: bool,
    /// The last job walked.
    last: Option<Key>,
    /// A job that should have been reserved could not be: later jobs hold reservations it
    /// did not see, so only a re-plan may try it again.
    reservation_failed: bool,
    /// Jobs that started during the walk: they left the queue, so when the walk stopped at
    /// the queue depth, the next cycle has jobs it has not looked at.
    started: usize,
}

impl Walk {
    /// Whether the walk looked at (or skipped past as unable to fit) the job at `key`.
    pub(crate) fn passed(&self, key: Key) -> bool {
        !self.stopped && self.last.is_some_and(|l| key <= l)
    }
}

/// How a walk ended: done, or it met something only a re-plan may decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalkEnd {
    Done,
    Replan,
}

enum Attempt {
    Started,
    Reserved(i64),
    Blocked,
}

impl QueueManager {
    /// Runs one scheduling cycle at time `now` (never earlier than the last one). Decisions
    /// come out as events: [`Event::Started`], [`Event::Reserved`], [`Event::Unreserved`].
    pub fn schedule(&mut self, now: i64) -> Result<CycleKind, QueueError> {
        if let Some(last) = self.last_now
            && now < last
        {
            return Err(QueueError::TimeWentBackwards { now, last });
        }
        let (mut kind, which) = self.cycle_kind(now);
        let none = HashMap::new();
        let end = match kind {
            CycleKind::Idle => WalkEnd::Done,
            CycleKind::Continue => {
                // The jobs the last walk started left the queue: the depth window now
                // reaches that many jobs further.
                let mut w = self.walk;
                w.considered = w.considered.saturating_sub(w.started);
                w.started = 0;
                self.walk_from(now, w, &none)?
            }
            CycleKind::Retry => self.walk_from(now, Walk::default(), &none)?,
            CycleKind::Replan => {
                let old = self.cancel_reservations(which)?;
                let end = self.walk_from(now, Walk::default(), &old)?;
                self.report_lost(&old);
                end
            }
        };
        if end == WalkEnd::Replan {
            kind = CycleKind::Replan;
            let old = self.cancel_reservations(Replan::All)?;
            self.walk_from(now, Walk::default(), &old)?;
            self.report_lost(&old);
        }
        match kind {
            CycleKind::Idle => self.stats.cycles_idle += 1,
            CycleKind::Continue => self.stats.cycles_continue += 1,
            CycleKind::Retry => self.stats.cycles_retry += 1,
            CycleKind::Replan => self.stats.cycles_replan += 1,
        }
        self.replan = false;
        self.freed_until = None;
        self.retry = false;
        self.arrivals = None;
        self.last_now = Some(now);
        Ok(kind)
    }

    fn cycle_kind(&self, now: i64) -> (CycleKind, Replan) {
        let due = self.reserved.first().is_some_and(|&(at, _)| at <= now);
        let ahead = match (self.arrivals, self.walk.last) {
            (Some(a), Some(last)) => a < last,
            _ => false,
        };
        let ended = self.last_now.is_some_and(|last| {
            self.running_ends
                .range((Bound::Excluded((last, JobId::MAX)), Bound::Unbounded))
                .next()
                .is_some_and(|&(end, _)| end <= now)
        });
        // A job whose reservation failed saw reservations placed after it: keep none.
        let failed = self.walk.reservation_failed;
        let kind = if self.params.exhaustive || self.replan || ahead {
            return (CycleKind::Replan, Replan::All);
        } else if let Some(freed) = self.freed_until {
            if failed {
                return (CycleKind::Replan, Replan::All);
            }
            match self.replan_after_freeing(now, freed) {
                Replan::Nothing => CycleKind::Retry,
                partial => return (CycleKind::Replan, partial),
            }
        } else if self.retry || ended || due {
            CycleKind::Retry
        } else if self.arrivals.is_some() || self.depth_left_jobs() {
            CycleKind::Continue
        } else {
            CycleKind::Idle
        };
        if kind == CycleKind::Retry && failed {
            return (CycleKind::Replan, Replan::All);
        }
        (kind, Replan::Nothing)
    }

    /// Whether the last walk stopped at the queue depth after starting jobs: those left the
    /// queue, so the next cycle resumes the walk to consider the jobs behind them (the ones
    /// it passed would answer as before: nothing was freed).
    fn depth_left_jobs(&self) -> bool {
        let depth = self.params.queue_depth;
        depth > 0 && self.walk.considered >= depth && self.walk.started > 0
    }

    /// Cancels the reservations `which` says; returns what they were, to report only changes.
    fn cancel_reservations(&mut self, which: Replan) -> Result<HashMap<JobId, i64>, QueueError> {
        let ids: Vec<JobId> = match which {
            Replan::Nothing => Vec::new(),
            Replan::From(ids) => ids,
            Replan::All => self.reserved.iter().map(|&(_, id)| id).collect(),
        };
        let mut old = HashMap::with_capacity(ids.len());
        for id in ids {
            if let State::Pending(WaitReason::Reserved { at }) = self.job_mut(id)?.state {
                self.matcher.cancel(id)?;
                self.reserved.remove(&(at, id));
                self.reserved_held.remove(&id);
                self.job_mut(id)?.state = State::Pending(WaitReason::Queued);
                old.insert(id, at);
            }
        }
        self.stats.reservations_replanned += old.len() as u64;
        Ok(old)
    }

    /// After a re-plan: announce the reservations it did not renew.
    fn report_lost(&mut self, old: &HashMap<JobId, i64>) {
        let mut lost: Vec<JobId> = old
            .keys()
            .copied()
            .filter(|id| {
                self.jobs
                    .get(id)
                    .is_some_and(|j| matches!(j.state, State::Pending(r) if !matches!(r, WaitReason::Reserved { .. })))
            })
            .collect();
        lost.sort_unstable();
        self.events
            .extend(lost.into_iter().map(|id| Event::Unreserved { id }));
    }

    /// Walks the pending order after `w.last` (from the start when `None`). `old` holds the
    /// reservations a re-plan cancelled: only new or moved ones are announced.
    fn walk_from(
        &mut self,
        now: i64,
        mut w: Walk,
        old: &HashMap<JobId, i64>,
    ) -> Result<WalkEnd, QueueError> {
        let policy = self.params.policy;
        let reservations_max = self.params.reservations_max();
        let depth = self.params.queue_depth;
        loop {
            if w.stopped || (depth > 0 && w.considered >= depth) {
                break;
            }
            let Some((key, id)) = self.next_pending(w.last) else {
                break;
            };
            let fcfs = policy == QueuePolicy::Fcfs;
            let allocate_only = fcfs || w.reservations >= reservations_max;
            // fcfs tries only its head, which the aggregates answer as cheaply.
            if allocate_only && !fcfs && !self.params.exhaustive && !self.any_may_fit(now) {
                self.skip_rest(&mut w);
                break;
            }
            w.considered += 1;
            w.last = Some(key);
            self.stats.considered += 1;
            let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
            if let State::Pending(WaitReason::Reserved { at }) = job.state {
                if at > now {
                    // Kept from an earlier cycle (Retry): still the earliest fit.
                    w.reservations += 1;
                } else if self.start_reserved(id, at, now)? {
                    w.started += 1;
                } else {
                    return Ok(WalkEnd::Replan);
                }
                continue;
            }
            if allocate_only {
                if self.try_allocate(id, now)? {
                    w.started += 1;
                } else {
                    self.set_reason(id, WaitReason::Resources)?;
                    w.stopped = fcfs;
                }
                continue;
            }
            match self.allocate_or_reserve(id, now)? {
                Attempt::Started => w.started += 1,
                Attempt::Reserved(at) => {
                    w.reservations += 1;
                    if old.get(&id) != Some(&at) {
                        self.events.push_back(Event::Reserved { id, at });
                    }
                }
                Attempt::Blocked => {
                    w.reservation_failed = true;
                    self.set_reason(id, WaitReason::NoReservation)?;
                }
            }
        }
        self.walk = w;
        Ok(WalkEnd::Done)
    }

    /// Starts job `id`, whose reservation at `at` is due, on the resources it was reserved:
    /// what a re-plan would do, since nothing else it could see changed (else the cycle would
    /// be a re-plan). `false` if it does not fit after all: only a re-plan may decide then.
    fn start_reserved(&mut self, id: JobId, at: i64, now: i64) -> Result<bool, QueueError> {
        self.matcher.cancel(id)?;
        self.reserved.remove(&(at, id));
        self.reserved_held.remove(&id);
        self.set_reason(id, WaitReason::Queued)?;
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

    fn next_pending(&self, after: Option<Key>) -> Option<(Key, JobId)> {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.pending
            .range((lower, Bound::Unbounded))
            .next()
            .map(|(k, id)| (*k, *id))
    }

    /// Nothing left in the walk can start now: account for the jobs a full walk would have
    /// looked at (they count against the queue depth), without matching them.
    fn skip_rest(&mut self, w: &mut Walk) {
        let depth = self.params.queue_depth;
        if depth == 0 {
            if let Some((&k, _)) = self.pending.last_key_value()
                && w.last.is_none_or(|l| k > l)
            {
                w.last = Some(k);
            }
            return;
        }
        while w.considered < depth {
            let Some((key, _)) = self.next_pending(w.last) else {
                break;
            };
            w.considered += 1;
            w.last = Some(key);
        }
    }

    /// False when some tracked type has less free now than every pending job needs.
    fn any_may_fit(&self, now: i64) -> bool {
        (0..self.needs.types()).all(|i| {
            match (self.needs.min(i), self.root.free_now(&self.matcher, i, now)) {
                (Some(need), Some(free)) => need <= 0 || free >= need,
                _ => true,
            }
        })
    }

    fn set_reason(&mut self, id: JobId, reason: WaitReason) -> Result<(), QueueError> {
        self.job_mut(id)?.state = State::Pending(reason);
        Ok(())
    }

    /// Starts job `id` now if it fits.
    fn try_allocate(&mut self, id: JobId, now: i64) -> Result<bool, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let duration = job.jobspec.attributes.duration;
        if !self.params.exhaustive && !self.root.may_fit(&self.matcher, &job.needs, now, duration) {
            self.stats.prefiltered += 1;
            return Ok(false);
        }
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
    fn allocate_or_reserve(&mut self, id: JobId, now: i64) -> Result<Attempt, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let duration = job.jobspec.attributes.duration;
        let from = if self.params.exhaustive {
            now
        } else {
            self.root
                .earliest_fit(&self.matcher, &job.needs, now, duration)
                .map_or(now, |t| t.max(now))
        };
        self.stats.match_reserve += 1;
        // The allocation stays in the matcher: a reservation needs no copy of it.
        let placed = self
            .matcher
            .place(MatchOp::AllocateOrElseReserve, &job.jobspec, id, from)?;
        match placed {
            Placement::Allocated { at } if at == now => {
                self.start(id, now)?;
                Ok(Attempt::Started)
            }
            // Allocated at `from` > now: the matcher holds it as it holds a reservation.
            Placement::Allocated { at } | Placement::Reserved { at } => {
                let held = self.root.held(&self.matcher, id);
                self.reserved_held.insert(id, held);
                self.reserved.insert((at, id));
                self.set_reason(id, WaitReason::Reserved { at })?;
                Ok(Attempt::Reserved(at))
            }
            Placement::NoMatch { .. } | Placement::Satisfiable(_) => Ok(Attempt::Blocked),
        }
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
            Allocation {
                vertices: Vec::new(),
                at: a.at,
                duration: a.duration,
            }
        };
        let job = self.jobs.get_mut(&id).ok_or(QueueError::NoSuchJob(id))?;
        let end = alloc
            .at
            .saturating_add(i64::try_from(alloc.duration).unwrap_or(i64::MAX));
        job.state = State::Running { start: now, end };
        self.pending.remove(&job.key);
        self.needs.remove(&job.needs);
        self.running_ends.insert((end, id));
        self.stats.started += 1;
        self.events.push_back(Event::Started { id, at: now, alloc });
        Ok(())
    }
}
