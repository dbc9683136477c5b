//! A leaf asked for itself: the visit of a leaf that one request names and asks nothing
//! below, answered in one pass.
//!
//! Why: most vertices a select enters are leaves (a socket's 22 cores under `first-1024`'s
//! socket jobs: 54,000 of its 56,500 visits), and each went through the general visit —
//! `test`, `prune`, `finish_vtx` and the rest, each looping over the request list, checking
//! the walk's modes and asking the state twice whether the vertex is a leaf: ~450
//! instructions a leaf, of which reading its calendar is ~100. For such a leaf most of that
//! is known before it is met: which request names it, that it forms no slot and chooses
//! nothing, holds no label and needs no aggregate. [`Walk::visit_leaf`] does exactly what the
//! general visit does then — the same checks in the same order, the same counts, errno,
//! exclusivity and score — and leaves every other case to it. Debug builds walk every such
//! leaf the general way too and compare.

use shardsched_resource::{Status, Sym, VertexId};

use super::{Errno, Visit, Walk, perf_class};
use crate::request::ReqId;
use crate::state::{IdleGroup, Usage, XCHECK_TOTAL};

/// What one exploration finds once for the leaves it meets, each at the first leaf that
/// needs it. Why: a free socket's 22 cores are most of what `first-1024`'s selects visit,
/// and each asked again what its siblings had answered: the request's case for its type
/// (~50 instructions) and its calendar (~130).
#[derive(Default)]
pub(super) struct LeavesBelow {
    /// Whether nothing holds the last cover group's leaves over the window: then no leaf's
    /// calendar of the group is read.
    group: IdleGroup,
    /// The last type met (and the exclusivity it was met under), and what
    /// [`Walk::leaf_case`] said of it.
    case: Option<(Sym, bool, Option<bool>)>,
    /// The leaf just visited was a candidate of an idle cover group: its group's next
    /// leaves may be answered from themselves ([`Walk::next_idle_leaf`]). Set by each such
    /// visit, taken by the exploration right after it.
    pub(super) run: Option<IdleRun>,
}

/// A leaf of an idle cover group that a visit found a candidate, and how: every other leaf
/// of the group, met in the same exploration, has all its units and no job too.
#[derive(Clone, Copy, Debug)]
pub(super) struct IdleRun {
    group: u32,
    /// The leaves' type.
    pub(super) kind: Sym,
    /// The exclusivity the leaf was asked under, and the one it handed up.
    excl_in: bool,
    pub(super) excl: bool,
}

/// What the general visit of a leaf would do: its candidacy and the exclusivity it hands
/// up (on success), or the errno it sets (on failure).
#[derive(Clone, Copy, Debug, PartialEq)]
struct LeafOutcome {
    visit: Option<Visit>,
    excl: bool,
    errno: Option<Errno>,
}

impl<'a> Walk<'a> {
    /// Visits `c` (of type `kind`) with `reqs` as [`Walk::dom_dfv`] would, when `c` is a
    /// leaf this shortcut answers (see the module's doc); `None` (and nothing done) when not.
    /// Whether `c` may be one is asked here, inlined into the exploration: a node (what a
    /// rack's exploration meets, its type at hand) costs a compare, and the rest two loads.
    #[inline(always)]
    pub(super) fn visit_leaf(
        &mut self,
        c: VertexId,
        kind: Sym,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        below: &mut LeavesBelow,
    ) -> Option<Option<Visit>> {
        if Some(kind) == self.node || !self.is_leaf(c) {
            return None;
        }
        self.visit_leaf_itself(c, kind, reqs, pristine, excl, below)
    }

    fn visit_leaf_itself(
        &mut self,
        c: VertexId,
        kind: Sym,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        below: &mut LeavesBelow,
    ) -> Option<Option<Visit>> {
        let outcome = self.leaf_outcome(c, kind, reqs, *excl, below)?;
        if cfg!(debug_assertions) {
            let (visits, errno) = (self.visits, self.errno);
            let mut x = *excl;
            let walked = self.dom_dfv(c, reqs, pristine, &mut x, None);
            let expected = LeafOutcome {
                visit: walked,
                excl: x,
                errno: (self.errno != errno).then_some(self.errno),
            };
            let counted = (self.visits.0 - visits.0, self.visits.1 - visits.1);
            let mine = (1, u32::from(outcome.visit.is_some()));
            // (An errno set to what it was reads as unchanged on both sides.)
            let outcome_seen = LeafOutcome {
                errno: outcome.errno.filter(|&e| e != errno),
                ..outcome
            };
            assert_eq!(
                (outcome_seen, mine),
                (expected, counted),
                "a leaf's short visit differs from its visit"
            );
            *excl = x;
            return Some(walked);
        }
        self.visits.0 += 1;
        if let Some(e) = outcome.errno {
            self.errno = e;
        }
        if outcome.visit.is_some() {
            self.visits.1 += 1;
            *excl = outcome.excl;
            // `finish_vtx` starts by clearing the choices.
            self.choices.clear();
        }
        Some(outcome.visit)
    }

