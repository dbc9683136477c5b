//! Drain and dry run: an admin's `resource drain` takes nodes out of scheduling in their
//! owner without moving them (running jobs continue, reservations are re-planned, the flag
//! is journaled and travels with the node); `queue move --dry-run` asks the donor what a
//! release would do, changing nothing.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_wire::msg::coord_shard::{DryRunReport, FreeAt, NodeRelease};
use shardsched_wire::msg::{Refusal, RefusalCode};

use super::ShardCore;
use crate::nodes::Holding;

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
        self.known_nodes(nodes)?;
        for name in nodes {
            let flag = drained.then(|| reason.to_owned());
            let effects = self.nodes.set_drained(name, flag);
            self.apply_effects(effects, "drain", false);
            self.refresh_node(name, "drain");
        }
        tracing::info!(queue = %self.queue, nodes = nodes.len(), drained, %reason, "drain");
        self.status_version += 1;
        Ok(())
    }

    /// Nodes drained, with the reason given (possibly empty): a view of the node table.
    pub fn drained_nodes(&self) -> BTreeMap<String, String> {
        self.nodes
            .drained_nodes()
            .map(|(n, r)| (n.to_owned(), r.to_owned()))
            .collect()
    }

    /// What releasing `nodes` would do now, changing nothing: per node its free time (the
    /// planned end of the last running job on it) and those jobs; the pending jobs that
    /// could never run on what the queue would still own without them (its owned and
    /// incoming nodes, less these: not its whole definition, which may name nodes other
    /// queues own).
    pub fn dry_run_release(&self, nodes: &[String]) -> Result<DryRunReport, Refusal> {
        self.known_nodes(nodes)?;
        let leaving: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        let vertices: Vec<_> = self
            .cluster
            .vertices
            .iter()
            .filter(|(name, _)| {
                let kept = self.nodes.get(name).is_some_and(|e| {
                    matches!(e.holding, Holding::Owned | Holding::Incoming { .. })
                });
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
            .map(shardsched_wire::Fluid)
            .collect();
        Ok(DryRunReport {
            nodes: rows,
            all_free,
            stranded,
        })
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
