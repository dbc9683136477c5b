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
}

/// A new task for `launch`.
pub(super) fn task(
    now: u64,
    queue: &str,
    launch: &NodeLaunch,
    pid: u32,
    ignores_term: &mut dyn FnMut(u64) -> u64,
) -> Task {
    Task {
        queue: queue.to_owned(),
        generation: launch.generation,
        pid,
        // The application finishes its work by its allocation's end (the shard would give
        // the node to the next job then), within its time limit.
        exits_at: launch
            .env_value(crate::agents_exec::SPAN_END_VAR)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
            .min(now + launch.time_limit_ms)
            .max(now + 1),
        ignores_term_ms: ignores_term(launch.kill_grace_ms).min(launch.kill_grace_ms),
        dies_at: None,
    }
}
