//! Forming slots at a vertex from its children (Fluxion's `dom_slot` and `cnt_slot`).
//!
//! The children are visited with the slot's contents, every one of them exclusively; each
//! member type's candidates are sorted by the policy; then as many slots are formed as there
//! are disjoint bundles of whole candidates of every member type, each bundle totalling at
//! least the per-slot count. A slot takes whole candidates — a 616-unit ssd backs one
//! `ssd[101]` slot, not six — in sorted order, and scores 1 plus its members' scores.

use std::collections::HashMap;

use shardsched_resource::{Sym, VertexId};

use super::evals::{Cands, EGroup, EvalEdge};
use super::score::Among;
use super::{Budget, Walk};
use crate::request::ReqId;
use crate::types::SLOT;

impl<'a> Walk<'a> {
    /// Forms slots of `shape` at `u`; leaves them on the candidate stack. `chooser` says
    /// whose decision picks among them (`u`'s, its parent's, or the top's).
    pub(super) fn dom_slot(
        &mut self,
        u: VertexId,
        shape: &'a [ReqId],
        nslots: u64,
        pristine: bool,
        chooser: Among,
    ) {
        let mark = self.cands.groups.len();
        // With one exactly-counted member type of unit-sized vertices whose scores follow
        // the graph order among the members the `chooser` compares, the best members are
        // the first found walking best-first: stop once they fill as many slots as can be
        // asked for; the slots the rest would form score worse (every slot has as many
        // members, each worse than the last) and are never chosen.
        let unit = |b: &Budget| self.score_order.unit_sized(b.kind);
        let mut budget = self
            .budget_for(shape, chooser)
            .filter(unit)
            .map(|b| Budget {
                per_share: u64::try_from(b.remaining).unwrap_or(u64::MAX),
                remaining: i64::try_from(nslots).unwrap_or(i64::MAX),
                ..b
            });
        self.explore(u, shape, pristine, true, budget.as_mut(), nslots);
        self.note_empty_types(shape, mark);
        // dom_finish_slot: every type present is sorted and taken whole.
        let mut kinds = std::mem::take(&mut self.slot_kinds);
        self.choose_all_present(mark, &mut kinds);
        self.slot_kinds = kinds;
        let qual = self.count_slots(shape, mark);
        // Each member's count per slot (from what qualifies, as Fluxion computes it for
        // every slot) and its cursor in the sorted candidates.
        let mut members = std::mem::take(&mut self.slot_members);
        members.clear();
        for &e in shape {
            let q = self.req.req(e);
            let count = q.calc_count(self.cands.qualified(mark, q.ty));
            members.push((q.ty, count, 0usize));
        }
        let mut edges = std::mem::take(&mut self.slot_edges);
        edges.clear();
        let mut slots = std::mem::take(&mut self.slot_list);
        slots.clear();
        let mut complete = true;
        {
            let cands = &self.cands;
            let choices = &self.choices;
            'slots: for _ in 0..qual {
                let mut score = 1i64;
                let start = edges.len();
                for i in 0..members.len() {
                    let (ty, count, _) = members[i];
                    // A type sharing its cursor with an earlier member of the same type.
                    let owner = members[..i].iter().position(|m| m.0 == ty).unwrap_or(i);
                    let list = choices.sorted(ty);
                    let cursor = &mut members[owner].2;
                    let Some(taken) = take_members(cands, list, cursor, count, &mut edges) else {
                        complete = false;
                        break 'slots;
                    };
                    score += taken;
                }
                slots.push((score, start as u32, (edges.len() - start) as u32));
            }
        }
        self.cands.groups.truncate(mark);
        if !complete {
            self.complain_of_slots();
        }
        if complete {
            for &(score, s, n) in &slots {
                push_slot(&mut self.cands, score, &edges[s as usize..(s + n) as usize]);
            }
        }
        self.slot_members = members;
        self.slot_edges = edges;
        self.slot_list = slots;
    }

    /// Fluxion's `dom_slot` message: the members ran out before the slots counted formed.
    #[cold]
    fn complain_of_slots(&mut self) {
        self.complain(|t| t.push_str("dom_slot: not enough slots.\n"));
    }

    /// Fluxion's EINVAL from `dom_finish_slot`: under a stop-on-1 policy, once a child was
    /// found, every type the children were visited with has a (maybe empty) candidate list,
    /// and taking all of an empty one fails with EINVAL — an errno that stays unless a later
    /// step sets another.
    fn note_empty_types(&mut self, list: &[ReqId], mark: usize) {
        if !self.policy.stop_at_first || self.cands.groups.len() == mark {
            return;
        }
        if list
            .iter()
            .any(|&r| self.cands.qualified(mark, self.req.req(r).ty) == 0)
        {
            self.errno = super::Errno::Inval;
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
                let mut add = |n: u64| {
                    accum = accum.saturating_add(n);
                    if accum >= count {
                        shares += 1;
                        accum = 0;
                    }
                };
                let sorted = self.choices.sorted(q.ty);
                if sorted.is_empty() {
                    for g in self.cands.groups[mark..].iter().filter(|g| g.kind == q.ty) {
                        add(g.count);
                    }
                } else {
                    for &gi in sorted {
                        add(self.cands.groups[gi as usize].count);
                    }
                }
                shares
            };
            qual = qual.min(fit);
        }
        if qual == u64::MAX { 0 } else { qual }
    }
}

