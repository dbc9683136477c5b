//! One match from start to end, as Fluxion's `dfu_traverser_t::run` does it: the checks of
//! the request, the node-count precheck, a select now, the fallbacks of each operation
//! (reservation search, the far-horizon satisfiability check), then the update.

use shardsched_jobspec::Jobspec;
use shardsched_resource::{Status, VertexId};

use crate::alloc::LEVEL_DRIFT_MAX;
use crate::dfu::{Errno, Walk, WalkKind, Window};
use crate::request::Request;
use crate::state::PLAN_BASE;
use crate::{AllocVertex, Allocation, Depth, JobState, MatchError, Matcher, Placement};

/// resource-query's match operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FluxionOp {
    Allocate,
    AllocateWithSatisfiability,
    AllocateOrElseReserve,
    Satisfiability,
    /// Match now and report it, recording nothing.
    WithoutAllocating,
    /// Match now or at the earliest time, recording nothing.
    WithoutAllocatingFuture,
}

impl FluxionOp {
    /// Parses resource-query's spelling.
    pub fn parse(s: &str) -> Option<FluxionOp> {
        Some(match s {
            "allocate" => FluxionOp::Allocate,
            "allocate_with_satisfiability" => FluxionOp::AllocateWithSatisfiability,
            "allocate_orelse_reserve" => FluxionOp::AllocateOrElseReserve,
            "satisfiability" => FluxionOp::Satisfiability,
            "without_allocating" => FluxionOp::WithoutAllocating,
            "without_allocating_future" => FluxionOp::WithoutAllocatingFuture,
            _ => return None,
        })
    }

    fn records(self) -> bool {
        !matches!(
            self,
            FluxionOp::WithoutAllocating
                | FluxionOp::WithoutAllocatingFuture
                | FluxionOp::Satisfiability
        )
    }
}

/// The answer of [`Matcher::schedule`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryOutcome {
    /// Held now (the allocation is the job's; also in [`Matcher::job`]).
    Allocated(i64, Allocation),
    /// Held from a later time.
    Reserved(i64, Allocation),
    /// Matched at this time, nothing recorded (`without_allocating*`).
    Matched(i64, Allocation),
    /// Nothing found; `unsatisfiable` when resource-query prints "Unsatisfiable request".
    NoMatch { unsatisfiable: bool },
    /// The answer of `satisfiability`.
    Satisfiable(bool),
}

impl Matcher {
    /// Runs `op` for `js` as job `jobid` at `now`, as resource-query does. An error is a
    /// request Fluxion refuses before matching (no job id is consumed then).
    pub fn schedule(
        &mut self,
        op: FluxionOp,
        js: &Jobspec,
        jobid: u64,
        now: i64,
    ) -> Result<QueryOutcome, MatchError> {
        // Fluxion's `run` starts with its traverser's messages cleared.
        if let Some(text) = self.complaints.as_mut() {
            text.clear();
        }
        self.schedule_as(op, js, jobid, now, true)
    }

