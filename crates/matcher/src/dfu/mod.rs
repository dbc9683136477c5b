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

mod budget;
mod decide;
pub(crate) mod evals;
mod explore;
mod leaf;
mod marks;
mod memo;
mod order;
mod qualify;
mod run;
mod score;
mod slot;
pub mod subtree;
mod visit;

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU64;

use shardsched_resource::{ResourceGraph, Sym, VertexId};

use crate::policy::MatchPolicy;
use crate::request::Request;
use crate::state::SchedState;
use crate::types::TypeTable;
pub(crate) use budget::Budget;
use evals::{Cands, Choices};
pub use marks::{Mark, Marks};
pub use memo::NodeVisits;
pub use order::EdgeOrder;
pub use score::{ScoreOrder, perf_class};

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

/// Labels Fluxion records on matched vertices (`ephemeral`): by vertex, the walk that set
/// them and the label. They are printed by the JGF writer, stale or not, until the vertex is
/// labelled again by a later walk.
pub type Labels = HashMap<u32, (u64, String)>;

/// What a matched vertex keeps for its parent: its score and the units it has free.
///
/// Why the units are kept plus one: `Option<Visit>` is then two words (none is a zero),
/// which a call returns in registers. As three, `dom_dfv` returned it through memory, and
/// the caller read it back wider than it was written, waiting for the stores: about 3 % of
/// the 5,000-job conservative replay's cycles, at every child a walk visits (`perf`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Visit {
    pub score: i64,
    avail_plus_one: NonZeroU64,
}

impl Visit {
    /// A visit with `avail` units free (`u64::MAX` counts as one fewer: never reached, units
    /// come from `i64` sizes).
    pub(crate) fn new(score: i64, avail: u64) -> Visit {
        Visit {
            score,
            avail_plus_one: NonZeroU64::MIN.saturating_add(avail),
        }
    }

    /// The units it has free.
    pub(crate) fn avail(&self) -> u64 {
        self.avail_plus_one.get() - 1
    }
}

/// The children of a vertex the walk follows, and the parent it came from.
pub trait Tree {
    /// Every vertex's children at once, compressed: `v`'s are `list[start[v]..start[v + 1]]`,
    /// as `(start, list)`.
    fn child_lists(&self) -> (&[u32], &[u32]);
    #[inline]
    fn children(&self, v: VertexId) -> &[u32] {
        let (start, list) = self.child_lists();
        &list[start[v.index()] as usize..start[v.index() + 1] as usize]
    }
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
    fn parent(&self, v: VertexId) -> Option<VertexId> {
        ResourceGraph::parent(self, v)
    }
    fn root(&self) -> VertexId {
        ResourceGraph::root(self)
    }
    #[inline]
    fn child_lists(&self) -> (&[u32], &[u32]) {
        ResourceGraph::child_lists(self)
    }
}

/// One select: a walk of the whole tree for one request at one time.
pub struct Walk<'a> {
    pub g: &'a ResourceGraph,
    pub tree: &'a dyn Tree,
    /// The tree's child lists, read once ([`Tree::child_lists`]).
    child_lists: (&'a [u32], &'a [u32]),
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
    /// Visit every vertex Fluxion's walk visits (no shortcut of ours), so that `visits`
    /// counts what Fluxion counts.
    exact_visits: bool,
    /// Fluxion's `m_preorder` and `m_postorder`: vertices this select entered, and those it
    /// left with a candidacy (`dfu_impl.cpp` `dom_dfv`).
    pub visits: (u32, u32),
    /// Fluxion's traverser messages (`m_err_msg`), kept only when asked for
    /// ([`Walk::complain_into`]).
    complaints: Option<String>,
    /// In a graph where a vertex has several parents: the walk's visit stamp of each
    /// vertex (Fluxion's colors) and the parent it was visited from.
    dag: Option<Box<DagState>>,
    /// Free nodes' visits, kept between walks ([`memo`]), and whether this walk uses them.
    node_visits: NodeVisits,
    keeps_visits: bool,
    /// The next `dom_dfv` walks its vertex itself (see [`Walk::visit_vertex`]).
    walk_node_itself: bool,
    /// Vertices an allocation holds at some other time than now ([`Walk::refuse_allocated`]).
    allocated: Option<&'a HashSet<u32>>,
}

