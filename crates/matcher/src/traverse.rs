//! The depth-first match: Fluxion's DFU traversal, re-derived.
//!
//! The jobspec and the containment tree are walked together from the root. At each vertex
//! `u` with request list `R`:
//! - if a request in `R` has `u`'s type, `u` *matches* it and its children are walked with
//!   that request's `with`; if that `with` holds a slot and `u` has children of every type
//!   the slot holds, the slot is formed here;
//! - else if `R` holds a slot whose contents are all child types of `u`, slots form at `u`;
//! - else, while nothing has matched yet on the path (*pristine*), `u` is an omitted prefix
//!   (cluster, rack…) and its children are walked with the same `R`; below a match an
//!   unmatched vertex is not part of the request.
//!
//! Every vertex that qualifies becomes a *candidate* of its type for its parent, with a score
//! (its id, plus a per-node term under node-centric policies). A matched vertex picks, for
//! each child request, the best candidates by score until the count is met, or fails. An
//! omitted-prefix vertex hands all its candidates up unchanged. Picks are kept in one arena
//! per match, so a failed branch costs nothing to forget.

use shardsched_resource::{ResourceGraph, Status, Sym, VertexId};

use crate::policy::{MatchPolicy, NODE_SCORE_FACTOR};
use crate::request::{ReqId, Request, select_count};
use crate::state::{SchedState, XCHECK_TOTAL};

/// Symbol standing for the slot type in candidate lists (never a graph symbol).
pub const SLOT: Sym = Sym(u32::MAX);

/// One chosen vertex: how many of its units, whether exclusively, and what it chose below.
#[derive(Clone, Copy, Debug)]
pub struct Pick {
    pub v: u32,
    pub needs: i64,
    pub excl: bool,
    /// Explicitly exclusive, or exclusive with nothing requested below: the whole subtree
    /// comes with it.
    pub whole: bool,
    pub sub_start: u32,
    pub sub_len: u32,
}

/// A candidate for a parent's choice: one vertex, or one formed slot.
#[derive(Clone, Copy, Debug)]
struct Cand {
    kind: Sym,
    score: i64,
    count: i64,
    picks_start: u32,
    picks_len: u32,
    single: bool,
}

enum Test {
    NoMatch,
    Pristine,
    Resource(ReqId),
    Slot { slot: ReqId, matched: Option<ReqId> },
}

struct Visit {
    score: i64,
    avail: i64,
    excl: bool,
    whole: bool,
    sub: (u32, u32),
    merged: Vec<Cand>,
}

/// One match attempt at one time window.
pub struct Traversal<'a> {
    g: &'a ResourceGraph,
    st: &'a SchedState,
    req: &'a Request,
    policy: MatchPolicy,
    at: i64,
    dur: u64,
    /// Satisfiability mode: calendars are ignored (as if nothing were allocated).
    sat: bool,
    /// With `sat`: also ignore status (as if every vertex were up).
    ignore_status: bool,
    node: Option<Sym>,
    multilevel: i64,
    pub arena: Vec<Pick>,
}

impl<'a> Traversal<'a> {
    pub fn new(
        g: &'a ResourceGraph,
        st: &'a SchedState,
        req: &'a Request,
        policy: MatchPolicy,
        at: i64,
        dur: u64,
        sat: bool,
    ) -> Self {
        Traversal {
            g,
            st,
            req,
            policy,
            at,
            dur,
            sat,
            ignore_status: false,
            node: g.sym("node"),
            multilevel: 0,
            arena: Vec::new(),
        }
    }

    /// Satisfiability that also ignores status: could the request fit the graph at all?
    pub fn ignoring_status(mut self) -> Self {
        self.ignore_status = self.sat;
        self
    }

    /// Runs the match from the root; returns the arena range of the top-level picks.
    pub fn select(&mut self) -> Option<(u32, u32)> {
        let top = self.req.top.clone();
        let mut dfu = self.root_candidates()?;
        self.finish(&mut dfu, &top)
    }

    /// Whether every top-level request has at least one qualifying candidate (even if not
    /// enough of them): Fluxion reports a request that fails with some candidates as busy,
    /// one with none as unsatisfiable.
    pub fn top_has_candidates(&mut self) -> bool {
        let top = self.req.top.clone();
        match self.root_candidates() {
            None => false,
            Some(dfu) => top.iter().all(|&r| qualified(&dfu, self.kind_of(r)) > 0),
        }
    }

    fn root_candidates(&mut self) -> Option<Vec<Cand>> {
        let root = self.g.root();
        let top = self.req.top.clone();
        let vis = self.dom_dfv(root, &top, true, false)?;
        let mut dfu = vis.merged;
        let idx = self.push_pick(root, vis.avail, vis.excl, vis.whole, vis.sub);
        dfu.push(Cand {
            kind: self.g.kind(root),
            score: vis.score,
            count: vis.avail,
            picks_start: idx,
            picks_len: 1,
            single: true,
        });
        Some(dfu)
    }

