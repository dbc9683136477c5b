//! Visiting a vertex's children: all of them in graph order (Fluxion's static exploration),
//! or — under a stop-on-1 policy such as `first` — in the learned order, stopping as soon as
//! the requests at this level are met (its dynamic exploration).

use shardsched_resource::{Sym, VertexId};
use smallvec::SmallVec;

use super::leaf::{IdleRun, LeavesBelow};
use super::{Budget, Walk};
use crate::request::ReqId;
use crate::types::SLOT;

/// Up to this many requested types at one vertex, `first`'s tallies stay on the stack.
const INLINE_TALLIES: usize = 4;

/// Progress towards `multiplier` shares of one type (Fluxion's `share_tally_t`): what one
/// child finds (everything it added, its own candidacy and what it handed up) is one
/// indivisible bundle; a share is complete when the bundles since the last one reach
/// `per_share`, and the excess is dropped.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tally {
    pub(super) kind: Sym,
    per_share: u64,
    accum: u64,
    shares: u64,
    /// Met: later children of this type are not visited.
    pub(super) met: bool,
}

impl Tally {
    fn add(&mut self, n: u64) {
        self.accum = self.accum.saturating_add(n);
        if self.per_share > 0 && self.accum >= self.per_share {
            self.shares += 1;
            self.accum = 0;
        }
    }

    pub(super) fn satisfies(&self, multiplier: u64) -> bool {
        self.per_share == 0 || self.shares >= multiplier
    }

    /// Counts one child's candidacy of `avail` units, its bundle alone (a run's children:
    /// idle leaves, nodes answered from copies), and marks the tally met when that
    /// completes its shares.
    pub(super) fn take(&mut self, avail: u64, multiplier: u64) {
        self.add(avail);
        if self.satisfies(multiplier) {
            self.met = true;
        }
    }
}

impl<'a> Walk<'a> {
    /// Fluxion's `dom_exp` on the walked subsystem.
    pub(super) fn dom_exp(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: bool,
        budget: Option<&mut Budget>,
    ) {
        self.explore(u, reqs, pristine, excl, budget, 1);
    }

    /// Visits `u`'s children with `reqs`, adding each one that qualifies as a candidate.
    pub(super) fn explore(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: bool,
        budget: Option<&mut Budget>,
        multiplier: u64,
    ) {
        if self.policy.stop_at_first {
            self.explore_dynamically(u, reqs, pristine, excl, multiplier);
        } else {
            self.explore_statically(u, reqs, pristine, excl, budget);
        }
    }

    /// Whether a child of any type may take part: above a match (`pristine`, an omitted
    /// prefix) or where a slot may form.
    fn any_kind(&self, reqs: &[ReqId], pristine: bool) -> bool {
        pristine || reqs.iter().any(|&r| self.req.req(r).is_slot)
    }

    /// Below a match, a child whose type no request names (and no slot can form at) is not
    /// part of the request: Fluxion's visit of it fails at once (its `test` finds nothing,
    /// before any mark, label or candidate). Counted and answered here, without the visit.
    fn turn_away(&mut self) {
        self.errno = super::Errno::Busy;
        self.visits.0 += 1;
    }

    fn explore_statically(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: bool,
        mut budget: Option<&mut Budget>,
    ) {
        let children = self.tree.children(u);
        let n = children.len();
        // Best-first only under a budget; otherwise graph order, as Fluxion walks.
        let reverse = budget.is_some() && self.policy.prefer_high;
        let any_kind = self.any_kind(reqs, pristine);
        let mut below = LeavesBelow::default();
        for i in 0..n {
            let c = VertexId(children[if reverse { n - 1 - i } else { i }]);
            let kind = self.g.kind(c);
            if self.seen(u, c) {
                continue;
            }
            if !any_kind && !reqs.iter().any(|&r| self.req.req(r).ty == kind) {
                self.turn_away();
                continue;
            }
            let mut x = excl;
            let before = self.cands.groups.len();
            let vis = match self.visit_leaf(c, kind, reqs, pristine, &mut x, &mut below) {
                Some(vis) => vis,
                None => self.dom_dfv(c, reqs, pristine, &mut x, budget.as_deref_mut()),
            };
            let Some(vis) = vis else {
                continue;
            };
            self.cands.push_vertex(kind, vis.score, vis.avail(), c.0, x);
            if let Some(b) = budget.as_deref_mut() {
                // A budget of slots counts those the child formed; any other, the child.
                let met = if b.kind == SLOT {
                    let formed = self.cands.total(before..self.cands.groups.len(), SLOT);
                    b.take(SLOT, formed)
                } else {
                    b.take(kind, vis.avail())
                };
                if met {
                    return;
                }
            }
        }
    }

