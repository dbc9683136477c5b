//! `attach` and `remove`: resource-query's grow and shrink of the graph of a running session
//! (Fluxion's `add_subgraph`, `utilities/command.cpp:548`, and `remove_subgraph`, `:567`).
//!
//! The graph changes in place with vertex ids kept
//! ([`shardsched_resource::ResourceGraph::attach`], `detach`); then everything derived from it is made again — the type
//! table (new types after the known ones), the calendars primed on the new graph as
//! Fluxion's `initialize` primes them after either command, `first`'s learned order, the
//! score order — and each held job's records are carried over ([`SchedState::carry`]).
//! Nothing of this runs on a match: a session that never changes its graph pays nothing.
//!
//! Removing vertices a job holds gives them back from the job first (a partial cancel:
//! Fluxion does exactly that for `remove RANKS false`; for a path it does not, and keeps
//! counting what the job held there against its ancestors' remaining resources — see
//! docs/MATCHING.md).

use std::collections::{BTreeMap, BTreeSet};

use shardsched_resource::{AttachError, JgfDocument, ResourceGraph, VertexId};

use crate::state::SchedState;
use crate::{MatchError, Matcher, dfu, prune_rank_of, subtree_of, tree_of};

impl Matcher {
    /// Adds the vertices and edges of `doc` the graph does not have (see
    /// [`shardsched_resource::ResourceGraph::attach`]); returns how many vertices were added. On an error
    /// nothing changed. As Fluxion's, the root's first-type planner keeps its points' keys
    /// (module `instants`).
    pub fn attach(&mut self, doc: &JgfDocument) -> Result<usize, MatchError> {
        self.keeping_keys(|m| m.attach_with(doc, ResourceGraph::attach))
    }

    /// [`Matcher::attach`] with the new children ordered by rank among the old ones
    /// ([`ResourceGraph::attach_in_rank_order`]): what a scheduler whose queue gains nodes
    /// wants, so that they are visited where a graph loaded whole would have them.
    pub fn graft(&mut self, doc: &JgfDocument) -> Result<usize, MatchError> {
        self.attach_with(doc, ResourceGraph::attach_in_rank_order)
    }

    fn attach_with(
        &mut self,
        doc: &JgfDocument,
        attach: fn(&mut ResourceGraph, &JgfDocument) -> Result<usize, AttachError>,
    ) -> Result<usize, MatchError> {
        // (Covers stand for the same holds: turning them back changes no answer.)
        self.uncover_all()?;
        let added = attach(&mut self.graph, doc)?;
        if added > 0 {
            self.regrow()?;
        }
        Ok(added)
    }

    /// Removes the vertex at `path` and everything below it in the dominant subsystem's
    /// tree, giving back first what jobs hold there. As Fluxion's, the root's first-type
    /// planner keeps its points' keys (module `instants`).
    pub fn remove_path(&mut self, path: &str) -> Result<(), MatchError> {
        let root = self.vertex(path)?;
        self.keeping_keys(|m| m.remove_subtrees(&[root]))
    }

    /// Runs `change`, a change of the graph's totals, as resource-query's `attach` and
    /// `remove` make it: the root's first-type planner's points get the new free units
    /// and keep their keys in the min-time tree (`planner_update_total`), so a point whose
    /// key fell behind is not offered to a reservation search (module `instants`). A
    /// queue's changes of definition (`graft`, `remove_subtrees`) do not: they offer every
    /// instant where the resources are.
    fn keeping_keys<T>(
        &mut self,
        change: impl FnOnce(&mut Self) -> Result<T, MatchError>,
    ) -> Result<T, MatchError> {
        let root = self.graph.root();
        // The first type and its free units at each point, before.
        let before = self.state.aggregate(root).and_then(|a| {
            let free: BTreeMap<i64, i64> = self
                .instants
                .from(i64::MIN)
                .map(|t| (t, a.cal.avail_at(t, 0)))
                .collect();
            Some((*a.types.first()?, free))
        });
        let changed = change(self)?;
        if let Some((first, free)) = before
            && let Some(a) = self.state.aggregate(root)
            && a.types.first() == Some(&first)
        {
            self.instants
                .totals_changed(&free, |t| a.cal.avail_at(t, 0));
        }
        Ok(changed)
    }

