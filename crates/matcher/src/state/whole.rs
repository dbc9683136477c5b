//! Whole covers: one record standing for a job's records on a node and on everything below
//! it, when a match takes the node whole.
//!
//! Why: a match that takes a node exclusively takes every vertex below it too (Fluxion's
//! exclusive walk lists the whole subtree), and recording it vertex by vertex made a bench
//! node of 59 vertices nine calendar records and six covers, each a calendar or a list of
//! its own on the node's first use — most of a 64-node exclusive match on 4,096 nodes, and
//! a large part of every whole-node reservation a conservative re-plan places again.
//!
//! Each non-root vertex of type `node` that is not inside another one is a *whole*; every
//! vertex below it belongs to it. When a commit lists a whole's every vertex exclusively
//! with all its units, and nothing but whole covers is recorded in that subtree, nor does a
//! whole cover meet the window, one *whole cover* is recorded instead of the vertex
//! records (`alloc.rs`). Every question about a vertex of the whole — units free, job
//! count, untouched, its aggregate — counts each whole cover as the records the commit
//! would have made there: all the vertex's units, one job, and on an aggregate every unit
//! of every type it tracks. So every answer is the one the vertex records gave, and a
//! cancel removes the cover as it removed them. Where a job's records are edited vertex by
//! vertex, its whole covers are first turned back into those records
//! ([`SchedState::uncover`]).
//!
//! A whole's shape — whether the records a whole listing makes are indeed all units and
//! every aggregate's totals, and what it adds to its parent's sums — is learned from the
//! graph at its first whole listing, and a whole whose shape differs is never covered.

mod bits;
mod covers;
mod untouched;

pub use untouched::UntouchedScratch;

use shardsched_planner::PeakUse;
use shardsched_resource::{ResourceGraph, VertexId};

use super::listing::Listings;
use super::shape::Shapes;
use super::{Hint, PLAN_BASE, PLAN_HORIZON, SchedState, SpanRef};
use crate::dfu::Tree;
use crate::{MatchError, saturating_end};
use covers::WholeCovers;

/// No whole.
pub(super) const NO_WHOLE: u32 = u32::MAX;

/// The wholes of a graph and their covers.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Wholes {
    /// The node of each whole.
    pub(super) vertex: Vec<u32>,
    /// The whole of each inner vertex (by inner index), or [`NO_WHOLE`].
    pub(super) of_inner: Vec<u32>,
    /// Live records other than whole covers on the vertices of each whole.
    records: Vec<u32>,
    /// Whole covers, by whole.
    covers: WholeCovers,
    /// What each whole's first whole listing learned, and what the update walk lists for
    /// each whole taken whole: derived from the graph alone, so two states of one graph are
    /// equal whatever each has learned of them yet.
    pub(super) shapes: Hint<Shapes>,
    pub(super) listings: Hint<Listings>,
}

impl Wholes {
    pub(super) fn new(vertex: Vec<u32>, of_inner: Vec<u32>) -> Wholes {
        let n = vertex.len();
        Wholes {
            vertex,
            of_inner,
            records: vec![0; n],
            covers: WholeCovers::new(n),
            shapes: Hint(Shapes::new(n)),
            listings: Hint(Listings::new(n)),
        }
    }
}

/// What [`SchedState::whole_node`] knows of a vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WholeNode {
    /// A whole's node one of whose covers meets the window.
    Covered,
    /// The node of whole `c`, nothing recorded in it over the window.
    Free(u32),
    /// Anything else.
    Other,
}

/// The end of the window `[at, at + dur)`, when it lies inside the planning window (the
/// calendars answer 0 for any other).
fn window_end(at: i64, dur: u64) -> Option<i64> {
    let horizon = saturating_end(PLAN_BASE, PLAN_HORIZON);
    let end = at.checked_add(i64::try_from(dur).ok()?)?;
    (dur > 0 && at >= PLAN_BASE && end <= horizon).then_some(end)
}

impl SchedState {
    /// The whole vertex `v` belongs to, if any.
    #[inline]
    pub(crate) fn whole_of(&self, v: VertexId) -> Option<u32> {
        let c = match self.inner_index(v) {
            Some(i) => self.wholes.of_inner[i as usize],
            None => self
                .cover_group(v)
                .map_or(NO_WHOLE, |p| self.cover_groups[p as usize].whole),
        };
        (c != NO_WHOLE).then_some(c)
    }

    /// The whole of inner vertex `i` (inner index) when nothing but whole covers is
    /// recorded in it: then its calendars hold nothing, and whether a job touches the
    /// vertex is whether a cover meets the window.
    #[inline]
    pub(super) fn only_covers_inner(&self, i: u32) -> Option<u32> {
        let c = self.wholes.of_inner[i as usize];
        (c != NO_WHOLE && self.wholes.records[c as usize] == 0).then_some(c)
    }

    /// The whole of inner vertex `i` (inner index) when whole covers are recorded on it.
    #[inline]
    pub(super) fn covered_inner(&self, i: u32) -> Option<u32> {
        let c = self.wholes.of_inner[i as usize];
        (c != NO_WHOLE && !self.wholes.covers.is_empty(c)).then_some(c)
    }

