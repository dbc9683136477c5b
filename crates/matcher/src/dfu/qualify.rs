//! Fluxion's `test` and `prune`: how a vertex relates to the requests it is visited with,
//! and whether it can hold them at all during the window.

use shardsched_resource::{Status, VertexId};

use super::{Errno, Walk, WalkKind};
use crate::request::ReqId;
use crate::state::{Shortfall, XCHECK_TOTAL};

impl<'a> Walk<'a> {
    /// Fluxion's `test`: how `u` relates to `reqs`.
    pub(super) fn test(&self, u: VertexId, reqs: &'a [ReqId], pristine: bool) -> Test<'a> {
        if self.req.flexible {
            return self.test_flexible(u, reqs, pristine);
        }
        let req = self.req;
        let ukind = self.g.kind(u);
        let mut matched = false;
        let mut slot: Option<(ReqId, u64)> = None;
        let mut resource: Option<ReqId> = None;
        for &r in reqs {
            let q = req.req(r);
            if !q.is_slot && q.ty == ukind {
                if matched {
                    return Test::clash(reqs);
                }
                resource = Some(r);
                for &c in &q.with {
                    if req.req(c).is_slot {
                        slot = Some((c, req.req(c).effective_max()));
                    }
                }
                matched = true;
            } else if q.is_slot {
                if matched {
                    return Test::clash(reqs);
                }
                slot = Some((r, q.effective_max()));
                matched = true;
            }
        }
        if let Some((s, n)) = slot
            && self.slot_match(u, s)
        {
            return Test {
                kind: MatchKind::Slot,
                next: &req.req(s).with,
                nslots: n,
                pristine: false,
                clash: false,
            };
        }
        if let Some(r) = resource {
            return Test {
                kind: MatchKind::Resource,
                next: &req.req(r).with,
                nslots: 0,
                pristine: false,
                clash: false,
            };
        }
        Test::unmatched(reqs, pristine)
    }

    /// The flexible traverser's `test`: several slots may share a list (or-slots); a slot
    /// list forms at `u` when any of its members could, and is then handed whole to
    /// [`Walk::dom_or_slot`]. A matched resource whose contents hold slots that cannot form
    /// at `u` does not match it.
    pub(super) fn test_flexible(&self, u: VertexId, reqs: &'a [ReqId], pristine: bool) -> Test<'a> {
        let req = self.req;
        let ukind = self.g.kind(u);
        let (mut matched, mut or_matched) = (false, false);
        let mut slots: Option<(&'a [ReqId], u64)> = None;
        let mut resource: Option<ReqId> = None;
        for &r in reqs {
            let q = req.req(r);
            if !q.is_slot && q.ty == ukind {
                if matched || or_matched {
                    return Test::clash(reqs);
                }
                resource = Some(r);
                for &c in &q.with {
                    if req.req(c).is_slot {
                        slots = Some((&q.with, req.req(c).effective_max()));
                    }
                }
                matched = true;
            } else if q.is_slot {
                if matched {
                    return Test::clash(reqs);
                }
                slots = Some((reqs, q.effective_max()));
                or_matched = true;
            }
        }
        let unmatched = Test::unmatched(reqs, pristine);
        if let Some((list, n)) = slots {
            if list.iter().any(|&s| self.slot_match(u, s)) {
                return Test {
                    kind: MatchKind::Slot,
                    next: list,
                    nslots: n,
                    pristine: false,
                    clash: false,
                };
            }
            return Test {
                nslots: n,
                ..unmatched
            };
        }
        if let Some(r) = resource {
            return Test {
                kind: MatchKind::Resource,
                next: &req.req(r).with,
                nslots: 0,
                pristine: false,
                clash: false,
            };
        }
        unmatched
    }

    /// Whether `u` has children of every type the slot holds.
    pub(super) fn slot_match(&self, u: VertexId, slot: ReqId) -> bool {
        let kinds = self.st.child_kinds(u);
        self.req.req(slot).with.iter().all(|&e| {
            let ty = self.req.req(e).ty;
            kinds
                .and_then(|k| k.has(self.types.rank(ty)))
                .unwrap_or_else(|| {
                    let children = self.tree.children(u);
                    children.iter().any(|&c| self.g.kind(VertexId(c)) == ty)
                })
        })
    }

    /// Fluxion's `prune`: status, constraint, own availability, then for the requests of
    /// `u`'s type (and slots) exclusivity and the subtree aggregate. Sets `free` to `u`'s
    /// own units free during the window when it read them (the select does not change the
    /// calendars, so the visit's later question is answered from it).
    pub(super) fn prune(
        &mut self,
        x_in: bool,
        u: VertexId,
        reqs: &[ReqId],
        free: &mut Option<i64>,
    ) -> bool {
        let w = self.win;
        // The far-horizon check sees nothing allocated, whatever the status.
        let sat = w.kind.ignores_calendars();
        if w.kind != WalkKind::Satisfiability && self.g.status(u) != Status::Up {
            self.errno = Errno::Busy;
            return false;
        }
        let ukind = self.g.kind(u);
        if let Some(c) = &self.req.constraint
            && (Some(ukind) == self.node || Some(ukind) == self.storage_node)
            && !c.admits(self.g, u)
        {
            self.errno = Errno::Busy;
            return false;
        }
        // A leaf's units and job count come from one read of its holds and covers (a
        // core is asked both); an inner vertex keeps them in two calendars, read as asked.
        let leaf =
            (!sat && self.st.is_leaf(u)).then(|| self.st.usage(u, self.g.size(u), w.at, w.dur));
        // An inner vertex the requests need untouched is asked that first: when it is, no
        // job holds any of its units either (a unit record comes with a job-count record,
        // but for an R from another subsystem's session), so they are all free, without
        // reading them. (`x_in` holds whenever a request of `u`'s type is exclusive.)
        let asks_untouched = || {
            x_in && reqs.iter().any(|&r| {
                let q = self.req.req(r);
                !q.is_slot && q.ty == ukind
            })
        };
        let vacant_inner = !sat
            && leaf.is_none()
            && self.st.untouched_means_free()
            && asks_untouched()
            && self.st.untouched(u, w.at, w.dur);
        if !sat {
            let units = match leaf {
                Some(usage) => usage.units_free,
                None if vacant_inner => {
                    let size = self.g.size(u);
                    debug_assert_eq!(size, self.st.units_free(u, size, w.at, w.dur));
                    size
                }
                None => self.st.units_free(u, self.g.size(u), w.at, w.dur),
            };
            *free = Some(units);
            if units <= 0 {
                self.errno = Errno::Busy;
                return false;
            }
        }
        let untouched = |walk: &Self| match leaf {
            Some(usage) => usage.jobs_free >= XCHECK_TOTAL,
            None => vacant_inner || walk.st.untouched(u, w.at, w.dur),
        };
        // The flexible traverser goes on past a slot whose subtree check fails: the last
        // check made decides.
        let mut ok = true;
        // Proven untouched during the window: no job holds anything below `u` then (every
        // aggregate record comes with a job-count record at the same vertex, and a whole
        // cover is a job), so its aggregate is its totals.
        let mut vacant = false;
        for &r in reqs {
            let q = self.req.req(r);
            if q.ty != ukind && !q.is_slot {
                continue;
            }
            if !q.is_slot {
                if x_in && q.exclusive == Some(false) {
                    self.errno = Errno::Inval;
                    self.complain_of_exclusivity(q.label.as_deref(), u);
                    return false;
                }
                if !sat && (x_in || q.exclusive == Some(true)) {
                    if !untouched(self) || self.allocated.is_some_and(|a| a.contains(&u.0)) {
                        self.errno = Errno::Busy;
                        return false;
                    }
                    // (Not where a walk takes no shortcut — after a job id matched again
                    // an aggregate may keep records no job count stands beside — nor after
                    // a partial cancel left some so.)
                    vacant = !self.exact_visits && self.st.untouched_means_free();
                }
            }
            let short = if q.user_data.is_empty() {
                None
            } else {
                self.st
                    .agg_shortfall(u, &q.user_data, w.at, w.dur, sat || vacant)
            };
            ok = short.is_none();
            debug_assert!(
                !vacant
                    || q.user_data.is_empty()
                    || ok
                        == self
                            .st
                            .agg_shortfall(u, &q.user_data, w.at, w.dur, sat)
                            .is_none(),
                "an untouched vertex's aggregate is not its totals"
            );
            if let Some(short) = short {
                if !(self.req.flexible && q.is_slot) {
                    self.errno = Errno::Busy;
                    return false;
                }
                // The flexible traverser goes on past the slot with the planner's errno as
                // it is: ERANGE when a need exceeds the subtree's totals. It lingers after
                // a walk that succeeds (`match allocate_with_satisfiability` then reports
                // it as an error and does not consume the job id); a prune that fails
                // turns it into EBUSY (below).
                self.errno = match short {
                    Shortfall::OverTotal => Errno::Range,
                    Shortfall::Busy => Errno::Busy,
                };
            }
        }
        if !ok && self.errno == Errno::Range {
            self.errno = Errno::Busy;
        }
        ok
    }

    /// Whether the subtree of an omitted-prefix vertex could hand up a candidate for any of
    /// `reqs`: one instance needs at least its own needs free below. Fluxion walks such
    /// subtrees anyway and finds nothing there; skipping them changes nothing but the time.
    pub(super) fn subtree_may_hold(&self, u: VertexId, t: &Test<'_>, reqs: &[ReqId]) -> bool {
        if t.kind != MatchKind::Pristine || self.win.kind.ignores_calendars() || self.req.flexible {
            return true;
        }
        let w = &self.win;
        reqs.iter().any(|&r| {
            self.req
                .req(r)
                .unit_needs
                .iter()
                .all(|&(ty, n)| self.st.agg_avail(u, ty, w.at, w.dur).is_none_or(|a| a >= n))
        })
    }

    /// The errno Fluxion's select ends with where our walk stops at an omitted-prefix
    /// vertex `u` by [`Walk::subtree_may_hold`].
    ///
    /// Fluxion walks that subtree and nothing in it qualifies; the failures below set EBUSY
    /// (each vertex's prune or count check), yet `u`'s own visit *succeeds*, empty: it
    /// passed its prune, and its `dom_finish_vtx` has no request of its type to miss
    /// (`dfu_impl.cpp` `dom_dfv`). Below the root the walk goes on with that EBUSY. At the
    /// root, `select` then resolves the graph, finds nothing of the top request and sets
    /// ENODEV — whatever the subtree said (random differential seed 67199). That errno is
    /// the select's only; what the planner's next ask of the reservation search leaves
    /// over it is `crate::search`'s (seed 55038: an EBUSY there hides it).
    pub(super) fn errno_of_empty_subtree(&self, u: VertexId) -> Errno {
        if u == self.tree.root() {
            Errno::NoDev
        } else {
            Errno::Busy
        }
    }
}

/// How a vertex relates to the request list it is visited with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MatchKind {
    Resource,
    Slot,
    /// Nothing matched yet on the path: walked through with the same requests.
    Pristine,
    None,
}

pub(super) struct Test<'a> {
    pub(super) kind: MatchKind,
    pub(super) next: &'a [ReqId],
    pub(super) nslots: u64,
    pub(super) pristine: bool,
    /// Two requests of the list match the vertex (Fluxion's "siblings in jobspec request
    /// same resource type").
    pub(super) clash: bool,
}

impl<'a> Test<'a> {
    fn clash(reqs: &'a [ReqId]) -> Test<'a> {
        Test {
            kind: MatchKind::None,
            next: reqs,
            nslots: 0,
            pristine: false,
            clash: true,
        }
    }

    /// Nothing matched at this vertex: its requests pass on to the children, and a
    /// pristine subtree stays pristine.
    fn unmatched(reqs: &'a [ReqId], pristine: bool) -> Test<'a> {
        Test {
            kind: if pristine {
                MatchKind::Pristine
            } else {
                MatchKind::None
            },
            next: reqs,
            nslots: 0,
            pristine,
            clash: false,
        }
    }
}

impl Walk<'_> {
    /// Fluxion's `by_excl` message for a resource written `exclusive: false` under a slot
    /// (no line break: the next message follows on the same line, as in Fluxion's).
    #[cold]
    fn complain_of_exclusivity(&mut self, label: Option<&str>, u: VertexId) {
        let name = self.g.name(u);
        self.complain(|t| {
            t.push_str("by_excl: exclusivity conflicts at jobspec=");
            t.push_str(label.unwrap_or_default());
            t.push_str(" : vertex=");
            t.push_str(name);
        });
    }
}
