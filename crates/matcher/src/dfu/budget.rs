//! Best-first early stop: a decision that may stop exploring once its count is met.

use shardsched_resource::Sym;

use super::{Walk, score};
use crate::request::ReqId;
use crate::types::SLOT;

/// A decision that may stop the walk early: `remaining` units of `kind` still wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    pub kind: Sym,
    /// Units still wanted; with `per_share`, shares (slots) still wanted.
    pub remaining: i64,
    /// Forming slots: the units one slot needs of `kind`, each candidate's whole amount
    /// counting towards one slot only (Fluxion's share tally); 0 otherwise.
    pub per_share: u64,
    /// Units towards the share being completed.
    pub accum: u64,
}

impl Budget {
    /// Counts a candidate of `kind` with `avail` units; true once nothing more is wanted.
    pub fn take(&mut self, kind: Sym, avail: u64) -> bool {
        if kind == self.kind {
            if self.per_share == 0 {
                self.remaining -= i64::try_from(avail).unwrap_or(i64::MAX);
            } else {
                self.accum = self.accum.saturating_add(avail);
                if self.accum >= self.per_share {
                    self.remaining -= 1;
                    self.accum = 0;
                }
            }
        }
        self.remaining <= 0
    }
}

impl Walk<'_> {
    /// A budget for deciding `with`, when early stop is exact: one child request with an
    /// exact count, of a type whose scores strictly increase along the graph order among
    /// the candidates the decision sees (`among`). With no two candidates tied, the best
    /// ones are the same however many worse ones are found (GCC's unstable sort places
    /// ties by the length of the list).
    pub(super) fn budget_for(&self, with: &[ReqId], among: score::Among) -> Option<Budget> {
        if !self.budgets {
            return None;
        }
        let [c] = with else { return None };
        let q = self.req.req(*c);
        if q.is_slot || q.count.min != q.count.max || q.ty == SLOT {
            return None;
        }
        let ordered = self.score_order.ordered(q.ty, among);
        let remaining = i64::try_from(q.count.min).unwrap_or(i64::MAX);
        ordered.then_some(Budget {
            kind: q.ty,
            remaining,
            per_share: 0,
            accum: 0,
        })
    }

    /// A budget for a matched resource choosing among the slots its children form (below a
    /// match only its children can: a vertex no request names is turned away), when early
    /// stop is exact: one slot request with an exact count, whose members are requests of
    /// exact counts with no contents, of unit-sized types whose scores strictly increase
    /// along the graph order among the resource's grandchildren. Every slot then holds the
    /// same number of members of each type; the slots one child forms take its best members
    /// in order, each slot's worse than the last; and every member a later child (in the
    /// walk's order, best-first) offers is worse than any an earlier one offers. So slot
    /// scores (one plus their members') never tie, and the best `count` are the first
    /// found. Counted in slots formed ([`SLOT`] candidates), not in units.
    pub(super) fn slot_budget_for(&self, with: &[ReqId]) -> Option<Budget> {
        if !self.budgets {
            return None;
        }
        let [c] = with else { return None };
        let q = self.req.req(*c);
        if !q.is_slot || q.count.min != q.count.max || q.with.is_empty() {
            return None;
        }
        let ordered = q.with.iter().all(|&m| {
            let m = self.req.req(m);
            !m.is_slot
                && m.with.is_empty()
                && m.count.min == m.count.max
                && self.score_order.unit_sized(m.ty)
                && self.score_order.ordered(m.ty, score::Among::Cousins)
        });
        let remaining = i64::try_from(q.count.min).unwrap_or(i64::MAX);
        ordered.then_some(Budget {
            kind: SLOT,
            remaining,
            per_share: 0,
            accum: 0,
        })
    }
}
