//! Fluxion's reservation search (`dfu_traverser_t::schedule`, `allocate_orelse_reserve`
//! and `without_allocating_future`): the times the root's aggregate could hold the request,
//! each tried with a full select, and the errno the planner leaves on the way.
//!
//! Fluxion's loop is `for (t = planner_multi_avail_time_first (..); t != -1 && rc; t =
//! planner_multi_avail_time_next (..)) rc = select (..)`: a select's errno and the planner's
//! are one variable, each step overwriting what the one before it left. What the planner
//! leaves ([`TimeAsked`]) shows whenever the search ends without a match (ENOENT: Fluxion
//! then asks the far horizon) and when the update of the time found takes nothing (the
//! match fails with the errno as it stands).

use crate::Matcher;
use crate::dfu::{Errno, WalkKind};
use crate::request::Request;
use crate::state::{PLAN_BASE, PLAN_HORIZON};

/// The time a reservation search found, and Fluxion's errno just before its select (the
/// update of that time, when it takes nothing, answers with the errno the select and the
/// following ask of the planner leave on top of it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub at: i64,
    pub errno_before: Errno,
}

/// One ask of Fluxion's planner for the next time (`planner_multi_avail_time_first` or
/// `_next`), with what it does to errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TimeAsked {
    at: Option<i64>,
    /// Whether a time was turned away by a type after the aggregate's first.
    ///
    /// Fluxion's multi-planner walks the times its *first* type's planner offers (that
    /// type's change points where its own need fits for the whole duration) and checks
    /// each against the other types with `planner_avail_during`, which sets EBUSY when one
    /// does not fit. So a time turned away by any type but the first leaves EBUSY, over
    /// whatever the last select left — in particular over the ENODEV of a select whose
    /// root's visit succeeded empty. With a first type the request does not use (need 0:
    /// `ssd` before `core` at the root of the random differential's small graphs) every
    /// change point is offered and checked (seed 55038).
    turned_away: bool,
}

impl TimeAsked {
    /// Sets `errno` as Fluxion's ask leaves it: ENOENT when no time is left, else EBUSY
    /// when a time was turned away on the way, else unchanged.
    fn apply(self, errno: &mut Errno) -> Option<i64> {
        if self.turned_away {
            *errno = Errno::Busy;
        }
        if self.at.is_none() {
            *errno = Errno::NoEnt;
        }
        self.at
    }
}

impl Matcher {
    /// Fluxion's reservation search: from `now + 1`, the times at which jobs start or end
    /// where the root's aggregate has the request's totals for the whole duration, each
    /// tried with a full select; the first that succeeds.
    pub(crate) fn search_times(
        &mut self,
        req: &Request,
        now: i64,
        dur: u64,
        kind: WalkKind,
    ) -> Option<Found> {
        let need = self.root_need(req);
        if let Some(a) = self.state.aggregate(self.graph.root())
            && need.iter().zip(a.totals()).any(|(n, t)| n > t)
        {
            self.errno = Errno::Range;
            return None;
        }
        let mut t = now.saturating_add(1);
        loop {
            let next = self.next_time(t, dur, &need).apply(&mut self.errno)?;
            t = next.saturating_add(1);
            let errno_before = self.errno;
            if self.select(req, next, now, dur, kind) {
                self.ask_following_time(&need, next, dur);
                return Some(Found {
                    at: next,
                    errno_before,
                });
            }
        }
    }

    /// Fluxion's loop asks for the time after `at` even after a successful select: what
    /// that ask leaves (ENOENT when none is left, EBUSY when it turned one away) shows when
    /// the update then takes nothing (random differential seeds 62677, 55038).
    pub(crate) fn ask_following_time(&mut self, need: &[i64], at: i64, dur: u64) {
        self.next_time(at.saturating_add(1), dur, need)
            .apply(&mut self.errno);
    }

    /// What the request needs of the root's aggregate, in the aggregate's order.
    pub(crate) fn root_need(&self, req: &Request) -> Vec<i64> {
        match self.state.aggregate(self.graph.root()) {
            Some(a) => a
                .ranks
                .iter()
                .map(|r| Request::amount(&req.totals, *r).unwrap_or(0))
                .collect(),
            None => Vec::new(),
        }
    }

    /// The first time at or after `from` at which a job starts or ends and the root's
    /// aggregate has `need` for `dur` (Fluxion's `planner_multi_avail_time_first/next`), and
    /// whether a time its first type offered was turned away before it ([`TimeAsked`]).
    /// Only the times the first type's planner offers are looked at (module `instants`).
    fn next_time(&mut self, from: i64, dur: u64, need: &[i64]) -> TimeAsked {
        let horizon = PLAN_BASE + i64::try_from(PLAN_HORIZON).unwrap_or(i64::MAX);
        let agg = self.state.aggregate(self.graph.root());
        let mut turned_away = false;
        let mut next = Some(from);
        while let Some(t) = next.and_then(|f| self.instants.from(f).next()) {
            next = t.checked_add(1);
            // Past the horizon the first type's planner ends the search (ENOENT) before
            // the others are asked; later times are further past it.
            if crate::saturating_end(t, dur) > horizon {
                break;
            }
            if let (Some(a), Some(&n0)) = (agg, need.first())
                && !self.instants.offers(t, a.cal.avail_at(t, 0), n0)
            {
                continue;
            }
            if agg.is_none_or(|a| a.fits_during(t, dur, need)) {
                return TimeAsked {
                    at: Some(t),
                    turned_away,
                };
            }
            // The first type's need fits and another's does not: `planner_avail_during`.
            turned_away |= agg.is_some_and(|a| {
                need.first()
                    .is_some_and(|&n0| a.cal.avail_during(t, dur, 0) >= n0)
            });
        }
        TimeAsked {
            at: None,
            turned_away,
        }
    }
}