    /// As [`Matcher::schedule`] with `fluxion`; without it (the shards' use): a type
    /// Fluxion does not know matches nothing instead of refusing the request, satisfiability
    /// keeps vertices that are down out, there is no node-count precheck (it reads a
    /// count of up nodes that callers changing status directly would leave behind), and a
    /// jobspec with or-slots or `xor_slot`s gets the flexible traverser by itself, and an
    /// allocated or reserved outcome carries an empty vertex list (the job record has it).
    pub(crate) fn schedule_as(
        &mut self,
        op: FluxionOp,
        js: &Jobspec,
        jobid: u64,
        now: i64,
        fluxion: bool,
    ) -> Result<QueryOutcome, MatchError> {
        let sat_kind = if fluxion {
            WalkKind::Satisfiability
        } else {
            WalkKind::SatisfiabilityUp
        };
        // resource-query hands the traverser a job id again when a match succeeded but its
        // writer failed (the id was not consumed): Fluxion matches anyway, and the job then
        // holds both (see `record_as`).
        if op.records() && self.jobs.contains_key(&jobid) && !fluxion {
            return Err(MatchError::DuplicateJob(jobid));
        }
        let compiled = self.compile_cached(js, fluxion, self.flexible_for(js, fluxion))?;
        let req: &Request = &compiled;
        if req.top.is_empty() {
            return Err(MatchError::BadRequest(
                "the jobspec has no resources".into(),
            ));
        }
        let g_duration = u64::try_from(self.graph_end - PLAN_BASE).unwrap_or(0);
        if req.duration > g_duration {
            return Err(MatchError::BadRequest(format!(
                "duration {} is longer than the graph's planning period ({g_duration} s)",
                req.duration
            )));
        }
        let mut dur = if req.duration == 0 {
            g_duration
        } else {
            req.duration
        };
        // Fluxion's errno for this command: resource-query's prompt leaves ENOTTY (here
        // `None`), then each step may set its own.
        self.errno = Errno::None;
        if op == FluxionOp::Satisfiability {
            let sat = self.far_select(req, dur, sat_kind);
            self.visits.set_to_last();
            return Ok(QueryOutcome::Satisfiable(sat));
        }
        if fluxion && let Err(e) = self.feasible(op, req, now, dur) {
            self.errno = e;
            return Ok(self.no_match());
        }
        let first_kind = if op.records() {
            WalkKind::Allocate
        } else {
            WalkKind::NoAllocate
        };
        // Fluxion's errno before the select that finds the time (see `search`).
        let mut errno_before = self.errno;
        let mut found = self.select(req, now, now, dur, first_kind).then_some(now);
        let mut reserve = false;
        // The kind of walk that found `found`.
        let mut found_by = first_kind;
        if found.is_some() {
            self.visits.set_to_last();
        } else {
            match op {
                FluxionOp::AllocateWithSatisfiability => {
                    self.errno = Errno::Busy;
                    self.far_select(req, dur, sat_kind);
                    self.visits.add(self.visits.last);
                    return Ok(self.no_match());
                }
                FluxionOp::AllocateOrElseReserve | FluxionOp::WithoutAllocatingFuture => {
                    let kind = if op == FluxionOp::AllocateOrElseReserve {
                        reserve = true;
                        WalkKind::Reserve
                    } else {
                        WalkKind::NoAllocate
                    };
                    self.visits.since = (0, 0);
                    found_by = kind;
                    let searched = self.search_times(req, now, dur, kind);
                    self.visits.add(self.visits.since);
                    match searched {
                        Some(f) => {
                            found = Some(f.at);
                            errno_before = f.errno_before;
                        }
                        None => {
                            // No time left: Fluxion asks whether it could ever fit.
                            if matches!(self.errno, Errno::NoEnt | Errno::Range) {
                                self.errno = Errno::Busy;
                                self.far_select(req, dur, sat_kind);
                            } else {
                                self.visits.add(self.visits.last);
                            }
                            return Ok(self.no_match());
                        }
                    }
                }
                _ => {
                    self.errno = Errno::Busy;
                    return Ok(self.no_match());
                }
            }
        }
        let at = found.unwrap_or(now);
        if at == self.graph_end {
            // Fluxion: no schedulable point before the end of the graph's time.
            self.errno = Errno::Busy;
            return Ok(self.no_match());
        }
        if at > self.graph_end || at < PLAN_BASE {
            return Err(MatchError::BadRequest(format!(
                "no time before the end of the planning period ({})",
                self.graph_end
            )));
        }
        if crate::saturating_end(at, dur) > self.graph_end {
            dur = u64::try_from(self.graph_end - at).unwrap_or(0);
        }
        let mut whole = req.exclusive_types.clone();
        if self.policy.node_exclusive
            && let Some(node) = self.graph.sym("node")
            && !whole.contains(&node)
        {
            whole.push(node);
        }
        let mut ranges = std::mem::take(&mut self.commit_scratch.whole_ranges);
        let mut alloc = crate::update::emission(
            &self.graph,
            crate::tree_of(&self.graph, &self.subtree),
            &self.marks,
            &whole,
            (self.last_recorded, &mut self.spares),
            &mut self.state,
            &mut ranges,
            (at, dur),
        );
        if alloc.is_empty() {
            // Nothing taken exclusively: the update fails, leaving the select's errno — which
            // the vertices a best-first walk skipped may have set: walk again visiting all,
            // from the errno Fluxion had before that select. After a reservation search,
            // Fluxion's loop then asked for the following time (`search`: ENOENT when there
            // is none, random differential seed 62677; EBUSY when one was turned away on
            // the way, seed 55038).
            self.errno = errno_before;
            self.exhaustive = true;
            self.select(req, at, now, dur, found_by);
            self.exhaustive = false;
            if at != now {
                self.ask_following_time(&self.root_need(req), at, dur);
            }
            return Ok(self.no_match());
        }
        if !op.records() {
            if let Some(order) = self.order.as_mut().filter(|_| fluxion) {
                let tree = crate::tree_of(&self.graph, &self.subtree);
                for av in &alloc {
                    let scratch = self.walk_scratch.as_mut();
                    crate::learn_weight(tree, &self.state, order, scratch, av.v, now);
                }
            }
            if fluxion && self.level_drift > 0 {
                for av in alloc.vertices_mut() {
                    av.depth += self.level_drift;
                }
            }
            return Ok(QueryOutcome::Matched(at, alloc));
        }
        let state = if reserve && at != now {
            JobState::Reserved
        } else {
            JobState::Allocated
        };
        // `first` learns its sticky child order from every match, reading free amounts at
        // the match's "now" (0 in resource-query) even for a reservation. The shards do not
        // learn: a queue re-plans its reservations as often as it likes and skips unchanged
        // work, and neither may change where later jobs go.
        let learn = if fluxion { Some(now) } else { None };
        if !fluxion && req.flexible && !self.takes_only_free(&alloc) {
            // The flexible traverser, as Fluxion's, may choose a vertex exclusively that
            // another job uses (a `node` inside an `xor_slot`: seeds 2107 and 2857 of the
            // generated cases); resource-query keeps Fluxion's answer, a queue never
            // holds a vertex twice.
            self.errno = Errno::Busy;
            return Ok(self.no_match());
        }
        let listed = alloc.len();
        let (held_at, held_for) = (alloc.at, alloc.duration);
        // For the commit of exactly this list (it takes them back).
        self.commit_scratch.whole_ranges = ranges;
        let placed = self.record_match(jobid, state, alloc, learn)?;
        let taken = self.last_recorded;
        if fluxion && let Some(job) = self.jobs.get_mut(&jobid) {
            // A vertex its calendar refused has no tag of the job in Fluxion: its cancel
            // walk stops there, and what lies below it stays taken (`Matcher::take`). One
            // only its pruning filter refused is tagged, and held: listed with the job after
            // what the match wrote. A queue gives back all a job holds.
            job.partial |= self.refused.iter().any(|r| !r.tagged);
            // Fluxion's walk level is not restored at a vertex whose calendar refused it,
            // and the level is the writers' indentation from then on, in every later walk.
            if self.level_drift > 0 {
                for av in &mut job.alloc.vertices_mut()[..taken] {
                    av.depth += self.level_drift;
                }
            }
            let tagged = self.refused.iter().filter(|r| r.tagged);
            job.alloc.vertices_mut().extend(tagged.map(|r| AllocVertex {
                depth: r.vertex.depth + self.level_drift,
                ..r.vertex
            }));
            let refused = Depth::try_from(listed - taken).unwrap_or(Depth::MAX);
            self.level_drift = self
                .level_drift
                .saturating_add(refused)
                .min(LEVEL_DRIFT_MAX);
        }
        // Without `fluxion`, [`Matcher::place`] reads the allocation from the job record:
        // no copy for it.
        let held = self
            .jobs
            .get(&jobid)
            .filter(|_| fluxion)
            .map(|j| {
                Allocation::new(
                    j.alloc.vertices()[..taken].to_vec(),
                    j.alloc.at,
                    j.alloc.duration,
                )
            })
            .unwrap_or(Allocation::window(held_at, held_for));
        Ok(match placed {
            Placement::Reserved { at } => QueryOutcome::Reserved(at, held),
            _ => QueryOutcome::Allocated(at, held),
        })
    }

