//! A queue's definition changing while it runs: subtrees grafted onto its graph or cut from
//! it, with every job kept (docs/CONFIG.md, "Runtime changes").
//!
//! Why: a shard's graph is its queue's definition (with what contains it). An admin who
//! widens or narrows a queue (`queue update --nodes`) changes that graph; rebuilding the
//! queue manager from scratch means a process restart and a journal replay. Here the
//! matcher grows or shrinks in place ([`Matcher::graft`], [`Matcher::remove_subtrees`]: ids of
//! the vertices kept do not change, every record is carried over), then what derives from
//! the graph is made again, as at construction:
//!
//! ```text
//! grow(doc) / shrink(vertices)
//!   → the live matcher and the definition's matcher change alike
//!   → root aggregates, whole-node list: rebuilt from the new graph
//!   → satisfiability cache forgotten; availability epoch bumped; a re-plan due
//!   → jobs not running that can never fit the new definition: denied (Event::Denied),
//!     as a restart's resubmission would deny them; pending ones that fit it but not what
//!     is up wait aside, as after an availability change
//! ```
//!
//! A shrink never takes resources from a running job or a hold: it is refused, with
//! nothing changed, while one holds a vertex it would remove. Reservations are all dropped
//! first (announced as lost); the next cycle plans them again on the new graph.

use std::collections::BTreeSet;

use shardsched_matcher::Matcher;
use shardsched_resource::{JgfDocument, ResourceGraph, VertexId};

use crate::error::QueueError;
use crate::event::{DenyReason, JobId};
use crate::queue::{QueueManager, State};
use crate::shapes::{RootAgg, Shapes};
use crate::whole::WholeNodes;

impl QueueManager {
    /// Adds the vertices of `part` the graph does not have (see [`Matcher::graft`]): the
    /// subtrees of nodes a definition gains, `part` being the cluster cut to them (with
    /// what contains them, matched by path), each among its siblings where a graph built
    /// whole would have it (by rank), so that the walks visit nodes as after a restart.
    /// The new vertices are as `part` has them (normally up): the caller marks down, with
    /// [`QueueManager::set_availability`], those it does not own yet, before the next
    /// [`QueueManager::schedule`]. Returns how many vertices were added.
    pub fn grow(&mut self, part: &ResourceGraph) -> Result<usize, QueueError> {
        let base = self
            .matcher
            .graph
            .vertices()
            .map(|v| self.matcher.graph.uniq_id(v))
            .max();
        let doc = JgfDocument::of_graph(part, base.map_or(0, |b| b.saturating_add(1)));
        // The definition's matcher first: an attach that fails changes nothing, and the
        // same document then attaches to the live graph, which has the same vertices.
        let added = self.definition.graft(&doc)?;
        if added == 0 {
            return Ok(0);
        }
        self.matcher.graft(&doc)?;
        self.redefined()?;
        Ok(added)
    }

    /// Removes `roots` and everything below them (the subtrees of nodes a definition
    /// loses). Refused with nothing changed when a running job or a hold has resources
    /// there, or a root is not a vertex of the graph.
    pub fn shrink(&mut self, roots: &[VertexId]) -> Result<(), QueueError> {
        if roots.is_empty() {
            return Ok(());
        }
        let gone = subtrees(&self.matcher, roots)?;
        let reserved: BTreeSet<JobId> = self.reservations.by_start().map(|(_, id)| id).collect();
        if let Some((id, _)) = self
            .matcher
            .jobs()
            .find(|(id, j)| !reserved.contains(id) && j.alloc.iter().any(|a| gone.contains(&a.v)))
        {
            return Err(QueueError::InUse(id));
        }
        self.drop_reservations()?;
        // Both graphs have the same vertex ids: the definition's matcher was cloned from
        // the live one, and every change since was made to both alike.
        self.matcher.remove_subtrees(roots)?;
        self.definition.remove_subtrees(roots)?;
        self.redefined()
    }

    /// After the graph changed: rebuild what derives from it, then deny the jobs that can
    /// never fit it and set aside those that do not fit what is up (module documentation).
    fn redefined(&mut self) -> Result<(), QueueError> {
        self.matcher.recount_nodes();
        self.definition.recount_nodes();
        self.root = RootAgg::new(&self.matcher);
        self.whole = WholeNodes::new(&self.matcher);
        self.shapes = Shapes::default();
        let now = self.last_now.unwrap_or(0);
        let live: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| !matches!(j.state, State::Running { .. }))
            .map(|(&id, _)| id)
            .collect();
        for id in live {
            let job = self.jobs.get(&id).ok_or(QueueError::NoSuchJob(id))?;
            let (needs, shape, jobspec) =
                (job.needs.clone(), job.shape.clone(), job.jobspec.clone());
            if !self.fits_definition(&needs, &shape, &jobspec, now)? {
                self.forget_live(id)?;
                self.deny(id, DenyReason::Unsatisfiable);
            }
        }
        self.availability_changed(now)
    }
}

impl QueueManager {
    /// Switches to queue policy `policy` with these depths (see [`Params`]), as a queue
    /// built with them would run from its next cycle: that cycle is a whole re-plan
    /// (every reservation cancelled, every considered job placed again), so nothing the
    /// old policy planned survives into the new one's decisions. Refused, with nothing
    /// changed, for depths out of bounds.
    ///
    /// [`Params`]: crate::Params
    pub fn set_policy(
        &mut self,
        policy: crate::QueuePolicy,
        queue_depth: usize,
        reservation_depth: usize,
    ) -> Result<(), QueueError> {
        let params = crate::Params {
            policy,
            queue_depth,
            reservation_depth,
            ..self.params.clone()
        };
        params.validate()?;
        if params != self.params {
            self.params = params;
            self.replan = true;
        }
        Ok(())
    }
}

/// Every vertex at or below `roots` in the dominant subsystem's tree.
fn subtrees(m: &Matcher, roots: &[VertexId]) -> Result<BTreeSet<VertexId>, QueueError> {
    let mut gone = BTreeSet::new();
    let mut stack = Vec::with_capacity(roots.len());
    for &v in roots {
        if v.index() >= m.graph.len() || m.graph.is_removed(v) {
            return Err(QueueError::NoSuchVertex(v.0));
        }
        stack.push(v);
    }
    while let Some(v) = stack.pop() {
        if gone.insert(v) {
            stack.extend(m.graph.children(v).iter().map(|&c| VertexId(c)));
        }
    }
    Ok(gone)
}

#[cfg(test)]
mod tests;
