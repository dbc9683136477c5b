//! Recording a job on a vertex set the caller names (Fluxion's `update`): the R of a job
//! that some other scheduler instance matched, read back vertex by vertex, is recorded here
//! exactly as the match that made it recorded it, without matching.
//!
//! Fluxion's readers check every named vertex against its own calendar first, in the R's
//! order (an exclusive one must be wholly free so its span can be added, a shared one wholly
//! free too), then its update walk goes from the root along the named vertices only and
//! takes each whose subtree holds a vertex named exclusive — the same walk a match's update
//! makes, so the writers print what a match would have printed.

use std::collections::{HashMap, HashSet};

use shardsched_resource::VertexId;

use crate::{AllocVertex, Allocation, Depth, JobState, MatchError, Matcher, Placement};

/// One vertex an R names: the units it says and whether exclusively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GivenVertex {
    pub v: VertexId,
    pub needs: i64,
    pub exclusive: bool,
}

/// Why a given vertex set cannot be recorded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GivenError {
    /// An exclusive vertex is not wholly free over the window (Fluxion: its span cannot be
    /// added).
    #[error("{0:?} is not wholly free for an exclusive hold")]
    CannotTake(VertexId),
    /// A shared vertex is not wholly free over the window.
    #[error("{0:?} is unavailable")]
    Unavailable(VertexId),
    /// The same vertex named twice.
    #[error("{0:?} named twice")]
    Duplicate(VertexId),
    /// Nothing reachable from the root is named exclusive: nothing would be held.
    #[error("nothing reachable from the root is taken exclusively")]
    NothingExclusive,
    #[error(transparent)]
    Match(#[from] MatchError),
}

impl Matcher {
    /// The allocation Fluxion's update walk makes of `given` over `[at, at + duration)`
    /// (see the module doc), after checking each vertex's calendar in the given order.
    pub fn given_allocation(
        &self,
        given: &[GivenVertex],
        at: i64,
        duration: u64,
    ) -> Result<Allocation, GivenError> {
        let mut named: HashMap<u32, (i64, bool)> = HashMap::with_capacity(given.len());
        for gv in given {
            if gv.v.index() >= self.graph.len() {
                return Err(MatchError::BadRequest(format!(
                    "vertex {} is not in the graph",
                    gv.v.0
                ))
                .into());
            }
            if named.insert(gv.v.0, (gv.needs, gv.exclusive)).is_some() {
                return Err(GivenError::Duplicate(gv.v));
            }
            let size = self.graph.size(gv.v);
            if self.state.units_free(gv.v, size, at, duration) < size {
                return Err(if gv.exclusive {
                    GivenError::CannotTake(gv.v)
                } else {
                    GivenError::Unavailable(gv.v)
                });
            }
        }
        let tree = self.tree();
        let mut walk = Walk {
            tree,
            named: &named,
            out: Vec::with_capacity(given.len()),
            seen: std::collections::HashSet::new(),
        };
        let root = tree.root();
        if !named.contains_key(&root.0) {
            // An R made under another dominant subsystem: Fluxion's update walk does not
            // start (the root's in-edge carries another walk's sequence number,
            // `traversers/dfu_impl_update.cpp:928`); see `record_given_holds`.
            return Ok(Allocation::window(at, duration));
        }
        // Fluxion's walk level, which its writers print as indentation, drifts where a
        // match's update was refused by a calendar; the update walk starts where it stands.
        walk.visit(root, self.level_drift);
        if !walk.out.iter().any(|a| a.exclusive) {
            return Err(GivenError::NothingExclusive);
        }
        Ok(Allocation::new(walk.out, at, duration))
    }

    /// Records a [`Matcher::given_allocation`] for job `jobid`. Records nothing on failure.
    ///
    /// As Fluxion's `update`: an allocation whatever its start — its reader puts the spans
    /// in each vertex's allocations, not its reservations (`update_data.reserved` is false
    /// for the command) — though resource-query says `RESERVED` for a later start (the
    /// placement returned); and `first`'s update walk learns from it with the job's unset
    /// `now` (-1), so every edge it descends gets weight 0 (`upd_by_outedges`).
    pub fn record_given(&mut self, jobid: u64, alloc: Allocation) -> Result<Placement, MatchError> {
        let placed = Self::given_state(&alloc).placement(alloc.at);
        self.record_new(jobid, JobState::Allocated, alloc, Some(-1))?;
        self.given_allocations = true;
        Ok(placed)
    }

