//! The matcher: finds resources for a jobspec in a resource graph, now or at the earliest
//! future time, and keeps the calendars that make those answers exact.
//!
//! One entry point, [`Matcher::run`], serves `shardsched query`, the benches, replay and the
//! shards. A match walks the graph depth-first together with the jobspec (see [`traverse`]),
//! scores candidates by the [`MatchPolicy`], picks the best, and — for allocations and
//! reservations — records them in per-vertex calendars ([`state`]) so that later matches see
//! them and [`Matcher::cancel`] restores the calendars exactly.
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
pub mod constraint;
mod hold;
pub mod policy;
pub mod request;
mod restore;
pub mod state;
#[cfg(test)]
mod test_support;
pub mod traverse;
pub mod writer;

use std::collections::BTreeMap;

use shardsched_jobspec::Jobspec;
use shardsched_resource::{ResourceGraph, Status, VertexId};

pub use alloc::{AllocVertex, Allocation};
pub use policy::MatchPolicy;
pub use request::Request;
pub use restore::{StoredAllocation, StoredVertex};
pub use state::{PLAN_BASE, PLAN_HORIZON, PruneFilters, SchedState, SpanRef};
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

/// A job the matcher holds resources for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    pub state: JobState,
    pub alloc: Allocation,
    pub spans: Vec<SpanRef>,
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
}

/// A resource graph with its scheduling state and the jobs placed on it.
#[derive(Clone, Debug)]
pub struct Matcher {
    pub graph: ResourceGraph,
    pub state: SchedState,
    policy: MatchPolicy,
    order: traverse::ScoreOrder,
    tree: alloc::TreeOrder,
    marks: alloc::Marks,
    scratch: traverse::Scratch,
    /// End times of held allocations and reservations, with how many end then: the only
    /// instants a reservation can start at.
    ends: BTreeMap<i64, u32>,
    jobs: BTreeMap<u64, JobRecord>,
}

impl Matcher {
    /// A matcher over `graph` with nothing allocated.
    pub fn new(graph: ResourceGraph, policy: MatchPolicy, filters: &PruneFilters) -> Matcher {
        let state = SchedState::new(&graph, filters);
        let order = traverse::ScoreOrder::new(&graph, &policy);
        let tree = alloc::TreeOrder::new(&graph);
        Matcher {
            graph,
            state,
            policy,
            order,
            tree,
            marks: alloc::Marks::default(),
            scratch: traverse::Scratch::default(),
            ends: BTreeMap::new(),
            jobs: BTreeMap::new(),
        }
    }

    /// The match policy this matcher was built with.
    pub fn policy(&self) -> MatchPolicy {
        self.policy
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
    /// matcher ([`Matcher::job`]). A whole-node allocation lists every vertex of its nodes,
    /// so a caller that needs only the start (a queue manager placing a reservation) saves
    /// copying it.
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
        let req = Request::compile(js, &self.graph, &self.state.prune_types)?;
        match op {
            MatchOp::Satisfiability => Ok(Placement::Satisfiable(self.satisfiable(&req, now))),
            MatchOp::Allocate | MatchOp::AllocateWithSatisfiability => {
                if let Some(a) = self.try_at(&req, now) {
                    return self.record_expanded(jobid, JobState::Allocated, a);
                }
                let satisfiable = (op == MatchOp::AllocateWithSatisfiability)
                    .then(|| self.satisfiable(&req, now));
                Ok(Placement::NoMatch { satisfiable })
            }
            MatchOp::AllocateOrElseReserve => {
                if let Some(a) = self.try_at(&req, now) {
                    return self.record_expanded(jobid, JobState::Allocated, a);
                }
                for t in self.candidate_times(now) {
                    if let Some(a) = self.try_at(&req, t) {
                        return self.record_expanded(jobid, JobState::Reserved, a);
                    }
                }
                // As Fluxion: a failed reservation is reported unsatisfiable only when, even
                // ignoring allocations and status, not one candidate qualifies for some
                // top-level request; down resources make it fail, not the request.
                let unsat = !self.graph_has_candidates(&req, now);
                Ok(Placement::NoMatch {
                    satisfiable: Some(!unsat),
                })
            }
        }
    }

    /// A copy of job `jobid`'s allocation (in memory an ended allocation left, when there
    /// is some).
    pub fn copy_allocation(&mut self, jobid: u64) -> Option<Allocation> {
        let job = self.jobs.get(&jobid)?;
        let mut vertices = self.marks.vertex_list(job.alloc.vertices.len());
        vertices.extend_from_slice(&job.alloc.vertices);
        Some(Allocation {
            vertices,
            ..job.alloc
        })
    }

    /// Whether `req` could ever be satisfied by the graph as it is (status respected,
    /// allocations ignored).
    fn satisfiable(&self, req: &Request, now: i64) -> bool {
        let dur = Self::duration_at(req, now);
        dur > 0 && self.traversal(req, now, dur, true).select().is_some()
    }

    /// Whether every top-level request finds at least one candidate in the graph, ignoring
    /// allocations and status.
    fn graph_has_candidates(&self, req: &Request, now: i64) -> bool {
        let dur = Self::duration_at(req, now);
        self.traversal(req, now, dur, true)
            .ignoring_status()
            .top_has_candidates()
    }

    fn duration_at(req: &Request, at: i64) -> u64 {
        let end = PLAN_BASE.saturating_add(PLAN_HORIZON as i64);
        let left = u64::try_from(end.saturating_sub(at)).unwrap_or(0);
        if req.duration == 0 {
            left
        } else {
            req.duration.min(left)
        }
    }

