//! Covers: one record standing for a full exclusive hold on every leaf child of a vertex
//! that has one type.
//!
//! Why: Fluxion's update walk records a job on every vertex it takes, so a whole node costs
//! a hold on each of its cores, gpus and memory pools (56 on the bench nodes), and a socket
//! with all its cores 22 core holds; recording them was a fifth of a large match. The leaf
//! children of an inner vertex are grouped by type (a *cover group*: a socket's cores, its
//! gpus, its memory pools). When a match takes *every* leaf of a group exclusively with all
//! its units, [`SchedState::hold_cover`] records one cover of the group instead; every
//! question about such a leaf (its units free, its job count, [`SchedState::untouched`])
//! reads its own holds *and* the covers of its group, a cover counting as a hold of all the
//! leaf's units and one job. So every per-vertex answer is the one the leaf's own holds
//! gave, and a cancel removes the cover as it removed the holds. Where a job's records are
//! edited vertex by vertex (partial cancel, a job id matched again) its covers are first
//! turned back into leaf holds ([`SchedState::uncover`]). Where vertices share parents
//! there are no covers.

use shardsched_planner::PeakUse;
use shardsched_resource::{ResourceGraph, Sym, VertexId};

use super::{LEAF, LEAF_BIT, SchedState, SpanRef};
use crate::MatchError;
use crate::dfu::Tree;

/// The leaf children of one inner vertex that have one type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CoverGroup {
    /// The inner index of their parent.
    parent: u32,
    kind: Sym,
    /// How many leaves a cover of the group stands for.
    leaves: u32,
    /// The whole its parent belongs to (`state::whole`), or `NO_WHOLE`.
    pub(super) whole: u32,
    /// Live holds of its leaves' own (their records, not the group's covers): none means
    /// that every leaf of the group is idle ([`SchedState::group_untouched`]).
    holds: u32,
}

/// What a commit read last of a cover group (see [`SchedState::leaf_units_free`]): its
/// covers' peak and whether it is idle, and how often the peak served again.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CoverMemo {
    last: Option<(u32, PeakUse)>,
    /// Whether nothing holds the last group's leaves over the window: then their calendars
    /// are not read.
    group: IdleGroup,
    /// Leaves answered from the memo without reading their covers.
    pub(crate) hits: u64,
}

impl CoverMemo {
    /// Forgets what was read: the covers changed.
    pub(crate) fn clear(&mut self) {
        self.last = None;
        self.group = IdleGroup::default();
    }
}

/// The last cover group asked about and [`SchedState::group_untouched`]'s answer, for a
/// caller that asks it of a run of the group's leaves over one window (an exploration, a
/// commit): the answer is read once per group.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdleGroup(Option<(u32, bool)>);

impl IdleGroup {
    /// Whether cover group `p` is untouched during `[at, at + dur)`, asked of `st` unless
    /// `p` was the group asked last.
    #[inline]
    pub(crate) fn ask(&mut self, st: &SchedState, p: u32, at: i64, dur: u64) -> bool {
        match self.0 {
            Some((q, idle)) if q == p => idle,
            _ => {
                let idle = st.group_untouched(p, at, dur);
                self.0 = Some((p, idle));
                idle
            }
        }
    }
}

/// Puts the leaf children of `v` (inner index `index`, in whole `whole`) in cover groups by
/// type, pointing each leaf at its group (while there is room for group numbers).
/// `child_lists` are the tree's ([`Tree::child_lists`]), read once by the caller, who calls
/// this as it numbers `v`, after every inner child of `v` (one parent each): a child still
/// [`LEAF`] in `inner_of` is a leaf. Leaves of one type come in runs (a socket's 22 cores),
/// so the group of the last leaf is tried first (3.9 M instructions on the 1,024-node bench
/// graph through `&dyn Tree`, with a search of the groups per leaf; 2.5 M this way).
/// (Inlined into the state build, its one caller: apart, start-up took ~1.3 M instructions
/// more on the 4,096-node bench graph.)
#[inline]
pub(super) fn group_leaves(
    g: &ResourceGraph,
    (start, list): (&[u32], &[u32]),
    v: VertexId,
    (index, whole): (u32, u32),
    inner_of: &mut [u32],
    groups: &mut Vec<CoverGroup>,
) {
    let first = groups.len();
    let mut last: Option<(Sym, usize)> = None;
    for &c in &list[start[v.index()] as usize..start[v.index() + 1] as usize] {
        let slot = &mut inner_of[c as usize];
        if *slot != LEAF {
            continue;
        }
        let kind = g.kind(VertexId(c));
        let gi = match last {
            Some((k, gi)) if k == kind => gi,
            _ => match groups[first..].iter().position(|x| x.kind == kind) {
                Some(p) => first + p,
                None if groups.len() < (LEAF_BIT - 1) as usize => {
                    groups.push(CoverGroup {
                        parent: index,
                        kind,
                        leaves: 0,
                        whole,
                        holds: 0,
                    });
                    groups.len() - 1
                }
                None => continue,
            },
        };
        last = Some((kind, gi));
        groups[gi].leaves += 1;
        *slot = LEAF_BIT | gi as u32;
    }
}

