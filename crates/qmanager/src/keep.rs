//! Which reservations a re-plan would put back where they are, proven from what changed.
//!
//! # What a placement depends on
//!
//! By definition a cycle cancels every reservation and walks the pending order, placing each
//! job in turn: started now, reserved at its earliest fit, or — beyond the reservation depth
//! — started now or left waiting. Job `j`'s placement depends only on its *view*: the
//! calendars of the running jobs, the node holds, and the placements of the jobs before it in
//! walk order (those after it are cancelled when it is placed). Four facts about the matcher
//! are used (the shortcuts of module `cycle` rest on them too; the differential tests replay
//! workloads both ways and compare every start):
//!
//! - **(A1) window**: a match at instant `t` for `d` seconds reads the calendars over
//!   `[t, t + d)` and nothing else, so two views equal over that window get the same answer
//!   there, vertices included.
//! - **(A2) earliest fit**: allocate-or-else-reserve answers the earliest instant at or after
//!   `now` at which a match succeeds. That instant is `now` or the end of a hold of the view:
//!   between two ends nothing is freed, so a match that succeeds at `t` also succeeds at the
//!   last end before `t` (or at `now`).
//! - **(A3) monotony**: freeing calendar time never makes a match fail that succeeded.
//! - **(A4) independence**: a match that picks vertices `V` at `t` picks `V` again when holds
//!   are added that leave `V` free over its window: the candidates it passed over only got
//!   fewer. Jobs started behind a reservation (backfilled) avoid its vertices, so they do
//!   not move it when they are in its view at the next re-plan; the cycle's `Retry` and
//!   `Continue` shortcuts rely on this already.
//!
//! # What changed ([`Delta`])
//!
//! Each reservation was the exact placement in its view when the last cycle ended. Since
//! then its view can only have changed by **freed** time: a running job that ended (or was
//! cancelled) before its planned end frees `[now, planned end)`, a cancelled reservation
//! frees its window. (Arrivals come after it in walk order; a job that ended on time freed
//! nothing after `now`; jobs backfilled behind it changed nothing by (A4); anything else — an
//! order change, availability, holds — re-plans everything.) During the re-plan, each job before it in walk order whose placement changed
//! adds two more: its old reservation's window is freed and its new window is **taken**
//! (`[now, now + d)` when it starts now). Only intervals are recorded, not vertices.
//!
//! # Rule 1: a reservation stays ([`QueueManager::stays`])
//!
//! Reservation `R` of job `j`, at `t > now` over `[t, e)`, comes back exactly where it is
//! (same start, same vertices) when
//!
//! 1. **no change meets `[t, e)`**: by (A1) the match at `t` sees what it saw and picks the
//!    same vertices; and
//! 2. **no match succeeds at any `s` in `[now, t)`**. Where `[s, s + d)` meets no change, the
//!    calendars are as they were when it failed there (`t` was the earliest fit). Where it
//!    meets only taken time, less is free than then, so it fails (A3). Only windows meeting
//!    freed time can succeed, and by (A2) the earliest such `s` is `now` or the end of a hold
//!    of `j`'s view. So at `now` and at every end of a running job, reservation or node hold
//!    whose window meets freed time before `t` (a superset of those ends), the root's
//!    aggregates must fall short of what `j` needs, counting as free the units of `R` itself
//!    and of every reservation still held for a job after `j` — the re-plan has those
//!    cancelled when it places `j`. The aggregates count free units, not where they are, so
//!    they can only over-estimate what a match finds: "falls short" is never wrong.
//!
//! Then `R` is left in the matcher untouched, and the changes do not grow.
//!
//! # Rule 2: placing a job while later reservations are still held (module `replan`)
//!
//! A job that must be placed again finds in the matcher the reservations of jobs after it
//! that the walk has not reached (its *tail*), which the definition has cancelled. A tail
//! reservation starting at or after `B` cannot change an answer whose search looks only at
//! windows ending by `B` (A1). The job is first matched with the whole tail held. What that
//! finds still succeeds without the tail (A3), so the exact answer's window ends by its end;
//! and by the end of the job's old reservation too, when that started at or after `now` and
//! no taken change meets its window (the old placement still succeeds: only freed time met
//! it, (A3)). `B` is the earlier of the two ends. When no tail reservation starts before
//! `B`, the answer ends by `B` (an old placement ending at `B` meets no tail reservation, so
//! the match would have found it), every window it tried read what the definition reads, and
//! the answer is exact. It is exact too when no tail reservation meets its window `[a, b)`
//! (the match at `a` read what the definition reads, (A1)) and no earlier instant can succeed
//! with the tail cancelled: windows meeting no tail reservation failed in the same calendars,
//! and for the others part 2 of rule 1 applies, with the tail's windows as what changed and
//! the units of the tail and of the answer itself counted free
//! ([`QueueManager::exact_despite_tail`]). Otherwise the tail reservations starting before
//! `B` are cancelled (the walk places them again when it gets there) and the job is matched
//! again, now exactly. The first match answers no earlier than the first instant the
//! root's aggregates admit the job with the whole tail held (where its search starts), so
//! `B` is at least the earlier of the end of a window starting there and the old
//! reservation's end: tail reservations starting before that are cancelled before the first
//! match. The argument above holds for any part of the tail being held, and those
//! reservations would be cancelled after the first match anyway, unless it happened to be
//! exact despite them (then the walk puts them back, most without a match, by rule 1).
//!
//! A job placed again at the same start on the same vertices changes nothing; any other
//! outcome frees its old window and takes its new one. A tail reservation cancelled this way
//! is, when the walk reaches it, just a job whose old reservation rule 1 may still prove: if
//! it does, the old allocation, kept when it was cancelled, goes back into the matcher
//! without a match (it fits: nothing placed since meets its window, and the tail behind it
//! was placed around it).

