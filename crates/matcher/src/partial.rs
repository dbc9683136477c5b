//! Partial cancel (resource-query's `partial-cancel`): giving back part of an allocation, as
//! Fluxion's `remove` with an R to cancel does it.
//!
//! - By ranks (an rv1exec R): every vertex of each rank the job holds is given back whole;
//!   what it held exclusively is counted per rank and type.
//! - By vertices (a JGF R): each listed vertex is given back whole; it must be held, and held
//!   exclusively (else the cancel fails there, what came before staying cancelled).
//!
//! Then, from the top vertex of each rank (the shortest path), every ancestor's pruning
//! filter record of the job shrinks by the counts of its ranks; an ancestor whose record
//! reaches zero of every type is no longer held by the job, and every ancestor with a record
//! leaves the job's exclusivity count. The job is gone when the root is no longer held.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_resource::VertexId;

use crate::state::SpanRef;
use crate::{MatchError, Matcher};

/// What a partial cancel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialCancel {
    /// The job holds nothing reachable any more (its root was given back).
    pub full: bool,
}

/// Why a partial cancel failed, in the words of Fluxion's `remove`
/// (`dfu_impl_update.cpp`), which resource-query prints on standard output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RemoveError {
    /// The R names a rank the graph does not have (Fluxion writes no `: ` here).
    #[error("remove{0} not found in by_rank map.")]
    NoSuchRank(i64),
    /// No rank was named.
    #[error("remove: rank_to_root is empty.")]
    NoRank,
    /// The job held nothing on a rank the R names.
    #[error("remove: {0} not found in rank_to_counts.")]
    NothingHeldOnRank(i64),
    /// The R did not read, or (a JGF R) names a vertex the graph lacks or the job does not
    /// hold exclusively: Fluxion's reader fails (what it gave back before stays given back).
    #[error("remove: partial_cancel returned error.")]
    ReadFailed,
}

/// Counts given back by rank, by type, and each rank's top vertex (Fluxion's
/// `rank_to_counts` and `rank_to_root`).
#[derive(Default)]
struct Freed {
    counts: BTreeMap<i64, HashMap<shardsched_resource::Sym, i64>>,
    roots: BTreeMap<i64, (usize, VertexId)>,
    /// The ranks in the order they entered `roots` (what orders Fluxion's unordered map).
    entered: Vec<i64>,
}

impl Freed {
    fn root(&mut self, rank: i64, v: VertexId, path_len: usize) {
        let e = self.roots.entry(rank).or_insert_with(|| {
            self.entered.push(rank);
            (usize::MAX, v)
        });
        if path_len < e.0 {
            *e = (path_len, v);
        }
    }
}

impl Matcher {
    /// Gives back every vertex of `ranks` job `jobid` holds (an rv1exec R).
    pub fn partial_cancel_ranks(
        &mut self,
        jobid: u64,
        ranks: &BTreeSet<i64>,
    ) -> Result<PartialCancel, MatchError> {
        self.uncover_job(jobid)?;
        let mut freed = Freed::default();
        // Fluxion's reader puts the ranks, ascending, into an unordered set; its walk of
        // them stops at the first the graph lacks, so which it names follows that set's
        // order (and so does the order they enter `rank_to_root`).
        for rank in crate::unordered::iteration_order(ranks.iter().copied()) {
            let members: Vec<VertexId> = self.graph.rank_vertices(rank).collect();
            if members.is_empty() {
                return Err(RemoveError::NoSuchRank(rank).into());
            }
            for v in members {
                if self.holds(jobid, v) {
                    self.give_back(jobid, v, &mut freed, false)?;
                }
                let len = self.graph.path(v).len();
                freed.root(rank, v, len);
            }
        }
        self.shrink_ancestors(jobid, &freed)
    }

    /// Gives back the listed vertices of job `jobid` (a JGF R), in order; `None` is a vertex
    /// the R names that the graph does not have (the cancel fails there).
    pub fn partial_cancel_vertices(
        &mut self,
        jobid: u64,
        vertices: &[Option<VertexId>],
    ) -> Result<PartialCancel, MatchError> {
        self.uncover_job(jobid)?;
        let mut freed = Freed::default();
        for v in vertices {
            // (Fluxion's reader: "inconsistent input vertex: nonexistent path", "can't
            // find x_checker span for job …".)
            let Some(v) = *v else {
                return Err(RemoveError::ReadFailed.into());
            };
            if !self.holds(jobid, v) {
                return Err(RemoveError::ReadFailed.into());
            }
            self.give_back(jobid, v, &mut freed, true)?;
            let len = self.graph.path(v).len();
            freed.root(self.graph.rank(v), v, len);
        }
        self.shrink_ancestors(jobid, &freed)
    }

