//! What a matched vertex decides: Fluxion's `resolve_graph` at the top and
//! `dom_finish_vtx` below it — each child type's best candidates chosen and their edges
//! marked for the update walk.

use shardsched_resource::{Sym, VertexId};
use smallvec::SmallVec;

use super::{Errno, Walk, perf_class};
use crate::request::ReqId;

/// Up to this many chosen types at one vertex, `enforce` orders them on the stack.
const INLINE_KINDS: usize = 4;

impl Walk<'_> {
    /// Fluxion's `resolve_graph`: the top-level choice, the root's share, and the marks up
    /// from the chosen candidates through the omitted prefix. Returns what to take of the
    /// root.
    pub(super) fn resolve_graph(&mut self, root: VertexId, root_avail: u64) -> Option<u64> {
        self.choices.clear();
        let req = self.req;
        // Under `locality`, the scores of every top-level type chosen so far (Fluxion's
        // comparator keeps one interval set through the loop).
        let mut runs = self.policy.locality.then(ScoreRuns::default);
        for &r in &req.top {
            let q = req.req(r);
            let qc = self.cands.qualified(0, q.ty);
            let count = q.calc_count(qc);
            if count == 0 {
                self.errno = Errno::Busy;
                return None;
            }
            match runs.as_mut() {
                Some(runs) => {
                    runs.add(self.cands.groups.iter().filter(|g| g.kind == q.ty));
                    let cands = &self.cands;
                    self.choices
                        .choose(cands, (0, q.ty), (count, qc), &mut |a: i64, b: i64| {
                            runs.start_of(a) > runs.start_of(b)
                        });
                }
                None => {
                    self.choose((0, q.ty), (count, qc));
                }
            }
        }
        self.multilevel = 0;
        // has_root: the root type's count, or 1.
        let mut needs = 1;
        for &r in &req.top {
            let q = req.req(r);
            if Some(q.ty) == Some(self.g.kind(root)) && !q.is_slot {
                let count = q.calc_count(root_avail);
                if count == 0 {
                    return None;
                }
                needs = count;
            }
        }
        self.enforce(0, true);
        Some(needs)
    }

    /// Fluxion's `dom_finish_vtx`: for the request `u` matched, choose each child type;
    /// returns `u`'s score and whether it chose (and so decides itself).
    pub(super) fn finish_vtx(
        &mut self,
        u: VertexId,
        reqs: &[ReqId],
        mark: usize,
        factor: i64,
    ) -> Option<(i64, bool)> {
        let req = self.req;
        let ukind = self.g.kind(u);
        let mut met = true;
        let mut hier = false;
        self.choices.clear();
        'reqs: for &r in reqs {
            let q = req.req(r);
            if q.is_slot || q.ty != ukind {
                continue;
            }
            for &c in &q.with {
                let cq = req.req(c);
                let qc = self.cands.qualified(mark, cq.ty);
                let count = cq.calc_count(qc);
                if count == 0 {
                    met = false;
                    break 'reqs;
                }
                hier |= self.choose((mark, cq.ty), (count, qc));
            }
        }
        self.multilevel -= factor;
        if !met {
            return None;
        }
        let score = if self.policy.variation {
            1 + perf_class(self.g, u)
        } else {
            1 + self.multilevel + self.g.id(u) + 1
        };
        Some((score, hier))
    }

    /// Sorts `kind`'s candidates above `mark` by the policy's score order and takes `k` of
    /// the `qualified` ([`Choices::choose`]).
    ///
    /// [`Choices::choose`]: super::evals::Choices::choose
    pub(super) fn choose(
        &mut self,
        (mark, kind): (usize, Sym),
        (k, qualified): (u64, u64),
    ) -> bool {
        let high = self.policy.prefer_high && !self.policy.variation;
        let cands = &self.cands;
        if high {
            self.choices.choose(
                cands,
                (mark, kind),
                (k, qualified),
                &mut |a: i64, b: i64| a > b,
            )
        } else {
            self.choices.choose(
                cands,
                (mark, kind),
                (k, qualified),
                &mut |a: i64, b: i64| a < b,
            )
        }
    }

    /// Fluxion's `enforce`: marks the edges of the chosen candidates (types in interning
    /// order); at the top level (`unconstrained`) also the edges up from them through the
    /// omitted prefix.
    pub(super) fn enforce(&mut self, mark: usize, unconstrained: bool) {
        // On the stack for the usual few types: this runs at every vertex that chooses.
        let mut kinds: SmallVec<[(u32, usize); INLINE_KINDS]> = self
            .choices
            .list
            .iter()
            .enumerate()
            .filter(|(_, c)| c.best_k > 0)
            .map(|(i, c)| (self.types.rank(c.kind), i))
            .collect();
        kinds.sort_unstable();
        for (_, ci) in kinds {
            let best_i = self.choices.list[ci].best_i;
            for j in 0..best_i {
                let gi = self.choices.list[ci].order[j] as usize;
                if self.cands.groups[gi].root {
                    continue;
                }
                let (s, n) = self.cands.groups[gi].edges;
                for ei in s..s + n {
                    let e = self.cands.edges[ei as usize];
                    let from = self.via_of(e.child);
                    self.marks.set(e.child, e.needs, e.excl, from);
                    if unconstrained {
                        self.mark_up(mark, VertexId(e.child));
                    }
                }
            }
        }
    }

    /// Marks the unmarked edges above `v` whose target type the top-level candidates hold
    /// but did not choose (the omitted prefix), up to the root or a marked edge.
    pub(super) fn mark_up(&mut self, mark: usize, v: VertexId) {
        let Some(mut parent) = self.tree.parent(v) else {
            return;
        };
        // A marked edge first: the nodes of one rack, chosen one after another, stop at
        // once at the rack their first one marked.
        while self.marks.get(parent.0).is_none() {
            let Some(grand) = self.tree.parent(parent) else {
                break;
            };
            let tgt = parent;
            parent = grand;
            let kind = self.g.kind(tgt);
            let contained = self.cands.groups[mark..].iter().any(|g| g.kind == kind)
                || self.choices.list.iter().any(|c| c.kind == kind);
            let chosen = self
                .choices
                .list
                .iter()
                .any(|c| c.kind == kind && c.best_k > 0);
            if contained && !chosen {
                let size = u64::try_from(self.g.size(tgt)).unwrap_or(0);
                self.marks.set(tgt.0, size, false, parent.0);
            }
        }
    }
}