    /// Records for job `jobid` only what Fluxion's R reader records when its update walk
    /// does not start (an R naming no vertex of this walk's tree root, from a session with
    /// another dominant subsystem; `given_allocation` then gives no vertices): each vertex
    /// the R names exclusive has its whole size taken on its own calendar over the window,
    /// with no job count and no aggregate below any ancestor. The job holds no vertex of
    /// the walk, so nothing is written, and its cancel gives the units back.
    pub fn record_given_holds(
        &mut self,
        jobid: u64,
        given: &[GivenVertex],
        alloc: Allocation,
    ) -> Result<Placement, MatchError> {
        if self.jobs.contains_key(&jobid) {
            return Err(MatchError::DuplicateJob(jobid));
        }
        debug_assert!(alloc.is_empty(), "a walk's allocation has its own record");
        let mut spans = Vec::new();
        for gv in given.iter().filter(|gv| gv.exclusive) {
            let size = self.graph.size(gv.v);
            // Units only, no job count: the reader's `update_vtx_plan`
            // (`readers/resource_reader_jgf.cpp`).
            if let Err(e) =
                self.state
                    .record_on(gv.v, alloc.at, alloc.duration, Some(size), 0, &mut spans)
            {
                for &s in &spans {
                    let _ = self.state.remove(s);
                }
                return Err(e);
            }
        }
        // An allocation whatever its start, as `record_given`'s.
        let placed = Self::given_state(&alloc).placement(alloc.at);
        self.given_allocations = true;
        let record = crate::JobRecord {
            state: JobState::Allocated,
            alloc,
            spans,
            partial: false,
            // No aggregate records it (the walk does not start): no instants to try.
            in_times: false,
        };
        self.jobs.insert(jobid, Box::new(record));
        Ok(placed)
    }

    /// The vertices held exclusively by allocations that do not cover `now` — only
    /// `update` makes such — for [`crate::dfu::Walk::refuse_allocated`]; `None` when there
    /// are none.
    pub(crate) fn allocated_not_now(&self, now: i64) -> Option<HashSet<u32>> {
        if !self.given_allocations {
            return None;
        }
        let records = self
            .jobs
            .values()
            .map(|j| &**j)
            .chain(self.side.iter().map(|s| &s.record));
        let set: HashSet<u32> = records
            .filter(|j| {
                j.state == JobState::Allocated
                    && !(j.alloc.at <= now && now < crate::end_of(&j.alloc))
            })
            .flat_map(|j| j.alloc.iter().filter(|av| av.exclusive).map(|av| av.v.0))
            .collect();
        (!set.is_empty()).then_some(set)
    }

    fn given_state(alloc: &Allocation) -> JobState {
        if alloc.at == 0 {
            JobState::Allocated
        } else {
            JobState::Reserved
        }
    }
}

/// The post-order walk over named vertices (children in tree order).
struct Walk<'a> {
    tree: &'a dyn crate::dfu::Tree,
    named: &'a HashMap<u32, (i64, bool)>,
    out: Vec<AllocVertex>,
    /// Vertices visited, where vertices share parents.
    seen: std::collections::HashSet<u32>,
}