    /// Gives back every vertex of `subtree` (a subtree whose top is `top`) job `jobid`
    /// holds, before `remove` takes the subtree out: as by ranks, all it held there counted
    /// as freed from `top` up.
    pub(crate) fn partial_cancel_within(
        &mut self,
        jobid: u64,
        subtree: &BTreeSet<u32>,
        top: VertexId,
    ) -> Result<PartialCancel, MatchError> {
        self.uncover_job(jobid)?;
        let held: Vec<VertexId> = self.job(jobid).map_or_else(Vec::new, |j| {
            j.alloc
                .iter()
                .filter(|av| subtree.contains(&av.v.0))
                .map(|av| av.v)
                .collect()
        });
        let mut freed = Freed::default();
        for v in held {
            self.give_back(jobid, v, &mut freed, false)?;
        }
        // One "rank": the subtree, freed from its top.
        let mut all: HashMap<shardsched_resource::Sym, i64> = HashMap::new();
        for counts in std::mem::take(&mut freed.counts).into_values() {
            for (t, n) in counts {
                *all.entry(t).or_default() += n;
            }
        }
        freed.counts.insert(0, all);
        freed.root(0, top, 0);
        self.shrink_ancestors(jobid, &freed)
    }

    /// Turns job `jobid`'s covers back into leaf holds: the steps below edit its records
    /// vertex by vertex (see `state::cover`).
    pub(crate) fn uncover_job(&mut self, jobid: u64) -> Result<(), MatchError> {
        let Some(job) = self.jobs.get_mut(&jobid) else {
            return Ok(());
        };
        let tree = crate::tree_of(&self.graph, &self.subtree);
        self.state.uncover(&self.graph, tree, &mut job.spans)
    }

    fn holds(&self, jobid: u64, v: VertexId) -> bool {
        self.job(jobid)
            .is_some_and(|j| j.alloc.iter().any(|av| av.v == v))
    }

    /// Removes every record of `v` from job `jobid`, counting what it held exclusively.
    /// `must_be_exclusive`: a vertex held shared is an error (after its records went).
    fn give_back(
        &mut self,
        jobid: u64,
        v: VertexId,
        freed: &mut Freed,
        must_be_exclusive: bool,
    ) -> Result<(), MatchError> {
        let Some(job) = self.jobs.get_mut(&jobid) else {
            return Err(MatchError::NoSuchJob(jobid));
        };
        job.partial = true;
        let Some(pos) = job.alloc.iter().position(|av| av.v == v) else {
            return Ok(());
        };
        let av = job.alloc.vertices_mut().remove(pos);
        let mut kept = Vec::with_capacity(job.spans.len());
        let mut result = Ok(());
        for &s in &job.spans {
            if self.state.span_vertex(s) != v {
                kept.push(s);
                continue;
            }
            if let Err(e) = self.state.remove(s) {
                result = Err(e);
            }
        }
        job.spans = kept;
        result?;
        if !av.exclusive {
            if must_be_exclusive {
                return Err(MatchError::BadRequest(format!(
                    "can't find allocation span for job {jobid} in {}",
                    self.graph.name(v)
                )));
            }
            return Ok(());
        }
        let rank = self.graph.rank(v);
        *freed
            .counts
            .entry(rank)
            .or_default()
            .entry(self.graph.kind(v))
            .or_default() += av.needs;
        Ok(())
    }