impl SchedState {
    /// The cover group whose covers stand for holds on leaf `v`, if any.
    #[inline]
    pub fn cover_group(&self, v: VertexId) -> Option<u32> {
        let x = self.inner_of[v.index()];
        (x & LEAF_BIT != 0 && x != LEAF).then_some(x & !LEAF_BIT)
    }

    /// The inner index of the parent of cover group `i`'s leaves.
    #[inline]
    pub fn cover_group_parent(&self, i: u32) -> u32 {
        self.cover_groups[i as usize].parent
    }

    /// How many leaves a cover of group `i` stands for.
    pub fn cover_group_leaves(&self, i: u32) -> u32 {
        self.cover_groups.get(i as usize).map_or(0, |x| x.leaves)
    }

    /// The parent of cover group `i`'s leaves.
    pub(super) fn cover_group_vertex(&self, i: u32) -> VertexId {
        VertexId(self.inner_vertex[self.cover_group_parent(i) as usize])
    }

    /// Whether nothing holds any leaf of cover group `p` during the window: no hold of a
    /// leaf's own at any time, no cover of the group and no whole cover of its node over the
    /// window. Then each leaf has all its units and no job: what [`SchedState::usage`] would
    /// read from its calendars, read once for the group. (The whole covers are asked as
    /// each leaf's peak asks them, `whole_peak`, windows past the planning window
    /// included.)
    pub(crate) fn group_untouched(&self, p: u32, at: i64, dur: u64) -> bool {
        self.cover_groups[p as usize].holds == 0
            && self.cover_peak(p, at, dur).jobs == 0
            && self
                .covered_group(p)
                .is_none_or(|c| self.whole_peak(c, 0, at, dur).jobs == 0)
    }

    /// Counts a hold of leaf `v`'s own made (`by` 1) or removed (-1) toward its cover
    /// group's.
    #[inline]
    pub(super) fn count_leaf_hold(&mut self, v: VertexId, by: i32) {
        if let Some(p) = self.cover_group(v) {
            let n = &mut self.cover_groups[p as usize].holds;
            debug_assert!(by > 0 || *n > 0, "a leaf hold removed that was not counted");
            *n = n.saturating_add_signed(by);
        }
    }

    /// The inner index of `v` when it is an inner vertex.
    #[inline]
    pub fn inner_index(&self, v: VertexId) -> Option<u32> {
        let x = self.inner_of[v.index()];
        (x & LEAF_BIT == 0).then_some(x)
    }

    /// Peak units and jobs of leaf `v` (of `size` units) during the window: its own holds
    /// and the covers of its group, each a hold of `size` units and one job.
    #[inline]
    pub(super) fn leaf_peak(&self, v: VertexId, size: i64, at: i64, dur: u64) -> PeakUse {
        let cover = self
            .cover_group(v)
            .map(|p| (p, self.cover_peak(p, at, dur)));
        self.leaf_peak_given(v, size, at, dur, cover)
    }

    /// The peak of cover group `p`'s covers during the window (in jobs: each cover is one).
    #[inline]
    fn cover_peak(&self, p: u32, at: i64, dur: u64) -> PeakUse {
        if self.covers.is_idle(p as usize) {
            return PeakUse::default();
        }
        self.covers.peak_during(p as usize, at, dur)
    }

    /// [`SchedState::leaf_peak`], given `cover`: leaf `v`'s cover group and the peak of its
    /// covers during the window, as [`SchedState::cover_peak`] reads it. The whole covers
    /// of its node count too (`state::whole`), each a hold of `size` units and one job.
    #[inline]
    fn leaf_peak_given(
        &self,
        v: VertexId,
        size: i64,
        at: i64,
        dur: u64,
        cover: Option<(u32, PeakUse)>,
    ) -> PeakUse {
        let own_idle = self.leaves.is_idle(v.index());
        let whole = cover.and_then(|(p, _)| self.covered_group(p));
        let grouped = cover.filter(|c| c.1.jobs > 0);
        match (own_idle, grouped, whole) {
            (true, None, None) => return PeakUse::default(),
            (false, None, None) => return self.leaves.peak_during(v.index(), at, dur),
            (true, Some((_, covered)), None) => {
                return PeakUse {
                    units: covered.jobs.saturating_mul(size),
                    jobs: covered.jobs,
                };
            }
            (true, None, Some(c)) => return self.whole_peak(c, size, at, dur),
            _ => {}
        }
        // Several may overlap the window: sweep them together.
        let end = crate::saturating_end(at, dur);
        let group = grouped.map(|(p, _)| p as usize);
        let holds = self
            .leaves
            .iter(v.index())
            .chain(
                group
                    .into_iter()
                    .flat_map(move |p| self.covers.iter(p))
                    .map(move |(s, e, _, j)| (s, e, size.saturating_mul(j), j)),
            )
            .chain(
                whole
                    .into_iter()
                    .flat_map(move |c| self.whole_holds(c, size)),
            );
        PeakUse::of_holds(holds, at, end)
    }

