//! One vertex's visit: Fluxion's `dom_dfv` — its test and prune, the walk below it, and
//! its candidacy for its parent — with the shortcuts that answer it without the walk.

use shardsched_resource::VertexId;

use super::qualify::MatchKind;
use super::{Budget, Errno, Visit, Walk, score};
use crate::request::ReqId;
use crate::state::WholeNode;

impl<'a> Walk<'a> {
    /// Visits `u` with request list `reqs`; on success returns `u`'s candidacy, and leaves
    /// on the stack what `u` hands up (unless it matched and decided itself).
    pub(super) fn dom_dfv(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        budget: Option<&mut Budget>,
    ) -> Option<Visit> {
        // A free node whose visit `memo` makes or checks is walked as any vertex.
        let itself = std::mem::take(&mut self.walk_node_itself);
        let whole = if !itself && !self.win.kind.ignores_calendars() {
            self.st.whole_node(u, self.win.at, self.win.dur)
        } else {
            WholeNode::Other
        };
        self.dom_dfv_as(u, reqs, pristine, excl, budget, whole)
    }

    /// [`Walk::dom_dfv`], given what `SchedState::whole_node` knows of `u` (`Other` where
    /// the walk does not ask it).
    pub(super) fn dom_dfv_as(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        budget: Option<&mut Budget>,
        whole: WholeNode,
    ) -> Option<Visit> {
        match whole {
            // (Not in an exact walk: its test may leave a message, as Fluxion's does.)
            WholeNode::Covered if !self.exact_visits => return self.covered(),
            WholeNode::Free(c) if self.keeps_visits => {
                return self.visit_free_node(c, u, reqs, pristine, excl, budget);
            }
            _ => {}
        }
        let x_in = *excl || self.exclusivity(reqs, u);
        let t = self.test(u, reqs, pristine);
        self.visits.0 += 1;
        if t.kind == MatchKind::None {
            if t.clash {
                self.complain_of_clash(u);
            }
            self.errno = Errno::Busy;
            return None;
        }
        let mut free = None;
        if !self.prune(x_in, u, reqs, &mut free) {
            return None;
        }
        if !self.exact_visits && !self.subtree_may_hold(u, &t, reqs) {
            self.errno = self.errno_of_empty_subtree(u);
            return None;
        }
        // dom_discover_vtx
        if self.policy.node_centric && Some(self.g.kind(u)) == self.node && self.g.id(u) < -1 {
            return None;
        }
        let seq = self.seq;
        if let Some(d) = &mut self.dag {
            d.visited[u.index()] = seq;
        }
        let factor = self.node_factor(u);
        self.multilevel += factor;
        let mark = self.cands.groups.len();
        match t.kind {
            MatchKind::Slot if self.req.flexible => {
                self.dom_or_slot(u, t.next, t.nslots, t.pristine);
            }
            MatchKind::Slot => {
                // Who chooses among the slots formed here: `u` when its own request holds
                // the slot, the top under an omitted prefix, else `u`'s matched parent.
                let ukind = self.g.kind(u);
                let own = reqs.iter().any(|&r| {
                    let q = self.req.req(r);
                    !q.is_slot && q.ty == ukind
                });
                let chooser = if own {
                    score::Among::Siblings
                } else if pristine {
                    score::Among::Walk
                } else {
                    score::Among::Cousins
                };
                self.dom_slot(u, t.next, t.nslots, t.pristine, chooser);
            }
            // A leaf matched by a request with no contents: nothing below to explore (no
            // child to visit or turn away, no budget to spend).
            MatchKind::Resource if t.next.is_empty() && self.is_leaf(u) => {}
            _ => {
                let mut own = if t.kind == MatchKind::Resource {
                    // A matched resource chooses among its own children, or among the
                    // slots they form.
                    self.budget_for(t.next, score::Among::Siblings)
                        .or_else(|| self.slot_budget_for(t.next))
                } else {
                    None
                };
                let b = if t.kind == MatchKind::Resource {
                    own.as_mut()
                } else {
                    budget
                };
                self.dom_exp(u, t.next, t.pristine, x_in, b);
            }
        }
        *excl = x_in;
        let avail = match free {
            Some(units) => u64::try_from(units).unwrap_or(0),
            None => self.avail(u),
        };
        let result = self.finish_vtx(u, reqs, mark, factor);
        let Some((score, hier)) = result else {
            self.cands.groups.truncate(mark);
            self.errno = Errno::Busy;
            return None;
        };
        if hier {
            self.enforce(mark, false);
            self.cands.groups.truncate(mark);
        }
        for &r in reqs {
            let q = self.req.req(r);
            if q.ty == self.g.kind(u)
                && let Some(l) = &q.label
            {
                self.labels.insert(u.0, (self.seq, l.clone()));
            }
        }
        self.visits.1 += 1;
        Some(Visit::new(score, avail))
    }

    /// A whole's node covered over the window: it has no unit free, and the checks of a
    /// visit would find it busy (each failing one says so), at a higher cost.
    #[inline]
    pub(super) fn covered(&mut self) -> Option<Visit> {
        self.visits.0 += 1;
        self.errno = Errno::Busy;
        None
    }

    /// Walks `u` itself, whatever [`Walk::dom_dfv`] knows of it at once (for `memo`).
    pub(super) fn visit_vertex(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        budget: Option<&mut Budget>,
    ) -> Option<Visit> {
        self.walk_node_itself = true;
        self.dom_dfv(u, reqs, pristine, excl, budget)
    }

    /// Whether `u` has no children in the walked tree.
    #[inline]
    pub(super) fn is_leaf(&self, u: VertexId) -> bool {
        let (start, _) = self.child_lists;
        start[u.index()] == start[u.index() + 1]
    }

    /// Own units of `u` free during the window.
    pub(super) fn avail(&self, u: VertexId) -> u64 {
        let w = &self.win;
        let free = if w.kind.ignores_calendars() {
            self.g.size(u)
        } else {
            self.st.units_free(u, self.g.size(u), w.at, w.dur)
        };
        u64::try_from(free).unwrap_or(0)
    }

    pub(super) fn exclusivity(&self, reqs: &[ReqId], u: VertexId) -> bool {
        let ukind = self.g.kind(u);
        reqs.iter().any(|&r| {
            let q = self.req.req(r);
            !q.is_slot && q.ty == ukind && q.exclusive == Some(true)
        })
    }

    /// Fluxion's multilevel factor of a node under node-centric policies.
    pub(super) fn node_factor(&self, u: VertexId) -> i64 {
        if self.policy.node_centric && Some(self.g.kind(u)) == self.node {
            score::node_factor(self.g, u)
        } else {
            0
        }
    }

    /// Fluxion's `test` message for a vertex two requests of one list match.
    #[cold]
    #[inline(never)]
    fn complain_of_clash(&mut self, u: VertexId) {
        let kind = self.g.kind_str(u);
        self.complain(|text| {
            text.push_str("test: siblings in jobspec request same resource type : ");
            text.push_str(kind);
            text.push_str(".\n");
        });
    }
}
