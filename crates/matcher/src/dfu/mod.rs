//! The depth-first match: Fluxion's DFU traversal, step for step.
//!
//! A match walks the resource tree from the root together with the jobspec, then walks it
//! again to take what the first walk chose:
//!
//! 1. **Select** ([`Walk::select`]). At each vertex `u` with request list `R`:
//!    - a request of `u`'s type *matches* `u` and its children are walked with that
//!      request's `with` — or, when that `with` holds a slot and `u` has children of every
//!      type the slot holds, slots form at `u` from its children;
//!    - a slot in `R` whose member types are all among `u`'s children forms at `u`;
//!    - otherwise, while nothing has matched yet on the path, `u` is an omitted prefix
//!      (cluster, rack…) walked with the same `R`, handing what its subtree found up
//!      unchanged; below a match, a vertex no request names is not part of the request.
//!
//!    Each visited vertex that qualifies becomes a candidate for its parent, scored by the
//!    policy; a matched vertex picks the best candidates of each child type, by Fluxion's
//!    (unstable) sort, whole candidates until the count is met, and marks the edges to them.
//!    Under `first` (stop-on-1), children are visited in a learned order and the visit of a
//!    vertex's children stops as soon as its requests are met ([`explore`]).
//! 2. **Update** ([`crate::update`]). From the root, only marked edges are followed; a
//!    vertex is taken if its subtree holds a vertex taken exclusively, and below a vertex of
//!    a type the jobspec asks exclusively (or a node under a `*nodex` policy) everything is
//!    taken whole.
//!
//! Speed: candidates live on one stack per match ([`evals`]); where the graph makes it exact
//! — one child request with an exact count of a type whose scores strictly follow the
//! graph's order — children are walked best-first and the walk stops as soon as the count is
//! met, which gives the choice a full walk would make ([`ScoreOrder`]).

pub(crate) mod evals;
mod explore;
mod score;
mod slot;
pub mod subtree;

use std::collections::HashMap;

use shardsched_resource::{ResourceGraph, Status, Sym, VertexId};

use crate::policy::MatchPolicy;
use crate::request::{ReqId, Request};
use crate::state::SchedState;
use crate::types::{SLOT, TypeTable};
use evals::{Cands, Choices};
pub use score::ScoreOrder;

/// What kind of walk this is, as Fluxion's `alloc_type`: it decides whether status counts
/// and whether an exclusive request refuses a vertex allocated now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkKind {
    Allocate,
    Reserve,
    /// The far-horizon check: nothing allocated, status ignored.
    Satisfiability,
    /// Our own satisfiability for the shards: nothing allocated, but vertices down stay
    /// out (a queue asks whether a job fits the nodes it has).
    SatisfiabilityUp,
    /// `without_allocating`: matched and reported, nothing recorded.
    NoAllocate,
}

impl WalkKind {
    /// Whether the walk sees the graph as if nothing were allocated.
    pub fn ignores_calendars(self) -> bool {
        matches!(self, WalkKind::Satisfiability | WalkKind::SatisfiabilityUp)
    }
}

/// The time window of one walk.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub at: i64,
    pub now: i64,
    pub dur: u64,
    pub kind: WalkKind,
}

/// Why the last step of a walk failed, as far as resource-query's messages tell it apart
/// (its `errno` after a match).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Errno {
    #[default]
    None,
    /// EBUSY: nothing free now.
    Busy,
    /// ENODEV: can never fit.
    NoDev,
    /// ENOENT: no schedulable point found.
    NoEnt,
    /// ERANGE: more than exists.
    Range,
    /// EINVAL.
    Inval,
}

/// The mark a select leaves on an edge (stored per child vertex: the tree has one edge into
/// each vertex) for the update walk: what to take there and whether exclusively.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mark {
    pub epoch: u32,
    pub needs: u64,
    pub excl: bool,
    /// The parent the marked edge comes from (in a graph where a vertex has several).
    pub from: u32,
}

/// Edge marks of the last select, by child vertex, plus the root's.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    pub epoch: u32,
    pub by_child: Vec<Mark>,
    pub root: Mark,
}

impl Marks {
    /// Starts a new select: marks of earlier ones stop counting.
    pub fn tick(&mut self, n: usize) {
        if self.by_child.len() != n {
            self.by_child = vec![Mark::default(); n];
            self.epoch = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.by_child.fill(Mark::default());
            self.epoch = 1;
        }
    }