/// The runs of contiguous scores among top-level candidates, by where each starts:
/// Fluxion's `locality` folds each candidate's score into a one-point interval of a joining
/// `boost::icl::interval_set`, which merges touching integers.
#[derive(Default)]
struct ScoreRuns {
    /// The scores added, sorted, each once.
    scores: Vec<i64>,
    /// `(first, last)` of each run, in order.
    runs: Vec<(i64, i64)>,
}

impl ScoreRuns {
    /// Adds the scores of `groups`.
    fn add<'c>(&mut self, groups: impl Iterator<Item = &'c super::evals::EGroup>) {
        self.scores.extend(groups.map(|g| g.score));
        self.scores.sort_unstable();
        self.scores.dedup();
        self.runs.clear();
        for &s in &self.scores {
            match self.runs.last_mut() {
                Some(r) if r.1.checked_add(1) == Some(s) => r.1 = s,
                _ => self.runs.push((s, s)),
            }
        }
    }

    /// Where the run holding `score` starts (runs are disjoint, so comparing starts
    /// compares the runs as boost's intervals compare: lower bound first).
    fn start_of(&self, score: i64) -> i64 {
        let i = self.runs.partition_point(|r| r.1 < score);
        self.runs.get(i).map_or(score, |r| r.0)
    }
}
