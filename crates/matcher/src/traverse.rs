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
//!
//! Speed: candidates live on one stack per match (no allocation per vertex), and where the
//! graph makes it safe — a decision over one type whose scores strictly increase along the
//! graph's order ([`ScoreOrder`]) — children are walked best-first and the walk stops as soon
//! as the decision has its count: the answer is the one a full walk would give, found without
//! visiting the rest of the cluster.

use shardsched_resource::{ResourceGraph, Status, Sym, VertexId};

use crate::policy::{MatchPolicy, NODE_SCORE_FACTOR};
use crate::request::{ReqId, Request, select_count};
use crate::state::{SchedState, Usage, XCHECK_TOTAL};

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

/// The score every vertex would get under a policy, and for which types those scores
/// strictly increase along the graph's preorder — the types for which best-first walking
/// with early stop gives exactly the answer of a full walk.
#[derive(Clone, Debug, Default)]
pub struct ScoreOrder {
    /// Indexed by type symbol.
    monotone: Vec<bool>,
    /// Indexed by type symbol: every vertex of the type has the same size.
    uniform_size: Vec<bool>,
}

impl ScoreOrder {
    /// Computes the order facts of `g` under `policy` (one pass over the graph).
    pub fn new(g: &ResourceGraph, policy: &MatchPolicy) -> ScoreOrder {
        let node = g.sym("node");
        let nkinds = g
            .vertices()
            .map(|v| g.kind(v).0 as usize + 1)
            .max()
            .unwrap_or(0);
        let mut monotone = vec![true; nkinds];
        let mut last: Vec<Option<i64>> = vec![None; nkinds];
        let mut size: Vec<Option<i64>> = vec![None; nkinds];
        let mut uniform_size = vec![true; nkinds];
        // Preorder with the node-centric term of the nearest node ancestor carried down.
        let mut stack = vec![(g.root(), 0i64)];
        while let Some((v, inherited)) = stack.pop() {
            let own = node_factor(g, policy, node, v);
            let ml = inherited + own;
            let k = g.kind(v).0 as usize;
            let score = ml + g.id(v) + 1;
            if last[k].is_some_and(|l| score <= l) {
                monotone[k] = false;
            }
            last[k] = Some(score);
            if size[k].is_some_and(|s| s != g.size(v)) {
                uniform_size[k] = false;
            }
            size[k] = Some(g.size(v));
            for &c in g.children(v).iter().rev() {
                stack.push((VertexId(c), ml));
            }
        }
        ScoreOrder {
            monotone,
            uniform_size,
        }
    }

    fn monotone(&self, kind: Sym) -> bool {
        self.monotone.get(kind.0 as usize).copied().unwrap_or(false)
    }

    fn uniform(&self, kind: Sym) -> bool {
        self.uniform_size
            .get(kind.0 as usize)
            .copied()
            .unwrap_or(false)
    }
}

fn node_factor(g: &ResourceGraph, policy: &MatchPolicy, node: Option<Sym>, v: VertexId) -> i64 {
    if policy.node_centric && Some(g.kind(v)) == node {
        (g.id(v) + 1) * NODE_SCORE_FACTOR + g.uniq_id(v) % NODE_SCORE_FACTOR
    } else {
        0
    }
}

/// A decision that may stop the walk early: `remaining` units of `kind` still wanted.
#[derive(Clone, Copy, Debug)]
struct Budget {
    kind: Sym,
    remaining: i64,
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
}

/// Memory a traversal works in, kept by the matcher between matches so that a match
/// allocates nothing once the buffers have grown.
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    cands: Vec<Cand>,
    arena: Vec<Pick>,
    cursors: Vec<usize>,
    slots: Vec<Cand>,
}

/// One match attempt at one time window.
pub struct Traversal<'a> {
    g: &'a ResourceGraph,
    st: &'a SchedState,
    req: &'a Request,
    order: &'a ScoreOrder,
    policy: MatchPolicy,
    at: i64,
    dur: u64,
    /// Satisfiability mode: calendars are ignored (as if nothing were allocated).
    sat: bool,
    /// With `sat`: also ignore status (as if every vertex were up).
    ignore_status: bool,
    node: Option<Sym>,
    multilevel: i64,
    /// Candidates of every vertex being decided, innermost on top.
    cands: Vec<Cand>,
    pub arena: Vec<Pick>,
    /// Slot formation's working memory (see `dom_slot`).
    cursors: Vec<usize>,
    slots: Vec<Cand>,
}

