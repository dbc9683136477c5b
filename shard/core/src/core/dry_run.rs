//! Dry run: `queue move --dry-run` asks the donor what a release would do, changing
//! nothing.

use std::collections::BTreeSet;

use shardsched_wire::msg::coord_shard::{DryRunReport, FreeAt, NodeRelease};
use shardsched_wire::msg::{Refusal, RefusalCode};

use super::ShardCore;
use crate::nodes::Holding;

impl ShardCore {
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
        let jobs = self.jobs_on(nodes.iter().map(String::as_str));
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