    /// [`Matcher::remove_path`] for each of `roots` at once: what derives from the graph is
    /// made again once, not once per subtree (a queue losing many nodes).
    pub fn remove_subtrees(&mut self, roots: &[VertexId]) -> Result<(), MatchError> {
        if roots.contains(&self.tree().root()) {
            // Fluxion finds no parent to cut it from (`get_parent_vtx`) and refuses.
            return Err(MatchError::BadRequest("the root cannot be removed".into()));
        }
        let mut gone = BTreeSet::new();
        let mut subtrees = Vec::with_capacity(roots.len());
        for &root in roots {
            let mut here = BTreeSet::new();
            let mut stack = vec![root];
            while let Some(v) = stack.pop() {
                if here.insert(v.0) {
                    stack.extend(self.tree().children(v).iter().map(|&c| VertexId(c)));
                }
            }
            gone.extend(here.iter().copied());
            subtrees.push((root, here));
        }
        // One pass over the jobs for all the subtrees; then, per subtree, only its holders.
        let holders = self.holders(&gone);
        for (root, here) in &subtrees {
            for &jobid in &holders {
                let holds_here = self
                    .job(jobid)
                    .is_some_and(|j| j.alloc.iter().any(|av| here.contains(&av.v.0)));
                if holds_here {
                    self.partial_cancel_within(jobid, here, *root)?;
                }
            }
        }
        self.remove_vertices(&gone)
    }

    /// Removes every vertex of `ranks` (Fluxion's `remove RANKS false`): the jobs holding
    /// some give them back (a partial cancel by ranks), then they go. A rank without
    /// vertices is an error, before anything changes. As Fluxion's, the root's first-type
    /// planner keeps its points' keys (module `instants`).
    pub fn remove_ranks(&mut self, ranks: &BTreeSet<i64>) -> Result<(), MatchError> {
        self.keeping_keys(|m| m.detach_ranks(ranks))
    }

    fn detach_ranks(&mut self, ranks: &BTreeSet<i64>) -> Result<(), MatchError> {
        let mut gone = BTreeSet::new();
        for &rank in ranks {
            let before = gone.len();
            gone.extend(self.graph.rank_vertices(rank).map(|v| v.0));
            if gone.len() == before {
                return Err(MatchError::BadRequest(format!(
                    "{rank} not found in by_rank map"
                )));
            }
        }
        if gone.contains(&self.tree().root().0) {
            return Err(MatchError::BadRequest("the root cannot be removed".into()));
        }
        for jobid in self.holders(&gone) {
            let Some(job) = self.job(jobid) else {
                continue;
            };
            let held: BTreeSet<i64> = job
                .alloc
                .iter()
                .filter(|av| gone.contains(&av.v.0))
                .map(|av| self.graph.rank(av.v))
                .collect();
            self.partial_cancel_ranks(jobid, &held)?;
        }
        self.remove_vertices(&gone)
    }

    /// The jobs holding some of `vertices`.
    fn holders(&self, vertices: &BTreeSet<u32>) -> Vec<u64> {
        self.jobs()
            .filter(|(_, j)| j.alloc.iter().any(|av| vertices.contains(&av.v.0)))
            .map(|(id, _)| id)
            .collect()
    }

    fn remove_vertices(&mut self, gone: &BTreeSet<u32>) -> Result<(), MatchError> {
        self.uncover_all()?;
        self.graph.detach(gone);
        // What jobs gone from the books left there (see `partial`) goes with the vertices.
        for job in self.side.iter_mut().map(|s| &mut s.record) {
            job.spans
                .retain(|&s| !gone.contains(&self.state.span_vertex(s).0));
        }
        self.regrow()
    }

    /// Turns every cover back into leaf holds: cover groups change with the graph.
    fn uncover_all(&mut self) -> Result<(), MatchError> {
        let tree = tree_of(&self.graph, &self.subtree);
        let lists = crate::books_by_id(&mut self.jobs).map(|j| &mut j.spans);
        let side = self.side.iter_mut().map(|s| &mut s.record.spans);
        for spans in lists.chain(side) {
            self.state.uncover(&self.graph, tree, spans)?;
        }
        Ok(())
    }

    /// Makes again what derives from the graph, carrying every record over.
    fn regrow(&mut self) -> Result<(), MatchError> {
        let types = self.types.grown(&self.graph);
        self.subtree = subtree_of(&self.graph, self.dominant_subsystem())?;
        let tree = tree_of(&self.graph, &self.subtree);
        // The pruning types so far (leaf types included) stay, as Fluxion's do.
        let mut prune = self.prune.clone();
        let mut state = SchedState::new_on(&self.graph, tree, &types, &mut prune);
        let lists = crate::books_by_id(&mut self.jobs).map(|j| &mut j.spans);
        let side = self.side.iter_mut().map(|s| &mut s.record.spans);
        for spans in lists.chain(side) {
            let mut carried = Vec::with_capacity(spans.len());
            for &s in spans.iter() {
                self.state.carry(s, &mut state, &mut carried)?;
            }
            *spans = carried;
        }
        self.state = state;
        self.prune_rank_of = prune_rank_of(&self.graph, &types, &prune);
        self.types = types;
        self.prune = prune;
        self.score_order = dfu::ScoreOrder::new(&self.graph, tree, &self.policy);
        if let Some(order) = &self.order {
            self.order = Some(order.regrown(&self.graph, tree));
        }
        self.compiled.clear();
        self.dag_state = None;
        self.marks = dfu::Marks::default();
        self.walk_scratch = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