use std::ops::Bound;

use shardsched_matcher::Matcher;
use smallvec::SmallVec;

use crate::event::JobId;
use crate::queue::{Key, QueueManager};
use crate::reservations::Reserved;
use crate::shapes::{RootAgg, planning_window};

/// With more reservations than this, a re-plan cancels them all rather than prove which ones
/// stay (each proof looks at every reservation behind it).
pub const KEEP_CHECK_RESERVATIONS_MAX: usize = 128;
/// Candidate instants a proof of rule 1 checks at most; beyond, the reservation is placed
/// again rather than proven.
pub const KEEP_CHECK_INSTANTS_MAX: usize = 256;

/// How one interval of a view changed (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    Freed,
    Taken,
}

/// What changed in the views of the jobs not yet placed, as intervals `[start, end)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Delta {
    changes: Vec<(i64, i64, Change)>,
}

impl Delta {
    /// The time freed since the last cycle; only what lies after `now` can matter.
    pub(crate) fn freed_since(freed: &[(i64, i64)], now: i64) -> Delta {
        let mut d = Delta::default();
        for &(start, end) in freed {
            d.push(start.max(now), end, Change::Freed);
        }
        d
    }

    pub(crate) fn push(&mut self, start: i64, end: i64, change: Change) {
        if start < end {
            self.changes.push((start, end, change));
        }
    }

    /// Whether some change meets `[start, end)`.
    pub(crate) fn meets(&self, start: i64, end: i64) -> bool {
        self.changes.iter().any(|c| c.0 < end && start < c.1)
    }

    /// Whether some taken interval meets `[start, end)`.
    pub(crate) fn taken_meets(&self, start: i64, end: i64) -> bool {
        self.changes
            .iter()
            .any(|c| c.2 == Change::Taken && c.0 < end && start < c.1)
    }

    fn freed(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.changes
            .iter()
            .filter(|c| c.2 == Change::Freed)
            .map(|c| (c.0, c.1))
    }
}

/// A reservation as rule 1 counts it free.
pub(crate) struct Held<'a> {
    pub(crate) at: i64,
    pub(crate) end: i64,
    held: &'a [i64],
}

impl Held<'_> {
    fn of(r: &Reserved) -> Held<'_> {
        Held {
            at: r.at,
            end: r.end,
            held: &r.held,
        }
    }
}

