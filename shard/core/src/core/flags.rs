//! Admin flags on nodes: `shardsched resource down|up` (node failure) and `resource
//! drain|undrain`. Both take nodes out of scheduling at once, in their owner, whether or
//! not the queue owns them, without moving them; the flag, with its reason, is the node
//! table's and survives ownership changes and restarts (it is journaled with the node's
//! entry).
//!
//! A drained node's running jobs continue (its reservations are re-planned). A node marked
//! down ends each job running on it: requeued when its jobspec allows it
//! (`attributes.system.requeue: true`, `submit --requeue`), failed otherwise with the
//! reason `node X went down: R`. In exec mode its processes are killed first (see
//! `core/exec.rs`).

use std::collections::BTreeMap;

use serde_json::Value;
use shardsched_wire::msg::{JobId, Refusal, RefusalCode};

use super::ShardCore;
use super::exec::EndAs;
use crate::job::JobRecord;
use crate::nodes::Flag;

/// The jobspec key (under `attributes.system`) that lets a job be requeued when a node it
/// runs on goes down.
pub const REQUEUE_ATTRIBUTE: &str = "requeue";

impl ShardCore {
    /// Nodes marked down, with the reason given (possibly empty): a view of the node table.
    pub fn down_nodes(&self) -> BTreeMap<String, String> {
        collect_flags(self.nodes.down_nodes())
    }

    /// Nodes drained, with the reason given (possibly empty): a view of the node table.
    pub fn drained_nodes(&self) -> BTreeMap<String, String> {
        collect_flags(self.nodes.drained_nodes())
    }

    /// Sets `flag` on `nodes` with `reason` (`Some`, possibly empty), or clears it (`None`):
    /// marks nodes down or up, drains or undrains them. Names that are not nodes of the
    /// queue's graph are refused before anything changes. A node whose flags are all clear is
    /// available again if the queue owns it. See the module documentation for what happens
    /// to running jobs.
    pub fn set_node_flag(
        &mut self,
        now_ms: u64,
        nodes: &[String],
        flag: Flag,
        reason: Option<&str>,
    ) -> Result<(), Refusal> {
        self.observe(now_ms);
        self.known_nodes(nodes)?;
        let why = match flag {
            Flag::Down => "node-state",
            Flag::Drained => "drain",
        };
        for name in nodes {
            tracing::info!(node = %name, ?flag, set = reason.is_some(), reason = %reason.unwrap_or(""), "node flag");
            self.flag_node(name, flag, reason.map(str::to_owned), why);
            if flag == Flag::Down && reason.is_some() {
                self.end_jobs_on_down_node(name);
            }
        }
        self.status_version += 1;
        if flag == Flag::Down {
            self.refresh_reasons(usize::MAX);
        }
        Ok(())
    }

    /// Refuses, before anything changes, names that are not nodes of the queue's graph (its
    /// definition: the coordinator sends a node's flags to its owner).
    pub(super) fn known_nodes(&self, nodes: &[String]) -> Result<(), Refusal> {
        match nodes
            .iter()
            .find(|n| !self.cluster.vertices.contains_key(*n))
        {
            Some(bad) => Err(Refusal::new(
                RefusalCode::NotFound,
                format!("no node {bad} in the definition of queue {}", self.queue),
            )),
            None => Ok(()),
        }
    }

    /// Ends (fails or requeues) every running job on down node `name` whose kill is not
    /// asked for already (that request decides how it ends: `core/exec.rs`).
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
            .filter(|id| !self.jobs.kill_requested.contains_key(*id))
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
    /// may not have reached them before the restart; a node marked down while the shard
    /// was away) are ended, unless their journaled kill was asked for again already.
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

/// Flags as the views list them.
fn collect_flags<'a>(flags: impl Iterator<Item = (&'a str, &'a str)>) -> BTreeMap<String, String> {
    flags.map(|(n, r)| (n.to_owned(), r.to_owned())).collect()
}