    pub fn set(&mut self, child: u32, needs: u64, excl: bool, from: u32) {
        self.by_child[child as usize] = Mark {
            epoch: self.epoch,
            needs,
            excl,
            from,
        };
    }

    /// The mark on the edge into `child`, if the last select set one.
    pub fn get(&self, child: u32) -> Option<Mark> {
        let m = self.by_child[child as usize];
        (m.epoch == self.epoch).then_some(m)
    }
}

/// Labels Fluxion records on matched vertices (`ephemeral`): by vertex, the walk that set
/// them and the label. They are printed by the JGF writer, stale or not, until the vertex is
/// labelled again by a later walk.
pub type Labels = HashMap<u32, (u64, String)>;

/// What a matched vertex keeps for its parent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Visit {
    pub score: i64,
    pub avail: u64,
}

/// The children of a vertex the walk follows, and the parent it came from.
pub trait Tree {
    fn children(&self, v: VertexId) -> &[u32];
    fn parent(&self, v: VertexId) -> Option<VertexId>;
    fn root(&self) -> VertexId;
    /// Whether some vertex has several parents (walks then visit each vertex once, by
    /// the first edge that reaches it, as Fluxion's colors do).
    fn is_dag(&self) -> bool {
        false
    }
}

impl Tree for ResourceGraph {
    #[inline]
    fn children(&self, v: VertexId) -> &[u32] {
        ResourceGraph::children(self, v)
    }
    #[inline]
    fn parent(&self, v: VertexId) -> Option<VertexId> {
        ResourceGraph::parent(self, v)
    }
    fn root(&self) -> VertexId {
        ResourceGraph::root(self)
    }
}

/// `first`'s learned child order (Fluxion's `by_outedges`): each vertex's children sorted by
/// (weight of the edge into them, uniq_id), both descending. Weights start at `u64::MAX`.
#[derive(Clone, Debug, Default)]
pub struct EdgeOrder {
    start: Vec<u32>,
    order: Vec<u32>,
    pub weight: Vec<u64>,
    uniq: Vec<i64>,
}

impl EdgeOrder {
    pub fn new(g: &ResourceGraph, tree: &dyn Tree) -> EdgeOrder {
        let n = g.len();
        let mut start = Vec::with_capacity(n + 1);
        let mut order = Vec::new();
        let uniq: Vec<i64> = g.vertices().map(|v| g.uniq_id(v)).collect();
        for v in g.vertices() {
            start.push(order.len() as u32);
            let from = order.len();
            order.extend_from_slice(tree.children(v));
            // std::map keyed (weight, uniq_id) with std::greater: equal keys keep the first.
            let kids = &mut order[from..];
            // Readers list children by ascending uniq_id as a rule: reversed, they are in
            // order and distinct, with no sort (this runs for every vertex at start).
            if kids.is_sorted_by(|a, b| uniq[*a as usize] < uniq[*b as usize]) {
                kids.reverse();
            } else if kids.len() > 1 {
                kids.sort_by(|a, b| uniq[*b as usize].cmp(&uniq[*a as usize]));
                let mut keep = 1;
                for i in 1..kids.len() {
                    if uniq[kids[i] as usize] != uniq[kids[keep - 1] as usize] {
                        kids[keep] = kids[i];
                        keep += 1;
                    }
                }
                order.truncate(from + keep);
            }
        }
        start.push(order.len() as u32);
        EdgeOrder {
            start,
            order,
            weight: vec![u64::MAX; n],
            uniq,
        }
    }

    /// `v`'s children in visiting order.
    pub fn children(&self, v: VertexId) -> &[u32] {
        let s = self.start[v.index()] as usize;
        let e = self.start[v.index() + 1] as usize;
        &self.order[s..e]
    }

    /// Sets the weight of the edge `parent → child` and moves the child to its place.
    pub fn set_weight(&mut self, parent: VertexId, child: u32, w: u64) {
        self.weight[child as usize] = w;
        let s = self.start[parent.index()] as usize;
        let e = self.start[parent.index() + 1] as usize;
        let list = &mut self.order[s..e];
        let Some(pos) = list.iter().position(|&c| c == child) else {
            return;
        };
        let (weight, uniq) = (&self.weight, &self.uniq);
        let key = |c: u32| (weight[c as usize], uniq[c as usize]);
        let mine = key(child);
        // Where it goes among the others: before the first with a smaller key.
        let at = list
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != pos)
            .position(|(_, &c)| key(c) < mine)
            .unwrap_or(list.len() - 1);
        if at < pos {
            list[at..=pos].rotate_right(1);
        } else if at > pos {
            list[pos..=at].rotate_left(1);
        }
    }
}

