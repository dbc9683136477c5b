//! A queue table change, checked whole and then applied, one concern per step:
//!
//! ```text
//! replace_queues(candidate)
//!   check_table_change   the file's rules; removed queues own nothing and are in no move;
//!                        no definition loses a node its queue owns; generator ids
//!   remap_queues         run-time state and shard links follow their queue by name;
//!                        removed queues' shards are told to stop
//!   take_unowned_nodes   unassigned nodes of new or grown definitions become the queue's
//!   reconfigure_changed  shards whose configuration changed get the new one (in place, or
//!                        a restart) with the nodes granted them
//!   then                 every owner is kept as an admin's decision; the table is
//!                        journaled as the run-time one (or the file's, after a reload)
//! ```

use std::collections::BTreeMap;

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::agent::OwnerChange;
use shardsched_wire::msg::{NodeGen, QueueConfig, Refusal, coord_shard};

use super::{Reconfig, RestartCommand, invalid, policy};
use crate::config::{self, Config};
use crate::core::{Core, QueueCommand, QueueState, ShardLink};
use crate::ownership;

impl Core {
    /// Checks `candidate` against the rules of the module documentation and applies it.
    /// `from_file`: it is the configuration file (reload), which becomes authoritative.
    pub(super) fn replace_queues(
        &mut self,
        mut candidate: Config,
        from_file: bool,
    ) -> Result<Reconfig, Refusal> {
        if !from_file {
            candidate.origin = self.config.origin.clone();
        }
        let generators = self.check_table_change(&candidate, from_file)?;
        let before_configs: Vec<(String, QueueConfig)> = (0..self.config.queues.len())
            .map(|qi| {
                (
                    self.config.queues[qi].name.clone(),
                    self.queue_config_at(qi),
                )
            })
            .collect();
        let before = self.durable_state();
        let mut out = Reconfig::default();
        self.remap_queues(candidate, &mut out);
        self.generators = generators;
        let granted = self.take_unowned_nodes(&mut out);
        self.reconfigure_changed(before_configs, &granted, &mut out);
        // Every owner stands as an admin's decision (like a move's): a restart keeps it as
        // long as its queue defines the node, instead of recomputing owners from the start
        // rules, which could give a node of a stopped queue to a started one added later.
        self.moves.keep_owners();
        self.runtime_table = !from_file;
        out.journal = self.durable_state() != before;
        self.journal_changes_since(&before);
        if out.changes.is_empty() {
            out.changes.push("nothing changed".into());
        }
        self.bump();
        self.debug_check();
        Ok(out)
    }

    /// Refuses `candidate` when it breaks a rule (module documentation); otherwise returns
    /// the generator ids it needs: kept per name forever, fresh for a name never seen.
    fn check_table_change(
        &self,
        candidate: &Config,
        from_file: bool,
    ) -> Result<BTreeMap<String, u16>, Refusal> {
        // A file's errors name the file; a run-time change's are about the change itself.
        config::check(candidate).map_err(|e| match from_file {
            true => invalid(format!("{}: {e}", candidate.origin)),
            false => invalid(e),
        })?;
        // Removed queues own nothing and are in no move.
        for q in &self.config.queues {
            if candidate.queue(&q.name).is_none() {
                self.check_removable(&q.name)?;
            }
        }
        // A definition never loses a node its queue owns.
        for new in &candidate.queues {
            let Some(qi) = self.queue_index(&new.name) else {
                continue;
            };
            let lost: Vec<usize> = self
                .owned_indices(qi)
                .filter(|n| new.definition.binary_search(n).is_err())
                .collect();
            if !lost.is_empty() {
                let hosts = encode_hostlist(&self.config.node_names(&lost));
                return Err(policy(format!(
                    "queue {}: its definition would lose {hosts}, which it owns: move them \
                     first (`shardsched queue move {hosts} --from {} --to QUEUE`), or give \
                     `--give-to QUEUE` to move them as part of the update",
                    new.name, new.name
                )));
            }
        }
        ownership::assign_generators(
            &self.generators,
            candidate.queues.iter().map(|q| q.name.as_str()),
        )
        .map_err(|e| policy(e.to_string()))
    }