    /// The ancestors' step (see the module doc).
    fn shrink_ancestors(&mut self, jobid: u64, freed: &Freed) -> Result<PartialCancel, MatchError> {
        if freed.roots.is_empty() {
            return Err(RemoveError::NoRank.into());
        }
        let mut parent_counts: BTreeMap<u32, HashMap<shardsched_resource::Sym, i64>> =
            BTreeMap::new();
        for rank in crate::unordered::iteration_order(freed.entered.iter().copied()) {
            let Some(&(_, root)) = freed.roots.get(&rank) else {
                continue;
            };
            let Some(counts) = freed.counts.get(&rank) else {
                return Err(RemoveError::NothingHeldOnRank(rank).into());
            };
            let mut cur = root;
            while let Some(p) = self.tree().parent(cur) {
                let e = parent_counts.entry(p.0).or_default();
                for (&t, &n) in counts {
                    *e.entry(t).or_default() += n;
                }
                cur = p;
            }
        }
        let root = self.tree().root();
        if self.holds(jobid, root) {
            for (&v, counts) in &parent_counts {
                self.shrink(jobid, VertexId(v), counts)?;
            }
        } else {
            // (The job stays, whatever is left of it.)
            // Fluxion's exhaustive cancel: every allocation record of the job goes.
            let Some(job) = self.jobs.get_mut(&jobid) else {
                return Err(MatchError::NoSuchJob(jobid));
            };
            let mut kept = Vec::with_capacity(job.spans.len());
            for &s in &job.spans {
                if matches!(s, SpanRef::Plan(..) | SpanRef::Leaf(..)) {
                    self.state.remove(s)?;
                } else {
                    kept.push(s);
                }
            }
            job.spans = kept;
            return Ok(PartialCancel { full: false });
        }
        let full = !self.holds(jobid, root);
        if full && let Some(mut job) = self.jobs.remove(&jobid) {
            job.leave_times(&mut self.instants);
            // What is left of it stays taken (Fluxion cannot reach it any more).
            self.orphan(jobid, *job, true);
            self.orphan_twins(jobid);
        }
        Ok(PartialCancel { full })
    }

    /// Shrinks job `jobid`'s pruning-filter record at ancestor `v` by `counts`.
    fn shrink(
        &mut self,
        jobid: u64,
        v: VertexId,
        counts: &HashMap<shardsched_resource::Sym, i64>,
    ) -> Result<(), MatchError> {
        let Some(agg) = self.state.aggregate(v) else {
            return Ok(());
        };
        let types = agg.types.clone();
        let Some(job) = self.jobs.get(&jobid) else {
            return Err(MatchError::NoSuchJob(jobid));
        };
        let Some((si, planned)) = job
            .spans
            .iter()
            .enumerate()
            .find_map(|(i, &s)| self.state.aggregate_span(v, s).map(|p| (i, p.to_vec())))
        else {
            return Ok(());
        };
        if !job.alloc.iter().any(|av| av.v == v) {
            return Ok(());
        }
        let mut left = planned;
        let first_before = left.first().copied().unwrap_or(0);
        for (k, &t) in types.iter().enumerate() {
            let name = self.types.name(&self.graph, t);
            let take = counts
                .iter()
                .find(|(s, _)| self.graph.str(**s) == name)
                .map_or(0, |(_, &n)| n);
            if left[k] == 0 || take == 0 {
                continue;
            }
            if take > left[k] {
                return Err(MatchError::BadRequest(format!(
                    "planner_multi_reduce_span returned -1 at {}",
                    self.graph.name(v)
                )));
            }
            left[k] -= take;
        }
        let Some(job) = self.jobs.get_mut(&jobid) else {
            return Err(MatchError::NoSuchJob(jobid));
        };
        if v == self.graph.root() {
            if left.first() == Some(&0) {
                // The root's record of its first type is given back (Fluxion removes a
                // span reduced to nothing, and one of 0 units reduced by 0): that type's
                // planner, whose points are the instants a reservation search tries, no
                // longer has the job's start and end (random differential seed 7385).
                job.leave_times(&mut self.instants);
            } else if left.first().copied().unwrap_or(0) < first_before {
                // Reduced but kept: the planner takes the keys in its window again.
                self.instants
                    .rekeyed(job.alloc.at, crate::end_of(&job.alloc));
            }
        }
        let old = job.spans[si];
        let filter_kept = left.iter().any(|&n| n != 0);
        if !filter_kept {
            self.state.remove(old)?;
            job.spans.remove(si);
            job.alloc.vertices_mut().retain(|av| av.v != v);
        } else {
            job.spans[si] = self.state.replace_aggregate(old, &left)?;
        }
        // Every ancestor with a record leaves the job's exclusivity count.
        if let Some(xi) = job
            .spans
            .iter()
            .position(|&s| matches!(s, SpanRef::Xcheck(..)) && self.state.span_vertex(s) == v)
        {
            let x = job.spans.remove(xi);
            self.state.remove(x)?;
            if filter_kept
                || job
                    .spans
                    .iter()
                    .any(|&s| matches!(s, SpanRef::Plan(..)) && self.state.span_vertex(s) == v)
            {
                // Its own units, or units of its filter, stay taken with no job count
                // (Fluxion's partial cancel keeps an ancestor's schedule span and reduces
                // its filter's): untouched no longer means free (random differential seeds
                // 134064 and, for the filter, 500294).
                self.state.note_jobless_units();
            }
        }
        Ok(())
    }
}