    /// The whole of cover group `p`'s leaves when whole covers are recorded on it.
    #[inline]
    pub(super) fn covered_group(&self, p: u32) -> Option<u32> {
        let c = self.cover_groups[p as usize].whole;
        (c != NO_WHOLE && !self.wholes.covers.is_empty(c)).then_some(c)
    }

    /// The holds of whole `c`'s covers as a leaf of `size` units sees them.
    pub(super) fn whole_holds(
        &self,
        c: u32,
        size: i64,
    ) -> impl Iterator<Item = (i64, i64, i64, i64)> + Clone + '_ {
        self.wholes
            .covers
            .all(c)
            .map(move |w| (w.start, w.end, size, 1))
    }

    /// The peak of whole `c`'s covers during the window, as a leaf of `size` units sees it.
    pub(super) fn whole_peak(&self, c: u32, size: i64, at: i64, dur: u64) -> PeakUse {
        // Covers never overlap: one at most at any instant.
        let jobs = i64::from(self.wholes.covers.meets(c, at, saturating_end(at, dur)));
        PeakUse {
            units: jobs.saturating_mul(size),
            jobs,
        }
    }

    /// What a calendar of whole `c` answers for `[at, at + dur)` (`own`, the fewest free
    /// over a window of its own records) once each cover takes `amount`: the fewest free
    /// over the window, the covers counted where they lie.
    pub(super) fn with_covers(
        &self,
        c: u32,
        at: i64,
        dur: u64,
        amount: i64,
        own: impl Fn(i64, u64) -> i64,
    ) -> i64 {
        let Some(end) = window_end(at, dur) else {
            return own(at, dur);
        };
        if !self.wholes.covers.meets(c, at, end) {
            // The common case, with nothing to cut.
            return own(at, dur);
        }
        // Cut the window where a cover starts or ends; each piece has its own count.
        let mut cuts: Vec<i64> = vec![at, end];
        for (s, e) in self.wholes.covers.meeting(c, at, end) {
            cuts.push(s);
            cuts.push(e);
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut fewest = i64::MAX;
        for w in cuts.windows(2) {
            let (s, e) = (w[0], w[1]);
            let jobs = self.wholes.covers.jobs_meeting(c, s, e);
            let piece = own(s, u64::try_from(e - s).unwrap_or(0));
            fewest = fewest.min(piece.saturating_sub(jobs.saturating_mul(amount)));
        }
        fewest
    }

    /// Jobs of whole `c`'s covers at `t`.
    pub(super) fn whole_jobs_at(&self, c: u32, t: i64) -> i64 {
        self.wholes.covers.jobs_meeting(c, t, t.saturating_add(1))
    }

    /// The earliest start at or after `at` of a window of `dur` that no cover of whole `c`
    /// meets, given `own`: the earliest such start of the calendar's own records.
    pub(super) fn whole_free_from(
        &self,
        c: u32,
        at: i64,
        dur: u64,
        own: impl Fn(i64) -> Option<i64>,
    ) -> Option<i64> {
        let dur = i64::try_from(dur).unwrap_or(i64::MAX);
        self.wholes.covers.free_from(c, at, dur, own)
    }

    /// Counts a record made on `v` (`by`: +1 made, -1 removed) toward its whole's.
    #[inline]
    pub(super) fn count_record(&mut self, c: u32, by: i32) {
        if c != NO_WHOLE {
            let n = &mut self.wholes.records[c as usize];
            *n = n.saturating_add_signed(by);
        }
    }

    /// The whole a record other than a whole cover lies in, or [`NO_WHOLE`].
    pub(super) fn record_whole(&self, s: SpanRef) -> u32 {
        match s {
            SpanRef::Leaf(v, _) => self.whole_of(VertexId(v)).unwrap_or(NO_WHOLE),
            SpanRef::Inner(i, ..)
            | SpanRef::Plan(i, _)
            | SpanRef::Xcheck(i, _)
            | SpanRef::Agg(i, _) => self.wholes.of_inner[i as usize],
            SpanRef::Cover(p, _) => self.cover_groups[p as usize].whole,
            SpanRef::Whole(..) => NO_WHOLE,
        }
    }

    /// How many wholes there are.
    pub(crate) fn wholes_len(&self) -> usize {
        self.wholes.vertex.len()
    }

    /// The node of whole `c`.
    pub(crate) fn whole_vertex(&self, c: u32) -> VertexId {
        VertexId(self.wholes.vertex[c as usize])
    }

    /// What a walk reading the calendars knows of `u` at once when it is a whole's node
    /// (`dfu::Walk::dom_dfv`): one of its whole covers meets the window (then every vertex
    /// of the whole has no unit free there: `u` is busy without asking more), or nothing is
    /// recorded in the whole over the window (every unit below `u` is free throughout it,
    /// whatever the window: `dfu::memo`). One search of the whole's covers answers both.
    #[inline]
    pub(crate) fn whole_node(&self, u: VertexId, at: i64, dur: u64) -> WholeNode {
        match self.whole_at(u) {
            Some(c) => self.whole_state(c, at, dur),
            None => WholeNode::Other,
        }
    }

    /// The whole whose node `u` is, if any.
    #[inline]
    pub(crate) fn whole_at(&self, u: VertexId) -> Option<u32> {
        let i = self.inner_index(u)?;
        let c = self.wholes.of_inner[i as usize];
        (c != NO_WHOLE && self.wholes.vertex[c as usize] == u.0).then_some(c)
    }

    /// [`SchedState::whole_node`] of the node of whole `c`. Inlined into the exploration,
    /// which asks it of every node it meets.
    #[inline(always)]
    pub(crate) fn whole_state(&self, c: u32, at: i64, dur: u64) -> WholeNode {
        if self.wholes.covers.live == 0 {
            return match self.wholes.records[c as usize] {
                0 => WholeNode::Free(c),
                _ => WholeNode::Other,
            };
        }
        let end = saturating_end(at, dur);
        let meets = self.wholes.covers.meets_inlined(c, at, end);
        // A window past the planning window: the calendars answer for themselves.
        if meets && window_end(at, dur) == Some(end) {
            return WholeNode::Covered;
        }
        if self.wholes.records[c as usize] == 0 && !meets {
            return WholeNode::Free(c);
        }
        WholeNode::Other
    }

    /// Whether a whole cover of `c` meets the window (false for a window outside the
    /// planning window, where the calendars answer for themselves).
    #[inline]
    pub(super) fn cover_meets(&self, c: u32, at: i64, dur: u64) -> bool {
        window_end(at, dur).is_some_and(|end| self.wholes.covers.meets(c, at, end))
    }

    /// Whether a whole cover of `c` may be recorded over the window: nothing else is
    /// recorded in the whole and no cover of it meets the window.
    #[inline]
    pub(crate) fn whole_free(&self, c: u32, at: i64, dur: u64) -> bool {
        self.wholes.records[c as usize] == 0
            && !self
                .wholes
                .covers
                .meets_inlined(c, at, saturating_end(at, dur))
    }

    /// Records a whole cover of each whole of `cs` over one window: every vertex of each
    /// held whole by one job. The caller has found each whole free over the window
    /// ([`SchedState::whole_free`]); one that is not after all (`cs` naming a whole twice)
    /// is an error, with the covers before it recorded (in `out`) for the caller to take
    /// out.
    pub(crate) fn hold_wholes(
        &mut self,
        cs: &[u32],
        at: i64,
        dur: u64,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let end = i64::try_from(dur)
            .ok()
            .filter(|&d| d > 0)
            .and_then(|d| at.checked_add(d))
            .ok_or_else(|| MatchError::Internal(format!("a whole cover of {dur} s at {at}")))?;
        let added = self.wholes.covers.add_each(cs, at, end);
        out.extend(cs[..added].iter().map(|&c| SpanRef::Whole(c, at)));
        match cs.get(added) {
            None => Ok(()),
            Some(c) => Err(MatchError::Internal(format!(
                "a whole cover of {c} at {at} over another"
            ))),
        }
    }

    /// Removes the whole cover of `c` that starts at `start`; its window.
    pub(super) fn remove_whole(&mut self, c: u32, start: i64) -> Result<(i64, i64), MatchError> {
        self.wholes
            .covers
            .remove(c as usize, start)
            .ok_or_else(|| MatchError::Internal(format!("no whole cover of {c} at {start}")))
    }

    /// Removes the whole cover starting at `start` of each whole of `cs`, as
    /// [`SchedState::remove_whole`] of each would.
    pub(super) fn remove_wholes(&mut self, cs: &[u32], start: i64) -> Result<(), MatchError> {
        if self.wholes.covers.remove_each(cs, start) {
            return Ok(());
        }
        Err(MatchError::Internal(format!(
            "no whole cover at {start} of one of {} wholes",
            cs.len()
        )))
    }

    /// The records the whole cover of `c` starting at `at` stands for, added to the
    /// calendars (children before parents, one hold per leaf) and pushed to `out`.
    pub(super) fn unwhole(
        &mut self,
        g: &ResourceGraph,
        tree: &dyn Tree,
        c: u32,
        at: i64,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let (start, end) = self.remove_whole(c, at)?;
        let dur = u64::try_from(end - start).unwrap_or(0);
        // Depth first, each vertex after its children, as a commit records them.
        let mut stack: Vec<(VertexId, usize)> = vec![(self.whole_vertex(c), 0)];
        while let Some(top) = stack.last_mut() {
            let (v, next) = *top;
            if let Some(&child) = tree.children(v).get(next) {
                top.1 += 1;
                stack.push((VertexId(child), 0));
                continue;
            }
            stack.pop();
            self.record_on(v, start, dur, Some(g.size(v)), 1, out)?;
            if let Some(agg) = self.aggregate(v) {
                let totals: Vec<(u32, i64)> = agg
                    .ranks
                    .iter()
                    .copied()
                    .zip(agg.totals().iter().copied())
                    .collect();
                self.hold_aggregate(v, start, dur, &totals, out)?;
            }
        }
        Ok(())
    }
}