/// One select: a walk of the whole tree for one request at one time.
pub struct Walk<'a> {
    pub g: &'a ResourceGraph,
    pub tree: &'a dyn Tree,
    pub st: &'a SchedState,
    pub req: &'a Request,
    pub types: &'a TypeTable,
    pub policy: MatchPolicy,
    pub win: Window,
    pub score_order: &'a ScoreOrder,
    pub order: Option<&'a EdgeOrder>,
    pub marks: &'a mut Marks,
    pub labels: &'a mut Labels,
    /// Fluxion's sequence number of this walk (labels are stamped with it).
    pub seq: u64,
    pub errno: Errno,
    pub(crate) cands: Cands,
    pub(crate) choices: Choices,
    /// Scratch of slot formation (kept to reuse their memory).
    slot_kinds: Vec<Sym>,
    slot_members: Vec<(Sym, u64, usize)>,
    slot_edges: Vec<evals::EvalEdge>,
    slot_list: Vec<(i64, u32, u32)>,
    /// Node-centric score of the ancestors being visited.
    multilevel: i64,
    node: Option<Sym>,
    storage_node: Option<Sym>,
    /// Whether walking best-first with early stop is allowed for this request.
    budgets: bool,
    /// In a graph where a vertex has several parents: the walk's visit stamp of each
    /// vertex (Fluxion's colors) and the parent it was visited from.
    dag: Option<Box<DagState>>,
}

/// Per-walk visit state in a graph where a vertex has several parents.
#[derive(Clone, Debug, Default)]
pub struct DagState {
    pub visited: Vec<u64>,
    pub via: Vec<u32>,
}