    /// One select at `at`; leaves its marks for the update.
    pub(crate) fn select(
        &mut self,
        req: &Request,
        at: i64,
        now: i64,
        dur: u64,
        kind: WalkKind,
    ) -> bool {
        self.walk(req, at, now, dur, kind).0
    }

    /// One select; returns whether it succeeded and its errno. A request with xor slots
    /// under the flexible traverser is tried alternative by alternative until one succeeds.
    fn walk(
        &mut self,
        req: &Request,
        at: i64,
        now: i64,
        dur: u64,
        kind: WalkKind,
    ) -> (bool, Errno) {
        if req.flexible && req.has_xor {
            if req.alternatives.is_empty() {
                // Too many alternatives: Fluxion's EOVERFLOW refuses the request.
                self.errno = Errno::Inval;
                return (false, Errno::Inval);
            }
            let mut last = (false, Errno::None);
            for alt in &req.alternatives {
                last = self.walk_one(alt, at, now, dur, kind);
                if last.0 {
                    break;
                }
            }
            return last;
        }
        self.walk_one(req, at, now, dur, kind)
    }

    fn walk_one(
        &mut self,
        req: &Request,
        at: i64,
        now: i64,
        dur: u64,
        kind: WalkKind,
    ) -> (bool, Errno) {
        self.seq += 1;
        // Fluxion's guard against overrunning jobs applies to a select at now for an
        // allocation or a match without one (`Walk::refuse_allocated`).
        let allocated = (at == now && matches!(kind, WalkKind::Allocate | WalkKind::NoAllocate))
            .then(|| self.allocated_not_now(now))
            .flatten();
        let scratch = self.walk_scratch.take().unwrap_or_default();
        let mut w = Walk::new(
            &self.graph,
            crate::tree_of(&self.graph, &self.subtree),
            &self.state,
            req,
            &self.types,
            self.policy,
            Window { at, now, dur, kind },
            &self.score_order,
            self.order.as_ref(),
            &mut self.marks,
            &mut self.labels,
            self.seq,
            scratch,
        );
        let complaints = self.complaints.take();
        if self.visits.on || self.aggregates_leaked || (complaints.is_some() && req.may_complain())
        {
            w.exact_visits();
        } else if self.exhaustive {
            w.no_budgets();
        }
        if let Some(text) = complaints {
            w.complain_into(text);
        }
        if let Some(a) = &allocated {
            w.refuse_allocated(a);
        }
        if crate::tree_of(&self.graph, &self.subtree).is_dag() {
            w.with_dag(self.dag_state.take().unwrap_or_else(|| {
                Box::new(crate::dfu::DagState {
                    visited: Vec::new(),
                    via: Vec::new(),
                })
            }));
        }
        let ok = w.select();
        self.visits.select(w.visits);
        self.complaints = w.take_complaints();
        if let Some(d) = w.take_dag() {
            self.dag_state = Some(d);
        }
        let errno = w.errno;
        self.walk_scratch = Some(w.into_scratch());
        if errno != Errno::None {
            self.errno = errno;
        }
        (ok, errno)
    }

