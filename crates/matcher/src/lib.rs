//! The matcher: finds resources for a jobspec in a resource graph, now or at the earliest
//! future time, and keeps the calendars that make those answers exact.
//!
//! One entry point, [`Matcher::run`], serves `shardsched query`, the benches, replay and the
//! shards. A match is Fluxion's: a *select* walks the graph depth-first together with the
//! jobspec, scores candidates by the [`MatchPolicy`] and marks the best ([`dfu`]); an
//! *update* walk then takes what the marks say ([`update`]) and — for allocations and
//! reservations — records it in per-vertex calendars ([`state`]) so that later matches see
//! it and [`Matcher::cancel`] restores the calendars exactly.
//!
//! ```
//! use shardsched_matcher::{Matcher, MatchOp, MatchOutcome, MatchPolicy, PruneFilters};
//! use shardsched_resource::{GraphBuilder, VertexSpec, CONTAINMENT};
//! let mut b = GraphBuilder::new();
//! let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
//! for i in 0..2 {
//!     let n = b.add_vertex(VertexSpec::new("node", "node", i));
//!     b.add_edge(c, n, CONTAINMENT);
//! }
//! let mut m = Matcher::new(b.finish().unwrap(), MatchPolicy::parse("low").unwrap(), &PruneFilters::default_filters());
//! let js = shardsched_jobspec::parse("version: 9999\nresources: [{type: slot, count: 1, label: s, with: [{type: node, count: 1}]}]\ntasks: [{command: [app], slot: s, count: {per_slot: 1}}]\nattributes: {system: {duration: 60}}").unwrap();
//! let out = m.run(MatchOp::Allocate, &js, 1, 0).unwrap();
//! assert!(matches!(out, MatchOutcome::Allocated(_)));
//! ```

pub mod alloc;
pub mod checker;
mod compiled;
pub mod constraint;
pub mod dfu;
pub mod find;
mod given;
pub use given::{GivenError, GivenVertex};
mod partial;
mod records;
mod side;
pub use partial::{PartialCancel, RemoveError};
mod gccsort;
mod hold;
mod instants;
pub mod policy;
mod regraph;
pub mod request;
mod restore;
mod schedule;
mod search;
pub mod state;
#[cfg(test)]
mod test_support;
pub mod types;
mod unordered;
pub mod update;
mod visits;
pub mod writer;

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use shardsched_jobspec::Jobspec;
use shardsched_resource::{ResourceGraph, Status, VertexId};

pub use alloc::{AllocVertex, Allocation, Depth};
pub use dfu::{EdgeOrder, Errno, Labels};
pub use policy::MatchPolicy;
pub use request::{Request, UNKNOWN_TYPE_MESSAGE};
pub use restore::{StoredAllocation, StoredVertex};
pub use schedule::{FluxionOp, QueryOutcome};
pub use state::{PLAN_BASE, PLAN_HORIZON, PruneFilters, SchedState, SpanRef};
pub use types::{PruneTypes, TypeTable};
pub use writer::Writer;

/// What a caller asks of a match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchOp {
    /// Allocate now or fail.
    Allocate,
    /// Allocate now; on failure, also say whether the request could ever be satisfied.
    AllocateWithSatisfiability,
    /// Allocate now, or reserve at the earliest time it fits.
    AllocateOrElseReserve,
    /// Only say whether the request could ever be satisfied; records nothing.
    Satisfiability,
}

impl MatchOp {
    /// Parses resource-query's spelling.
    pub fn parse(s: &str) -> Option<MatchOp> {
        Some(match s {
            "allocate" => MatchOp::Allocate,
            "allocate_with_satisfiability" => MatchOp::AllocateWithSatisfiability,
            "allocate_orelse_reserve" => MatchOp::AllocateOrElseReserve,
            "satisfiability" => MatchOp::Satisfiability,
            _ => return None,
        })
    }
}

