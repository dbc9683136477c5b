//! A new queue configuration from the coordinator (`Reconfigure`, or a re-registration's
//! assignment): a new definition, queue policy, depths or array bound are applied in
//! place; a new match policy or durations restart the shard.
//!
//! Why: a shard's graph is its queue's definition (with what contains it, module
//! `assign`). When an admin widens or narrows the queue, the graph gains the subtrees of
//! the added nodes (cut from the cluster description the coordinator sent at
//! registration, kept for this) and loses those of removed nodes, in the running queue
//! manager ([`QueueManager::grow`], [`QueueManager::shrink`]): running jobs, reservations'
//! plans, holds and every client connection stay. The nodes the change gave the queue
//! come up at the generation the coordinator set.
//!
//! ```text
//! Reconfigure { config, granted, flags }
//!   match policy, durations changed?      → restart (take_restart): the process exits for
//!                                           its supervisor; the journal restores every job
//!   definition changed?                   → added: grafted, down until the node table says
//!                                           otherwise; removed: cut, unless the shard holds
//!                                           the node (owned, moving, a job or hold on it),
//!                                           which stays until a restart
//!   cannot (no cluster description, the queue manager refuses)  → restart
//!   queue policy or depths changed?       → the queue manager's next cycle is a whole
//!                                           re-plan under them (QueueManager::set_policy)
//!   then                                  → granted nodes up (journaled), queue state set
//! ```
//!
//! [`QueueManager::grow`]: shardsched_qmanager::QueueManager::grow
//! [`QueueManager::shrink`]: shardsched_qmanager::QueueManager::shrink

use std::collections::BTreeSet;
use std::time::Instant;

use shardsched_resource::VertexId;
use shardsched_wire::msg::QueueConfig;
use shardsched_wire::msg::coord_shard::{Reconfigure, Response};

use super::ShardCore;
use super::usage;
use crate::assign;
use crate::nodes::Holding;

impl ShardCore {
    /// `Reconfigure` from the coordinator (see the module documentation). Always `Ack`:
    /// when the change needs a restart, [`ShardCore::take_restart`] says so.
    pub(super) fn handle_reconfigure(&mut self, now_ms: u64, change: &Reconfigure) -> Response {
        self.observe(now_ms);
        if let Err(why) = self.take_config(&change.config, &[]) {
            self.restart_for(why);
            return Response::Ack { stale: Vec::new() };
        }
        self.take_owned(&change.granted, &change.flags, "granted")
    }

    /// Takes `new` if a running core can: the enabled/started flags, and a definition
    /// (with `also_kept`: nodes an assignment names, which stay in the graph). `Err` says
    /// why the shard must restart instead, with nothing changed but what a restart redoes.
    pub(super) fn take_config(
        &mut self,
        new: &QueueConfig,
        also_kept: &[&str],
    ) -> Result<(), String> {
        if !self.config.applies_in_place(new) {
            return Err("its match policy or durations changed".into());
        }
        if self.config.definition != new.definition {
            self.redefine(new, also_kept)?;
        }
        let order = |c: &QueueConfig| (c.queue_policy, c.queue_depth, c.reservation_depth);
        if order(&self.config) != order(new) {
            let params = assign::params(new).map_err(|e| e.to_string())?;
            self.qm
                .set_policy(params.policy, params.queue_depth, params.reservation_depth)
                .map_err(|e| e.to_string())?;
            tracing::info!(queue = %self.queue, policy = %new.queue_policy, queue_depth = new.queue_depth,
                reservation_depth = new.reservation_depth, "queue policy changed in place");
        }
        // Everything but the flags, which set_queue_state compares and logs.
        let taken = QueueConfig {
            enabled: self.config.enabled,
            started: self.config.started,
            ..new.clone()
        };
        if taken != self.config {
            self.config = taken;
            self.status_version += 1;
        }
        self.set_queue_state(new.enabled, new.started);
        Ok(())
    }

    /// What the driver (or the simulator) must do after this batch: `Some(why)` when the
    /// process must exit for a restart, to take a configuration a running core cannot.
    pub fn take_restart(&mut self) -> Option<String> {
        self.outbox.restart.take()
    }

    pub(super) fn restart_for(&mut self, why: String) {
        tracing::info!(queue = %self.queue, %why, "new queue configuration; restarting to apply it");
        self.outbox.restart = Some(why);
    }

    /// The graph follows `new`'s definition: nodes added are grafted (down), nodes
    /// removed that the shard does not hold are cut.
    fn redefine(&mut self, new: &QueueConfig, also_kept: &[&str]) -> Result<(), String> {
        let started = Instant::now();
        let Some(description) = self.cluster.description.clone() else {
            return Err("the core was built on a graph, not a cluster description".into());
        };
        let kept = self.held_nodes(also_kept);
        let wanted: BTreeSet<String> = new
            .definition
            .iter()
            .cloned()
            .chain(
                kept.iter()
                    .filter(|n| self.cluster.vertices.contains_key(*n))
                    .cloned(),
            )
            .collect();
        let added: Vec<String> = wanted
            .iter()
            .filter(|n| !self.cluster.vertices.contains_key(*n))
            .cloned()
            .collect();
        let removed: Vec<(String, VertexId)> = self
            .cluster
            .vertices
            .iter()
            .filter(|(n, _)| !wanted.contains(*n))
            .map(|(n, &v)| (n.clone(), v))
            .collect();
        if !added.is_empty() {
            let part_config = QueueConfig {
                definition: added.clone(),
                ..new.clone()
            };
            let (part, _) = assign::definition_graph(&description, &part_config, &[])
                .map_err(|e| e.to_string())?;
            self.qm.grow(&part).map_err(|e| e.to_string())?;
        }
        let roots: Vec<VertexId> = removed.iter().map(|(_, v)| *v).collect();
        self.qm.shrink(&roots).map_err(|e| e.to_string())?;
        let vertices = assign::node_index(&self.qm.matcher().graph);
        for name in &added {
            if let Some(&v) = vertices.get(name) {
                // Grafted up; nothing is up until the node table says so.
                self.qm
                    .set_availability(v, false)
                    .map_err(|e| e.to_string())?;
            }
        }
        let graph = &self.qm.matcher().graph;
        let fresh = added
            .iter()
            .filter_map(|n| vertices.get(n).map(|&v| (n.clone(), v)));
        self.cluster.capacity.extend(usage::capacity(graph, fresh));
        for (name, _) in &removed {
            self.cluster.capacity.remove(name);
        }
        self.cluster.vertices = vertices;
        self.cluster.definition = wanted;
        for name in &added {
            self.refresh_node(name, "definition");
        }
        // Pending jobs that can no longer fit the definition fail, and say so.
        self.drain(None);
        self.status_version += 1;
        tracing::info!(
            queue = %self.queue,
            added = added.len(),
            removed = removed.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "definition changed in place"
        );
        Ok(())
    }

    /// The nodes the shard must keep in its graph whatever its definition: those its node
    /// table holds (owned, moving in or out), those running or completing jobs are on, and
    /// `also` (an assignment's).
    fn held_nodes(&self, also: &[&str]) -> BTreeSet<String> {
        let mut kept: BTreeSet<String> = self
            .nodes
            .entries()
            .filter(|(_, e)| e.holding != Holding::NotOwned)
            .map(|(n, _)| n.to_owned())
            .collect();
        kept.extend(self.jobs.per_node.keys().cloned());
        kept.extend(self.jobs.completing.iter().cloned());
        kept.extend(also.iter().map(|n| (*n).to_owned()));
        kept
    }
}

#[cfg(test)]
mod tests;
