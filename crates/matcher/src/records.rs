//! A job's records in the calendars: how a match, a restore or a hold is recorded (all or
//! nothing, or leaving out what refuses it as Fluxion does), how a job matched again under
//! its id keeps both, and how a cancel takes the records out again — exactly, or as far as
//! Fluxion's cancel walk reaches for a job that lost part of its vertices.

use std::collections::HashSet;

use shardsched_resource::VertexId;

use super::instants::Instants;
use super::{
    Allocation, JobRecord, JobState, MatchError, Matcher, Placement, RankOf, SchedState, SpanRef,
    alloc, end_of, learn_weight, tree_of,
};

impl Matcher {
    /// Records `alloc` for `jobid` (the calendars, the job, its times), failing on any
    /// conflict: a restore, a hold or an `update`. With `learn`, `first`'s order learns as
    /// from a match ([`Matcher::record_match`]).
    pub(crate) fn record(
        &mut self,
        jobid: u64,
        state: JobState,
        alloc: Allocation,
        learn: Option<i64>,
    ) -> Result<Placement, MatchError> {
        self.record_as(jobid, state, alloc, false, learn)
    }

    /// Records what a match found: a vertex whose calendar refuses it is left out, as
    /// Fluxion leaves it. With `learn` (the time at which `first` reads free amounts),
    /// `first`'s learned order is updated too.
    pub(crate) fn record_match(
        &mut self,
        jobid: u64,
        state: JobState,
        alloc: Allocation,
        learn: Option<i64>,
    ) -> Result<Placement, MatchError> {
        self.record_as(jobid, state, alloc, true, learn)
    }

    fn record_as(
        &mut self,
        jobid: u64,
        state: JobState,
        mut alloc: Allocation,
        lenient: bool,
        learn: Option<i64>,
    ) -> Result<Placement, MatchError> {
        let mut spans = self.commit(&mut alloc, lenient, learn)?;
        let at = alloc.at;
        self.instants.add(at, end_of(&alloc));
        self.last_recorded = alloc.len();
        if let Some(mut old) = self.jobs.remove(&jobid) {
            // The same id matched again (Fluxion keeps per-vertex records by job id): the
            // job holds both, the earlier as a twin of the new, their records giving way
            // vertex by vertex, covers taken apart (`side.rs`).
            self.aggregates_leaked = true;
            let tree = tree_of(&self.graph, &self.subtree);
            self.state.uncover(&self.graph, tree, &mut old.spans)?;
            self.state.uncover(&self.graph, tree, &mut spans)?;
            self.matched_again(jobid, *old, state, &spans)?;
        }
        self.jobs.insert(
            jobid,
            Box::new(JobRecord {
                state,
                alloc,
                spans,
                partial: false,
                in_times: true,
            }),
        );
        Ok(state.placement(at))
    }

    /// Records `alloc` in the calendars; on failure nothing stays recorded.
    fn commit(
        &mut self,
        alloc: &mut Allocation,
        lenient: bool,
        learn: Option<i64>,
    ) -> Result<Vec<SpanRef>, MatchError> {
        let ranks = RankOf(&self.prune_rank_of, &self.graph);
        let g = &self.graph;
        let tree = tree_of(&self.graph, &self.subtree);
        let order = learn.and(self.order.as_mut());
        let scratch = &mut self.walk_scratch;
        let now = learn.unwrap_or(alloc.at);
        alloc::commit_noting(
            g,
            tree,
            &mut self.state,
            &ranks,
            alloc,
            lenient,
            order.map(|order| {
                move |st: &SchedState, v: VertexId| {
                    learn_weight(tree, st, order, scratch.as_mut(), v, now);
                }
            }),
            &mut self.refused,
            &mut self.commit_scratch,
        )
    }

    /// Calendars of this graph with nothing held (what cancelling every job gives back).
    pub fn fresh_state(&self) -> SchedState {
        let mut prune = self.prune.clone();
        SchedState::new_on(&self.graph, self.tree(), &self.types, &mut prune)
    }

