//! Per-vertex scheduling state, in dense arrays indexed by vertex.
//!
//! As in Fluxion, each vertex keeps how many of its own units are taken (a core has 1, a
//! 2 GB memory pool 2; only exclusive uses take units) and how many jobs touch it (every use
//! counts 1: an exclusive request wants a vertex no job touches). Leaves (cores, gpus,
//! memory: nearly every vertex) keep both in one compact hold list ([`Pools`]: 4 bytes per
//! vertex idle, no allocation in steady state); inner vertices, which every job passes
//! through, keep both in one calendar ([`Aggregate`]), beside their aggregate.
//!
//! Inner vertices also keep Fluxion's aggregate ("subplan"): the free units of each pruning
//! type below them, for the types [`PruneTypes::tracked_by`] the vertex's type — the prune
//! filters (`HL:LL`), completed by every leaf type no filter names (anchored at `cluster`).
//! The walk skips vertices whose aggregate cannot hold a request; `first` orders siblings by
//! the last of these types.
//!
//! Fluxion keeps three calendars there (units, job count, subplan); here they are the
//! types of one [`MultiPlanner`], so that a match records one span per inner vertex
//! ([`SpanRef::Inner`]) rather than three, each with its calendar (module `inner`). Where
//! records are edited one by one, such a span is split into its parts first
//! ([`SchedState::uncover`]).

use std::sync::Arc;

use shardsched_planner::{HoldId, HoldLists, MultiPlanner, Pools, SpanId};
use shardsched_resource::{Sym, VertexId};

use crate::MatchError;
use crate::types::PruneTypes;

/// Capacity of the job-count calendar (Fluxion's `X_CHECKER_NJOBS`).
pub const XCHECK_TOTAL: i64 = 1 << 30;
/// First instant of the planning window.
pub const PLAN_BASE: i64 = 0;
/// Length of the planning window in seconds (about 34,800 years): effectively unbounded.
pub const PLAN_HORIZON: u64 = 1 << 40;
/// `inner_of` of a leaf has this bit set; the bits below are its cover group (its parent in
/// the walk tree and its type), when leaves there may be covered (see [`cover`]).
const LEAF_BIT: u32 = 1 << 31;
/// A leaf without a cover group.
const LEAF: u32 = u32::MAX;
/// Up to this many types of an inner vertex's calendar (its aggregate's, its units, its job
/// count), a record's amounts are gathered on the stack.
const CALENDAR_INLINE_TYPES: usize = 10;

mod build;
mod carry;
mod cover;
pub(crate) mod distinct;
mod inner;
mod kinds;
mod listing;
mod shape;
mod whole;
use cover::CoverGroup;
pub(crate) use cover::{CoverMemo, IdleGroup};
pub use kinds::ChildKinds;
pub(crate) use listing::{Below, KeptListings, WholeListing};
pub use whole::UntouchedScratch;
pub(crate) use whole::WholeNode;
use whole::{NO_WHOLE, Wholes};

/// Prune filters: pairs of (high-level type or all, low-level type).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneFilters {
    pub pairs: Vec<(Option<String>, String)>,
}

impl PruneFilters {
    /// Parses `HL:LL,HL:LL` (`ALL` for any high-level type; blanks inside a pair are
    /// ignored). An empty or blank text means the default, as resource-query takes it.
    pub fn parse(s: &str) -> Result<PruneFilters, MatchError> {
        if s.trim().is_empty() {
            return Ok(PruneFilters::default_filters());
        }
        Ok(PruneFilters {
            pairs: PruneTypes::parse(s)?,
        })
    }

    /// The default, `ALL:core,ALL:node`.
    pub fn default_filters() -> PruneFilters {
        PruneFilters {
            pairs: vec![(None, "core".into()), (None, "node".into())],
        }
    }

    /// The type names the filters mention, anchors before low-level types, in order.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.pairs
            .iter()
            .flat_map(|(h, l)| h.iter().map(String::as_str).chain([l.as_str()]))
    }
}