    /// The far-horizon check: could the request fit the graph with nothing allocated and
    /// status ignored? A failure turns "busy" into "can never fit" (ENODEV).
    fn far_select(&mut self, req: &Request, dur: u64, kind: WalkKind) -> bool {
        let at = self.graph_end;
        let ok = self.select(req, at, at, dur, kind);
        if !ok && matches!(self.errno, Errno::Busy | Errno::Range) {
            self.errno = Errno::NoDev;
        }
        ok
    }

    /// The errno the last [`Matcher::schedule`] ended with: what resource-query's output
    /// depends on (busy: the job id is consumed; unsatisfiable: consumed, and said so;
    /// anything else: the request counts as refused, its id is not consumed).
    pub fn last_errno(&self) -> Errno {
        self.errno
    }

    fn no_match(&self) -> QueryOutcome {
        QueryOutcome::NoMatch {
            unsatisfiable: self.errno == Errno::NoDev,
        }
    }

    /// Fluxion's `request_feasible`: enough nodes up (and, with a constraint, enough
    /// admitted and free) for the nodes the request names?
    fn feasible(&self, op: FluxionOp, req: &Request, at: i64, dur: u64) -> Result<(), Errno> {
        let Some(node) = self.graph.sym("node") else {
            return Ok(());
        };
        let node_rank = self.types.rank(node);
        let target = if self.prune.is_pruning(node_rank) {
            Request::amount(&req.totals, node_rank).unwrap_or(0)
        } else {
            0
        };
        let checking_sat = op == FluxionOp::AllocateWithSatisfiability;
        let fail = if checking_sat {
            Errno::NoDev
        } else {
            Errno::Busy
        };
        if req.constraint.is_none() && target <= self.nodes_up {
            return Ok(());
        }
        if target > self.nodes_up {
            return Err(fail);
        }
        let Some(c) = &req.constraint else {
            return Ok(());
        };
        let target_time = if matches!(op, FluxionOp::Allocate | FluxionOp::WithoutAllocating) {
            at
        } else {
            self.graph_end - 1
        };
        let g = &self.graph;
        let mut feasible = 0;
        for v in g.vertices() {
            if feasible >= target {
                break;
            }
            if g.kind(v) != node || !c.admits(g, v) {
                continue;
            }
            if !checking_sat && g.status(v) != Status::Up {
                continue;
            }
            if self.state.units_free(v, g.size(v), target_time, dur) == 1 {
                feasible += 1;
            }
        }
        if feasible < target {
            return Err(fail);
        }
        Ok(())
    }

