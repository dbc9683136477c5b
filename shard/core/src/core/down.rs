//! Node failure: an admin marks nodes down (`shardsched resource down`) or up again.
//!
//! A node marked down leaves scheduling at once (the queue manager sees it unavailable,
//! whether or not the queue owns it) and stays out until marked up; the flag, with its
//! reason, is the node table's and survives ownership changes and restarts (it is
//! journaled with the node's entry). Each job running on it ends: requeued when its jobspec
//! allows it (`attributes.system.requeue: true`, `submit --requeue`), failed otherwise with
//! the reason `node X went down: R`. In exec mode its processes are killed first (see
//! `core/exec.rs`).

use std::collections::BTreeMap;

use serde_json::Value;
use shardsched_wire::msg::{JobId, Refusal, RefusalCode};

use super::ShardCore;
use super::exec::EndAs;
use crate::job::JobRecord;

/// The jobspec key (under `attributes.system`) that lets a job be requeued when a node it
/// runs on goes down.
pub const REQUEUE_ATTRIBUTE: &str = "requeue";

impl ShardCore {
    /// Nodes marked down, with the reason given (possibly empty): a view of the node table.
    pub fn down_nodes(&self) -> BTreeMap<String, String> {
        self.nodes
            .down_nodes()
            .map(|(n, r)| (n.to_owned(), r.to_owned()))
            .collect()
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
        self.known_nodes(nodes)?;
        for name in nodes {
            if down {
                tracing::info!(queue = %self.queue, node = %name, %reason, "node down");
            } else if self.nodes.get(name).is_some_and(|e| e.down.is_some()) {
                tracing::info!(queue = %self.queue, node = %name, "node up");
            }
            let flag = down.then(|| reason.to_owned());
            let effects = self.nodes.set_down(name, flag);
            self.apply_effects(effects, "node-state", false);
            self.refresh_node(name, "node-state");
            if down {
                self.end_jobs_on_down_node(name);
            }
        }
        self.status_version += 1;
        self.refresh_reasons(usize::MAX);
        Ok(())
    }

    /// Refuses, before anything changes, names that are not nodes of the cluster.
    pub(super) fn known_nodes(&self, nodes: &[String]) -> Result<(), Refusal> {
        match nodes
            .iter()
            .find(|n| !self.cluster.vertices.contains_key(*n))
        {
            Some(bad) => Err(Refusal::new(
                RefusalCode::NotFound,
                format!("no node {bad} in the cluster of queue {}", self.queue),
            )),
            None => Ok(()),
        }
    }

    /// Ends (fails or requeues) every running job on down node `name`.
    pub(super) fn end_jobs_on_down_node(&mut self, name: &str) {
        let why = match self.nodes.get(name).and_then(|e| e.down.as_deref()) {
            None => return,
            Some("") => format!("node {name} went down"),
            Some(reason) => format!("node {name} went down: {reason}"),
        };
        let mut hit: Vec<JobId> = self
            .jobs
            .running
            .keys()
            .filter(|id| {
                self.jobs
                    .table
                    .get(**id)
                    .is_some_and(|j| j.nodes.iter().any(|n| n == name))
            })
            .copied()
            .collect();
        hit.sort_unstable();
        for id in hit {
            let requeue = self.jobs.table.get(id).is_some_and(requeue_allowed);
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
        let down: Vec<String> = self.nodes.down_nodes().map(|(n, _)| n.to_owned()).collect();
        for name in down {
            self.end_jobs_on_down_node(&name);
        }
    }
}

/// Whether a job asked to be requeued when a node it runs on fails.
fn requeue_allowed(job: &JobRecord) -> bool {
    serde_json::from_str::<Value>(&job.jobspec_json).is_ok_and(|spec| {
        spec.pointer(&format!("/attributes/system/{REQUEUE_ATTRIBUTE}")) == Some(&Value::Bool(true))
    })
}