/// The calendar of an inner vertex: free units of each tracked type below it (its
/// aggregate), then its own units free, then its job count free.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    /// The tracked types, in Fluxion's order: shared by the vertices of one type (a graph's
    /// thousands of sockets track the same few), not a list each. Empty where the vertex
    /// has no aggregate ([`SchedState::aggregate`] says `None` then).
    pub types: Arc<[Sym]>,
    /// Their interning ranks (parallel to `types`).
    pub ranks: Arc<[u32]>,
    /// One type per entry of `types`, then the vertex's own units (its size), then its
    /// job count ([`XCHECK_TOTAL`]): callers see the aggregate's types at their indices,
    /// and [`Aggregate::totals`] only theirs.
    pub cal: MultiPlanner,
    /// How many spans of `cal` carry an aggregate record (a match whose filter refused
    /// carries zeros there instead, as Fluxion keeps no subplan span then): whether the
    /// aggregate has a record, which `first` reads.
    recorded: u32,
    /// How many spans of `cal` carry units of the vertex's own: while none does, its units
    /// are all free, and reading them need not walk the change points the job counts and
    /// the aggregate made (a cluster's or a rack's, thousands).
    units_held: u32,
}

/// Calendars of an inner (non-leaf) vertex.
#[derive(Clone, Debug, PartialEq)]
pub struct Inner {
    /// Its one calendar, aggregate included (with no types where it tracks none).
    pub agg: Aggregate,
    /// The types of its children in the tree, as a set of type ranks ([`ChildKinds`]).
    pub child_kinds: ChildKinds,
}

/// How a vertex is used during a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Own units not held.
    pub units_free: i64,
    /// Job-count capacity not held ([`XCHECK_TOTAL`] when nobody touches the vertex).
    pub jobs_free: i64,
}

/// Why an aggregate cannot give what a request needs: Fluxion's planner says `ERANGE` when
/// a type's need exceeds its total, `EBUSY` when only its free units fall short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shortfall {
    OverTotal,
    Busy,
}

/// All scheduling state of one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedState {
    /// Index into `inner` for inner vertices; for leaves `LEAF_BIT` and their parent's index
    /// (or `LEAF`).
    inner_of: Vec<u32>,
    /// The vertex of each entry of `inner`.
    inner_vertex: Vec<u32>,
    pub inner: Vec<Inner>,
    pub leaves: Pools,
    /// Covers, by cover group: a hold here stands for a full exclusive hold of every leaf
    /// of the group (see [`cover`]). Contiguous lists: a group carries a cover per job over
    /// its node (dozens under conservative backfill) and is read at every node a match
    /// considers.
    covers: HoldLists,
    /// The cover groups: the leaf children of one inner vertex that share a type.
    cover_groups: Vec<CoverGroup>,
    /// Nodes a whole cover may stand for, and their covers (see [`whole`]).
    wholes: Wholes,
    /// Every pruning type, as symbols (graph symbols, or the type table's own).
    pub prune_types: Vec<Sym>,
    /// The pruning types' ranks (parallel to `prune_types`).
    pub prune_ranks: Vec<u32>,
    /// Whether an inner vertex was ever given units with no job count (an R read from
    /// another dominant subsystem, [`crate::Matcher::record_given_holds`]), or kept them
    /// after its job count went (a partial cancel): until then, an inner vertex no job
    /// touches has all its units free.
    jobless_units: Hint<bool>,
    /// Which build of a state this is (one number per [`SchedState::new_on`] in the
    /// process): what a reader that keeps answers about its wholes compares, as their
    /// numbering is this build's (`dfu::memo`).
    built: Hint<u64>,
}

/// What a state knows to answer faster — derived from the graph, or a fact that once true
/// stays true — and not part of what it holds: two states are equal whatever it says.
#[derive(Clone, Copy, Debug, Default)]
struct Hint<T>(T);

impl<T> PartialEq for Hint<T> {
    fn eq(&self, _: &Hint<T>) -> bool {
        true
    }
}