    /// Makes `candidate` the configuration: each queue's run-time state and shard link
    /// follow it by name (a new queue starts as configured, offline), a removed queue's
    /// definition is forgotten and its shard told to stop; the move machine learns every
    /// definition.
    fn remap_queues(&mut self, candidate: Config, out: &mut Reconfig) {
        let mut queues = Vec::with_capacity(candidate.queues.len());
        let mut shards = Vec::with_capacity(candidate.queues.len());
        for q in &candidate.queues {
            match self.queue_index(&q.name) {
                Some(old) => {
                    queues.push(self.queues[old].clone());
                    shards.push(self.shards[old].take());
                }
                None => {
                    queues.push(QueueState {
                        enabled: q.enabled,
                        started: q.started,
                        admin_reason: None,
                    });
                    shards.push(None);
                    out.changes.push(format!(
                        "added queue {} ({} nodes, {}{})",
                        q.name,
                        q.definition.len(),
                        q.policy,
                        if q.started { "" } else { ", stopped" }
                    ));
                }
            }
        }
        for (qi, old) in self.config.queues.iter().enumerate() {
            if candidate.queue(&old.name).is_some() {
                continue;
            }
            self.moves.set_definition(&old.name, None);
            out.changes.push(format!("removed queue {}", old.name));
            if let Some(ShardLink { conn, .. }) = self.shards[qi].take() {
                out.stop.push(QueueCommand {
                    queue: old.name.clone(),
                    conn,
                    enabled: false,
                    started: false,
                });
            }
        }
        self.config = candidate;
        self.queues = queues;
        self.shards = shards;
        for q in &self.config.queues {
            self.moves
                .set_definition(&q.name, Some(self.config.node_names(&q.definition)));
        }
    }

    /// Unassigned nodes of new or grown definitions become their queue's: those an `owns`
    /// names first, then the rest by queue name. Returns each queue's (by index), at their
    /// new generations.
    fn take_unowned_nodes(&mut self, out: &mut Reconfig) -> Vec<Vec<NodeGen>> {
        let mut gained: Vec<Vec<String>> = vec![Vec::new(); self.config.queues.len()];
        for owns_pass in [true, false] {
            for (qi, taken) in gained.iter_mut().enumerate() {
                let q = &self.config.queues[qi];
                let nodes = if owns_pass { &q.owns } else { &q.definition };
                for n in nodes.clone() {
                    taken.extend(self.take_unowned(qi, n));
                }
            }
        }
        let mut granted = Vec::with_capacity(gained.len());
        for (qi, gained) in gained.iter().enumerate() {
            let nodes = self.granted(gained);
            if !nodes.is_empty() {
                let queue = self.config.queues[qi].name.clone();
                out.changes.push(format!(
                    "queue {queue} owns {} now",
                    encode_hostlist(gained)
                ));
                // Their agents learn the owner now: a launch from the queue's shard is
                // accepted only from the owner they know.
                self.tell_owner(&queue, &nodes, OwnerChange::Granted);
            }
            granted.push(nodes);
        }
        granted
    }

    /// Tells the connected shards whose configuration differs from `before`: the new one,
    /// with the nodes `granted` gave their queue (by queue index). A shard applies it in
    /// place ([`QueueConfig::applies_in_place`]), or restarts.
    fn reconfigure_changed(
        &self,
        before: Vec<(String, QueueConfig)>,
        granted: &[Vec<NodeGen>],
        out: &mut Reconfig,
    ) {
        for (name, old) in before {
            let Some(qi) = self.queue_index(&name) else {
                continue;
            };
            let new = self.queue_config_at(qi);
            if old == new {
                continue;
            }
            out.changes
                .push(format!("queue {name}: configuration changed"));
            if let Some(link) = &self.shards[qi] {
                out.changes.push(if old.applies_in_place(&new) {
                    format!("queue {name}: its shard applies it without a restart")
                } else {
                    format!("queue {name}: its shard restarts to apply it (no job is lost)")
                });
                let granted = granted[qi].clone();
                let flags = self.flags_of(granted.iter().map(|n| n.node.as_str()));
                out.restart.push(RestartCommand {
                    queue: name,
                    conn: link.conn,
                    change: coord_shard::Reconfigure {
                        config: new,
                        granted,
                        flags,
                    },
                });
            }
        }
    }

    /// `nodes` with their generations now.
    fn granted(&self, nodes: &[String]) -> Vec<NodeGen> {
        nodes
            .iter()
            .filter_map(|n| {
                Some(NodeGen {
                    node: n.clone(),
                    generation: self.moves.generation_of(n)?,
                })
            })
            .collect()
    }
}
