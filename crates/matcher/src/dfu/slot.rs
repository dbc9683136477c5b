//! Forming slots at a vertex from its children (Fluxion's `dom_slot` and `cnt_slot`).
//!
//! The children are visited with the slot's contents, every one of them exclusively; each
//! member type's candidates are sorted by the policy; then as many slots are formed as there
//! are disjoint bundles of whole candidates of every member type, each bundle totalling at
//! least the per-slot count. A slot takes whole candidates — a 616-unit ssd backs one
//! `ssd[101]` slot, not six — in sorted order, and scores 1 plus its members' scores.

use shardsched_resource::{Sym, VertexId};

use super::Walk;
use super::evals::{EGroup, EvalEdge};
use crate::request::ReqId;
use crate::types::SLOT;

impl<'a> Walk<'a> {
    /// Forms slots of `shape` at `u`; leaves them on the candidate stack.
    pub(super) fn dom_slot(
        &mut self,
        u: VertexId,
        shape: &'a [ReqId],
        nslots: u64,
        pristine: bool,
    ) {
        let mark = self.cands.groups.len();
        self.explore(u, shape, pristine, true, None, nslots);
        // dom_finish_slot: every type present is sorted and taken whole.
        self.choices.clear();
        let mut kinds: Vec<Sym> = Vec::new();
        for g in &self.cands.groups[mark..] {
            if !kinds.contains(&g.kind) {
                kinds.push(g.kind);
            }
        }
        kinds.sort_by_key(|&k| self.types.rank(k));
        let slot_order_high = self.policy.prefer_high || self.policy.variation;
        {
            let cands = &self.cands;
            if slot_order_high {
                self.choices
                    .choose_all(cands, mark, &kinds, &mut |a: i64, b: i64| a > b);
            } else {
                self.choices
                    .choose_all(cands, mark, &kinds, &mut |a: i64, b: i64| a < b);
            }
        }
        let qual = self.count_slots(shape, mark);
        let mut cursors: Vec<(Sym, usize)> = Vec::new();
        let mut slots: Vec<(i64, Vec<EvalEdge>)> = Vec::new();
        let mut complete = true;
        'slots: for _ in 0..qual {
            let mut score = 1i64;
            let mut edges = Vec::new();
            for &e in shape {
                let q = self.req.req(e);
                let qc = self.cands.qualified(mark, q.ty);
                let count = q.calc_count(qc);
                let list = self.list_of(q.ty, mark);
                let pos = match cursors.iter().position(|c| c.0 == q.ty) {
                    Some(p) => p,
                    None => {
                        cursors.push((q.ty, 0));
                        cursors.len() - 1
                    }
                };
                let mut j = 0u64;
                while j < count {
                    let Some(&gi) = list.get(cursors[pos].1) else {
                        complete = false;
                        break 'slots;
                    };
                    cursors[pos].1 += 1;
                    let g = self.cands.groups[gi as usize];
                    let first = self.cands.edges[g.edges.0 as usize];
                    edges.push(EvalEdge {
                        child: first.child,
                        needs: g.count,
                        excl: true,
                    });
                    score += g.score;
                    j += g.count;
                }
            }
            slots.push((score, edges));
        }
        self.cands.groups.truncate(mark);
        if !complete {
            return;
        }
        for (score, edges) in slots {
            let s = self.cands.edges.len() as u32;
            let n = edges.len() as u32;
            self.cands.edges.extend(edges);
            self.cands.groups.push(EGroup {
                kind: SLOT,
                score,
                count: 1,
                root: false,
                edges: (s, n),
            });
        }
    }

    /// The candidates of `kind` above `mark` in the order slots take them: sorted when the
    /// type was sorted, else in stack order.
    fn list_of(&self, kind: Sym, mark: usize) -> Vec<u32> {
        let sorted = self.choices.sorted(kind);
        if !sorted.is_empty() {
            return sorted.to_vec();
        }
        (mark..self.cands.groups.len())
            .filter(|&i| self.cands.groups[i].kind == kind)
            .map(|i| i as u32)
            .collect()
    }

    /// Fluxion's `cnt_slot`: how many slots the candidates above `mark` can form — for each
    /// member type, the number of disjoint bundles of whole candidates each totalling the
    /// per-slot count; the least over the types.
    fn count_slots(&self, shape: &[ReqId], mark: usize) -> u64 {
        let mut qual = u64::MAX;
        for &e in shape {
            let q = self.req.req(e);
            let qc = self.cands.qualified(mark, q.ty);
            let count = q.calc_count(qc);
            let fit = if count == 0 {
                0
            } else {
                let mut accum = 0u64;
                let mut shares = 0u64;
                for gi in self.list_of(q.ty, mark) {
                    let n = self.cands.groups[gi as usize].count;
                    accum = accum.saturating_add(n);
                    if accum >= count {
                        shares += 1;
                        accum = 0;
                    }
                }
                shares
            };
            qual = qual.min(fit);
        }
        if qual == u64::MAX { 0 } else { qual }
    }
}