    /// Records `alloc` in `st` as a match would (for checks that rebuild calendars).
    pub fn commit_into(
        &self,
        st: &mut SchedState,
        alloc: &Allocation,
    ) -> Result<Vec<SpanRef>, MatchError> {
        let ranks = RankOf(&self.prune_rank_of, &self.graph);
        let mut copy = alloc.clone();
        let tree = tree_of(&self.graph, &self.subtree);
        let no_after = None::<fn(&SchedState, VertexId)>;
        alloc::commit(&self.graph, tree, st, &ranks, &mut copy, false, no_after)
    }

    /// Removes job `jobid`'s allocation or reservation, restoring the calendars exactly.
    pub fn cancel(&mut self, jobid: u64) -> Result<(), MatchError> {
        let alloc = self.take(jobid)?;
        self.spares.give_back(alloc);
        Ok(())
    }

    /// As [`Matcher::cancel`], handing the allocation back instead of keeping its memory for
    /// a later match: for a caller that may put it back ([`Matcher::restore`]) or compare it
    /// with what replaces it, and would otherwise copy it first.
    pub fn take(&mut self, jobid: u64) -> Result<Allocation, MatchError> {
        let mut job = self
            .jobs
            .remove(&jobid)
            .ok_or(MatchError::NoSuchJob(jobid))?;
        job.leave_times(&mut self.instants);
        if self.has_twins(jobid) {
            return self.take_with_twins(jobid, *job);
        }
        if job.partial {
            // Fluxion's cancel walk stops at vertices the job does not hold: what lies
            // below them stays taken, and still listed with the job (`find`).
            let reach = self.reachable(&job.alloc.iter().map(|av| av.v.0).collect());
            let mut left = Vec::new();
            for &s in &job.spans {
                if reach.contains(&self.state.span_vertex(s).0) {
                    self.state.remove(s)?;
                } else {
                    left.push(s);
                }
            }
            self.orphan_left(jobid, job.state, &job.alloc, left, true);
            return Ok(job.alloc);
        }
        self.state.remove_each(&job.spans)?;
        Ok(job.alloc)
    }

    /// The vertices a job's cancel walk reaches: from the root, through vertices the job
    /// holds, `held` (none when it does not hold the root).
    fn reachable(&self, held: &HashSet<u32>) -> HashSet<u32> {
        let mut out = HashSet::new();
        let root = self.tree().root();
        if !held.contains(&root.0) {
            return out;
        }
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            if !held.contains(&v.0) || !out.insert(v.0) {
                continue;
            }
            stack.extend(self.tree().children(v).iter().map(|&c| VertexId(c)));
        }
        out
    }

    /// The visit counts Fluxion's cancel walk would report for job `jobid` (its `cancel …
    /// stats`): the walk starts at the root and descends into the children of every vertex
    /// the job holds, so it visits one plus the children of each held vertex, and completes
    /// each held vertex. `None` for an unknown job.
    pub fn cancel_counts(&self, jobid: u64) -> Option<(u64, u64)> {
        let job = self.jobs.get(&jobid)?;
        let root = self.tree().root();
        let held = self.tagged_vertices(job, jobid);
        if !held.contains(&root.0) {
            return Some((0, 0));
        }
        if job.partial || self.tree().is_dag() || self.has_twins(jobid) {
            // The walk enters the root and every child of a vertex it removes, each once.
            let reach = self.reachable(&held);
            let mut entered: HashSet<u32> = HashSet::new();
            entered.insert(root.0);
            for &v in &reach {
                entered.extend(self.tree().children(VertexId(v)).iter().copied());
            }
            return Some((entered.len() as u64, reach.len() as u64));
        }
        let held = job.alloc.len() as u64;
        let visited: u64 = job
            .alloc
            .iter()
            .map(|av| self.tree().children(av.v).len() as u64)
            .sum();
        Some((1 + visited, held))
    }
}

impl JobRecord {
    /// Takes the job's start and end out of the instants a reservation search tries, if
    /// they are there.
    pub(crate) fn leave_times(&mut self, instants: &mut Instants) {
        if std::mem::take(&mut self.in_times) {
            instants.remove(self.alloc.at, end_of(&self.alloc));
        }
    }
}