/// The working memory of a select, handed from one walk to the next so that a match
/// allocates none of it again: the candidate stack, the choices made at a vertex and the
/// slot formation's lists. Scratch only: a clone starts empty.
#[derive(Debug, Default)]
pub struct WalkScratch {
    cands: Cands,
    choices: Choices,
    slot_kinds: Vec<Sym>,
    slot_members: Vec<(Sym, u64, usize)>,
    slot_edges: Vec<evals::EvalEdge>,
    slot_list: Vec<(i64, u32, u32)>,
    node_visits: NodeVisits,
}

impl WalkScratch {
    /// Forgets the kept visit of whole `c`'s node (the order of children below it changed).
    pub fn forget_node_visit(&mut self, c: u32) {
        self.node_visits.forget(c);
    }

    /// Whether a free node's visit is kept (else none is to be forgotten).
    pub fn keeps_node_visits(&self) -> bool {
        self.node_visits.keeps_any()
    }
}

impl Clone for WalkScratch {
    fn clone(&self) -> Self {
        WalkScratch::default()
    }
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
        scratch: WalkScratch,
    ) -> Walk<'a> {
        // An unchosen vertex's label stays on it and shows in later JGF output: a labelled
        // request must visit everything Fluxion visits.
        let budgets = !req.labelled
            && !tree.is_dag()
            && !req.flexible
            && policy.stops_by_score_order()
            && !win.kind.ignores_calendars();
        Walk {
            g,
            tree,
            child_lists: tree.child_lists(),
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
            cands: scratch.cands,
            choices: scratch.choices,
            slot_kinds: scratch.slot_kinds,
            slot_members: scratch.slot_members,
            slot_edges: scratch.slot_edges,
            slot_list: scratch.slot_list,
            multilevel: 0,
            node: g.sym("node"),
            storage_node: g.sym("storage_node"),
            budgets,
            exact_visits: false,
            complaints: None,
            visits: (0, 0),
            dag: None,
            node_visits: scratch.node_visits,
            keeps_visits: false,
            walk_node_itself: false,
            allocated: None,
        }
    }

    /// Fluxion's guard against jobs overrunning their time (`by_excl`), for a select at
    /// `now` for an allocation or a match without one (the caller's to ask): an exclusive
    /// request refuses every vertex with an allocation of any time — `allocated` holds
    /// those whose allocation does not cover now (the others the calendars refuse already).
    /// Such an allocation is resource-query's `update` at a later time; the walk then takes
    /// no shortcut.
    pub fn refuse_allocated(&mut self, allocated: &'a HashSet<u32>) {
        self.allocated = Some(allocated);
        self.exact_visits();
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

    /// Visits exactly what Fluxion's walk visits, for its visit counts: no best-first early
    /// stop and no skipping of subtrees that cannot hold anything.
    pub fn exact_visits(&mut self) {
        self.budgets = false;
        self.exact_visits = true;
    }

    /// Appends Fluxion's traverser messages to `text` (what earlier selects of the same
    /// match left), handed back by [`Walk::take_complaints`].
    pub fn complain_into(&mut self, text: String) {
        self.complaints = Some(text);
    }

    /// The messages, handed back to the matcher after the walk (`None` when not kept).
    pub fn take_complaints(&mut self) -> Option<String> {
        self.complaints.take()
    }

    /// Appends to the traverser messages, when they are kept.
    fn complain(&mut self, say: impl FnOnce(&mut String)) {
        if let Some(text) = self.complaints.as_mut() {
            say(text);
        }
    }

    /// Gives the candidate stack back for the next walk.
    pub fn into_scratch(mut self) -> WalkScratch {
        // Every use of the choices starts by clearing them; this only keeps their lists.
        self.choices.clear();
        WalkScratch {
            cands: self.cands,
            choices: self.choices,
            slot_kinds: self.slot_kinds,
            slot_members: self.slot_members,
            slot_edges: self.slot_edges,
            slot_list: self.slot_list,
            node_visits: self.node_visits,
        }
    }

    /// Runs the select from the root. On success the marks say what to take, and the root's
    /// own mark says how much of the root.
    pub fn select(&mut self) -> bool {
        self.marks.tick(self.g.len(), self.tree.is_dag());
        self.cands.clear();
        self.keeps_visits = self.keeps_node_visits();
        if self.keeps_visits {
            self.start_node_visits();
        }
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
            needs: vis.avail(),
            excl,
        });
        self.cands.groups.push(evals::EGroup {
            kind: self.g.kind(root),
            score: vis.score,
            count: vis.avail(),
            root: true,
            edges: (e, 1),
        });
        let _ = r;
        let ok = self.resolve_graph(root, vis.avail());
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
}