/// Takes whole candidates of one member type from `list` (group indices in the order slots
/// take them), from `*cursor` on, until they hold `count` units: pushes an exclusive edge to
/// each one's first child onto `edges` and returns the sum of their scores; `None` when the
/// list runs out first (no further slot can be formed).
#[inline]
fn take_members(
    cands: &Cands,
    list: &[u32],
    cursor: &mut usize,
    count: u64,
    edges: &mut Vec<EvalEdge>,
) -> Option<i64> {
    let mut score = 0i64;
    let mut taken = 0u64;
    while taken < count {
        let &gi = list.get(*cursor)?;
        *cursor += 1;
        let g = cands.groups[gi as usize];
        let first = cands.edges[g.edges.0 as usize];
        edges.push(EvalEdge {
            child: first.child,
            needs: g.count,
            excl: true,
        });
        score += g.score;
        taken += g.count;
    }
    Some(score)
}

/// Pushes a formed slot of `edges` onto the candidate stack as one candidate.
fn push_slot(cands: &mut Cands, score: i64, edges: &[EvalEdge]) {
    let at = cands.edges.len() as u32;
    cands.edges.extend_from_slice(edges);
    cands.groups.push(EGroup {
        kind: SLOT,
        score,
        count: 1,
        root: false,
        edges: (at, edges.len() as u32),
    });
}

/// One state of the or-slot search: the counts left after it, how many slots the best
/// choice from here forms, and which slot that choice takes first (Fluxion's
/// `select_or_config` tuple).
type OrConfig = (Vec<i64>, i64, i64);

impl<'a> Walk<'a> {
    /// Sorts every type present above `mark` by the slot order and takes each whole (the
    /// start of Fluxion's `dom_finish_slot`); `kinds` gets those types in interning order.
    fn choose_all_present(&mut self, mark: usize, kinds: &mut Vec<Sym>) {
        self.choices.clear();
        kinds.clear();
        for g in &self.cands.groups[mark..] {
            if !kinds.contains(&g.kind) {
                kinds.push(g.kind);
            }
        }
        kinds.sort_by_key(|&k| self.types.rank(k));
        let cands = &self.cands;
        if self.policy.prefer_high || self.policy.variation {
            self.choices
                .choose_all(cands, mark, kinds, &mut |a: i64, b: i64| a > b);
        } else {
            self.choices
                .choose_all(cands, mark, kinds, &mut |a: i64, b: i64| a < b);
        }
    }

