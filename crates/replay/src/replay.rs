//! Replaying a workload through the real queue manager and matcher, in virtual time.
//!
//! There is no model of the scheduler here: each SWF job becomes a jobspec and is submitted
//! to a [`QueueManager`] at its submit time; the queue manager decides, the matcher places.
//! Virtual time jumps from event to event. At each timestamp, in this order: jobs whose run
//! ends are completed, jobs submitted then arrive, and one scheduling cycle runs. A job that
//! starts at `t` ends at `t + run`, its run time capped at its requested time (the duration
//! the scheduler planned with); a job that ends before its requested time frees its
//! resources early, and the next cycle re-plans reservations into the gap.
//!
//! `--unit node`: an SWF processor is a whole node (jobspec `node[p]`, exclusive, one slot
//! each). `--unit core`: it is a core (`slot[p] -> core[1]`, as `flux submit -n p`).
//!
//! Scheduler time is the wall time spent inside the queue manager's inputs and cycles (and
//! so in the matcher), measured around each call; building jobspecs and the replay's own
//! bookkeeping are not counted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use shardsched_jobspec::{JobspecError, Shorthand};
use shardsched_resource::ResourceGraph;

use shardsched_qmanager::{Event, JobRequest, Params, QueueError, QueueManager};

use crate::swf::{Fate, Workload};

/// What one SWF processor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Core,
    Node,
}

impl std::str::FromStr for Unit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "core" => Ok(Unit::Core),
            "node" => Ok(Unit::Node),
            _ => Err(format!("unknown unit {s:?}; expected core or node")),
        }
    }
}

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("job on line {line}: {source}")]
    Jobspec { line: usize, source: JobspecError },
    #[error(transparent)]
    Queue(#[from] QueueError),
}

/// What happened to one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobResult {
    pub submit: i64,
    /// Seconds it really ran (run time capped at the requested time; 0 when unknown).
    pub run: i64,
    /// Processors (nodes or cores, by unit); 0 when unknown.
    pub procs: u64,
    pub start: Option<i64>,
    /// The start of the first reservation it was given, if any.
    pub first_reservation: Option<i64>,
    /// Why it never ran, when it did not.
    pub not_run: Option<String>,
}

impl JobResult {
    /// For [`crate::swf::write_with_waits`].
    pub fn fate(&self) -> Fate {
        match self.start {
            Some(s) => Fate::Waited(s - self.submit),
            None => Fate::NotRun,
        }
    }
}

/// A replay in progress; drive it with [`Replay::step`] until it returns `false`.
#[derive(Debug)]
pub struct Replay<'w> {
    workload: &'w Workload,
    unit: Unit,
    qm: QueueManager,
    /// Job indices in arrival order: submit time, then file order.
    order: Vec<usize>,
    next: usize,
    completions: BinaryHeap<Reverse<(i64, u64)>>,
    results: Vec<JobResult>,
    capacity: u64,
    /// Virtual time is SWF time minus this (≤ 0), so that it never runs before the
    /// matcher's planning window starts at 0.
    origin: i64,
    scheduler_time: Duration,
    done: bool,
}

