//! A node's simulated tasks (processes that outlive their agent) and the agent's state
//! directory.

use std::collections::BTreeMap;

use shardsched_wire::msg::agent::{EndCause, JobEnd, NodeLaunch};
use shardsched_wire::msg::{Generation, JobId};

/// A simulated task: one job's processes on one node.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    /// The queue whose shard launched it, and the generation it was launched at.
    pub(crate) queue: String,
    pub(crate) generation: Generation,
    pub(crate) pid: u32,
    /// When it exits 0 on its own (its time limit from its start).
    pub(super) exits_at: u64,
    /// How long it ignores SIGTERM (at most the kill grace).
    pub(super) ignores_term_ms: u64,
    /// Asked to stop: when it dies, and why.
    pub(super) dies_at: Option<(u64, String)>,
    /// When the lease its launch renewed runs out, ms: its supervisor stops it once that
    /// and the deadline its agent last persisted for its queue have passed (as
    /// `shardsched_process::plan::LeaseWatch` does), whether the agent runs or not.
    pub(super) launch_deadline_ms: u64,
    /// Runs past its allocation's span (to its time limit from its own start).
    pub(super) overruns: bool,
}

/// A task that ended, as the simulator counts it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reaped {
    pub(crate) job: JobId,
    /// It ran past its allocation's span.
    pub(crate) overran: bool,
    /// Its supervisor stopped it, its lease over.
    pub(crate) lease_stopped: bool,
}

impl Task {
    /// When it ends, and how.
    pub(super) fn end(&self) -> (u64, JobEnd) {
        match &self.dies_at {
            Some((at, why)) if *at < self.exits_at => (
                *at,
                JobEnd::without_status(EndCause::Cancelled, why.clone()),
            ),
            _ => (
                self.exits_at,
                JobEnd {
                    cause: EndCause::Completed,
                    exit_code: Some(0),
                    signal: None,
                    note: String::new(),
                },
            ),
        }
    }
}

/// What survives the agent's crash: its state directory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Disk {
    /// Job directories: the launching queue and generation.
    pub(super) jobs: BTreeMap<JobId, (String, Generation)>,
    /// End files the supervisors wrote.
    pub(super) ends: BTreeMap<JobId, JobEnd>,
    /// Persisted lease renewals.
    pub(super) leases: BTreeMap<String, u64>,
    /// The same as deadlines, for the supervisors (`lease-deadlines.json`).
    pub(super) lease_deadlines: BTreeMap<String, u64>,
}

/// A new task for `launch`, whose shard's lease runs out at `launch_deadline_ms`.
pub(super) fn task(
    now: u64,
    queue: &str,
    launch: &NodeLaunch,
    pid: u32,
    launch_deadline_ms: u64,
    ignores_term: &mut dyn FnMut(u64) -> u64,
) -> Task {
    // Most applications finish their work by their allocation's end; one job in four (by
    // its id, so that every node's task of it does the same) runs to its time limit from
    // its own start, past that end by its launch's delay, as a real one that overruns does
    // (its shard keeps its nodes until the end is reported: no job may start on them).
    let span_end = launch
        .env_value(crate::agents_exec::SPAN_END_VAR)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    let limit = now.saturating_add(launch.time_limit_ms);
    let runs_to_limit = launch.job.0.is_multiple_of(4);
    Task {
        queue: queue.to_owned(),
        generation: launch.generation,
        pid,
        exits_at: if runs_to_limit {
            limit
        } else {
            span_end.min(limit)
        }
        .max(now + 1),
        ignores_term_ms: ignores_term(launch.kill_grace_ms).min(launch.kill_grace_ms),
        dies_at: None,
        launch_deadline_ms,
        overruns: runs_to_limit && limit > span_end,
    }
}

impl Task {
    /// When its supervisor finds its lease over, given the deadlines its agent persisted
    /// (`None` once it is stopping anyway).
    pub(super) fn lease_over_at(&self, disk: &Disk) -> Option<u64> {
        if self.dies_at.is_some() {
            return None;
        }
        let persisted = disk.lease_deadlines.get(&self.queue).copied().unwrap_or(0);
        Some(persisted.max(self.launch_deadline_ms).saturating_add(1))
    }
}
