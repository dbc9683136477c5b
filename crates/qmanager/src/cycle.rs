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
//! - **Replan** when the order changed (priority change, a job entering ahead of where the
//!   last walk got to, a job back from waiting), or availability or a node hold changed: the
//!   full definition. When calendar time in the future was freed (a running job ended before
//!   its planned end or was cancelled, a reservation was cancelled), or a reservation's start
//!   passed with no cycle then (the definition searches it a window it does not hold), the
//!   walk goes over every considered job as the definition does, but leaves in place each
//!   reservation that module `keep` proves the re-plan would put back where it is, and places
//!   the others again so that the matcher answers as it would with every later reservation
//!   cancelled (module `replan`).
//! - **Retry** when time up to now was freed (a job ended at or after its planned end, a
//!   planned end passed): every considered job that could not start is tried again, but the
//!   reservations stay. Re-planning them would give the same answer: the calendar after
//!   `now` is unchanged, and each reservation was already the earliest fit after the last
//!   cycle, at a time later than `now`. And when a reservation is due (its start is `now`):
//!   a re-plan would start it now on the resources it holds and put the others back, so the
//!   walk does just that (and falls back to a re-plan if it somehow does not fit).
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

use std::ops::Bound;

use crate::error::QueueError;
use crate::event::{Event, JobId, JobMap, WaitReason};
use crate::keep::{Delta, KEEP_CHECK_RESERVATIONS_MAX};
use crate::params::QueuePolicy;
use crate::place::Attempt;
use crate::queue::{Key, QueueManager, State};
use crate::replan::Replanning;

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