/// The answer of [`Matcher::run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatchOutcome {
    Allocated(Allocation),
    Reserved(Allocation),
    /// Nothing now (or ever, for reserve). `satisfiable` is known when the op checked it.
    NoMatch {
        satisfiable: Option<bool>,
    },
    /// Answer of [`MatchOp::Satisfiability`].
    Satisfiable(bool),
}

/// The answer of [`Matcher::place`]: [`MatchOutcome`] without the allocation, which the
/// matcher keeps ([`Matcher::job`], [`Matcher::copy_allocation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Allocated { at: i64 },
    Reserved { at: i64 },
    NoMatch { satisfiable: Option<bool> },
    Satisfiable(bool),
}

/// Whether a job holds its resources now or later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    Allocated,
    Reserved,
}

impl JobState {
    /// What recording a job in this state at `at` answers.
    fn placement(self, at: i64) -> Placement {
        match self {
            JobState::Allocated => Placement::Allocated { at },
            JobState::Reserved => Placement::Reserved { at },
        }
    }
}

/// A map keyed by job id, hashed by `rustc-hash`'s multiply-rotate hash: the ids come from
/// the program (a shard's FLUIDs, resource-query's counter) or a local user
/// (resource-query's `update`), never from a remote party that could pick ids that
/// collide, so SipHash's flood resistance buys nothing (it cost ~2 % of a conservative
/// replay's instructions in the queue manager's maps). Its order is arbitrary: a reader
/// that shows one sorts.
pub type JobMap<V> = FxHashMap<u64, V>;

/// A job the matcher holds resources for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    pub state: JobState,
    /// The vertices the job holds (Fluxion's job tags), children before parents.
    pub alloc: Allocation,
    pub spans: Vec<SpanRef>,
    /// Part of it was cancelled ([`Matcher::partial_cancel_ranks`]), or (resource-query's
    /// matches) its match left out a vertex whose calendar refused it
    /// ([`Matcher::last_refused`]): what it holds may not all be reachable from the root
    /// through vertices it holds.
    pub partial: bool,
    /// Its start and end are among the instants a reservation search tries (the
    /// matcher's `instants`): in Fluxion, the root's aggregate holds a span of it for its
    /// first type, whose planner's points are the instants tried. A partial cancel that
    /// gives that span back (all of it, or a span of 0 units: `planner_multi_reduce_span`)
    /// takes them out while the job keeps the rest.
    pub in_times: bool,
}