    fn explore_dynamically(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: bool,
        multiplier: u64,
    ) {
        let Some(order) = self.order else {
            return;
        };
        let mark = self.cands.groups.len();
        // On the stack for the usual few types: this runs at every vertex `first` walks.
        let mut tallies: SmallVec<[Tally; INLINE_TALLIES]> = SmallVec::new();
        for &r in reqs {
            let q = self.req.req(r);
            let t = Tally {
                kind: q.ty,
                per_share: q.effective_max(),
                accum: 0,
                shares: 0,
                met: false,
            };
            match tallies.iter_mut().find(|x| x.kind == q.ty) {
                Some(e) => *e = t,
                None => tallies.push(t),
            }
        }
        // Read as a slice from here on (a `SmallVec` asks at each access where it lives).
        let tallies = &mut tallies[..];
        // Tallies not marked met yet: the requests are all met when none is left (every
        // request has the tally of its type, and a tally met stays met).
        let mut unmet = tallies.len();
        // Candidates below `counted` are tallied (a failed child leaves nothing above).
        let mut counted = mark;
        // Asked only of a child no request names (rare where requests name every type).
        let mut any_kind = None;
        let (children, reversed) = order.children(self.child_lists, u);
        let mut known = self.start_children(u, (children, reversed), reqs, pristine, excl);
        let n = children.len();
        let mut below = LeavesBelow::default();
        let mut next = 0;
        while next < n {
            let i = next;
            next += 1;
            let c = VertexId(children[if reversed { n - 1 - i } else { i }]);
            let kind = known.kind(i).unwrap_or_else(|| self.g.kind(c));
            // Every request has a tally of its type: one look says whether the child's type
            // is met (skipped), asked (visited), or named by no request.
            let asked = match tallies.iter().find(|t| t.kind == kind) {
                Some(t) if t.met => continue,
                Some(_) => true,
                None => false,
            };
            if self.seen(u, c) {
                continue;
            }
            if !asked && !*any_kind.get_or_insert_with(|| self.any_kind(reqs, pristine)) {
                self.turn_away();
                continue;
            }
            let mut x = excl;
            let vis = match self.visit_leaf(c, kind, reqs, pristine, &mut x, &mut below) {
                Some(vis) => vis,
                None => match self.known_child(i, c, reqs, pristine, &mut x, &mut known) {
                    Ok(known) => known,
                    Err(Some(whole)) => self.dom_dfv_as(c, reqs, pristine, &mut x, None, whole),
                    Err(None) => self.dom_dfv(c, reqs, pristine, &mut x, None),
                },
            };
            let Some(vis) = vis else {
                continue;
            };
            self.cands.push_vertex(kind, vis.score, vis.avail(), c.0, x);
            let end = self.cands.groups.len();
            if end == counted + 1 {
                // The child's candidacy alone (as from every kept visit): its own type grows.
                if let Some(t) = tallies.iter_mut().find(|t| t.kind == kind)
                    && vis.avail() > 0
                {
                    t.add(vis.avail());
                }
            } else {
                for t in tallies.iter_mut() {
                    let grown = self.cands.total(counted..end, t.kind);
                    if grown > 0 {
                        t.add(grown);
                    }
                }
            }
            counted = end;
            // Every tally belongs to a request, so this marks each request's type met.
            for t in tallies.iter_mut() {
                if !t.met && t.satisfies(multiplier) {
                    t.met = true;
                    unmet -= 1;
                }
            }
            debug_assert_eq!(
                unmet == 0,
                reqs.iter().all(|&r| {
                    let ty = self.req.req(r).ty;
                    tallies
                        .iter()
                        .find(|t| t.kind == ty)
                        .is_some_and(|t| t.satisfies(multiplier))
                }),
                "the requests are met when every tally is"
            );
            if unmet == 0 {
                break;
            }
            // The leaves of an idle group that follow the one just found: each answered
            // from itself while its type is not met (the other tallies do not move). (Read
            // before it is taken: a take writes, and this is asked after every child.)
            if below.run.is_some()
                && let Some(run) = below.run.take()
                && let Some(t) = tallies.iter().position(|t| t.kind == run.kind && !t.met)
            {
                let tally = &mut tallies[t];
                let asked = (reqs, pristine, multiplier);
                next +=
                    self.follow_idle_run(run, (children, reversed, next), tally, asked, &mut below);
                if tally.met {
                    unmet -= 1;
                }
                counted = self.cands.groups.len();
                if unmet == 0 {
                    break;
                }
            }
            // The nodes that follow, while their run's copies answer them.
            if known.has_run()
                && let Some(t) = tallies.iter().position(|t| t.kind == kind && !t.met)
            {
                let tally = &mut tallies[t];
                let asked = (reqs, pristine, excl, multiplier);
                next += self.follow_node_run((children, reversed, next), tally, asked, &known);
                if tally.met {
                    unmet -= 1;
                }
                counted = self.cands.groups.len();
                if unmet == 0 {
                    break;
                }
            }
        }
        self.end_children(u, known);
    }

    /// Candidates for the leaves of `run`'s idle cover group that come next among the
    /// children (`children`, read backwards when `reversed`, from `next`), each answered
    /// from itself ([`Walk::next_idle_leaf`]) until `tally` (their type's) is met or a
    /// child is no such leaf. Returns how many it took. Out of line: the exploration's own
    /// loop, which runs at every vertex `first` walks, stays lean.
    #[inline(never)]
    fn follow_idle_run(
        &mut self,
        run: IdleRun,
        (children, reversed, next): (&[u32], bool, usize),
        tally: &mut Tally,
        (reqs, pristine, multiplier): (&'a [ReqId], bool, u64),
        below: &mut LeavesBelow,
    ) -> usize {
        let n = children.len();
        let mut i = next;
        while i < n && !tally.met {
            let c = VertexId(children[if reversed { n - 1 - i } else { i }]);
            let Some(vis) = self.next_idle_leaf(c, run, (reqs, pristine), below) else {
                break;
            };
            i += 1;
            self.cands
                .push_vertex(run.kind, vis.score, vis.avail(), c.0, run.excl);
            tally.take(vis.avail(), multiplier);
        }
        i - next
    }
}