impl<T> std::ops::Deref for Hint<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Hint<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// One record of an allocation in the calendars, so that cancel removes exactly it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanRef {
    /// A leaf's hold (its vertex, and the hold).
    Leaf(u32, HoldId),
    /// An inner vertex's record of one job (its job count, its units when exclusive, and
    /// its aggregate's when the flag says so): one span of the vertex's calendar, split
    /// into the three parts below before records are edited one by one.
    Inner(u32, SpanId, bool),
    /// Parts: spans of an inner vertex's calendar with only its units, only its job count,
    /// only the aggregate's types.
    Plan(u32, SpanId),
    Xcheck(u32, SpanId),
    Agg(u32, SpanId),
    /// A cover of a cover group (by its index): every leaf of the group held whole.
    Cover(u32, HoldId),
    /// A whole cover (by whole index, and its start, which names it among the whole's
    /// covers: they never overlap): the node and every vertex below it held whole.
    Whole(u32, i64),
}

// A job record holds one per record; a whole cover named by its start keeps them at 16.
const _: () = assert!(std::mem::size_of::<SpanRef>() == 16);

impl SchedState {
    fn inner(&self, v: VertexId) -> Option<&Inner> {
        let i = self.inner_of[v.index()];
        (i & LEAF_BIT == 0).then(|| &self.inner[i as usize])
    }

    /// Inner vertex `v`'s calendars, and its whole when whole covers are recorded there.
    #[inline]
    fn inner_covered(&self, v: VertexId) -> Option<(&Inner, Option<u32>)> {
        let i = self.inner_of[v.index()];
        (i & LEAF_BIT == 0).then(|| (&self.inner[i as usize], self.covered_inner(i)))
    }

    /// The types of inner vertex `v`'s children; `None` for a vertex without calendars of
    /// its own.
    #[inline]
    pub fn child_kinds(&self, v: VertexId) -> Option<ChildKinds> {
        self.inner(v).map(|i| i.child_kinds)
    }

    /// Whether `v` keeps no calendars of its own beyond a leaf's hold list.
    pub fn is_leaf(&self, v: VertexId) -> bool {
        self.inner_of[v.index()] & LEAF_BIT != 0
    }

    /// How `v` (of size `size`) is used during `[at, at + dur)`.
    #[inline]
    pub fn usage(&self, v: VertexId, size: i64, at: i64, dur: u64) -> Usage {
        match self.inner_covered(v) {
            Some((inner, None)) => Usage {
                units_free: inner.agg.units_free(at, dur),
                jobs_free: inner.agg.jobs_free(at, dur),
            },
            Some((inner, Some(c))) => Usage {
                units_free: self.inner_units_free(inner, c, at, dur),
                jobs_free: self.inner_jobs_free(inner, c, at, dur),
            },
            None => self.leaf_usage(v, size, at, dur),
        }
    }

    /// Own units of `v` free throughout `[at, at + dur)` (Fluxion's `by_avail`).
    #[inline]
    pub fn units_free(&self, v: VertexId, size: i64, at: i64, dur: u64) -> i64 {
        match self.inner_covered(v) {
            Some((inner, None)) => inner.agg.units_free(at, dur),
            Some((inner, Some(c))) => self.inner_units_free(inner, c, at, dur),
            None => self.leaf_usage(v, size, at, dur).units_free,
        }
    }

    /// Which build of a state this is ([`SchedState::new_on`] numbers them; a clone keeps
    /// the number, as it keeps the wholes' numbering).
    pub fn built(&self) -> u64 {
        *self.built
    }

    /// Whether an inner vertex untouched over a window has all its units free then, and its
    /// pruning filter its totals (every record of its units or its filter came with a job
    /// count).
    pub fn untouched_means_free(&self) -> bool {
        !*self.jobless_units
    }

    /// Some inner vertex's units stay held while the job count that came with them went
    /// (a partial cancel): from now on, untouched does not mean free.
    pub(crate) fn note_jobless_units(&mut self) {
        *self.jobless_units = true;
    }

    /// Whether no job touches `v` during `[at, at + dur)` (Fluxion's exclusivity check).
    #[inline]
    pub fn untouched(&self, v: VertexId, at: i64, dur: u64) -> bool {
        // A whole's vertex with nothing but covers recorded in the whole: its own
        // calendar is empty, and not read (a cache miss per node for the whole-node search
        // start, which asks this of every node).
        if let Some(i) = self.inner_index(v)
            && let Some(c) = self.only_covers_inner(i)
        {
            let untouched = !self.cover_meets(c, at, dur);
            debug_assert_eq!(untouched, self.untouched_by_calendars(v, at, dur));
            return untouched;
        }
        self.untouched_by_calendars(v, at, dur)
    }