/// How much of the definition a re-plan must redo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redo {
    /// Nothing: keep every reservation.
    Nothing,
    /// Only what the changes since the last cycle may move (module `replan`).
    Changed,
    /// Cancel every reservation and place every job again.
    All,
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
        let (mut kind, redo) = self.cycle_kind(now);
        let mut end = match kind {
            CycleKind::Idle => WalkEnd::Done,
            CycleKind::Continue => {
                // The jobs the last walk started left the queue: the depth window now
                // reaches that many jobs further.
                let mut w = self.walk;
                w.considered = w.considered.saturating_sub(w.started);
                w.started = 0;
                self.walk_from(now, w, &JobMap::default())?
            }
            CycleKind::Retry => self.walk_from(now, Walk::default(), &JobMap::default())?,
            CycleKind::Replan if redo == Redo::Changed => {
                let mut rp = Replanning::new(Delta::freed_since(&self.freed, now));
                let r = self.replan_walk(now, &mut rp);
                self.finish_replan(&mut rp);
                r?;
                self.report_lost(&rp.old);
                if rp.old.is_empty() {
                    // Every reservation stayed: what a retry does.
                    kind = CycleKind::Retry;
                }
                WalkEnd::Done
            }
            CycleKind::Replan => WalkEnd::Replan,
        };
        if end == WalkEnd::Replan {
            kind = CycleKind::Replan;
            let old = self.cancel_all_reservations()?;
            end = self.walk_from(now, Walk::default(), &old)?;
            self.report_lost(&old);
        }
        debug_assert_eq!(
            end,
            WalkEnd::Done,
            "a walk with no reservation held cannot fail"
        );
        match kind {
            CycleKind::Idle => self.stats.cycles_idle += 1,
            CycleKind::Continue => self.stats.cycles_continue += 1,
            CycleKind::Retry => self.stats.cycles_retry += 1,
            CycleKind::Replan => self.stats.cycles_replan += 1,
        }
        self.replan = false;
        self.freed.clear();
        self.retry = false;
        self.arrivals = None;
        self.last_now = Some(now);
        Ok(kind)
    }

    fn cycle_kind(&self, now: i64) -> (CycleKind, Redo) {
        let first = self.reservations.first().map(|(at, _)| at);
        let due = first.is_some_and(|at| at <= now);
        // A reservation whose start passed with no cycle then: the re-plan searches from
        // `now`, over a window its reservation does not cover, and may pick other vertices.
        let overdue = first.is_some_and(|at| at < now);
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
            return (CycleKind::Replan, Redo::All);
        } else if (!self.freed.is_empty() || overdue) && !self.reservations.is_empty() {
            let unproven =
                self.reservations.len() > KEEP_CHECK_RESERVATIONS_MAX || self.root.types.is_empty();
            let redo = if failed || unproven {
                Redo::All
            } else {
                Redo::Changed
            };
            return (CycleKind::Replan, redo);
        } else if !self.freed.is_empty() || self.retry || ended || due {
            CycleKind::Retry
        } else if self.arrivals.is_some() || self.depth_left_jobs() {
            CycleKind::Continue
        } else {
            CycleKind::Idle
        };
        if kind == CycleKind::Retry && failed {
            return (CycleKind::Replan, Redo::All);
        }
        (kind, Redo::Nothing)
    }

    /// Whether the last walk stopped at the queue depth after starting jobs: those left the
    /// queue, so the next cycle resumes the walk to consider the jobs behind them (the ones
    /// it passed would answer as before: nothing was freed).
    fn depth_left_jobs(&self) -> bool {
        let depth = self.params.queue_depth;
        depth > 0 && self.walk.considered >= depth && self.walk.started > 0
    }

    /// Cancels every reservation; returns where they were, to report only changes.
    fn cancel_all_reservations(&mut self) -> Result<JobMap<i64>, QueueError> {
        let ids: Vec<JobId> = self.reservations.by_start().map(|(_, id)| id).collect();
        let mut old = JobMap::with_capacity_and_hasher(ids.len(), Default::default());
        for id in ids {
            if let Some(r) = self.unreserve(id)? {
                old.insert(id, r.at);
            }
        }
        self.stats.reservations_replanned += old.len() as u64;
        Ok(old)
    }

    /// After a re-plan: announce the reservations it did not renew.
    fn report_lost(&mut self, old: &JobMap<i64>) {
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

    /// Walks the pending order after `w.last` (from the start when `None`), keeping the
    /// reservations held. `old` holds the reservations a re-plan cancelled: only new or moved
    /// ones are announced.
    fn walk_from(&mut self, now: i64, w: Walk, old: &JobMap<i64>) -> Result<WalkEnd, QueueError> {
        self.walk_with(now, w, old, None)
    }

    /// The walk of a re-plan that keeps what it proves stays (module `replan`). Reservations
    /// of jobs beyond the walk would not be made: they go.
    fn replan_walk(&mut self, now: i64, rp: &mut Replanning) -> Result<(), QueueError> {
        self.walk_with(now, Walk::default(), &JobMap::default(), Some(rp))?;
        let last = self.walk.last;
        self.cancel_tail(last, i64::MAX, rp)?;
        Ok(())
    }

    fn walk_with(
        &mut self,
        now: i64,
        mut w: Walk,
        old: &JobMap<i64>,
        mut rp: Option<&mut Replanning>,
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
            if allocate_only && let Some(rp) = rp.as_deref_mut() {
                // No job from here on gets a reservation: the ones they held go.
                self.cancel_tail(w.last, i64::MAX, rp)?;
            }
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
                if let Some(rp) = rp.as_deref_mut() {
                    let end = self.reservations.get(id).map_or(at, |r| r.end);
                    if self.stays(id, at, end, now, &rp.delta) {
                        w.reservations += 1;
                        self.stats.reservations_kept += 1;
                        continue;
                    }
                    self.unreserve_for_replan(id, rp)?;
                } else if at > now {
                    // Kept from an earlier cycle (Retry): still the earliest fit.
                    w.reservations += 1;
                    continue;
                } else if self.start_reserved(id, now)? {
                    w.started += 1;
                    continue;
                } else {
                    return Ok(WalkEnd::Replan);
                }
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
            let attempt = match rp.as_deref_mut() {
                Some(rp) => self.place_in_replan(id, now, rp)?,
                None => self.allocate_or_reserve(id, now)?,
            };
            let old_at = rp.as_deref().map_or(old, |rp| &rp.old).get(&id).copied();
            match attempt {
                Attempt::Started => w.started += 1,
                Attempt::Reserved(at) => {
                    w.reservations += 1;
                    if old_at != Some(at) {
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
}