impl<'w> Replay<'w> {
    /// A replay of `workload` on `graph`.
    pub fn new(
        graph: ResourceGraph,
        workload: &'w Workload,
        unit: Unit,
        params: Params,
    ) -> Result<Replay<'w>, ReplayError> {
        let capacity = capacity(&graph, unit);
        let mut qm = QueueManager::new(graph, params)?;
        // Replay reads when jobs start, never where: started events need no vertex lists.
        qm.set_started_allocations(false);
        let mut order: Vec<usize> = (0..workload.jobs.len()).collect();
        order.sort_by_key(|&i| workload.jobs[i].submit);
        let origin = workload
            .jobs
            .iter()
            .map(|j| j.submit)
            .min()
            .unwrap_or(0)
            .min(0);
        let results = workload
            .jobs
            .iter()
            .map(|j| JobResult {
                submit: j.submit,
                run: j.actual_run().unwrap_or(0),
                procs: j.procs().unwrap_or(0),
                start: None,
                first_reservation: None,
                not_run: None,
            })
            .collect();
        Ok(Replay {
            workload,
            unit,
            qm,
            order,
            next: 0,
            completions: BinaryHeap::new(),
            results,
            capacity,
            origin,
            scheduler_time: Duration::ZERO,
            done: false,
        })
    }

    /// Processes the next timestamp; `false` once every job has ended or can never start.
    pub fn step(&mut self) -> Result<bool, ReplayError> {
        if self.done {
            return Ok(false);
        }
        let arrival = self.order.get(self.next).map(|&i| self.virtual_submit(i));
        let completion = self.completions.peek().map(|r| r.0.0);
        let now = match (arrival, completion) {
            (None, None) => {
                self.finish();
                return Ok(false);
            }
            (Some(a), Some(c)) => a.min(c),
            (Some(t), None) | (None, Some(t)) => t,
        };
        let clock = Instant::now();
        while let Some(&Reverse((end, id))) = self.completions.peek()
            && end == now
        {
            self.completions.pop();
            self.qm.complete(id, now)?;
        }
        self.scheduler_time += clock.elapsed();
        while let Some(&i) = self.order.get(self.next)
            && self.virtual_submit(i) == now
        {
            self.next += 1;
            self.submit(i)?;
        }
        let clock = Instant::now();
        self.qm.schedule(now)?;
        self.scheduler_time += clock.elapsed();
        while let Some(e) = self.qm.poll_event() {
            self.record(e);
        }
        Ok(true)
    }

    /// Steps to the end.
    pub fn run(&mut self) -> Result<(), ReplayError> {
        while self.step()? {}
        Ok(())
    }

    fn submit(&mut self, i: usize) -> Result<(), ReplayError> {
        let job = &self.workload.jobs[i];
        let (Some(procs), Some(duration)) = (job.procs(), job.planned_duration()) else {
            self.results[i].not_run = Some(match job.procs() {
                None => "no processor count".into(),
                Some(_) => "neither run time nor requested time".into(),
            });
            return Ok(());
        };
        let mut sh = Shorthand {
            duration,
            command: vec!["swf-job".into()],
            ..Shorthand::default()
        };
        match self.unit {
            Unit::Node => sh.nodes = Some(procs),
            Unit::Core => sh.tasks = Some(procs),
        }
        let jobspec = sh.to_jobspec().map_err(|source| ReplayError::Jobspec {
            line: job.line + 1,
            source,
        })?;
        let req = JobRequest {
            id: i as u64,
            jobspec,
            priority: 0,
            submit_time: job.submit.saturating_sub(self.origin),
            user: u32::try_from(job.user).unwrap_or(0),
        };
        let clock = Instant::now();
        let r = self.qm.submit(req);
        self.scheduler_time += clock.elapsed();
        r?;
        Ok(())
    }

    fn record(&mut self, e: Event) {
        let id = e.id();
        let Ok(i) = usize::try_from(id) else {
            return;
        };
        let Some(r) = self.results.get_mut(i) else {
            return;
        };
        match e {
            Event::Started { at, .. } => {
                r.start = Some(at.saturating_add(self.origin));
                self.completions
                    .push(Reverse((at.saturating_add(r.run), id)));
            }
            Event::Reserved { at, .. } => {
                r.first_reservation
                    .get_or_insert(at.saturating_add(self.origin));
            }
            Event::Denied { reason, .. } => r.not_run = Some(reason.to_string()),
            _ => {}
        }
    }

    fn virtual_submit(&self, i: usize) -> i64 {
        self.workload.jobs[i].submit.saturating_sub(self.origin)
    }

    /// Jobs still pending when nothing more can happen will never start.
    fn finish(&mut self) {
        self.done = true;
        for r in &mut self.results {
            if r.start.is_none() && r.not_run.is_none() {
                r.not_run = Some("never started".into());
            }
        }
    }

    /// Jobs submitted so far (for progress).
    pub fn submitted(&self) -> usize {
        self.next
    }

    pub fn results(&self) -> &[JobResult] {
        &self.results
    }

    /// Nodes (unit node) or cores (unit core) in the cluster.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Wall time spent inside the queue manager so far.
    pub fn scheduler_time(&self) -> Duration {
        self.scheduler_time
    }

    pub fn queue(&self) -> &QueueManager {
        &self.qm
    }

    /// The workload's jobs' fates, for [`crate::swf::write_with_waits`].
    pub fn fates(&self) -> Vec<Fate> {
        self.results.iter().map(JobResult::fate).collect()
    }
}

/// Nodes or cores of `g` (up or not: the definition).
pub fn capacity(g: &ResourceGraph, unit: Unit) -> u64 {
    let kind = match unit {
        Unit::Node => "node",
        Unit::Core => "core",
    };
    let Some(sym) = g.sym(kind) else {
        return 0;
    };
    g.vertices()
        .filter(|&v| g.kind(v) == sym && g.in_containment(v))
        .map(|v| u64::try_from(g.size(v)).unwrap_or(0))
        .sum()
}