    /// [`SchedState::untouched`] from `v`'s calendars and its whole's covers.
    fn untouched_by_calendars(&self, v: VertexId, at: i64, dur: u64) -> bool {
        match self.inner_covered(v) {
            Some((inner, None)) => inner.agg.jobs_free(at, dur) >= XCHECK_TOTAL,
            // Each cover is one job over its span: untouched with covers is untouched by
            // its own records and by every cover.
            Some((inner, Some(c))) => {
                !self.cover_meets(c, at, dur) && inner.agg.jobs_free(at, dur) >= XCHECK_TOTAL
            }
            None => self.leaf_peak(v, 0, at, dur).jobs == 0,
        }
    }

    /// An inner vertex's units free with whole `c`'s covers, each all its units.
    fn inner_units_free(&self, inner: &Inner, c: u32, at: i64, dur: u64) -> i64 {
        let size = inner.agg.size();
        self.with_covers(c, at, dur, size, |a, d| inner.agg.units_free(a, d))
    }

    /// An inner vertex's job count free with whole `c`'s covers, each one job.
    fn inner_jobs_free(&self, inner: &Inner, c: u32, at: i64, dur: u64) -> i64 {
        self.with_covers(c, at, dur, 1, |a, d| inner.agg.jobs_free(a, d))
    }

    /// The earliest instant at or after `at` from which no job touches inner vertex `v` for
    /// `dur` seconds, so that [`SchedState::untouched`] holds there; `None` for a leaf, or
    /// when no such window ends within the planning horizon. A read-only query for callers
    /// bounding when a request that takes `v` exclusively can start (the queue manager's
    /// whole-node search start).
    pub fn untouched_from(&self, v: VertexId, at: i64, dur: u64) -> Option<i64> {
        let (inner, covered) = self.inner_covered(v)?;
        let own = |t| inner.agg.untouched_from(t, dur);
        match covered {
            None => own(at),
            Some(c) => self.whole_free_from(c, at, dur, own),
        }
    }

    #[inline]
    fn leaf_usage(&self, v: VertexId, size: i64, at: i64, dur: u64) -> Usage {
        let peak = self.leaf_peak(v, size, at, dur);
        Usage {
            units_free: size - peak.units,
            jobs_free: XCHECK_TOTAL - peak.jobs,
        }
    }

    /// Free units of `t` below `v` during the window, if `v` tracks `t`.
    pub fn agg_avail(&self, v: VertexId, t: Sym, at: i64, dur: u64) -> Option<i64> {
        let (inner, covered) = self.inner_covered(v)?;
        let a = inner.aggregate()?;
        let i = a.types.iter().position(|&x| x == t)?;
        Some(agg_free(self, a, covered, i, at, dur))
    }

    /// The units of `t` in use below `v` during the window as steps into `out`
    /// (`MultiPlanner::used_steps`), and the units of `t` below `v`: what
    /// [`SchedState::agg_avail`] reads, for a caller asking about many windows at once.
    /// `None` (nothing added) unless `v` tracks `t`, no whole cover counts in `v`'s
    /// aggregate and the window lies inside the planning window.
    pub fn agg_used_steps(
        &self,
        v: VertexId,
        t: Sym,
        at: i64,
        dur: u64,
        out: &mut Vec<(i64, i64)>,
    ) -> Option<i64> {
        let (inner, None) = self.inner_covered(v)? else {
            return None;
        };
        let a = inner.aggregate()?;
        let i = a.types.iter().position(|&x| x == t)?;
        let total = *a.totals().get(i)?;
        a.cal.used_steps(at, dur, i, out).then_some(total)
    }

    /// Free units of the `i`th type of `v`'s aggregate at `t`, if `v` has an aggregate.
    pub fn agg_free_at(&self, v: VertexId, i: usize, t: i64) -> Option<i64> {
        let (inner, covered) = self.inner_covered(v)?;
        Some(agg_free_at(self, inner.aggregate()?, covered, i, t))
    }