    fn traversal<'m>(
        &'m self,
        req: &'m Request,
        at: i64,
        dur: u64,
        sat: bool,
    ) -> traverse::Traversal<'m> {
        traverse::Traversal::new(
            &self.graph,
            &self.state,
            req,
            &self.order,
            self.policy,
            at,
            dur,
            sat,
            Default::default(),
        )
    }

    fn try_at(&mut self, req: &Request, at: i64) -> Option<Allocation> {
        let dur = Self::duration_at(req, at);
        if dur == 0 {
            return None;
        }
        let scratch = std::mem::take(&mut self.scratch);
        let mut t = traverse::Traversal::new(
            &self.graph,
            &self.state,
            req,
            &self.order,
            self.policy,
            at,
            dur,
            false,
            scratch,
        );
        let top = t.select();
        let alloc = top.map(|top| {
            alloc::expand(
                &self.graph,
                &self.tree,
                &mut self.marks,
                &t.arena,
                top,
                self.policy.node_exclusive,
                at,
                dur,
            )
        });
        self.scratch = t.into_scratch();
        alloc
    }

    /// Times after `now` at which some held resource frees up, in order: the only instants at
    /// which a request that does not fit earlier can start to fit.
    fn candidate_times(&self, now: i64) -> Vec<i64> {
        self.ends
            .range(now.saturating_add(1)..)
            .map(|(&t, _)| t)
            .collect()
    }

    /// Records the allocation the last `try_at` expanded, with what the expansion knows of
    /// its whole subtrees.
    fn record_expanded(
        &mut self,
        jobid: u64,
        state: JobState,
        alloc: Allocation,
    ) -> Result<Placement, MatchError> {
        let runs = self.marks.take_whole_runs();
        let placed = self.record(jobid, state, alloc, &runs);
        self.marks.return_whole_runs(runs);
        placed
    }

    /// Records `alloc` for `jobid`. `whole_runs` are the runs of its vertices that are whole
    /// subtrees copied from the template (`alloc::expand`), or empty: only the allocation
    /// just expanded may pass them.
    fn record(
        &mut self,
        jobid: u64,
        state: JobState,
        alloc: Allocation,
        whole_runs: &[(u32, u32)],
    ) -> Result<Placement, MatchError> {
        let spans = alloc::commit_expanded(&self.graph, &mut self.state, &alloc, whole_runs)?;
        *self.ends.entry(end_of(&alloc)).or_default() += 1;
        let at = alloc.at;
        self.jobs.insert(
            jobid,
            JobRecord {
                state,
                alloc,
                spans,
            },
        );
        Ok(match state {
            JobState::Allocated => Placement::Allocated { at },
            JobState::Reserved => Placement::Reserved { at },
        })
    }

    /// Removes job `jobid`'s allocation or reservation, restoring the calendars exactly.
    pub fn cancel(&mut self, jobid: u64) -> Result<(), MatchError> {
        let alloc = self.take(jobid)?;
        self.marks.give_back(alloc.vertices);
        Ok(())
    }

    /// As [`Matcher::cancel`], handing the allocation back instead of keeping its memory for
    /// a later match: for a caller that may put it back ([`Matcher::restore`]) or compare it
    /// with what replaces it, and would otherwise copy it first.
    pub fn take(&mut self, jobid: u64) -> Result<Allocation, MatchError> {
        let job = self
            .jobs
            .remove(&jobid)
            .ok_or(MatchError::NoSuchJob(jobid))?;
        let end = end_of(&job.alloc);
        if let Some(n) = self.ends.get_mut(&end) {
            *n -= 1;
            if *n == 0 {
                self.ends.remove(&end);
            }
        }
        for &s in &job.spans {
            self.state.remove(s)?;
        }
        Ok(job.alloc)
    }

    /// Hands back an allocation the caller is done with (one [`Matcher::run`] returned),
    /// so that its memory serves a later match instead of being freed and taken again.
    pub fn recycle(&mut self, alloc: Allocation) {
        self.marks.give_back(alloc.vertices);
    }

    /// The job `jobid`, if the matcher holds resources for it.
    pub fn job(&self, jobid: u64) -> Option<&JobRecord> {
        self.jobs.get(&jobid)
    }

    /// What job `jobid` takes from `v`'s aggregate: units of each of its types (in the
    /// aggregate's order), zeros when it takes none there. `None` when the job is unknown
    /// or `v` has no aggregate. Read from the job's calendar records, so it costs a few
    /// records, not a pass over the allocation's vertices.
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

    /// All jobs, by id.
    pub fn jobs(&self) -> impl Iterator<Item = (u64, &JobRecord)> {
        self.jobs.iter().map(|(k, v)| (*k, v))
    }

    /// Marks the vertex at `path` up or down; down vertices and their subtrees are skipped.
    pub fn set_status(&mut self, path: &str, status: Status) -> Result<(), MatchError> {
        let v = self.vertex(path)?;
        self.graph.set_status(v, status);
        Ok(())
    }

    /// The vertex at a containment path.
    pub fn vertex(&self, path: &str) -> Result<VertexId, MatchError> {
        self.graph
            .find_path(path)
            .ok_or_else(|| MatchError::NoSuchPath(path.to_string()))
    }
}

/// When an allocation's resources free up.
fn end_of(a: &Allocation) -> i64 {
    a.at.saturating_add(i64::try_from(a.duration).unwrap_or(i64::MAX))
}
