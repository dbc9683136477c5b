//! Keeping reservations when jobs end early: which ones can a re-plan move?
//!
//! A job that ends before its planned end frees its resources from `now` to that end. The
//! cycle's definition then re-plans: cancel every reservation, reserve again in order. With
//! a slow match that is the dominant cost of a backfill queue (most jobs end early, since
//! users over-estimate), and most of the time it puts every reservation back exactly where it
//! was. This module proves that cheaply, from the root's aggregate calendars, for as many of
//! them as it can.
//!
//! Let `F` be the latest planned end among the jobs that freed time since the last cycle:
//! what was freed lies in `[now, F)`. A re-plan keeps reservation `R` (start `t_R`,
//! duration `d`) in place when the ones before it in walk order stay and
//!
//! 1. `F <= t_R`: the calendar over `R`'s window is untouched, so at `t_R` the matcher finds
//!    the same resources; and
//! 2. `R` cannot start earlier. It did not fit at any earlier instant before, so an earlier
//!    fit must overlap the freed time: it starts at some candidate instant (`now`, or a held
//!    job's end) before `F`. At each such instant `t`, the root's free units of each tracked
//!    type over `[t, t + d)` must fall short of what `R` needs, counting as free the units of
//!    `R` and of every reservation after it in walk order (a re-plan cancels them all, then
//!    reserves in order, so `R` sees the ones before it in place). The aggregates count
//!    units, not where they are, so they can only over-estimate what `R` would find: "falls
//!    short" is never wrong.
//!
//! The first reservation in walk order for which either fails, and every one after it, are
//! re-planned; the ones before it are kept (a re-plan would put them back: each sees only
//! the ones before it). If none fails, the cycle only retries blocked jobs. Each check is one aggregate query per type, and a finer one, cut at
//! reservation boundaries, only when the coarse one (every overlapping reservation's units
//! free over the whole window) does not already fall short. The bound
//! [`KEEP_CHECK_RESERVATIONS_MAX`] keeps the proof cheaper than the re-plan it saves.

use std::ops::Bound;

use shardsched_matcher::Matcher;

use crate::event::JobId;
use crate::queue::QueueManager;
use crate::shapes::{RootAgg, planning_window};

/// With more reservations than this, re-plan rather than prove nothing moves.
pub const KEEP_CHECK_RESERVATIONS_MAX: usize = 128;

/// A reservation as the proof sees it.
struct Held<'a> {
    at: i64,
    end: i64,
    held: &'a [i64],
}

/// What an early completion leaves to re-plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Replan {
    /// Every reservation stays where it is.
    Nothing,
    /// These reservations (a suffix of the walk order) may move; the ones before stay.
    From(Vec<JobId>),
    /// No proof attempted: re-plan everything.
    All,
}

impl QueueManager {
    /// Which reservations a re-plan after calendar time up to `freed` was freed could move
    /// (see the module documentation).
    pub(crate) fn replan_after_freeing(&self, now: i64, freed: i64) -> Replan {
        if self.reserved.is_empty() {
            return Replan::Nothing;
        }
        if self.reserved.len() > KEEP_CHECK_RESERVATIONS_MAX || self.root.types.is_empty() {
            return Replan::All;
        }
        // In walk order: a re-plan reserves them in this order, each seeing the ones before
        // it in place and the ones after it cancelled.
        let mut holds = Vec::with_capacity(self.reserved.len());
        for &(at, id) in &self.reserved {
            let (Some(job), Some(held)) = (self.jobs.get(&id), self.reserved_held.get(&id)) else {
                return Replan::All;
            };
            let duration = job.jobspec.attributes.duration;
            let Ok(d) = i64::try_from(planning_window(at, duration)) else {
                return Replan::All;
            };
            let end = at.saturating_add(d);
            holds.push((job.key, id, &job.needs, duration, Held { at, end, held }));
        }
        holds.sort_by_key(|h| h.0);
        let mut instants = vec![now];
        instants.extend(
            self.running_ends
                .range((Bound::Excluded((now, JobId::MAX)), Bound::Unbounded))
                .map(|&(end, _)| end)
                .take_while(|&end| end < freed),
        );
        instants.dedup();
        let all: Vec<&Held> = holds.iter().map(|h| &h.4).collect();
        let moves = holds
            .iter()
            .enumerate()
            .position(|(j, (_, _, needs, d, h))| {
                // 1. The freed time reaches into its window, or 2. it may fit earlier.
                freed > h.at
                    || instants.iter().any(|&t| {
                        self.root
                            .may_fit_without(&self.matcher, needs, t, *d, &all[j..])
                    })
            });
        match moves {
            None => Replan::Nothing,
            Some(j) => Replan::From(holds[j..].iter().map(|h| h.1).collect()),
        }
    }
}