    /// Why `v`'s aggregate cannot give `need` (by pruning-type rank; absent types need 0)
    /// during the window — Fluxion's `by_subplan` — as its `planner_multi_avail_during`
    /// says it: its types in order, the first one short decides. `None` when it can, or
    /// when `v` has no aggregate. With `empty`, as if nothing were allocated (only the
    /// totals count).
    pub fn agg_shortfall(
        &self,
        v: VertexId,
        need: &[(u32, i64)],
        at: i64,
        dur: u64,
        empty: bool,
    ) -> Option<Shortfall> {
        let (Some(a), covered) = self.inner_covered(v).map(|(i, c)| (i.aggregate(), c))? else {
            return None;
        };
        a.ranks.iter().enumerate().find_map(|(i, r)| {
            let n = need.iter().find(|e| e.0 == *r).map_or(0, |e| e.1);
            if n <= 0 {
                None
            } else if n > a.totals()[i] {
                Some(Shortfall::OverTotal)
            } else if !empty && agg_free(self, a, covered, i, at, dur) < n {
                Some(Shortfall::Busy)
            } else {
                None
            }
        })
    }

    /// The aggregate of `v`, if it has one.
    pub fn aggregate(&self, v: VertexId) -> Option<&Aggregate> {
        self.inner(v)?.aggregate()
    }

    /// The units per type an aggregate record takes, if `s` is one made at `v`.
    pub fn aggregate_span(&self, v: VertexId, s: SpanRef) -> Option<&[i64]> {
        if let SpanRef::Whole(c, _) = s {
            // A whole cover took every unit of every aggregate of its whole.
            if self.whole_of(v) != Some(c) {
                return None;
            }
            return self.aggregate(v).map(Aggregate::totals);
        }
        let (SpanRef::Agg(i, id) | SpanRef::Inner(i, id, true)) = s else {
            return None;
        };
        if self.inner_of[v.index()] != i {
            return None;
        }
        let agg = self.inner[i as usize].aggregate()?;
        agg.cal
            .span(id)
            .map(|span| &span.planned[..agg.types.len()])
    }

    /// Records one vertex's use by a job: one job on its count, and `needs` units when
    /// exclusive.
    pub fn hold(
        &mut self,
        v: VertexId,
        at: i64,
        dur: u64,
        needs: i64,
        exclusive: bool,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        self.record_on(v, at, dur, exclusive.then_some(needs), 1, out)
    }

    /// Records on `v` over the window `units` of its own calendar (when `Some`) and `jobs`
    /// on its job count (when more than 0): a leaf's one hold carries both, an inner
    /// vertex has a record for each (job count first).
    #[inline]
    pub(crate) fn record_on(
        &mut self,
        v: VertexId,
        at: i64,
        dur: u64,
        units: Option<i64>,
        jobs: i64,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let err = |e: shardsched_planner::PlannerError| MatchError::Internal(e.to_string());
        let i = self.inner_of[v.index()];
        if i & LEAF_BIT != 0 {
            let units = units.unwrap_or(0);
            let id = self
                .leaves
                .add(v.index(), at, dur, units, jobs)
                .map_err(err)?;
            out.push(SpanRef::Leaf(v.0, id));
            let c = self.whole_of(v).unwrap_or(NO_WHOLE);
            self.count_record(c, 1);
            self.count_leaf_hold(v, 1);
            return Ok(());
        }
        self.record_parts(i, at, dur, units, jobs, out)
    }

    /// Adds an aggregate record at inner vertex `v` taking `needs` (by pruning-type rank;
    /// types `v` does not track are ignored): a span of its calendar with nothing else.
    /// Nothing when `v` has no aggregate.
    pub fn hold_aggregate(
        &mut self,
        v: VertexId,
        at: i64,
        dur: u64,
        needs: &[(u32, i64)],
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let i = self.inner_of[v.index()];
        if i & LEAF_BIT != 0 || self.inner[i as usize].aggregate().is_none() {
            return Ok(());
        }
        self.record_aggregate(i, at, dur, needs, out)
    }