    fn push_pick(
        &mut self,
        v: VertexId,
        needs: i64,
        excl: bool,
        whole: bool,
        sub: (u32, u32),
    ) -> u32 {
        self.arena.push(Pick {
            v: v.0,
            needs,
            excl,
            whole,
            sub_start: sub.0,
            sub_len: sub.1,
        });
        self.arena.len() as u32 - 1
    }

    fn kind_of(&self, r: ReqId) -> Option<Sym> {
        let q = self.req.req(r);
        if q.is_slot { Some(SLOT) } else { q.kind }
    }

    fn dom_dfv(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        pristine: bool,
        excl: bool,
    ) -> Option<Visit> {
        let ukind = self.g.kind(u);
        let x_in = excl || self.exclusivity(reqs, u);
        let test = self.test(u, reqs, pristine);
        if matches!(test, Test::NoMatch) || !self.prune_ok(u, x_in, reqs) {
            return None;
        }
        let factor = if self.policy.node_centric && Some(ukind) == self.node {
            (self.g.id(u) + 1) * NODE_SCORE_FACTOR + self.g.uniq_id(u) % NODE_SCORE_FACTOR
        } else {
            0
        };
        self.multilevel += factor;
        let result = self.dom_dfv_inner(u, reqs, test, x_in);
        self.multilevel -= factor;
        result
    }

    fn dom_dfv_inner(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        test: Test,
        x_in: bool,
    ) -> Option<Visit> {
        let (mut dfu, matched) = match test {
            Test::NoMatch => return None,
            Test::Slot { slot, matched } => (self.dom_slot(u, slot), matched),
            Test::Resource(r) => {
                let with = self.req.req(r).with.clone();
                (self.explore(u, &with, false, x_in), Some(r))
            }
            Test::Pristine => (self.explore(u, reqs, true, x_in), None),
        };
        let avail = if self.sat {
            self.g.size(u)
        } else {
            self.st.plans[u.index()].avail_during(self.at, self.dur)
        };
        if avail <= 0 {
            return None;
        }
        let score = self.multilevel + self.g.id(u) + 1;
        match matched {
            Some(r) => {
                let with = self.req.req(r).with.clone();
                let sub = self.finish(&mut dfu, &with)?;
                // Fluxion allocates the whole subtree of a vertex the jobspec marks exclusive,
                // and of an exclusive vertex that asks for nothing below it.
                let explicit = self.req.req(r).exclusive == Some(true);
                let whole = explicit || (x_in && with.is_empty());
                Some(Visit {
                    score,
                    avail,
                    excl: x_in,
                    whole,
                    sub,
                    merged: Vec::new(),
                })
            }
            None => Some(Visit {
                score,
                avail,
                excl: x_in,
                whole: false,
                sub: (0, 0),
                merged: dfu,
            }),
        }
    }

    fn test(&self, u: VertexId, reqs: &[ReqId], pristine: bool) -> Test {
        let ukind = self.g.kind(u);
        for &r in reqs {
            let q = self.req.req(r);
            if !q.is_slot && q.kind == Some(ukind) {
                if let Some(&s) = q.with.iter().find(|&&c| self.req.req(c).is_slot)
                    && self.slot_match(u, s)
                {
                    return Test::Slot {
                        slot: s,
                        matched: Some(r),
                    };
                }
                return Test::Resource(r);
            }
            if q.is_slot && self.slot_match(u, r) {
                return Test::Slot {
                    slot: r,
                    matched: None,
                };
            }
        }
        if pristine {
            Test::Pristine
        } else {
            Test::NoMatch
        }
    }

    /// Whether `u` has children of every type the slot holds.
    fn slot_match(&self, u: VertexId, slot: ReqId) -> bool {
        let children = self.g.children(u);
        self.req
            .req(slot)
            .with
            .iter()
            .all(|&e| match self.req.req(e).kind {
                Some(k) => children.iter().any(|&c| self.g.kind(VertexId(c)) == k),
                None => false,
            })
    }

    fn exclusivity(&self, reqs: &[ReqId], u: VertexId) -> bool {
        let ukind = self.g.kind(u);
        if self.policy.node_exclusive && Some(ukind) == self.node {
            return true;
        }
        reqs.iter().any(|&r| {
            let q = self.req.req(r);
            q.kind == Some(ukind) && q.exclusive == Some(true)
        })
    }