/// Errors of the matcher.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MatchError {
    #[error("bad prune filter {0:?}: expected HL:LL, e.g. ALL:core")]
    BadPruneFilter(String),
    #[error("job {0} already holds resources")]
    DuplicateJob(u64),
    #[error("no job {0}")]
    NoSuchJob(u64),
    #[error("no resource vertex at path {0}")]
    NoSuchPath(String),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("internal calendar error: {0}")]
    Internal(String),
    #[error(transparent)]
    Attach(#[from] shardsched_resource::AttachError),
    #[error(transparent)]
    Remove(#[from] RemoveError),
}

/// A resource graph with its scheduling state and the jobs placed on it.
#[derive(Clone, Debug)]
pub struct Matcher {
    pub graph: ResourceGraph,
    pub state: SchedState,
    policy: MatchPolicy,
    types: TypeTable,
    prune: PruneTypes,
    /// Interning rank of each type symbol when it is a pruning type.
    prune_rank_of: Vec<Option<u32>>,
    score_order: dfu::ScoreOrder,
    /// `first`'s learned child order (stop-on-1 policies only).
    order: Option<EdgeOrder>,
    marks: dfu::Marks,
    labels: Labels,
    /// Fluxion's sequence number: one per select.
    seq: u64,
    /// The last select's working memory, for the next one.
    walk_scratch: Option<dfu::WalkScratch>,
    spares: alloc::Spares,
    /// A commit's working memory, kept for the next one.
    commit_scratch: alloc::CommitScratch,
    /// Start and end times of held allocations and reservations (of jobs whose
    /// [`JobRecord::in_times`] holds): the only instants at which a reservation can start,
    /// as Fluxion's planner offers them.
    instants: instants::Instants,
    /// The jobs' books. Hashed, not a B-tree: a match looks its job up four times (a
    /// B-tree's search was ~300 instructions each, 2 % of first-1024). Where an order
    /// shows, it is by id ([`Matcher::jobs`], [`books_by_id`]). Each record boxed: a
    /// slot of the table is then the id and a pointer, so each growth of the table moves
    /// 16 bytes a job into fresh pages instead of a record's ~120, and the records lie
    /// packed in the heap (first-1024: 2,712 → 2,578 page faults).
    jobs: JobMap<Box<JobRecord>>,
    /// End of the graph's planning period (Fluxion's graph duration): durations are cut
    /// there, and a job without one lasts until then.
    graph_end: i64,
    /// Fluxion's count of up nodes (its own bookkeeping, quirks included).
    nodes_up: i64,
    /// Fluxion's errno during the last [`Matcher::schedule`].
    errno: dfu::Errno,
    /// Fluxion's flexible traverser (`-T flexible`): or-slots and xor-slots.
    flexible: bool,
    /// Records beside the jobs' books: a job's records under its other state, and what no
    /// cancel reaches any more (`side.rs`).
    side: Vec<side::SideRecord>,
    /// Some job's pruning-filter records stay in calendars its books no longer list (a
    /// job id matched again, see `side.rs`): an aggregate may then count more than its
    /// subtree holds, so walks take no shortcut by aggregates (Fluxion reads one only for
    /// requests of its vertex's type).
    aggregates_leaked: bool,
    /// Whether `update` recorded a job: its allocation may not cover now
    /// ([`Matcher::allocated_not_now`]).
    given_allocations: bool,
    /// Walk every vertex Fluxion's walk visits (no best-first early stop), for its errno.
    exhaustive: bool,
    /// Levels Fluxion's update walk failed to give back (one per vertex a calendar
    /// refused): every later output is indented that much deeper, up to
    /// [`alloc::LEVEL_DRIFT_MAX`].
    level_drift: Depth,
    /// The vertices the last recorded match left out, with the number of kept vertices
    /// before each (see [`Matcher::last_refused`]).
    refused: Vec<alloc::LeftOut>,
    /// Fluxion's traverser messages of the last match, when kept
    /// ([`Matcher::keep_complaints`]).
    complaints: Option<String>,
    /// The dominant subsystem's tree when it is not containment (`-S PA`).
    subtree: Option<Box<dfu::subtree::SubTree>>,
    /// The pruning types the filters name (before the leaf types a walk adds).
    prune_base: PruneTypes,
    /// A walk's visit state in a graph where vertices share parents (kept between walks).
    dag_state: Option<Box<dfu::DagState>>,
    /// How many vertices the last recorded match took (its job may hold more: see
    /// `record_as`).
    last_recorded: usize,
    /// Fluxion's traversal visit counts (`-e`).
    visits: visits::VisitCounts,
    /// The requests compiled last, for the next matches of the same jobspecs.
    compiled: compiled::CompiledRequests,
}

/// The tree of `subsystem` walks follow, when it is not the plain containment tree.
fn subtree_of(
    graph: &ResourceGraph,
    subsystem: &str,
) -> Result<Option<Box<dfu::subtree::SubTree>>, MatchError> {
    if subsystem == shardsched_resource::CONTAINMENT && !graph.has_shared_children() {
        return Ok(None);
    }
    let tree = dfu::subtree::SubTree::new(graph, subsystem)
        .ok_or_else(|| MatchError::BadRequest(format!("the graph has no {subsystem} subsystem")))?;
    if let Some((v, depth)) = tree.too_deep() {
        let e = graph.too_deep(subsystem, v, depth);
        return Err(MatchError::BadRequest(e.to_string()));
    }
    Ok(Some(Box::new(tree)))
}

/// The tree walks follow: the dominant subsystem's, containment's by default.
fn tree_of<'a>(
    graph: &'a ResourceGraph,
    subtree: &'a Option<Box<dfu::subtree::SubTree>>,
) -> &'a dyn dfu::Tree {
    match subtree {
        Some(t) => t.as_ref(),
        None => graph,
    }
}