impl<'a> Walk<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        g: &'a ResourceGraph,
        tree: &'a dyn Tree,
        st: &'a SchedState,
        req: &'a Request,
        types: &'a TypeTable,
        policy: MatchPolicy,
        win: Window,
        score_order: &'a ScoreOrder,
        order: Option<&'a EdgeOrder>,
        marks: &'a mut Marks,
        labels: &'a mut Labels,
        seq: u64,
        cands: Cands,
    ) -> Walk<'a> {
        // An unchosen vertex's label stays on it and shows in later JGF output: a labelled
        // request must visit everything Fluxion visits.
        let budgets = !req.labelled
            && !tree.is_dag()
            && !req.flexible
            && !policy.stop_at_first
            && !policy.variation
            && !win.kind.ignores_calendars();
        Walk {
            g,
            tree,
            st,
            req,
            types,
            policy,
            win,
            score_order,
            order,
            marks,
            labels,
            seq,
            errno: Errno::None,
            cands,
            choices: Choices::default(),
            slot_kinds: Vec::new(),
            slot_members: Vec::new(),
            slot_edges: Vec::new(),
            slot_list: Vec::new(),
            multilevel: 0,
            node: g.sym("node"),
            storage_node: g.sym("storage_node"),
            budgets,
            dag: None,
        }
    }

    /// Gives the walk the visit state it needs in a graph where vertices share parents.
    pub fn with_dag(&mut self, mut st: Box<DagState>) {
        let n = self.g.len();
        if st.visited.len() != n {
            st.visited = vec![0; n];
            st.via = vec![u32::MAX; n];
        }
        self.dag = Some(st);
    }

    /// Takes the visit state back (for the next walk).
    pub fn take_dag(&mut self) -> Option<Box<DagState>> {
        self.dag.take()
    }

    /// The parent `child` was visited from (its tree parent outside a DAG).
    fn via_of(&self, child: u32) -> u32 {
        match &self.dag {
            Some(d) => d.via[child as usize],
            None => u32::MAX,
        }
    }

    /// Whether `c` was already visited in this walk (a DAG only); else notes `u` as the
    /// parent it is visited from.
    pub(super) fn seen(&mut self, u: VertexId, c: VertexId) -> bool {
        let seq = self.seq;
        match &mut self.dag {
            Some(d) => {
                if d.visited[c.index()] == seq {
                    return true;
                }
                d.via[c.index()] = u.0;
                false
            }
            None => false,
        }
    }

    /// Visits everything Fluxion's walk visits (its errno then is Fluxion's too).
    pub fn no_budgets(&mut self) {
        self.budgets = false;
    }

    /// Gives the candidate stack back for the next walk.
    pub fn into_cands(self) -> Cands {
        self.cands
    }

    /// Runs the select from the root. On success the marks say what to take, and the root's
    /// own mark says how much of the root.
    pub fn select(&mut self) -> bool {
        self.marks.tick(self.g.len());
        self.cands.clear();
        let root = self.tree.root();
        let top = &self.req.top;
        let excl = self.exclusivity(top, root);
        let mut x_in = excl;
        let mut budget = self.budget_for(top, score::Among::Walk);
        let Some(vis) = self.dom_dfv(root, top, true, &mut x_in, budget.as_mut()) else {
            return false;
        };
        let r = self.cands.groups.len() as u32;
        let e = self.cands.edges.len() as u32;
        self.cands.edges.push(evals::EvalEdge {
            child: root.0,
            needs: vis.avail,
            excl,
        });
        self.cands.groups.push(evals::EGroup {
            kind: self.g.kind(root),
            score: vis.score,
            count: vis.avail,
            root: true,
            edges: (e, 1),
        });
        let _ = r;
        let ok = self.resolve_graph(root, vis.avail);
        if ok.is_none() {
            // Fluxion's select: a failed resolve means "can never fit here".
            self.errno = Errno::NoDev;
        }
        self.marks.root = Mark {
            epoch: self.marks.epoch,
            needs: ok.unwrap_or(0),
            excl,
            from: u32::MAX,
        };
        ok.is_some()
    }

    /// Fluxion's `resolve_graph`: the top-level choice, the root's share, and the marks up
    /// from the chosen candidates through the omitted prefix. Returns what to take of the
    /// root.
    fn resolve_graph(&mut self, root: VertexId, root_avail: u64) -> Option<u64> {
        self.choices.clear();
        let req = self.req;
        for &r in &req.top {
            let q = req.req(r);
            let qc = self.cands.qualified(0, q.ty);
            let count = q.calc_count(qc);
            if count == 0 {
                self.errno = Errno::Busy;
                return None;
            }
            self.choose(0, q.ty, count, true);
        }
        self.multilevel = 0;
        // has_root: the root type's count, or 1.
        let mut needs = 1;
        for &r in &req.top {
            let q = req.req(r);
            if Some(q.ty) == Some(self.g.kind(root)) && !q.is_slot {
                let count = q.calc_count(root_avail);
                if count == 0 {
                    return None;
                }
                needs = count;
            }
        }
        self.enforce(0, true);
        Some(needs)
    }

    /// Visits `u` with request list `reqs`; on success returns `u`'s candidacy, and leaves
    /// on the stack what `u` hands up (unless it matched and decided itself).
    fn dom_dfv(
        &mut self,
        u: VertexId,
        reqs: &'a [ReqId],
        pristine: bool,
        excl: &mut bool,
        budget: Option<&mut Budget>,
    ) -> Option<Visit> {
        let x_in = *excl || self.exclusivity(reqs, u);
        let t = self.test(u, reqs, pristine);
        if t.kind == MatchKind::None {
            self.errno = Errno::Busy;
            return None;
        }
        if !self.prune(x_in, u, reqs) {
            return None;
        }
        if !self.subtree_may_hold(u, &t, reqs) {
            self.errno = Errno::Busy;
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
            _ => {
                let mut own = if t.kind == MatchKind::Resource {
                    // A matched resource chooses among its own children.
                    self.budget_for(t.next, score::Among::Siblings)
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
        let avail = self.avail(u);
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
        Some(Visit { score, avail })
    }

    /// Fluxion's `dom_finish_vtx`: for the request `u` matched, choose each child type;
    /// returns `u`'s score and whether it chose (and so decides itself).
    fn finish_vtx(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        mark: usize,
        factor: i64,
    ) -> Option<(i64, bool)> {
        let req = self.req;
        let ukind = self.g.kind(u);
        let mut met = true;
        let mut hier = false;
        self.choices.clear();
        'reqs: for &r in reqs {
            let q = req.req(r);
            if q.is_slot || q.ty != ukind {
                continue;
            }
            for &c in &q.with {
                let cq = req.req(c);
                let qc = self.cands.qualified(mark, cq.ty);
                let count = cq.calc_count(qc);
                if count == 0 {
                    met = false;
                    break 'reqs;
                }
                hier |= self.choose(mark, cq.ty, count, false);
            }
        }
        self.multilevel -= factor;
        if !met {
            return None;
        }
        let score = if self.policy.variation {
            1 + perf_class(self.g, u)
        } else {
            1 + self.multilevel + self.g.id(u) + 1
        };
        Some((score, hier))
    }

    /// Sorts `kind`'s candidates above `mark` by the policy and takes `k`.
    fn choose(&mut self, mark: usize, kind: Sym, k: u64, _graph: bool) -> bool {
        let high = self.policy.prefer_high && !self.policy.variation;
        let cands = &self.cands;
        if high {
            self.choices
                .choose(cands, mark, kind, k, &mut |a: i64, b: i64| a > b)
        } else {
            self.choices
                .choose(cands, mark, kind, k, &mut |a: i64, b: i64| a < b)
        }
    }

    /// Fluxion's `enforce`: marks the edges of the chosen candidates (types in interning
    /// order); at the top level (`unconstrained`) also the edges up from them through the
    /// omitted prefix.
    fn enforce(&mut self, mark: usize, unconstrained: bool) {
        let mut kinds: Vec<(u32, usize)> = self
            .choices
            .list
            .iter()
            .enumerate()
            .filter(|(_, c)| c.best_k > 0)
            .map(|(i, c)| (self.types.rank(c.kind), i))
            .collect();
        kinds.sort_unstable();
        for (_, ci) in kinds {
            let best_i = self.choices.list[ci].best_i;
            for j in 0..best_i {
                let gi = self.choices.list[ci].order[j] as usize;
                if self.cands.groups[gi].root {
                    continue;
                }
                let (s, n) = self.cands.groups[gi].edges;
                for ei in s..s + n {
                    let e = self.cands.edges[ei as usize];
                    let from = self.via_of(e.child);
                    self.marks.set(e.child, e.needs, e.excl, from);
                    if unconstrained {
                        self.mark_up(mark, VertexId(e.child));
                    }
                }
            }
        }
    }

    /// Marks the unmarked edges above `v` whose target type the top-level candidates hold
    /// but did not choose (the omitted prefix), up to the root or a marked edge.
    fn mark_up(&mut self, mark: usize, v: VertexId) {
        let Some(mut parent) = self.tree.parent(v) else {
            return;
        };
        while self.tree.parent(parent).is_some() {
            if self.marks.get(parent.0).is_some() {
                break;
            }
            let tgt = parent;
            parent = self.tree.parent(parent).unwrap_or(parent);
            let kind = self.g.kind(tgt);
            let contained = self.cands.groups[mark..].iter().any(|g| g.kind == kind)
                || self.choices.list.iter().any(|c| c.kind == kind);
            let chosen = self
                .choices
                .list
                .iter()
                .any(|c| c.kind == kind && c.best_k > 0);
            if contained && !chosen {
                let size = u64::try_from(self.g.size(tgt)).unwrap_or(0);
                self.marks.set(tgt.0, size, false, parent.0);
            }
        }
    }

    /// Own units of `u` free during the window.
    fn avail(&self, u: VertexId) -> u64 {
        let w = &self.win;
        let free = if w.kind.ignores_calendars() {
            self.g.size(u)
        } else {
            self.st.units_free(u, self.g.size(u), w.at, w.dur)
        };
        u64::try_from(free).unwrap_or(0)
    }

    fn exclusivity(&self, reqs: &[ReqId], u: VertexId) -> bool {
        let ukind = self.g.kind(u);
        reqs.iter().any(|&r| {
            let q = self.req.req(r);
            !q.is_slot && q.ty == ukind && q.exclusive == Some(true)
        })
    }

    /// Fluxion's multilevel factor of a node under node-centric policies.
    fn node_factor(&self, u: VertexId) -> i64 {
        if self.policy.node_centric && Some(self.g.kind(u)) == self.node {
            score::node_factor(self.g, u)
        } else {
            0
        }
    }

    /// Fluxion's `test`: how `u` relates to `reqs`.
    fn test(&self, u: VertexId, reqs: &'a [ReqId], pristine: bool) -> Test<'a> {
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
                    return Test::none(reqs);
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
                    return Test::none(reqs);
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
            };
        }
        if let Some(r) = resource {
            return Test {
                kind: MatchKind::Resource,
                next: &req.req(r).with,
                nslots: 0,
                pristine: false,
            };
        }
        Test::unmatched(reqs, pristine)
    }

    /// The flexible traverser's `test`: several slots may share a list (or-slots); a slot
    /// list forms at `u` when any of its members could, and is then handed whole to
    /// [`Walk::dom_or_slot`]. A matched resource whose contents hold slots that cannot form
    /// at `u` does not match it.
    fn test_flexible(&self, u: VertexId, reqs: &'a [ReqId], pristine: bool) -> Test<'a> {
        let req = self.req;
        let ukind = self.g.kind(u);
        let (mut matched, mut or_matched) = (false, false);
        let mut slots: Option<(&'a [ReqId], u64)> = None;
        let mut resource: Option<ReqId> = None;
        for &r in reqs {
            let q = req.req(r);
            if !q.is_slot && q.ty == ukind {
                if matched || or_matched {
                    return Test::none(reqs);
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
                    return Test::none(reqs);
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
            };
        }
        unmatched
    }

    /// Whether `u` has children of every type the slot holds.
    fn slot_match(&self, u: VertexId, slot: ReqId) -> bool {
        let children = self.tree.children(u);
        self.req.req(slot).with.iter().all(|&e| {
            let ty = self.req.req(e).ty;
            children.iter().any(|&c| self.g.kind(VertexId(c)) == ty)
        })
    }

    /// Fluxion's `prune`: status, constraint, own availability, then for the requests of
    /// `u`'s type (and slots) exclusivity and the subtree aggregate.
    fn prune(&mut self, x_in: bool, u: VertexId, reqs: &[ReqId]) -> bool {
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
        if !sat && self.st.units_free(u, self.g.size(u), w.at, w.dur) <= 0 {
            self.errno = Errno::Busy;
            return false;
        }
        // The flexible traverser goes on past a slot whose subtree check fails: the last
        // check made decides.
        let mut ok = true;
        for &r in reqs {
            let q = self.req.req(r);
            if q.ty != ukind && !q.is_slot {
                continue;
            }
            if !q.is_slot {
                if x_in && q.exclusive == Some(false) {
                    self.errno = Errno::Inval;
                    return false;
                }
                if !sat && (x_in || q.exclusive == Some(true)) && !self.st.untouched(u, w.at, w.dur)
                {
                    self.errno = Errno::Busy;
                    return false;
                }
            }
            ok = q.user_data.is_empty() || self.st.agg_fits(u, &q.user_data, w.at, w.dur, sat);
            if !ok {
                self.errno = Errno::Busy;
                if !(self.req.flexible && q.is_slot) {
                    return false;
                }
            }
        }
        ok
    }

    /// Whether the subtree of an omitted-prefix vertex could hand up a candidate for any of
    /// `reqs`: one instance needs at least its own needs free below. Fluxion walks such
    /// subtrees anyway and finds nothing there; skipping them changes nothing but the time.
    fn subtree_may_hold(&self, u: VertexId, t: &Test<'_>, reqs: &[ReqId]) -> bool {
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
}

/// How a vertex relates to the request list it is visited with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MatchKind {
    Resource,
    Slot,
    /// Nothing matched yet on the path: walked through with the same requests.
    Pristine,
    None,
}

struct Test<'a> {
    kind: MatchKind,
    next: &'a [ReqId],
    nslots: u64,
    pristine: bool,
}

impl<'a> Test<'a> {
    fn none(reqs: &'a [ReqId]) -> Test<'a> {
        Test {
            kind: MatchKind::None,
            next: reqs,
            nslots: 0,
            pristine: false,
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
        }
    }
}

/// A decision that may stop the walk early: `remaining` units of `kind` still wanted.
#[derive(Clone, Copy, Debug)]
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
    fn budget_for(&self, with: &[ReqId], among: score::Among) -> Option<Budget> {
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
}

/// The variation policy's score of a vertex: its `perf_class` property read as C's `stoi`
/// does (leading blanks and sign, then digits), 9999 when missing, unreadable, negative or
/// above 9999.
pub fn perf_class(g: &ResourceGraph, v: VertexId) -> i64 {
    const WORST: i64 = 9999;
    let Some(text) = g.properties(v).and_then(|p| p.get("perf_class")) else {
        return WORST;
    };
    let s = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return WORST;
    }
    let Ok(n) = digits[..end].parse::<i64>() else {
        return WORST;
    };
    let n = if neg { -n } else { n };
    if !(i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&n) || !(0..=WORST).contains(&n) {
        return WORST;
    }
    n
}