    /// Whether `js` would be allocated on this graph with nothing held and status ignored:
    /// the far-horizon select succeeds *and* takes some vertex exclusively. (Fluxion's
    /// `satisfiability` asks only the first: a request that takes nothing exclusively is
    /// satisfiable yet never allocated.)
    pub fn allocatable_when_empty(&mut self, js: &Jobspec) -> Result<bool, MatchError> {
        let compiled = self.compile_cached(js, false, self.flexible_for(js, false))?;
        let req: &Request = &compiled;
        let dur = if req.duration == 0 { 1 } else { req.duration };
        if !self.far_select(req, dur, WalkKind::Satisfiability) {
            return Ok(false);
        }
        let mut whole = req.exclusive_types.clone();
        if self.policy.node_exclusive
            && let Some(node) = self.graph.sym("node")
        {
            whole.push(node);
        }
        let listed = crate::update::emission(
            &self.graph,
            crate::tree_of(&self.graph, &self.subtree),
            &self.marks,
            &whole,
            (0, &mut self.spares),
            &mut self.state,
            &mut Vec::new(),
            (0, dur),
        );
        let some = !listed.is_empty();
        self.spares.give_back(listed);
        Ok(some)
    }

    /// Whether no job touches a vertex `alloc` takes exclusively, over its window.
    fn takes_only_free(&self, alloc: &Allocation) -> bool {
        alloc
            .iter()
            .all(|av| !av.exclusive || self.state.untouched(av.v, alloc.at, alloc.duration))
    }

    /// Whether `js` is matched by the flexible traverser: when chosen (`-T flexible`), and
    /// outside resource-query's rules (`fluxion` false: the shards) for a jobspec that
    /// offers alternatives (or-slots, `xor_slot`), which only the flexible traverser
    /// matches. Other jobspecs keep the simple traverser's answers there.
    fn flexible_for(&self, js: &Jobspec, fluxion: bool) -> bool {
        self.flexible || (!fluxion && js.has_alternatives())
    }

    /// The vertex a walk starts from.
    pub fn root(&self) -> VertexId {
        self.graph.root()
    }
}