    fn prune_ok(&self, u: VertexId, x_in: bool, reqs: &[ReqId]) -> bool {
        if !self.ignore_status && self.g.status(u) != Status::Up {
            return false;
        }
        let ukind = self.g.kind(u);
        let jobs_free = if self.sat {
            XCHECK_TOTAL
        } else {
            self.st.xcheck[u.index()].avail_during(self.at, self.dur)
        };
        if jobs_free <= 0 {
            return false;
        }
        let node_x = self.policy.node_exclusive && Some(ukind) == self.node;
        if node_x && jobs_free < XCHECK_TOTAL {
            return false;
        }
        for &r in reqs {
            let q = self.req.req(r);
            if q.is_slot || q.kind != Some(ukind) {
                continue;
            }
            if x_in && q.exclusive == Some(false) {
                return false;
            }
            if x_in && jobs_free < XCHECK_TOTAL {
                return false;
            }
            if !self.sat {
                for &(t, n) in &q.needs {
                    if let Some(a) = self.st.agg_avail(u, t, self.at, self.dur)
                        && a < n
                    {
                        return false;
                    }
                }
            }
        }
        true
    }

    fn explore(&mut self, u: VertexId, reqs: &[ReqId], pristine: bool, excl: bool) -> Vec<Cand> {
        let mut dfu = Vec::new();
        for &c in self.g.children(u) {
            let c = VertexId(c);
            if let Some(vis) = self.dom_dfv(c, reqs, pristine, excl) {
                dfu.extend(vis.merged.iter().copied());
                let idx = self.push_pick(c, vis.avail, vis.excl, vis.whole, vis.sub);
                dfu.push(Cand {
                    kind: self.g.kind(c),
                    score: vis.score,
                    count: vis.avail,
                    picks_start: idx,
                    picks_len: 1,
                    single: true,
                });
            }
        }
        dfu
    }

    fn dom_slot(&mut self, u: VertexId, slot: ReqId) -> Vec<Cand> {
        let shape = self.req.req(slot).with.clone();
        let nslots = self.req.req(slot).count.max;
        let mut sdfu = self.explore(u, &shape, false, true);
        let policy = self.policy;
        sdfu.sort_by(|a, b| policy.better(a.score, b.score));
        let mut qual = u64::MAX;
        for &e in &shape {
            let min = self.req.req(e).count.min.max(1);
            let qc = qualified(&sdfu, self.kind_of(e));
            qual = qual.min(u64::try_from(qc).unwrap_or(0) / min);
        }
        qual = qual.min(nslots);
        let mut cursors = vec![0usize; shape.len()];
        let mut out = Vec::new();
        'slots: for _ in 0..qual {
            let start = self.arena.len();
            let mut score = 0i64;
            for (i, &e) in shape.iter().enumerate() {
                let kind = self.kind_of(e);
                let need = select_count(&self.req.req(e).count, qualified(&sdfu, kind));
                let mut got = 0;
                while got < need {
                    let Some(c) = sdfu
                        .iter()
                        .filter(|c| Some(c.kind) == kind)
                        .nth(cursors[i])
                        .copied()
                    else {
                        self.arena.truncate(start);
                        break 'slots;
                    };
                    cursors[i] += 1;
                    for p in c.picks_start..c.picks_start + c.picks_len {
                        let mut pick = self.arena[p as usize];
                        pick.excl = true;
                        self.arena.push(pick);
                    }
                    score += c.score;
                    got += c.count;
                }
            }
            let len = (self.arena.len() - start) as u32;
            out.push(Cand {
                kind: SLOT,
                score,
                count: 1,
                picks_start: start as u32,
                picks_len: len,
                single: false,
            });
        }
        out
    }

    /// For each child request, choose the best candidates until its count is met.
    fn finish(&mut self, dfu: &mut [Cand], with: &[ReqId]) -> Option<(u32, u32)> {
        let policy = self.policy;
        dfu.sort_by(|a, b| policy.better(a.score, b.score));
        let start = self.arena.len() as u32;
        for &c in with {
            let kind = self.kind_of(c)?;
            let qc = qualified(dfu, Some(kind));
            let mut k = select_count(&self.req.req(c).count, qc);
            if k == 0 {
                return None;
            }
            for cand in dfu.iter().filter(|d| d.kind == kind) {
                if k == 0 {
                    break;
                }
                let take = k.min(cand.count);
                for p in cand.picks_start..cand.picks_start + cand.picks_len {
                    let mut pick = self.arena[p as usize];
                    if cand.single {
                        pick.needs = take;
                    }
                    self.arena.push(pick);
                }
                k -= take;
            }
        }
        Some((start, self.arena.len() as u32 - start))
    }
}

fn qualified(dfu: &[Cand], kind: Option<Sym>) -> i64 {
    dfu.iter()
        .filter(|c| Some(c.kind) == kind)
        .map(|c| c.count)
        .sum()
}