impl Matcher {
    /// A matcher over `graph` with nothing allocated.
    pub fn new(graph: ResourceGraph, policy: MatchPolicy, filters: &PruneFilters) -> Matcher {
        let types = TypeTable::new(&graph, filters.type_names());
        let mut prune = PruneTypes::default();
        for (hl, ll) in &filters.pairs {
            let anchor = hl
                .as_deref()
                .and_then(|h| types.lookup(&graph, h))
                .map(|s| types.rank(s));
            if hl.is_some() && anchor.is_none() {
                continue;
            }
            if let Some(low) = types.lookup(&graph, ll) {
                prune.set(anchor, types.rank(low));
            }
        }
        let prune_base = prune.clone();
        let state = SchedState::new(&graph, &types, &mut prune);
        let prune_rank_of = prune_rank_of(&graph, &types, &prune);
        let score_order = dfu::ScoreOrder::new(&graph, &graph, &policy);
        let order = policy.stop_at_first.then(|| EdgeOrder::new(&graph, &graph));
        let node = graph.sym("node");
        let nodes_up = node.map_or(0, |n| {
            graph
                .vertices()
                .filter(|&v| graph.kind(v) == n)
                .map(|v| if graph.status(v) == Status::Up { 1 } else { -1 })
                .sum()
        });
        let mut m = Matcher {
            graph,
            state,
            policy,
            types,
            prune,
            prune_rank_of,
            score_order,
            order,
            marks: dfu::Marks::default(),
            labels: Labels::default(),
            seq: 0,
            walk_scratch: None,
            spares: alloc::Spares::default(),
            commit_scratch: alloc::CommitScratch::default(),
            instants: instants::Instants::default(),
            jobs: JobMap::default(),
            graph_end: PLAN_BASE.saturating_add(i64::try_from(PLAN_HORIZON / 2).unwrap_or(0)),
            nodes_up,
            errno: dfu::Errno::None,
            flexible: false,
            side: Vec::new(),
            aggregates_leaked: false,
            given_allocations: false,
            exhaustive: false,
            level_drift: 0,
            refused: Vec::new(),
            complaints: None,
            subtree: None,
            prune_base,
            dag_state: None,
            last_recorded: 0,
            visits: visits::VisitCounts::default(),
            compiled: compiled::CompiledRequests::default(),
        };
        if m.graph.has_shared_children() {
            // Walks follow every containment edge, each vertex once.
            let _ = m.set_dominant_subsystem(shardsched_resource::CONTAINMENT);
        }
        m
    }

    /// Makes `subsystem` the dominant one (resource-query's `-S PA`: walks follow the power
    /// subsystem's edges from its root). Only before anything is held; `containment` goes
    /// back to the default.
    pub fn set_dominant_subsystem(&mut self, subsystem: &str) -> Result<(), MatchError> {
        if !self.jobs.is_empty() {
            return Err(MatchError::Internal(
                "the dominant subsystem changes only before any match".into(),
            ));
        }
        self.subtree = subtree_of(&self.graph, subsystem)?;
        self.compiled.clear();
        self.walk_scratch = None;
        let mut prune = self.prune_base.clone();
        let tree = tree_of(&self.graph, &self.subtree);
        self.state = SchedState::new_on(&self.graph, tree, &self.types, &mut prune);
        self.prune_rank_of = prune_rank_of(&self.graph, &self.types, &prune);
        self.prune = prune;
        self.score_order = dfu::ScoreOrder::new(&self.graph, tree, &self.policy);
        if self.order.is_some() {
            self.order = Some(EdgeOrder::new(&self.graph, tree));
        }
        Ok(())
    }

    /// The dominant subsystem's name (`containment` unless set otherwise).
    pub fn dominant_subsystem(&self) -> &str {
        self.subtree
            .as_ref()
            .map_or(shardsched_resource::CONTAINMENT, |t| t.name.as_str())
    }