    /// [`SchedState::units_free`] of leaf `v` for one commit, which asks it of every leaf it
    /// takes whole, over one window: the leaves of a cover group come one after another, and
    /// their covers read the same, so `memo` keeps the last group's cover peak (a node's 44
    /// cores read its covers once, not 44 times). The caller clears `memo` when the covers
    /// change ([`CoverMemo::clear`]) and uses one memo per window.
    ///
    /// When nothing holds any leaf of the group over the window
    /// ([`SchedState::group_untouched`], asked once per group), each has all its units free
    /// and its calendars are not read (a free socket's 22 cores under `first-1024`).
    pub(crate) fn leaf_units_free(
        &self,
        v: VertexId,
        size: i64,
        at: i64,
        dur: u64,
        memo: &mut CoverMemo,
    ) -> i64 {
        let Some(p) = self.cover_group(v) else {
            return self.units_free(v, size, at, dur);
        };
        if memo.group.ask(self, p, at, dur) {
            debug_assert_eq!(
                size,
                self.units_free(v, size, at, dur),
                "an idle group's leaf"
            );
            return size;
        }
        let covered = match memo.last {
            Some((q, c)) if q == p => {
                memo.hits += 1;
                c
            }
            _ => {
                let c = self.cover_peak(p, at, dur);
                memo.last = Some((p, c));
                c
            }
        };
        let free = size
            - self
                .leaf_peak_given(v, size, at, dur, Some((p, covered)))
                .units;
        debug_assert_eq!(free, self.units_free(v, size, at, dur), "stale cover memo");
        free
    }

    /// Records a cover of group `i`: every leaf of the group held whole by one job.
    pub fn hold_cover(
        &mut self,
        i: u32,
        at: i64,
        dur: u64,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let id = self
            .covers
            .add(i as usize, at, dur, 1, 1)
            .map_err(|e| MatchError::Internal(e.to_string()))?;
        out.push(SpanRef::Cover(i, id));
        self.count_record(self.cover_groups[i as usize].whole, 1);
        Ok(())
    }

    /// Replaces every cover among `spans` by the holds it stands for (one per leaf of its
    /// group, all its units, one job), in place.
    pub fn uncover(
        &mut self,
        g: &ResourceGraph,
        tree: &dyn Tree,
        spans: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        if !spans.iter().any(|s| {
            matches!(
                s,
                SpanRef::Cover(..) | SpanRef::Whole(..) | SpanRef::Inner(..)
            )
        }) {
            return Ok(());
        }
        let err = |e: shardsched_planner::PlannerError| MatchError::Internal(e.to_string());
        let mut out = Vec::with_capacity(spans.len());
        for &s in spans.iter() {
            if let SpanRef::Whole(c, at) = s {
                self.unwhole(g, tree, c, at, &mut out)?;
                continue;
            }
            if let SpanRef::Inner(i, id, taken) = s {
                self.split_inner(i, id, taken, &mut out)?;
                continue;
            }
            let SpanRef::Cover(i, id) = s else {
                out.push(s);
                continue;
            };
            let Some((_, start, end, _, _)) = self.covers.hold(id) else {
                return Err(MatchError::Internal(format!("unknown cover at {i}")));
            };
            self.covers.remove(id).map_err(err)?;
            self.count_record(self.cover_groups[i as usize].whole, -1);
            let dur = u64::try_from(end - start).unwrap_or(0);
            let parent = self.cover_group_vertex(i);
            for &c in tree.children(parent) {
                if self.inner_of[c as usize] == LEAF_BIT | i {
                    let c = VertexId(c);
                    let hold = self
                        .leaves
                        .add(c.index(), start, dur, g.size(c), 1)
                        .map_err(err)?;
                    out.push(SpanRef::Leaf(c.0, hold));
                    self.count_record(self.cover_groups[i as usize].whole, 1);
                    self.count_leaf_hold(c, 1);
                }
            }
        }
        *spans = out;
        Ok(())
    }
}
