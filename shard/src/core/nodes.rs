//! Node failure: an admin marks nodes down (`shardsched resource down`) or up again.
//!
//! A node marked down leaves scheduling at once (the queue manager sees it unavailable,
//! whether or not the queue owns it) and stays out until marked up; the flag survives
//! ownership changes. Each job running on it ends: requeued when its jobspec allows it
//! (`attributes.system.requeue: true`, `submit --requeue`), failed otherwise with the
//! reason `node X went down: R`. In exec mode its processes are killed first (see
//! `core/exec.rs`). The flags are in [`ShardCore::down_nodes`]; the journal keeps them
//! ([`JournalRecord::Down`]) and a restart brings them back.

use std::collections::BTreeMap;

use serde_json::Value;
use shardsched_proto::msg::{JobId, Refusal, RefusalCode};

use super::ShardCore;
use super::exec::EndAs;
use crate::error::ShardError;
use crate::job::JobRecord;
use crate::journal::JournalRecord;

/// The jobspec key (under `attributes.system`) that lets a job be requeued when a node it
/// runs on goes down.
pub const REQUEUE_ATTRIBUTE: &str = "requeue";

impl ShardCore {
    /// Nodes marked down, with the reason given (possibly empty).
    pub fn down_nodes(&self) -> &BTreeMap<String, String> {
        &self.down
    }

    /// Marks `nodes` down (with `reason`) or up. Names that are not nodes of the cluster are
    /// refused before anything changes. Marking a node up makes it available again if the
    /// queue owns it. See the module documentation for what happens to running jobs.
    pub fn set_node_state(
        &mut self,
        now_ms: u64,
        nodes: &[String],
        down: bool,
        reason: &str,
    ) -> Result<(), Refusal> {
        self.observe(now_ms);
        let mut vertices = Vec::with_capacity(nodes.len());
        for name in nodes {
            let v = self.nodes.get(name).ok_or_else(|| {
                Refusal::new(
                    RefusalCode::NotFound,
                    format!("no node {name} in the cluster of queue {}", self.queue),
                )
            })?;
            vertices.push((name.clone(), *v));
        }
        let internal = |e: shardsched_qmanager::QueueError| {
            Refusal::new(RefusalCode::Internal, format!("queue manager: {e}"))
        };
        for (name, v) in vertices {
            if !down {
                if self.down.remove(&name).is_some() {
                    tracing::info!(queue = %self.queue, node = %name, "node up");
                }
                let effects = self.moves.set_down(&name, false);
                self.apply_effects(effects, "node-state", false);
                self.refresh_node(&name, "node-state");
                continue;
            }
            tracing::info!(queue = %self.queue, node = %name, %reason, "node down");
            self.down.insert(name.clone(), reason.to_owned());
            self.qm.set_availability(v, false).map_err(internal)?;
            let effects = self.moves.set_down(&name, true);
            self.apply_effects(effects, "node-state", false);
            self.refresh_node(&name, "node-state");
            self.end_jobs_on_down_node(&name);
        }
        if self.options.journal {
            self.journal.push(JournalRecord::Down(self.down_list()));
        }
        self.status_version += 1;
        self.refresh_reasons(usize::MAX);
        Ok(())
    }

    /// Ends (fails or requeues) every running job on down node `name`.
    pub(super) fn end_jobs_on_down_node(&mut self, name: &str) {
        let why = match self.down.get(name).map(String::as_str) {
            None => return,
            Some("") => format!("node {name} went down"),
            Some(reason) => format!("node {name} went down: {reason}"),
        };
        let mut hit: Vec<JobId> = self
            .running
            .keys()
            .filter(|id| {
                self.table
                    .get(**id)
                    .is_some_and(|j| j.nodes.iter().any(|n| n == name))
            })
            .copied()
            .collect();
        hit.sort_unstable();
        for id in hit {
            let requeue = self.table.get(id).is_some_and(requeue_allowed);
            let plan = if requeue {
                EndAs::Requeue(why.clone())
            } else {
                EndAs::Failed {
                    exception: Some("node-down"),
                    why: why.clone(),
                }
            };
            self.end_running(id, plan);
        }
    }

    /// After a restore: jobs still running on a node marked down (in exec mode, their kill
    /// may not have reached them before the restart) are ended again.
    pub(super) fn end_jobs_on_down_nodes(&mut self) {
        let down: Vec<String> = self.down.keys().cloned().collect();
        for name in down {
            self.end_jobs_on_down_node(&name);
        }
    }

    /// The down flags as the journal keeps them.
    fn down_list(&self) -> Vec<(String, String)> {
        self.down
            .iter()
            .map(|(n, r)| (n.clone(), r.clone()))
            .collect()
    }

    /// Marks down again the nodes a restarted shard's journal says are down (part of
    /// [`ShardCore::restore`]). Names the cluster no longer has are dropped, and logged.
    pub(super) fn restore_down(&mut self, down: &[(String, String)]) -> Result<(), ShardError> {
        for (name, reason) in down {
            let Some(&v) = self.nodes.get(name) else {
                tracing::warn!(queue = %self.queue, node = %name, "a node marked down is not in the cluster any more");
                continue;
            };
            self.down.insert(name.clone(), reason.clone());
            self.qm.set_availability(v, false)?;
        }
        Ok(())
    }
}

/// Whether a job asked to be requeued when a node it runs on fails.
fn requeue_allowed(job: &JobRecord) -> bool {
    serde_json::from_str::<Value>(&job.jobspec_json).is_ok_and(|spec| {
        spec.pointer(&format!("/attributes/system/{REQUEUE_ATTRIBUTE}")) == Some(&Value::Bool(true))
    })
}