impl RootAgg {
    /// What job `id`'s allocation or reservation takes from the root's aggregates, per
    /// tracked type: the units of every exclusively taken vertex of that type. Below the
    /// root, that is what the matcher recorded in the root's aggregate; the root itself
    /// counts if taken.
    pub(crate) fn held(&self, m: &Matcher, id: JobId) -> Vec<i64> {
        let mut held = vec![0; self.types.len()];
        let Some(job) = m.job(id) else {
            return held;
        };
        let alloc = &job.alloc;
        if let Some(below) = m.aggregate_use(id, self.root)
            && below.len() == self.types.len()
        {
            held = below;
            if let Some(top) = alloc.vertices.last()
                && top.v == self.root
                && top.exclusive
                && let Some(i) = self.types.iter().position(|&t| t == m.graph.kind(top.v))
            {
                held[i] += top.needs;
            }
            return held;
        }
        for av in alloc.vertices.iter().filter(|av| av.exclusive) {
            let kind = m.graph.kind(av.v);
            if let Some(i) = self.types.iter().position(|&t| t == kind) {
                held[i] += av.needs;
            }
        }
        held
    }

    /// As [`RootAgg::may_fit`], counting the units of the reservations `holds` as free.
    fn may_fit_without(
        &self,
        m: &Matcher,
        needs: &[i64],
        t: i64,
        duration: u64,
        holds: &[&Held],
    ) -> bool {
        let Ok(window) = i64::try_from(planning_window(t, duration)) else {
            return true;
        };
        if window == 0 {
            return false;
        }
        let end = t.saturating_add(window);
        let overlapping: Vec<&Held> = holds
            .iter()
            .copied()
            .filter(|h| h.at < end && t < h.end)
            .collect();
        let wanted = || {
            self.types
                .iter()
                .enumerate()
                .filter_map(|(i, _)| needs.get(i).filter(|&&n| n > 0).map(|&n| (i, n)))
        };
        // Coarse first: every overlapping reservation's units free over the whole window.
        let coarse = wanted().all(|(i, need)| {
            let back: i64 = overlapping.iter().map(|h| held(h, i)).sum();
            self.free_during(m, i, t, window)
                .is_none_or(|free| free + back >= need)
        });
        if !coarse || overlapping.is_empty() {
            return coarse;
        }
        // Exact: cut the window where a reservation starts or ends; within a piece, each
        // reservation covers all of it or none.
        let mut cuts = vec![t, end];
        for h in &overlapping {
            cuts.extend([h.at, h.end].into_iter().filter(|&c| c > t && c < end));
        }
        cuts.sort_unstable();
        cuts.dedup();
        wanted().all(|(i, need)| {
            cuts.windows(2).all(|w| {
                let (a, b) = (w[0], w[1]);
                let back: i64 = overlapping
                    .iter()
                    .filter(|h| h.at <= a && b <= h.end)
                    .map(|h| held(h, i))
                    .sum();
                self.free_during(m, i, a, b - a)
                    .is_none_or(|free| free + back >= need)
            })
        })
    }
}

fn held(h: &Held, i: usize) -> i64 {
    h.held.get(i).copied().unwrap_or(0)
}