    /// Free units at `now` of the last type `v`'s aggregate tracks, and whether the
    /// aggregate has any record: what `first` reorders `v` among its siblings by.
    pub fn last_type_free_at(&self, v: VertexId, now: i64) -> Option<(i64, bool)> {
        let (inner, covered) = self.inner_covered(v)?;
        let a = inner.aggregate()?;
        let last = a.types.len().checked_sub(1)?;
        let free = agg_free_at(self, a, covered, last, now);
        Some((free, a.has_records() || covered.is_some()))
    }

    /// The vertex a record is on.
    pub fn span_vertex(&self, s: SpanRef) -> VertexId {
        match s {
            SpanRef::Leaf(v, _) => VertexId(v),
            SpanRef::Inner(i, ..)
            | SpanRef::Plan(i, _)
            | SpanRef::Xcheck(i, _)
            | SpanRef::Agg(i, _) => VertexId(self.inner_vertex[i as usize]),
            SpanRef::Cover(i, _) => self.cover_group_vertex(i),
            SpanRef::Whole(c, _) => self.whole_vertex(c),
        }
    }

    /// [`SchedState::remove`] of each of `spans` (a job's records), the whole covers that
    /// start together taken out together ([`SchedState::remove_wholes`]); other records
    /// are not theirs, so the order changes nothing.
    pub fn remove_each(&mut self, spans: &[SpanRef]) -> Result<(), MatchError> {
        let mut wholes: Vec<u32> = Vec::with_capacity(spans.len());
        let mut start = None;
        for &s in spans {
            match s {
                SpanRef::Whole(c, at) => {
                    if let Some(t) = start
                        && t != at
                    {
                        self.remove_wholes(&wholes, t)?;
                        wholes.clear();
                    }
                    start = Some(at);
                    wholes.push(c);
                }
                _ => self.remove(s)?,
            }
        }
        match start {
            Some(at) => self.remove_wholes(&wholes, at),
            None => Ok(()),
        }
    }

    /// Removes a record made by [`SchedState::hold`] or [`SchedState::hold_aggregate`].
    pub fn remove(&mut self, s: SpanRef) -> Result<(), MatchError> {
        let c = self.record_whole(s);
        let r = match s {
            SpanRef::Whole(c, at) => return self.remove_whole(c, at).map(|_| ()),
            SpanRef::Leaf(_, id) => self.leaves.remove(id),
            SpanRef::Cover(_, id) => self.covers.remove(id),
            SpanRef::Inner(..) | SpanRef::Plan(..) | SpanRef::Xcheck(..) | SpanRef::Agg(..) => {
                let parts = self.remove_inner(s)?;
                self.count_record(c, -parts);
                return Ok(());
            }
        };
        r.map_err(|e| MatchError::Internal(e.to_string()))?;
        self.count_record(c, -1);
        if let SpanRef::Leaf(v, _) = s {
            self.count_leaf_hold(VertexId(v), -1);
        }
        Ok(())
    }
}

/// Free units of aggregate `a`'s `i`th type during the window, with the covers of whole
/// `covered` (each all the type's units below the vertex).
fn agg_free(
    st: &SchedState,
    a: &Aggregate,
    covered: Option<u32>,
    i: usize,
    at: i64,
    dur: u64,
) -> i64 {
    let own = |at, dur| a.cal.avail_during(at, dur, i);
    match covered {
        None => own(at, dur),
        Some(c) => {
            let total = a.totals().get(i).copied().unwrap_or(0);
            st.with_covers(c, at, dur, total, own)
        }
    }
}

/// Free units of aggregate `a`'s `i`th type at `t`, with the covers of whole `covered`.
fn agg_free_at(st: &SchedState, a: &Aggregate, covered: Option<u32>, i: usize, t: i64) -> i64 {
    let own = a.cal.avail_at(t, i);
    match covered {
        None => own,
        Some(c) => {
            let total = a.totals().get(i).copied().unwrap_or(0);
            own.saturating_sub(st.whole_jobs_at(c, t).saturating_mul(total))
        }
    }
}