    /// The tree walks follow (see [`Matcher::set_dominant_subsystem`]).
    pub fn tree(&self) -> &dyn dfu::Tree {
        tree_of(&self.graph, &self.subtree)
    }

    /// Chooses Fluxion's flexible traverser (`-T flexible`: or-slots formed by best score,
    /// xor-slots tried one alternative at a time) or its default one.
    pub fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }

    /// Sets the end of the planning period (see [`Matcher::graph_end`]); resource-query uses
    /// Fluxion's 100 years.
    pub fn set_graph_end(&mut self, end: i64) {
        self.graph_end = end.clamp(PLAN_BASE + 1, PLAN_BASE + (PLAN_HORIZON / 2) as i64);
    }

    /// End of the planning period: no job runs past it.
    pub fn graph_end(&self) -> i64 {
        self.graph_end
    }

    /// The match policy this matcher was built with.
    pub fn policy(&self) -> MatchPolicy {
        self.policy
    }

    /// Fluxion's type table of this graph.
    pub fn types(&self) -> &TypeTable {
        &self.types
    }

    /// Labels recorded on vertices by matches (printed by the JGF writer).
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Matches `js` for job `jobid` at time `now` according to `op`.
    pub fn run(
        &mut self,
        op: MatchOp,
        js: &Jobspec,
        jobid: u64,
        now: i64,
    ) -> Result<MatchOutcome, MatchError> {
        let placed = self.place(op, js, jobid, now)?;
        let copy = |m: &mut Matcher| {
            m.copy_allocation(jobid)
                .ok_or_else(|| MatchError::Internal(format!("job {jobid} placed but not held")))
        };
        Ok(match placed {
            Placement::Allocated { .. } => MatchOutcome::Allocated(copy(self)?),
            Placement::Reserved { .. } => MatchOutcome::Reserved(copy(self)?),
            Placement::NoMatch { satisfiable } => MatchOutcome::NoMatch { satisfiable },
            Placement::Satisfiable(b) => MatchOutcome::Satisfiable(b),
        })
    }

    /// As [`Matcher::run`], without handing back a copy of the allocation: it stays in the
    /// matcher ([`Matcher::job`]).
    pub fn place(
        &mut self,
        op: MatchOp,
        js: &Jobspec,
        jobid: u64,
        now: i64,
    ) -> Result<Placement, MatchError> {
        if op != MatchOp::Satisfiability && self.jobs.contains_key(&jobid) {
            return Err(MatchError::DuplicateJob(jobid));
        }
        let fop = match op {
            MatchOp::Allocate => FluxionOp::Allocate,
            MatchOp::AllocateWithSatisfiability => FluxionOp::AllocateWithSatisfiability,
            MatchOp::AllocateOrElseReserve => FluxionOp::AllocateOrElseReserve,
            MatchOp::Satisfiability => FluxionOp::Satisfiability,
        };
        Ok(match self.schedule_as(fop, js, jobid, now, false)? {
            QueryOutcome::Allocated(at, _) => Placement::Allocated { at },
            QueryOutcome::Reserved(at, _) => Placement::Reserved { at },
            QueryOutcome::Matched(..) => Placement::NoMatch { satisfiable: None },
            QueryOutcome::NoMatch { unsatisfiable } => Placement::NoMatch {
                satisfiable: match op {
                    MatchOp::Allocate => None,
                    _ => Some(!unsatisfiable),
                },
            },
            QueryOutcome::Satisfiable(b) => Placement::Satisfiable(b),
        })
    }

    /// A copy of job `jobid`'s allocation.
    pub fn copy_allocation(&mut self, jobid: u64) -> Option<Allocation> {
        let job = self.jobs.get(&jobid)?;
        let lists = self.spares.lists(job.alloc.entries().len());
        Some(job.alloc.copy_into(lists))
    }

    /// The vertices the last recorded match left out because their calendars refused them
    /// (each with the number of kept vertices before it): Fluxion writes no vertex for them
    /// but still the edge into them ([`writer::MatchWriter::feed_with_refused`]).
    pub fn last_refused(&self) -> &[alloc::LeftOut] {
        &self.refused
    }

    /// Feeds `a` to `w` as Fluxion's update walk would: along the dominant subsystem, with
    /// the labels of the last walk, and (when `a` was just recorded) the edges into the
    /// vertices it left out.
    pub fn feed_writer(&self, w: &mut writer::MatchWriter, a: &Allocation, recorded: bool) {
        let refused = if recorded { &self.refused[..] } else { &[][..] };
        w.feed_on(
            &self.graph,
            self.tree(),
            self.dominant_subsystem(),
            &self.labels,
            a,
            refused,
        );
    }

    /// Hands back an allocation the caller is done with (one [`Matcher::run`] returned),
    /// so that its memory serves a later match instead of being freed and taken again.
    pub fn recycle(&mut self, alloc: Allocation) {
        self.spares.give_back(alloc);
    }

    /// The job `jobid`, if the matcher holds resources for it.
    pub fn job(&self, jobid: u64) -> Option<&JobRecord> {
        self.jobs.get(&jobid).map(|v| &**v)
    }

    /// What job `jobid` takes from `v`'s aggregate: units of each of its types (in the
    /// aggregate's order), zeros when it takes none there. `None` when the job is unknown
    /// or `v` has no aggregate.
    pub fn aggregate_use(&self, jobid: u64, v: VertexId) -> Option<Vec<i64>> {
        let job = self.jobs.get(&jobid)?;
        let agg = self.state.aggregate(v)?;
        let used = job
            .spans
            .iter()
            .rev()
            .find_map(|&s| self.state.aggregate_span(v, s));
        Some(used.map_or_else(|| vec![0; agg.types.len()], <[i64]>::to_vec))
    }

    /// All jobs, by id (sorted at each call: the books are hashed).
    pub fn jobs(&self) -> impl Iterator<Item = (u64, &JobRecord)> {
        by_id(self.jobs.iter().map(|(k, v)| (*k, &**v)).collect()).into_iter()
    }

    /// Counts the graph's nodes again for `first`'s early "not enough nodes" answer, each
    /// as up: the count a graph loaded with every node up starts with. `attach` and
    /// `remove_path` keep the count of before, as Fluxion's `add_subgraph` and
    /// `remove_subgraph` do (resource-query's bytes depend on it); a scheduler whose graph
    /// grows calls this after them, or `first` would refuse every request for more nodes
    /// than the graph had. (A queue manager sets availability on the graph, outside this
    /// count: for it the count is the definition's.)
    pub fn recount_nodes(&mut self) {
        self.nodes_up = self.graph.sym("node").map_or(0, |node| {
            self.graph
                .vertices()
                .filter(|&v| self.graph.kind(v) == node && !self.graph.is_removed(v))
                .count()
        }) as i64;
    }

    /// Marks the vertex at `path` up or down; down vertices and their subtrees are skipped.
    pub fn set_status(&mut self, path: &str, status: Status) -> Result<(), MatchError> {
        let at = self.vertices(path)?;
        let changed: Vec<VertexId> = at
            .into_iter()
            .filter(|&v| self.graph.status(v) != status)
            .collect();
        for &v in &changed {
            self.graph.set_status(v, status);
        }
        // Fluxion counts every node of the subtrees, whatever its own status, once.
        if let Some(node) = self.graph.sym("node") {
            let sign = if status == Status::Up { 1 } else { -1 };
            let g = &self.graph;
            let subtrees: BTreeSet<VertexId> =
                changed.iter().flat_map(|&v| g.preorder(v)).collect();
            let delta: i64 = subtrees
                .into_iter()
                .filter(|&x| g.kind(x) == node)
                .map(|x| g.size(x))
                .sum();
            self.nodes_up += sign * delta;
        }
        Ok(())
    }

    /// Every vertex at a path, in vertex order (more than one where a graph names two
    /// alike): what `set-property`, `get-property`, `set-status` and `get-status` act on.
    pub fn vertices(&self, path: &str) -> Result<Vec<VertexId>, MatchError> {
        let at = self.graph.find_paths(path);
        if at.is_empty() {
            return Err(MatchError::NoSuchPath(path.to_string()));
        }
        Ok(at)
    }

    /// The vertex at a containment path.
    pub fn vertex(&self, path: &str) -> Result<VertexId, MatchError> {
        self.graph
            .find_path(path)
            .ok_or_else(|| MatchError::NoSuchPath(path.to_string()))
    }
}