    /// What the general visit of leaf `c` would do, when it is a case this shortcut
    /// answers: a leaf of the state too, not a node, met by a plain walk (no
    /// satisfiability, flexible, constrained-node, DAG or allocation-refusing one), named by
    /// exactly one request and no slot, that request asking nothing below it and holding no
    /// label or aggregate need, and not asking it shared under an exclusive parent.
    fn leaf_outcome(
        &self,
        c: VertexId,
        kind: Sym,
        reqs: &[ReqId],
        excl: bool,
        below: &mut LeavesBelow,
    ) -> Option<LeafOutcome> {
        // The same for every leaf of one type an exploration meets: asked once.
        let case = match below.case {
            Some((k, x, case)) if k == kind && x == excl => case,
            _ => {
                let case = self.leaf_case(kind, reqs, excl);
                below.case = Some((kind, excl, case));
                case
            }
        };
        let x_in = case?;
        if !self.st.is_leaf(c) {
            return None;
        }
        let busy = LeafOutcome {
            visit: None,
            excl,
            errno: Some(Errno::Busy),
        };
        // `prune`: status, own units free, and, asked exclusively, no job there.
        if self.g.status(c) != Status::Up {
            return Some(busy);
        }
        let w = &self.win;
        let size = self.g.size(c);
        let st = self.st;
        let group = st.cover_group(c);
        let idle = group.is_some_and(|p| below.group.ask(st, p, w.at, w.dur));
        let usage = if idle {
            Usage {
                units_free: size,
                jobs_free: XCHECK_TOTAL,
            }
        } else {
            st.usage(c, size, w.at, w.dur)
        };
        debug_assert_eq!(
            usage,
            st.usage(c, size, w.at, w.dur),
            "a leaf of an idle group"
        );
        if usage.units_free <= 0 || (x_in && usage.jobs_free < XCHECK_TOTAL) {
            return Some(busy);
        }
        if idle && let Some(group) = group {
            below.run = Some(IdleRun {
                group,
                kind,
                excl_in: excl,
                excl: x_in,
            });
        }
        Some(LeafOutcome {
            visit: Some(Visit::new(
                self.leaf_score(c),
                u64::try_from(usage.units_free).unwrap_or(0),
            )),
            excl: x_in,
            errno: None,
        })
    }

    /// `finish_vtx`'s score of leaf `c` (it has nothing to choose).
    #[inline]
    fn leaf_score(&self, c: VertexId) -> i64 {
        if self.policy.variation {
            1 + perf_class(self.g, c)
        } else {
            1 + self.multilevel + self.g.id(c) + 1
        }
    }

    /// The visit of `c`, met in an exploration right after a leaf of `run`'s idle cover
    /// group was found a candidate, when `c` is an up leaf of that group with units: what
    /// [`Walk::visit_leaf`] gives then (the same case, the group still idle over the same
    /// window), read off `c` alone. `None`, and nothing done, for any other child.
    ///
    /// Why: a free socket's 22 cores each went through the whole short visit, asking again
    /// what the first had answered, and through the exploration's loop (~250 instructions
    /// a core). Debug builds visit each such leaf the short way too (itself checked against
    /// the general visit) and compare.
    #[inline]
    pub(super) fn next_idle_leaf(
        &mut self,
        c: VertexId,
        run: IdleRun,
        (reqs, pristine): (&'a [ReqId], bool),
        below: &mut LeavesBelow,
    ) -> Option<Visit> {
        if self.g.kind(c) != run.kind
            || !self.is_leaf(c)
            || self.st.cover_group(c) != Some(run.group)
            || self.g.status(c) != Status::Up
        {
            return None;
        }
        let size = u64::try_from(self.g.size(c)).ok().filter(|&s| s > 0)?;
        let visit = Visit::new(self.leaf_score(c), size);
        debug_assert!(
            self.choices.list.is_empty(),
            "choices made since the group's leaf"
        );
        if cfg!(debug_assertions) {
            let mut x = run.excl_in;
            let short = self.visit_leaf_itself(c, run.kind, reqs, pristine, &mut x, below);
            // (That visit notes a run again: taken already, as in a build without it.)
            below.run = None;
            assert_eq!(
                (short, x),
                (Some(Some(visit)), run.excl),
                "an idle group's next leaf differs from its visit"
            );
            return Some(visit);
        }
        // What `visit_leaf_itself` counts for a candidate. (It clears the choices too: the
        // group's first leaf did, and nothing chose since.)
        self.visits.0 += 1;
        self.visits.1 += 1;
        Some(visit)
    }

    /// Whether leaves of type `kind` that `reqs` ask (under a parent taken exclusively when
    /// `excl`) are a case this shortcut answers, and if so whether they are asked
    /// exclusively: everything [`Walk::leaf_outcome`] asks of a leaf but the leaf itself.
    fn leaf_case(&self, kind: Sym, reqs: &[ReqId], excl: bool) -> Option<bool> {
        if self.req.flexible
            || self.dag.is_some()
            || self.allocated.is_some()
            || self.walk_node_itself
            || self.win.kind.ignores_calendars()
            || (self.req.constraint.is_some() && Some(kind) == self.storage_node)
        {
            return None;
        }
        let mut named = None;
        for &r in reqs {
            let q = self.req.req(r);
            if q.is_slot || (q.ty == kind && named.is_some()) {
                return None;
            }
            if q.ty == kind {
                named = Some(q);
            }
        }
        let q = named?;
        if !q.with.is_empty() || q.label.is_some() || !q.user_data.is_empty() {
            return None;
        }
        // `exclusivity`, and `prune`'s refusal of a shared request under an exclusive
        // parent (it complains: left to the general visit).
        let x_in = excl || q.exclusive == Some(true);
        if x_in && q.exclusive == Some(false) {
            return None;
        }
        Some(x_in)
    }
}