    /// The flexible traverser's `dom_slot`: the children are visited with the union of the
    /// slots' contents; then the slots are chosen to form as many as possible (a memoized
    /// search over the counts left, the first slot of the list winning ties), and formed in
    /// that order from each type's sorted candidates.
    pub(super) fn dom_or_slot(
        &mut self,
        u: VertexId,
        slots: &'a [ReqId],
        nslots: u64,
        pristine: bool,
    ) {
        let req: &'a crate::request::Request = self.req;
        let union = req.union_of(slots);
        let mark = self.cands.groups.len();
        self.explore(u, union, pristine, true, None, nslots);
        self.note_empty_types(union, mark);
        let mut kinds: Vec<Sym> = Vec::new();
        self.choose_all_present(mark, &mut kinds);
        let types: Vec<Sym> = union.iter().map(|&r| req.req(r).ty).collect();
        let counts: Vec<i64> = types
            .iter()
            .map(|&t| i64::from(self.cands.qualified(mark, t) as u32 as i32))
            .collect();
        let mut memo: HashMap<Vec<i64>, OrConfig> = HashMap::new();
        // Fluxion keeps the slot count in an int.
        let nslots = i64::from(nslots as u32 as i32);
        let mut cfg = self.select_or_config(slots, &types, &counts, nslots, &mut memo);
        let qual = cfg.1 as u32;
        let mut cursors: Vec<(Sym, usize)> = Vec::new();
        let mut formed: Vec<(i64, Vec<EvalEdge>)> = Vec::new();
        let mut complete = qual > 0;
        'slots: for _ in 0..qual {
            let Ok(index) = usize::try_from(cfg.2) else {
                complete = false;
                break;
            };
            let Some(&slot) = slots.get(index) else {
                complete = false;
                break;
            };
            let members = &req.req(slot).with;
            if members.is_empty() && formed.len() >= SLOTS_WITHOUT_MEMBERS_MAX {
                break;
            }
            let mut score = 1i64;
            let mut edges = Vec::new();
            for &e in members {
                let q = req.req(e);
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
                let cursor = &mut cursors[pos].1;
                let Some(taken) = take_members(&self.cands, &list, cursor, count, &mut edges)
                else {
                    complete = false;
                    self.complain_of_slots();
                    break 'slots;
                };
                score += taken;
            }
            formed.push((score, edges));
            cfg = memo.get(&cfg.0).cloned().unwrap_or((Vec::new(), 0, 0));
        }
        self.cands.groups.truncate(mark);
        if !complete {
            return;
        }
        for (score, edges) in formed {
            push_slot(&mut self.cands, score, &edges);
        }
    }

    /// Fluxion's `select_or_config`: the most slots `counts` (of `types`) can form, and the
    /// first slot to take for it. With one slot: the least, over its members, of the counts
    /// over what one slot takes, capped by `nslots`; with several: the best of taking each
    /// slot first (the first of the best on ties), searched depth first with memoization.
    fn select_or_config(
        &self,
        slots: &[ReqId],
        types: &[Sym],
        counts: &[i64],
        nslots: i64,
        memo: &mut HashMap<Vec<i64>, OrConfig>,
    ) -> OrConfig {
        if let Some(c) = memo.get(counts) {
            return c.clone();
        }
        let req = self.req;
        let idx = |t: Sym| types.iter().position(|&x| x == t);
        if let [slot] = slots {
            let mut max = nslots;
            for &e in &req.req(*slot).with {
                let q = req.req(e);
                let have = idx(q.ty).map(|i| counts[i] as u32);
                let qc = have.unwrap_or(0);
                let count = q.calc_count(u64::from(qc)) as u32;
                match have {
                    Some(h) if h >= count && count > 0 => {
                        max = max.min(i64::from((h / count) as i32));
                    }
                    _ => {
                        max = 0;
                        break;
                    }
                }
            }
            let c = (counts.to_vec(), max, 0);
            memo.insert(counts.to_vec(), c.clone());
            return c;
        }
        let mut best = -1i64;
        for (i, &slot) in slots.iter().enumerate() {
            let mut updated = counts.to_vec();
            let mut fits = true;
            for &e in &req.req(slot).with {
                let q = req.req(e);
                let Some(k) = idx(q.ty) else {
                    fits = false;
                    break;
                };
                let count = q.calc_count(u64::from(counts[k] as u32)) as u32;
                if count == 0 {
                    fits = false;
                    break;
                }
                updated[k] = i64::from((updated[k] as u32).wrapping_sub(count) as i32);
            }
            // A slot that takes nothing would search forever (Fluxion recurses without end).
            if !fits || updated == counts {
                continue;
            }
            let test = self
                .select_or_config(slots, types, &updated, nslots, memo)
                .1;
            if best < test {
                best = test;
                memo.insert(counts.to_vec(), (updated, best + 1, i as i64));
            }
        }
        if best < 0 {
            memo.insert(counts.to_vec(), (Vec::new(), 0, -1));
        }
        memo.get(counts).cloned().unwrap_or((Vec::new(), 0, -1))
    }
}

/// Slots formed at most from an or-slot without members (Fluxion would form billions).
const SLOTS_WITHOUT_MEMBERS_MAX: usize = 1 << 16;