/// The pruning-type rank of each graph symbol that is a pruning type.
fn prune_rank_of(graph: &ResourceGraph, types: &TypeTable, prune: &PruneTypes) -> Vec<Option<u32>> {
    (0..graph.sym_count())
        .map(|i| {
            let r = types.rank(shardsched_resource::Sym(i as u32));
            (r != u32::MAX && prune.is_pruning(r)).then_some(r)
        })
        .collect()
}

/// The pruning-type rank of a vertex's type.
struct RankOf<'a>(&'a [Option<u32>], &'a ResourceGraph);

impl alloc::PruneRank for RankOf<'_> {
    fn prune_rank(&self, v: VertexId) -> Option<u32> {
        self.0.get(self.1.kind(v).index()).copied().flatten()
    }
}

/// `first`'s reordering after a match: the edge into `v` gets the free amount, at `now`, of
/// the last type `v`'s aggregate tracks (Fluxion's `upd_by_outedges`). Leaves keep theirs.
/// A `now` before the planners' base (the update walk of resource-query's `update`, whose
/// job has no `now`: -1) fails that query, and the weight becomes 0, as in Fluxion.
/// A changed weight reorders the children of `v`'s parent: a visit kept of the node above
/// them is forgotten (`dfu::memo`).
fn learn_weight(
    tree: &dyn dfu::Tree,
    st: &SchedState,
    order: &mut EdgeOrder,
    scratch: Option<&mut dfu::WalkScratch>,
    v: VertexId,
    now: i64,
) {
    // Asked first: most vertices a match takes are leaves (22 cores of a socket).
    if st.is_leaf(v) {
        return;
    }
    let Some(parent) = tree.parent(v) else {
        return;
    };
    let Some((free, has_spans)) = st.last_type_free_at(v, now) else {
        return;
    };
    let w = if now < state::PLAN_BASE {
        // The query fails before the planners' base: Fluxion sets the weight to 0.
        0
    } else if free == 0 && !has_spans {
        return;
    } else {
        u64::try_from(free).unwrap_or(0)
    };
    if order.weight(v) == w {
        return;
    }
    order.set_weight(tree, parent, v.0, w);
    if let Some(scratch) = scratch.filter(|s| s.keeps_node_visits())
        && let Some(c) = st.whole_of(parent)
    {
        scratch.forget_node_visit(c);
    }
}

/// Every job's record in `jobs`, by id, to change: where records are carried or changed one
/// after another, what each gets (span ids, above all) follows the ids' order, as it did
/// when the books were a B-tree.
pub(crate) fn books_by_id(
    jobs: &mut JobMap<Box<JobRecord>>,
) -> impl Iterator<Item = &mut JobRecord> {
    by_id(jobs.iter_mut().map(|(k, v)| (*k, &mut **v)).collect())
        .into_iter()
        .map(|e| e.1)
}

/// `entries` (a job's id and what the books hold of it) in the order of the ids.
fn by_id<T>(mut entries: Vec<(u64, T)>) -> Vec<(u64, T)> {
    entries.sort_unstable_by_key(|e| e.0);
    entries
}

/// When an allocation's resources free up.
fn end_of(a: &Allocation) -> i64 {
    saturating_end(a.at, a.duration)
}

/// The end of `[at, at + dur)`, at most `i64::MAX`.
pub(crate) fn saturating_end(at: i64, dur: u64) -> i64 {
    at.saturating_add(i64::try_from(dur).unwrap_or(i64::MAX))
}
