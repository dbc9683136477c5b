//! The queue manager's state and its inputs: submit, cancel, complete, availability and
//! priority changes. Scheduling itself is in [`crate::cycle`].
//!
//! Every input does only bookkeeping proportional to the job it is about, and records what it
//! may have changed for the next cycle: an early completion frees calendar time in the future
//! (reservations may move into it), an on-time one only lets blocked jobs be retried, an
//! arrival only needs itself considered. Jobs that leave the queue (completed, cancelled,
//! denied) are forgotten at once, so memory and per-cycle work follow the live jobs, never
//! the jobs ever seen.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use shardsched_jobspec::Jobspec;
use shardsched_matcher::{Matcher, PLAN_BASE, PruneFilters};
use shardsched_resource::{ResourceGraph, Status, VertexId};

use crate::cycle::Walk;
use crate::error::QueueError;
use crate::event::{DenyReason, Event, JobId, JobMap, JobRequest, JobView, WaitReason};
use crate::params::Params;
use crate::reservations::Reservations;
use crate::shapes::{NeedIndex, RootAgg, Shapes};
use crate::whole::WholeNodes;

/// Intervals of freed calendar time remembered between two cycles (each a job that ended
/// before its planned end, or a cancelled running job or reservation); beyond this many, the
/// next cycle re-plans every reservation instead of proving which ones stay.
pub const FREED_INTERVALS_MAX: usize = 1024;

/// Pending order: priority (higher first), then submit time, then arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) priority: Reverse<i64>,
    pub(crate) submit: i64,
    pub(crate) seq: u64,
}

/// A live job.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// With the effective duration filled in.
    pub(crate) jobspec: Jobspec,
    pub(crate) key: Key,
    pub(crate) shape: String,
    /// Units of each root-tracked type it needs (see [`RootAgg`]).
    pub(crate) needs: Vec<i64>,
    pub(crate) state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// In the pending order; `Reserved` when it holds a reservation in the matcher.
    Pending(WaitReason),
    /// Fits the definition but not what is up: outside the pending order.
    Waiting,
    /// Held by the caller (module `held`): outside the pending order and not considered,
    /// keeping its key so that it comes back to its place when released.
    Held,
    Running {
        start: i64,
        end: i64,
    },
}

/// Counters of what the queue manager did, for benches and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub cycles_idle: u64,
    pub cycles_continue: u64,
    pub cycles_retry: u64,
    pub cycles_replan: u64,
    /// Jobs looked at by cycles (reserved jobs kept across a cycle included).
    pub considered: u64,
    pub match_allocate: u64,
    pub match_reserve: u64,
    pub match_satisfiability: u64,
    /// Reservations cancelled by re-plans (to be reserved again, maybe elsewhere).
    pub reservations_replanned: u64,
    /// Reservations a re-plan proved would come back where they are, and left in place.
    pub reservations_kept: u64,
    /// Allocation attempts answered "no" by the root aggregates without a match.
    pub prefiltered: u64,
    /// Reservation searches for whole nodes started later than the root's aggregates
    /// allow, where enough nodes are untouched for the whole window (module `whole`).
    pub whole_node_skips: u64,
    pub started: u64,
    pub denied: u64,
}

/// One queue: its pending jobs in order, its matcher, and its policy. See the crate docs.
#[derive(Clone, Debug)]
pub struct QueueManager {
    pub(crate) params: Params,
    pub(crate) matcher: Matcher,
    /// A matcher over the definition that never holds a job: satisfiability at submit.
    pub(crate) definition: Matcher,
    pub(crate) jobs: JobMap<Job>,
    pub(crate) pending: BTreeMap<Key, JobId>,
    pub(crate) waiting: BTreeMap<Key, JobId>,
    /// Jobs held out of the pending order (module `held`).
    pub(crate) held: usize,
    /// Planned ends of running jobs' allocations.
    pub(crate) running_ends: BTreeSet<(i64, JobId)>,
    /// Reservations held in the matcher.
    pub(crate) reservations: Reservations,
    /// Ends of node holds (module `hold`): (end, hold id).
    pub(crate) hold_ends: BTreeSet<(i64, JobId)>,
    pub(crate) needs: NeedIndex,
    pub(crate) shapes: Shapes,
    pub(crate) root: RootAgg,
    /// The node vertices, for whole-node reservation searches (module `whole`).
    pub(crate) whole: WholeNodes,
    /// Where the last cycle's walk over the pending order ended.
    pub(crate) walk: Walk,
    /// The order, availability or a node hold changed: re-plan everything.
    pub(crate) replan: bool,
    /// Calendar time freed in the future since the last cycle, as `[start, end)` intervals:
    /// running jobs that ended (or were cancelled) before their planned end, cancelled
    /// reservations. The next cycle re-plans, keeping the reservations it can prove would
    /// come back where they are (module `keep`). At most [`FREED_INTERVALS_MAX`].
    pub(crate) freed: Vec<(i64, i64)>,
    /// Calendar time up to now was freed: retry blocked jobs, keep reservations.
    pub(crate) retry: bool,
    /// Smallest key that entered the pending order since the last cycle.
    pub(crate) arrivals: Option<Key>,
    /// Availability changes so far.
    pub(crate) epoch: u64,
    pub(crate) next_seq: u64,
    pub(crate) last_now: Option<i64>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) stats: Stats,
    /// Whether started events carry the allocation's vertices (see
    /// [`QueueManager::set_started_allocations`]).
    pub(crate) started_allocations: bool,
}