impl<'a> Traversal<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        g: &'a ResourceGraph,
        st: &'a SchedState,
        req: &'a Request,
        order: &'a ScoreOrder,
        policy: MatchPolicy,
        at: i64,
        dur: u64,
        sat: bool,
        scratch: Scratch,
    ) -> Self {
        let Scratch {
            mut cands,
            mut arena,
            cursors,
            slots,
        } = scratch;
        cands.clear();
        arena.clear();
        Traversal {
            g,
            st,
            req,
            order,
            policy,
            at,
            dur,
            sat,
            ignore_status: false,
            node: g.sym("node"),
            multilevel: 0,
            cands,
            arena,
            cursors,
            slots,
        }
    }

    /// Gives the buffers back for the next match.
    pub fn into_scratch(self) -> Scratch {
        Scratch {
            cands: self.cands,
            arena: self.arena,
            cursors: self.cursors,
            slots: self.slots,
        }
    }

    /// Satisfiability that also ignores status: could the request fit the graph at all?
    pub fn ignoring_status(mut self) -> Self {
        self.ignore_status = self.sat;
        self
    }

    /// Runs the match from the root; returns the arena range of the top-level picks.
    pub fn select(&mut self) -> Option<(u32, u32)> {
        let req = self.req;
        let top = &req.top;
        if !self.root_candidates(top) {
            return None;
        }
        self.finish(0, top)
    }

    /// Whether every top-level request has at least one qualifying candidate (even if not
    /// enough of them): Fluxion reports a request that fails with some candidates as busy,
    /// one with none as unsatisfiable.
    pub fn top_has_candidates(&mut self) -> bool {
        let req = self.req;
        let top = &req.top;
        self.root_candidates(top)
            && top
                .iter()
                .all(|&r| qualified(&self.cands, self.kind_of(r)) > 0)
    }

    /// Leaves the root's candidates (and what its omitted-prefix subtree handed up) on the
    /// candidate stack.
    fn root_candidates(&mut self, top: &[ReqId]) -> bool {
        let root = self.g.root();
        let mut budget = self.budget_for(top);
        let Some(vis) = self.dom_dfv(root, top, true, false, budget.as_mut()) else {
            return false;
        };
        let idx = self.push_pick(root, vis.avail, vis.excl, vis.whole, vis.sub);
        self.cands.push(Cand {
            kind: self.g.kind(root),
            score: vis.score,
            count: vis.avail,
            picks_start: idx,
            picks_len: 1,
            single: true,
        });
        true
    }

    /// A budget for deciding `with`, when early stop is exact: one child request with an
    /// exact count, either of a type whose scores strictly follow the graph order, or a slot
    /// whose contents all are (a slot's score is the sum of its members', so slots formed
    /// later in the graph order then score strictly higher, given equal-sized members).
    fn budget_for(&self, with: &[ReqId]) -> Option<Budget> {
        let [c] = with else { return None };
        let q = self.req.req(*c);
        if q.count.min != q.count.max {
            return None;
        }
        let remaining = i64::try_from(q.count.min).unwrap_or(i64::MAX);
        if q.is_slot {
            let exact_members = q.with.iter().all(|&e| {
                let m = self.req.req(e);
                m.count.min == m.count.max
                    && m.kind
                        .is_some_and(|k| self.order.monotone(k) && self.order.uniform(k))
            });
            return exact_members.then_some(Budget {
                kind: SLOT,
                remaining,
            });
        }
        let kind = q.kind?;
        self.order
            .monotone(kind)
            .then_some(Budget { kind, remaining })
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

    /// Visits `u`. On success, `u`'s own candidacy is returned and — when `u` is an omitted
    /// prefix or forms top-level slots — the candidates it hands up are left on the stack.
    fn dom_dfv(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        pristine: bool,
        excl: bool,
        budget: Option<&mut Budget>,
    ) -> Option<Visit> {
        let test = self.test(u, reqs, pristine);
        if matches!(test, Test::NoMatch) {
            return None;
        }
        let x_in = excl || self.exclusivity(reqs, u);
        // Both are pure filters: the cheaper one (a held vertex fails on its job count)
        // goes first.
        let usage = self.prune_ok(u, x_in, reqs)?;
        let may_hold = match test {
            Test::Pristine => self.subtree_may_hold(u, reqs),
            Test::Slot { slot, .. } => self.subtree_may_hold(u, &[slot]),
            _ => true,
        };
        if !self.sat && !may_hold {
            return None;
        }
        let factor = node_factor(self.g, &self.policy, self.node, u);
        self.multilevel += factor;
        let mark = self.cands.len();
        let result = self.dom_dfv_inner(u, reqs, test, x_in, usage.units_free, mark, budget);
        if result.is_none() {
            self.cands.truncate(mark);
        }
        self.multilevel -= factor;
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn dom_dfv_inner(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        test: Test,
        x_in: bool,
        avail: i64,
        mark: usize,
        budget: Option<&mut Budget>,
    ) -> Option<Visit> {
        let matched = match test {
            Test::NoMatch => return None,
            Test::Slot { slot, matched } => {
                let before = self.cands.len();
                self.dom_slot(u, slot);
                if matched.is_none()
                    && let Some(b) = budget.filter(|b| b.kind == SLOT)
                {
                    b.remaining -= (self.cands.len() - before) as i64;
                }
                matched
            }
            Test::Resource(r) => {
                let req = self.req;
                let with = &req.req(r).with;
                let mut own = self.budget_for(with);
                self.explore(u, with, false, x_in, own.as_mut());
                Some(r)
            }
            Test::Pristine => {
                self.explore(u, reqs, true, x_in, budget);
                None
            }
        };
        let score = self.multilevel + self.g.id(u) + 1;
        let Some(r) = matched else {
            return Some(Visit {
                score,
                avail,
                excl: x_in,
                whole: false,
                sub: (0, 0),
            });
        };
        let req = self.req;
        let with = &req.req(r).with;
        let sub = self.finish(mark, with)?;
        self.cands.truncate(mark);
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
        })
    }

    fn explore(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        pristine: bool,
        excl: bool,
        mut budget: Option<&mut Budget>,
    ) {
        let children = self.g.children(u);
        let n = children.len();
        // Best-first only under a budget; otherwise graph order, as Fluxion walks.
        let reverse = budget.is_some() && self.policy.prefer_high;
        // Below a match, a child whose type no request names (and no slot can form at) is
        // not part of the request: skip it without a visit (`test` would say `NoMatch`).
        let any_kind = pristine || reqs.iter().any(|&r| self.req.req(r).is_slot);
        for i in 0..n {
            let c = VertexId(children[if reverse { n - 1 - i } else { i }]);
            let kind = self.g.kind(c);
            if !any_kind && !reqs.iter().any(|&r| self.req.req(r).kind == Some(kind)) {
                continue;
            }
            let Some(vis) = self.dom_dfv(c, reqs, pristine, excl, budget.as_deref_mut()) else {
                continue;
            };
            let idx = self.push_pick(c, vis.avail, vis.excl, vis.whole, vis.sub);
            self.cands.push(Cand {
                kind,
                score: vis.score,
                count: vis.avail,
                picks_start: idx,
                picks_len: 1,
                single: true,
            });
            if let Some(b) = budget.as_deref_mut() {
                if b.kind == kind {
                    b.remaining -= vis.avail;
                }
                if b.remaining <= 0 {
                    return;
                }
            }
        }
    }

    /// Forms slots at `u` from its children and leaves them on the candidate stack.
    fn dom_slot(&mut self, u: VertexId, slot: ReqId) {
        let req = self.req;
        let shape = &req.req(slot).with;
        let nslots = self.req.req(slot).count.max;
        let mark = self.cands.len();
        // With an exact number of slots of one exactly-counted, order-following type, the
        // best members are the first found walking best-first.
        let exact = req.req(slot).count.min == nslots;
        let mut budget = self
            .budget_for(shape)
            .filter(|b| exact && b.kind != SLOT)
            .map(|b| Budget {
                remaining: b
                    .remaining
                    .saturating_mul(i64::try_from(nslots).unwrap_or(i64::MAX)),
                ..b
            });
        self.explore(u, shape, false, true, budget.as_mut());
        let policy = self.policy;
        sort_candidates(&mut self.cands[mark..], policy);
        let mut qual = u64::MAX;
        for &e in shape {
            let min = self.req.req(e).count.min.max(1);
            let qc = qualified(&self.cands[mark..], self.kind_of(e));
            qual = qual.min(u64::try_from(qc).unwrap_or(0) / min);
        }
        qual = qual.min(nslots);
        // Reused buffers: nothing below recurses, so one pair serves every slot visit.
        let mut cursors = std::mem::take(&mut self.cursors);
        cursors.clear();
        cursors.resize(shape.len(), mark);
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        'slots: for _ in 0..qual {
            let start = self.arena.len();
            let mut score = 0i64;
            for (i, &e) in shape.iter().enumerate() {
                let kind = self.kind_of(e);
                let need =
                    select_count(&self.req.req(e).count, qualified(&self.cands[mark..], kind));
                let mut got = 0;
                while got < need {
                    let Some(pos) =
                        (cursors[i]..self.cands.len()).find(|&p| Some(self.cands[p].kind) == kind)
                    else {
                        self.arena.truncate(start);
                        break 'slots;
                    };
                    cursors[i] = pos + 1;
                    let c = self.cands[pos];
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
            slots.push(Cand {
                kind: SLOT,
                score,
                count: 1,
                picks_start: start as u32,
                picks_len: len,
                single: false,
            });
        }
        self.cands.truncate(mark);
        self.cands.extend_from_slice(&slots);
        self.cursors = cursors;
        self.slots = slots;
    }

    /// For each child request, choose the best candidates above `mark` until its count is
    /// met; returns the arena range of the picks.
    fn finish(&mut self, mark: usize, with: &[ReqId]) -> Option<(u32, u32)> {
        let policy = self.policy;
        sort_candidates(&mut self.cands[mark..], policy);
        let start = self.arena.len() as u32;
        for &c in with {
            let kind = self.kind_of(c)?;
            let qc = qualified(&self.cands[mark..], Some(kind));
            let mut k = select_count(&self.req.req(c).count, qc);
            if k == 0 {
                return None;
            }
            for i in mark..self.cands.len() {
                let cand = self.cands[i];
                if k == 0 {
                    break;
                }
                if cand.kind != kind {
                    continue;
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

    /// Whether the subtree of an omitted-prefix vertex (or of a vertex where slots form)
    /// could hand up a candidate for any of `reqs`: one instance needs at least its unit
    /// needs free below. Fluxion walks such subtrees anyway; skipping them changes nothing
    /// but the time taken (aggregates only over-estimate what is free).
    fn subtree_may_hold(&self, u: VertexId, reqs: &[ReqId]) -> bool {
        reqs.iter().any(|&r| {
            self.req.req(r).unit_needs.iter().all(|&(t, n)| {
                self.st
                    .agg_avail(u, t, self.at, self.dur)
                    .is_none_or(|a| a >= n)
            })
        })
    }

    /// Fluxion's prune: status, constraint, exclusivity against the job count, own units,
    /// and the subtree aggregates of a matched vertex. Returns `u`'s usage when it may be
    /// visited.
    fn prune_ok(&self, u: VertexId, x_in: bool, reqs: &[ReqId]) -> Option<Usage> {
        if !self.ignore_status && self.g.status(u) != Status::Up {
            return None;
        }
        let ukind = self.g.kind(u);
        if let Some(c) = &self.req.constraint
            && Some(ukind) == self.node
            && !c.admits(self.g, u)
        {
            return None;
        }
        let usage = if self.sat {
            Usage {
                units_free: self.g.size(u),
                jobs_free: XCHECK_TOTAL,
            }
        } else {
            self.st
                .usage_if_reachable(u, self.g.size(u), self.at, self.dur)?
        };
        let jobs_free = usage.jobs_free;
        if jobs_free <= 0 || usage.units_free <= 0 {
            return None;
        }
        let node_x = self.policy.node_exclusive && Some(ukind) == self.node;
        if node_x && jobs_free < XCHECK_TOTAL {
            return None;
        }
        for &r in reqs {
            let q = self.req.req(r);
            if q.is_slot || q.kind != Some(ukind) {
                continue;
            }
            if x_in && q.exclusive == Some(false) {
                return None;
            }
            if x_in && jobs_free < XCHECK_TOTAL {
                return None;
            }
            if !self.sat {
                for &(t, n) in &q.needs {
                    if let Some(a) = self.st.agg_avail(u, t, self.at, self.dur)
                        && a < n
                    {
                        return None;
                    }
                }
            }
        }
        Some(usage)
    }
}

/// Best first, ties in walk order (a stable sort). A best-first walk hands candidates up
/// already in that order: checking costs less than sorting (which allocates).
fn sort_candidates(cands: &mut [Cand], policy: MatchPolicy) {
    let in_order =
        cands.is_sorted_by(|a, b| policy.better(a.score, b.score) != std::cmp::Ordering::Greater);
    if !in_order {
        cands.sort_by(|a, b| policy.better(a.score, b.score));
    }
}

fn qualified(dfu: &[Cand], kind: Option<Sym>) -> i64 {
    dfu.iter()
        .filter(|c| Some(c.kind) == kind)
        .map(|c| c.count)
        .sum()
}
