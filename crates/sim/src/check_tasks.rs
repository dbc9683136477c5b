//! The checks by processes (seeds whose shards launch through node agents): what runs on
//! each node, as its tasks, against what the shards say, after every step.
//!
//! | invariant | checked as |
//! |---|---|
//! | I2 | no task of queue A's job runs on a node up in another queue's running shard |
//! | I4 | a task runs only for a job its (running) shard has running on that node: a job's tasks are not left behind on a node it no longer holds, and a requeued job never runs twice at once |
//! | I4 | a restarted agent finds every task still running on its node ([`restarted`]) |
//!
//! A crashed shard's jobs are not looked at (its journal is, by [`crate::check`]); its
//! tasks are checked again once it runs.

use std::collections::BTreeMap;

use shardsched_wire::msg::JobState;

use crate::agent::AgentProcess;
use crate::check::{Invariant, Violation, broken};
use crate::shard::ShardProcess;

/// The checks of the module documentation, at one instant.
pub(crate) fn instant(
    agents: &BTreeMap<String, AgentProcess>,
    shards: &BTreeMap<String, ShardProcess>,
) -> Result<(), Violation> {
    let running: BTreeMap<&str, &shardsched_shard_core::ShardCore> = shards
        .values()
        .filter(|s| s.alive)
        .filter_map(|s| Some((s.queue.as_str(), s.core.as_ref()?)))
        .collect();
    for agent in agents.values() {
        let node = agent.node.as_str();
        for (&job, task) in &agent.tasks {
            for (&queue, core) in &running {
                if queue != task.queue && core.nodes().is_up(node) {
                    return Err(broken(
                        Invariant::I2,
                        format!(
                            "a task of {job} ({}'s, launched at generation {}) runs on {node}, \
                             which is up in {queue}",
                            task.queue, task.generation.0
                        ),
                    ));
                }
            }
            let Some(core) = running.get(task.queue.as_str()) else {
                continue;
            };
            let held = core
                .job(job)
                .is_some_and(|j| j.state == JobState::Running && j.nodes.iter().any(|n| n == node));
            if !held {
                let state = core.job(job).map(|j| (j.state, j.nodes.clone()));
                return Err(broken(
                    Invariant::I4,
                    format!(
                        "a task of {job} runs on {node}, but {} has the job {state:?}",
                        task.queue
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A restarted agent must find every task still running on its node (its job's
/// directory is there, and its supervisor lives).
pub(crate) fn restarted(agent: &AgentProcess) -> Result<(), Violation> {
    let Some(core) = &agent.core else {
        return Ok(());
    };
    for &job in agent.tasks.keys() {
        if !core.job(job).is_some_and(|state| state.is_live()) {
            return Err(broken(
                Invariant::I4,
                format!(
                    "{}'s agent restarted without finding the task of {job} that still runs \
                     there",
                    agent.node
                ),
            ));
        }
    }
    Ok(())
}