impl QueueManager {
    /// Rule 1 of the module documentation: whether job `id`'s reservation at `at` over
    /// `[at, end)` — held, or cancelled earlier in this re-plan — is what the re-plan at
    /// `now` would place, given the changes `delta` in its view.
    pub(crate) fn stays(&self, id: JobId, at: i64, end: i64, now: i64, delta: &Delta) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        if at <= now || delta.meets(at, end) {
            return false;
        }
        // Free in the re-plan's view: every reservation behind it, and this one (if held).
        let mut free = self.held_behind(job.key);
        free.extend(self.reservations.get(id).map(Held::of));
        self.fits_nowhere_before(id, now, at, delta, &free)
    }

    /// Rule 2's shortcut: whether job `id`, just matched over `[at, end)` with its tail held,
    /// got what it would get with the tail cancelled, so that no tail reservation need go.
    /// True when no tail reservation meets `[at, end)` — the match at `at` read what the
    /// definition reads (A1) — and no match can succeed earlier with the tail cancelled: at
    /// instants whose windows meet no tail reservation the match failed in the same
    /// calendars, and at the others (rule 1, part 2, with the tail windows as what changed)
    /// the root's aggregates fall short with the tail's units and the job's own counted free.
    pub(crate) fn exact_despite_tail(&self, id: JobId, now: i64, at: i64, end: i64) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        let tail = self.held_behind(job.key);
        if tail.iter().any(|h| h.at < end && at < h.end) {
            return false;
        }
        let mut windows = Delta::default();
        for h in &tail {
            windows.push(h.at, h.end, Change::Freed);
        }
        let own = self.root.held(&self.matcher, id);
        let mut free = tail;
        free.push(Held {
            at,
            end,
            held: &own,
        });
        self.fits_nowhere_before(id, now, at, &windows, &free)
    }

    /// The reservations behind `key` in walk order, as rule 1 counts them free, with room
    /// for one more (the job's own window). Made with room for them all at once: a filter
    /// over the map does not say how many pass, and collecting grew the vector again and
    /// again at every job a re-plan walks.
    fn held_behind(&self, key: Key) -> Vec<Held<'_>> {
        let mut held = Vec::with_capacity(self.reservations.len() + 1);
        held.extend(self.reservations.behind(key).map(Held::of));
        held
    }

    /// Whether job `id` certainly cannot start at any instant in `[now, before)` whose window
    /// meets what `delta` freed, with the reservations `free` counted as free (rule 1, part
    /// 2). Windows meeting only taken time or no change are not looked at: the caller knows
    /// that the match failed there.
    fn fits_nowhere_before(
        &self,
        id: JobId,
        now: i64,
        before: i64,
        delta: &Delta,
        free: &[Held],
    ) -> bool {
        let Some(job) = self.jobs.get(&id) else {
            return false;
        };
        let duration = job.jobspec.attributes.duration;
        let Some(instants) = self.candidate_instants(now, before, duration, delta) else {
            return false;
        };
        let one_by_one = || {
            !instants.iter().any(|&t| {
                self.root
                    .may_fit_without(&self.matcher, &job.needs, t, duration, free)
            })
        };
        let Some(none) =
            self.root
                .fits_at_none(&self.matcher, &job.needs, &instants, duration, free)
        else {
            return one_by_one();
        };
        debug_assert_eq!(none, one_by_one(), "the sweep answers otherwise");
        none
    }

    /// Instants in `[now, before)` at which a job of `duration` seconds may start to fit in
    /// its view, among those whose window meets freed time: `now` and the ends of running
    /// jobs, reservations and node holds (rule 1, part 2). `None` when there are more than
    /// [`KEEP_CHECK_INSTANTS_MAX`].
    fn candidate_instants(
        &self,
        now: i64,
        before: i64,
        duration: u64,
        delta: &Delta,
    ) -> Option<Vec<i64>> {
        let d = i64::try_from(duration).unwrap_or(i64::MAX);
        let mut instants = Vec::new();
        for (x, y) in delta.freed() {
            // [s, s + d) meets [x, y) when x - d < s < y (any s < y when unlimited).
            let lo = if d == 0 {
                now
            } else {
                x.saturating_sub(d).saturating_add(1).max(now)
            };
            let hi = y.min(before);
            if lo >= hi {
                continue;
            }
            if lo == now {
                instants.push(now);
            }
            let range = (
                Bound::Included((lo, JobId::MIN)),
                Bound::Excluded((hi, JobId::MIN)),
            );
            let running = self.running_ends.range(range).map(|&(t, _)| t);
            let holds = self.hold_ends.range(range).map(|&(t, _)| t);
            let reserved = self.reservations.ends_between(lo - 1, hi);
            instants.extend(running.chain(holds).chain(reserved));
            if instants.len() > KEEP_CHECK_INSTANTS_MAX {
                sort_dedup(&mut instants);
                if instants.len() > KEEP_CHECK_INSTANTS_MAX {
                    return None;
                }
            }
        }
        sort_dedup(&mut instants);
        Some(instants)
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
            if let Some(top) = alloc.last()
                && top.v == self.root
                && top.exclusive
                && let Some(i) = self.types.iter().position(|&t| t == m.graph.kind(top.v))
            {
                held[i] += top.needs;
            }
            return held;
        }
        for av in alloc.iter().filter(|av| av.exclusive) {
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
        holds: &[Held],
    ) -> bool {
        let Ok(window) = i64::try_from(planning_window(t, duration)) else {
            return true;
        };
        if window == 0 {
            return false;
        }
        let end = t.saturating_add(window);
        // The reservations meeting the window, found once: a proof asks about a job's
        // window at several instants with every reservation behind it (25 on average in
        // the 5,000-job replay), and each piece of the exact check below asked again.
        let overlapping: SmallVec<[&Held; 16]> =
            holds.iter().filter(|h| h.at < end && t < h.end).collect();
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
        // reservation covers all of it or none. (With its room: growing it was ~8 % of the
        // proofs' time.)
        let mut cuts: SmallVec<[i64; 32]> = SmallVec::with_capacity(2 + 2 * overlapping.len());
        cuts.extend([t, end]);
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

/// Sorts `v` and drops repeats.
fn sort_dedup(v: &mut Vec<i64>) {
    v.sort_unstable();
    v.dedup();
}

pub(crate) fn held(h: &Held, i: usize) -> i64 {
    h.held.get(i).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_meets_by_interval_and_kind() {
        let mut d = Delta::freed_since(&[(0, 50), (10, 10)], 20);
        assert!(d.meets(40, 60));
        assert!(!d.meets(50, 60), "[20, 50) ends where the window starts");
        assert!(!d.meets(0, 20), "clamped to now");
        assert!(!d.taken_meets(0, 100));
        d.push(70, 80, Change::Taken);
        assert!(d.taken_meets(60, 71));
        assert!(!d.taken_meets(80, 90));
        assert_eq!(d.freed().collect::<Vec<_>>(), [(20, 50)]);
    }
}