impl Walk<'_> {
    /// How many vertices at and below `u` are taken exclusively.
    fn visit(&mut self, u: VertexId, depth: Depth) -> u64 {
        let (needs, exclusive) = self.named[&u.0];
        if !self.seen.insert(u.0) {
            return 0;
        }
        let mut n = 0;
        for &c in self.tree.children(u) {
            if self.named.contains_key(&c) {
                n += self.visit(VertexId(c), depth + 1);
            }
        }
        if exclusive {
            n += 1;
        }
        if n > 0 {
            self.out.push(AllocVertex {
                v: u,
                needs,
                exclusive,
                depth,
            });
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use crate::{MatchOp, MatchOutcome};

    use super::*;

    fn one_node() -> shardsched_jobspec::Jobspec {
        shardsched_jobspec::parse(
            "version: 9999\nresources: [{type: slot, count: 1, label: s, with: [{type: node, count: 1}]}]\ntasks: [{command: [app], slot: s, count: {per_slot: 1}}]\nattributes: {system: {duration: 60}}",
        )
        .expect("jobspec")
    }

    fn given_of(a: &Allocation) -> Vec<GivenVertex> {
        // An R lists parents first; the walk must not depend on the order given.
        a.vertices()
            .iter()
            .rev()
            .map(|av| GivenVertex {
                v: av.v,
                needs: av.needs,
                exclusive: av.exclusive,
            })
            .collect()
    }

    /// A matcher after job 1 took one node, and what it took.
    fn first_match() -> (Matcher, Allocation) {
        let mut live = crate::test_support::two_node_matcher();
        let MatchOutcome::Allocated(a) = live
            .run(MatchOp::Allocate, &one_node(), 1, 100)
            .expect("match")
        else {
            panic!("no allocation");
        };
        (live, a)
    }

    #[test]
    fn a_matched_allocation_given_back_is_the_same_allocation_and_holds_the_same() {
        let (mut live, a) = first_match();
        let mut other = crate::test_support::two_node_matcher();
        let again = other
            .given_allocation(&given_of(&a), a.at, a.duration)
            .expect("given");
        assert_eq!(again, a);
        other.record_given(1, again).expect("record");
        assert_eq!(
            other.record_given(1, a.clone()),
            Err(MatchError::DuplicateJob(1))
        );
        // Recording it again at the same time fails on the first vertex taken.
        let taken = other.given_allocation(&given_of(&a), a.at, a.duration);
        assert!(matches!(taken, Err(GivenError::CannotTake(_))), "{taken:?}");
        // Later matches go where they would have gone in the matcher that matched.
        for id in 2..=3 {
            assert_eq!(
                live.run(MatchOp::AllocateOrElseReserve, &one_node(), id, 100),
                other.run(MatchOp::AllocateOrElseReserve, &one_node(), id, 100)
            );
        }
    }

    #[test]
    fn a_set_with_nothing_exclusive_or_a_vertex_twice_is_refused() {
        let (_, a) = first_match();
        let m = crate::test_support::two_node_matcher();
        let mut shared = given_of(&a);
        for g in &mut shared {
            g.exclusive = false;
        }
        assert_eq!(
            m.given_allocation(&shared, 0, 60),
            Err(GivenError::NothingExclusive)
        );
        let mut twice = given_of(&a);
        twice.push(twice[0]);
        assert_eq!(
            m.given_allocation(&twice, 0, 60),
            Err(GivenError::Duplicate(twice[0].v))
        );
        // A reservation is recorded as one.
        let mut m = m;
        let later = m.given_allocation(&given_of(&a), 3600, 60).expect("given");
        assert_eq!(
            m.record_given(7, later),
            Ok(Placement::Reserved { at: 3600 })
        );
    }

    /// An R whose root is not this walk's root (one from a session walking another
    /// subsystem): only the exclusive vertices' own units are held, nothing is listed, and
    /// cancel gives them back.
    #[test]
    fn a_set_without_the_root_holds_only_its_exclusive_vertices_until_cancelled() {
        let (_, a) = first_match();
        let mut m = crate::test_support::two_node_matcher();
        let root = m.tree().root();
        let given: Vec<GivenVertex> = given_of(&a).into_iter().filter(|g| g.v != root).collect();
        let held: Vec<VertexId> = given.iter().filter(|g| g.exclusive).map(|g| g.v).collect();
        assert!(!held.is_empty());
        let alloc = m.given_allocation(&given, 0, 60).expect("given");
        assert!(alloc.is_empty(), "{alloc:?}");
        let placed = m.record_given_holds(1, &given, alloc.clone());
        assert_eq!(placed, Ok(Placement::Allocated { at: 0 }));
        assert_eq!(
            m.record_given_holds(1, &given, alloc),
            Err(MatchError::DuplicateJob(1))
        );
        for &v in &held {
            assert_eq!(m.state.units_free(v, m.graph.size(v), 0, 60), 0);
        }
        m.cancel(1).expect("cancel");
        for &v in &held {
            let size = m.graph.size(v);
            assert_eq!(m.state.units_free(v, size, 0, 60), size);
        }
    }
}