impl QueueManager {
    /// A queue over `graph` (its definition: vertices down in it are outside the queue for
    /// good; use [`QueueManager::set_availability`] for vertices that are merely down now),
    /// with the matcher's default prune filters (`ALL:core,ALL:node`).
    pub fn new(graph: ResourceGraph, params: Params) -> Result<QueueManager, QueueError> {
        QueueManager::with_filters(graph, params, &PruneFilters::default_filters())
    }

    /// As [`QueueManager::new`], with the given prune filters.
    pub fn with_filters(
        graph: ResourceGraph,
        params: Params,
        filters: &PruneFilters,
    ) -> Result<QueueManager, QueueError> {
        params.validate()?;
        let matcher = Matcher::new(graph, params.match_policy, filters);
        let definition = matcher.clone();
        let root = RootAgg::new(&matcher);
        let whole = WholeNodes::new(&matcher);
        Ok(QueueManager {
            params,
            definition,
            jobs: JobMap::default(),
            pending: BTreeMap::new(),
            waiting: BTreeMap::new(),
            held: 0,
            running_ends: BTreeSet::new(),
            reservations: Reservations::default(),
            hold_ends: BTreeSet::new(),
            needs: NeedIndex::new(root.types.len()),
            shapes: Shapes::default(),
            root,
            whole,
            matcher,
            walk: Walk::default(),
            replan: false,
            freed: Vec::new(),
            retry: false,
            arrivals: None,
            epoch: 0,
            next_seq: 0,
            last_now: None,
            events: VecDeque::new(),
            stats: Stats::default(),
            started_allocations: true,
        })
    }

    /// Takes a job in. It is denied (an [`Event::Denied`]) when its duration is above the
    /// maximum or it could never fit the definition; it waits outside the pending order when
    /// it fits the definition but not what is up now; otherwise it is pending and considered
    /// by the next [`QueueManager::schedule`].
    pub fn submit(&mut self, mut req: JobRequest) -> Result<(), QueueError> {
        let id = req.id;
        if self.jobs.contains_key(&id) {
            return Err(QueueError::DuplicateJob(id));
        }
        let asked = req.jobspec.attributes.duration;
        let Some(duration) = self.params.effective_duration(asked) else {
            let max = self.params.max_duration;
            self.deny(id, DenyReason::DurationAboveMax { asked, max });
            return Ok(());
        };
        req.jobspec.attributes.duration = duration;
        let needs = match self.root.needs(&self.matcher, &req.jobspec) {
            Ok(n) => n,
            Err(e) => {
                self.deny(id, DenyReason::Invalid(e.to_string()));
                return Ok(());
            }
        };
        let shape = Shapes::key(&req.jobspec);
        let now = req.submit_time;
        if !self.fits_definition(&needs, &shape, &req.jobspec, now)? {
            self.deny(id, DenyReason::Unsatisfiable);
            return Ok(());
        }
        let key = self.insert_job(req, shape, needs, State::Waiting);
        self.waiting.insert(key, id);
        self.admit_if_up(id, now)
    }

    /// Whether a request (its `needs`, `shape` and jobspec) could ever fit the queue's
    /// definition, with everything up and free.
    pub(crate) fn fits_definition(
        &mut self,
        needs: &[i64],
        shape: &str,
        jobspec: &Jobspec,
        now: i64,
    ) -> Result<bool, QueueError> {
        Ok(self.root.within_totals(needs)
            && self.shapes.fits_definition(
                shape,
                jobspec,
                &mut self.definition,
                now,
                &mut self.stats.match_satisfiability,
            )?)
    }

    pub(crate) fn deny(&mut self, id: JobId, reason: DenyReason) {
        self.stats.denied += 1;
        self.events.push_back(Event::Denied { id, reason });
    }

    /// Cancels a pending, waiting or running job.
    pub fn cancel(&mut self, id: JobId) -> Result<(), QueueError> {
        self.forget_live(id)?;
        self.events.push_back(Event::Cancelled { id });
        Ok(())
    }

