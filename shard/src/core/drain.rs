//! Drain and dry run: an admin's `resource drain` takes nodes out of scheduling in their
//! owner without moving them (running jobs continue, reservations are re-planned, the flag
//! is journaled and travels with the node); `queue move --dry-run` asks the donor what a
//! release would do, changing nothing.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_proto::msg::coord_shard::{DryRunReport, FreeAt, NodeRelease};
use shardsched_proto::msg::{Refusal, RefusalCode};

use super::ShardCore;
use super::moving::flag_list;
use crate::journal::JournalRecord;
use crate::moves::Holding;

impl ShardCore {
    /// Drains nodes (no new work, reservations re-planned, running jobs continue) or
    /// undrains them. Names that are not nodes of the cluster are refused first.
    pub fn set_node_drain(
        &mut self,
        now_ms: u64,
        nodes: &[String],
        drained: bool,
        reason: &str,
    ) -> Result<(), Refusal> {
        self.observe(now_ms);
        if let Some(bad) = nodes.iter().find(|n| !self.nodes.contains_key(*n)) {
            return Err(Refusal::new(
                RefusalCode::NotFound,
                format!("no node {bad} in the cluster of queue {}", self.queue),
            ));
        }
        for name in nodes {
            if drained {
                self.drained.insert(name.clone(), reason.to_owned());
            } else {
                self.drained.remove(name);
            }
            let effects = self.moves.set_drained(name, drained);
            self.apply_effects(effects, "drain", false);
            self.refresh_node(name, "drain");
        }
        tracing::info!(queue = %self.queue, nodes = nodes.len(), drained, %reason, "drain");
        if self.options.journal {
            self.journal
                .push(JournalRecord::Drained(flag_list(&self.drained)));
        }
        self.status_version += 1;
        Ok(())
    }

    /// Nodes drained, with the reason given (possibly empty).
    pub fn drained_nodes(&self) -> &BTreeMap<String, String> {
        &self.drained
    }

    /// What releasing `nodes` would do now, changing nothing: per node its free time (the
    /// planned end of the last running job on it) and those jobs; the pending jobs that
    /// could never run on what the queue would still own without them (its owned and
    /// incoming nodes, less these: not its whole definition, which may name nodes other
    /// queues own).
    pub fn dry_run_release(&self, nodes: &[String]) -> Result<DryRunReport, Refusal> {
        for name in nodes {
            if !self.nodes.contains_key(name) {
                return Err(Refusal::new(
                    RefusalCode::NotFound,
                    format!("no node {name} in the cluster of queue {}", self.queue),
                ));
            }
        }
        let leaving: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        let vertices: Vec<_> = self
            .nodes
            .iter()
            .filter(|(name, _)| {
                let kept = matches!(
                    self.moves.entry(name).holding,
                    Holding::Owned | Holding::Incoming { .. }
                );
                leaving.contains(name.as_str()) || !kept
            })
            .map(|(_, &v)| v)
            .collect();
        let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let jobs = self.jobs_on(&names);
        let mut all_free = FreeAt::Now;
        let rows = nodes
            .iter()
            .map(|name| {
                let held = jobs.get(name.as_str()).cloned().unwrap_or_default();
                let free = match held.iter().map(|&(_, end)| end).max() {
                    None => FreeAt::Now,
                    Some(end) => FreeAt::Expected(end),
                };
                all_free = later(all_free, free);
                NodeRelease {
                    node: name.clone(),
                    free,
                    jobs: held.into_iter().map(|(id, _)| id).collect(),
                }
            })
            .collect();
        let stranded = self
            .qm
            .stranded_without(&vertices, self.now_s())
            .map_err(|e| Refusal::new(RefusalCode::Internal, format!("queue manager: {e}")))?
            .into_iter()
            .map(shardsched_proto::Fluid)
            .collect();
        Ok(DryRunReport {
            nodes: rows,
            all_free,
            stranded,
        })
    }

    /// Restores the drain flags a restarted shard's journal has (part of the restart).
    pub(super) fn restore_drained(&mut self, drained: &[(String, String)]) {
        for (name, reason) in drained {
            if self.nodes.contains_key(name) {
                self.drained.insert(name.clone(), reason.clone());
            }
        }
    }
}

/// The later of two free times.
fn later(a: FreeAt, b: FreeAt) -> FreeAt {
    match (a, b) {
        (FreeAt::Expected(x), FreeAt::Expected(y)) => FreeAt::Expected(x.max(y)),
        (FreeAt::Expected(x), FreeAt::Now) | (FreeAt::Now, FreeAt::Expected(x)) => {
            FreeAt::Expected(x)
        }
        (FreeAt::Now, FreeAt::Now) => FreeAt::Now,
    }
}