    /// Takes job `id` out of the queue, whatever its state, giving back what it holds (no
    /// event: the caller says why it went).
    pub(crate) fn forget_live(&mut self, id: JobId) -> Result<(), QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let key = job.key;
        match job.state {
            State::Pending(_) => {
                let window = self.reservations.get(id).map(|r| (r.at, r.end));
                self.leave_pending(id)?;
                if let Some((at, end)) = window {
                    // Jobs behind it lose a reservation from their view: its window is freed.
                    self.free_interval(at, end);
                } else {
                    // The queue-depth window or the fcfs head may have moved.
                    self.retry = true;
                }
            }
            State::Waiting => {
                self.waiting.remove(&key);
            }
            State::Held => self.held -= 1,
            State::Running { end, .. } => {
                self.matcher.cancel(id)?;
                self.running_ends.remove(&(end, id));
                self.freed(end, self.last_now.unwrap_or(PLAN_BASE));
            }
        }
        self.jobs.remove(&id);
        Ok(())
    }

    /// Job `id` ended at `now`: its resources are free. Ending before its planned end frees
    /// calendar time that reservations may move into.
    pub fn complete(&mut self, id: JobId, now: i64) -> Result<(), QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let State::Running { end, .. } = job.state else {
            return Err(QueueError::NotRunning(id));
        };
        self.matcher.cancel(id)?;
        self.running_ends.remove(&(end, id));
        self.jobs.remove(&id);
        self.freed(end, now);
        self.events.push_back(Event::Completed { id, at: now });
        self.recheck_waiting(now)
    }

    /// Marks vertex `v` (and so its subtree) up or down. Running jobs are not touched;
    /// reservations are re-planned; pending jobs that no longer fit what is up move aside,
    /// waiting ones that fit again come back.
    pub fn set_availability(&mut self, v: VertexId, up: bool) -> Result<(), QueueError> {
        if v.index() >= self.matcher.graph.len() {
            return Err(QueueError::NoSuchVertex(v.0));
        }
        let status = if up { Status::Up } else { Status::Down };
        if self.matcher.graph.status(v) == status {
            return Ok(());
        }
        self.matcher.graph.set_status(v, status);
        self.availability_changed(self.last_now.unwrap_or(0))
    }

    /// What is up changed (a vertex's availability, the graph itself): reservations are
    /// re-planned; pending jobs that no longer fit what is up move aside, waiting ones that
    /// fit again come back.
    pub(crate) fn availability_changed(&mut self, now: i64) -> Result<(), QueueError> {
        self.epoch += 1;
        self.replan = true;
        let ids: Vec<JobId> = self.pending.values().copied().collect();
        for id in ids {
            if !self.jobs.contains_key(&id) {
                continue;
            }
            if !self.fits_up(id, now)? {
                let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
                let reserved = matches!(job.state, State::Pending(WaitReason::Reserved { .. }));
                self.leave_pending(id)?;
                let job = self.job_mut(id)?;
                job.state = State::Waiting;
                let key = job.key;
                self.waiting.insert(key, id);
                // Its reservation went with the resources: say so, or the caller would
                // keep showing a start time that no longer holds.
                if reserved {
                    self.events.push_back(Event::Unreserved { id });
                }
            }
        }
        self.recheck_waiting(now)
    }

    /// Changes a pending, waiting or held job's priority.
    pub fn set_priority(&mut self, id: JobId, priority: i64) -> Result<(), QueueError> {
        let job = self.jobs.get_mut(&id).ok_or(QueueError::NoSuchJob(id))?;
        let old = job.key;
        let new = Key {
            priority: Reverse(priority),
            ..old
        };
        job.key = new;
        match job.state {
            State::Pending(_) => {
                self.pending.remove(&old);
                self.pending.insert(new, id);
                self.replan = true;
            }
            State::Waiting => {
                self.waiting.remove(&old);
                self.waiting.insert(new, id);
            }
            State::Held => {}
            State::Running { .. } => {
                job.key = old;
                return Err(QueueError::NotPending(id));
            }
        }
        Ok(())
    }

    /// Whether [`Event::Started`] carries the job's allocation (on by default). A caller that
    /// never reads where jobs run (workload replay) turns it off and saves a copy of every
    /// allocation, a whole-node job listing every vertex of its nodes: the event's
    /// allocation then has its start and duration and no vertices. The matcher holds the
    /// allocation either way ([`QueueManager::matcher`]).
    pub fn set_started_allocations(&mut self, on: bool) {
        self.started_allocations = on;
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Where job `id` is, if it is live.
    pub fn job(&self, id: JobId) -> Option<JobView> {
        let job = self.jobs.get(&id)?;
        Some(match job.state {
            // A job the last walk went past without a word (it stopped matching once nothing
            // could fit) was found not to fit.
            State::Pending(WaitReason::Queued) if self.walk.passed(job.key) => JobView::Pending {
                reason: WaitReason::Resources,
            },
            State::Pending(reason) => JobView::Pending { reason },
            State::Waiting => JobView::Pending {
                reason: WaitReason::Unavailable,
            },
            State::Held => JobView::Pending {
                reason: WaitReason::Held,
            },
            State::Running { start, end } => JobView::Running { start, end },
        })
    }

    /// Jobs in the pending order (waiting ones not counted).
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Jobs that fit the definition but not what is up.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// The running jobs whose allocation's span has ended by `now`: ones still running past
    /// it (their executor has not reported their end yet). Their resources are free in the
    /// calendar from that end, so a caller that runs real processes keeps their nodes out of
    /// reach until the end is reported.
    pub fn running_past(&self, now: i64) -> impl Iterator<Item = JobId> + '_ {
        self.running_ends
            .range(..=(now, JobId::MAX))
            .map(|&(_, id)| id)
    }

    pub fn running_len(&self) -> usize {
        self.running_ends.len()
    }

    /// Reservations now held: (job, start), earliest first.
    pub fn reservations(&self) -> impl Iterator<Item = (JobId, i64)> + '_ {
        self.reservations.by_start().map(|(at, id)| (id, at))
    }

    /// Pending jobs in the order the next cycle considers them.
    pub fn pending_order(&self) -> impl Iterator<Item = JobId> + '_ {
        self.pending.values().copied()
    }

    /// The matcher: graph, calendars, allocations and reservations.
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A running job planned to end at `end` stopped holding its resources at `now`.
    fn freed(&mut self, end: i64, now: i64) {
        if end > now {
            self.free_interval(now, end);
        } else {
            // Nothing after `now` changed: blocked jobs may be retried, nothing re-planned.
            self.retry = true;
        }
    }

    /// Calendar time `[start, end)` was freed: the next cycle re-plans what it may change.
    fn free_interval(&mut self, start: i64, end: i64) {
        if self.freed.len() >= FREED_INTERVALS_MAX {
            self.replan = true;
        } else {
            self.freed.push((start, end));
        }
    }

    pub(crate) fn job_mut(&mut self, id: JobId) -> Result<&mut Job, QueueError> {
        self.jobs.get_mut(&id).ok_or(QueueError::NoSuchJob(id))
    }

    /// Takes a pending job out of the order (and its reservation out of the matcher).
    pub(crate) fn leave_pending(&mut self, id: JobId) -> Result<(), QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let key = job.key;
        if let State::Pending(WaitReason::Reserved { .. }) = job.state {
            self.matcher.cancel(id)?;
            self.reservations.remove(id);
        }
        self.needs.remove(&job.needs);
        self.pending.remove(&key);
        Ok(())
    }

    /// Records job `req` (its jobspec with the effective duration filled in) in `state`,
    /// under the next key of the queue's order: priority, then submit time, then arrival.
    pub(crate) fn insert_job(
        &mut self,
        req: JobRequest,
        shape: String,
        needs: Vec<i64>,
        state: State,
    ) -> Key {
        let key = Key {
            priority: Reverse(req.priority),
            submit: req.submit_time,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let job = Job {
            jobspec: req.jobspec,
            key,
            shape,
            needs,
            state,
        };
        self.jobs.insert(req.id, job);
        key
    }

    /// Whether what is up now can hold job `id` (cached per shape and availability epoch).
    fn fits_up(&mut self, id: JobId, now: i64) -> Result<bool, QueueError> {
        let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
        let fits = self.shapes.fits_up(
            &job.shape,
            &job.jobspec,
            &mut self.matcher,
            self.epoch,
            now,
            &mut self.stats.match_satisfiability,
        )?;
        Ok(fits)
    }

    /// Moves waiting job `id` into the pending order if what is up can hold it.
    pub(crate) fn admit_if_up(&mut self, id: JobId, now: i64) -> Result<(), QueueError> {
        if self.fits_up(id, now)? {
            let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
            let key = job.key;
            self.needs.insert(&job.needs);
            self.waiting.remove(&key);
            self.pending.insert(key, id);
            self.arrivals = Some(self.arrivals.map_or(key, |a| a.min(key)));
            self.job_mut(id)?.state = State::Pending(WaitReason::Queued);
        }
        Ok(())
    }

    /// Retries every waiting job (cheap: the answer is cached per shape and availability).
    fn recheck_waiting(&mut self, now: i64) -> Result<(), QueueError> {
        let ids: Vec<JobId> = self.waiting.values().copied().collect();
        for id in ids {
            self.admit_if_up(id, now)?;
        }
        Ok(())
    }
}
