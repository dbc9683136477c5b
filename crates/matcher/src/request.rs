//! A jobspec compiled against one graph: types interned, slots marked, subtree needs summed.
//!
//! The traverser walks the graph and the request together; comparing interned symbols
//! instead of type strings keeps that walk free of string work.

use shardsched_jobspec::{Count, CountOp, Jobspec, Resource};

use crate::MatchError;
use crate::constraint::NodeConstraint;
use crate::types::{PruneTypes, SLOT, TypeTable};
use shardsched_resource::{ResourceGraph, Sym};

/// Index of a [`Req`] in [`Request::reqs`].
pub type ReqId = u32;

/// The type of a request Fluxion does not know (it matches no vertex).
pub const UNKNOWN_TYPE: Sym = Sym(u32::MAX - 1_000_000);

/// Fluxion's jobspec error for a resource type it does not know.
pub const UNKNOWN_TYPE_MESSAGE: &str = "Value of \"type\" must be a resource type known to fluxion";

/// One resource vertex of the jobspec.
#[derive(Clone, Debug)]
pub struct Req {
    /// The graph's symbol for this type; `None` when no vertex has it (or for a slot).
    pub kind: Option<Sym>,
    /// The type as Fluxion knows it: [`SLOT`] for slots, [`UNKNOWN_TYPE`] when unknown.
    pub ty: Sym,
    /// `type: slot`.
    pub is_slot: bool,
    /// `type: xor_slot` (the flexible traverser expands these into alternatives).
    pub is_xor: bool,
    pub count: Count,
    /// Explicit `exclusive`; slots are exclusive for their contents regardless.
    pub exclusive: Option<bool>,
    /// The label of a non-slot resource (Fluxion records it on the vertices it matches).
    pub label: Option<String>,
    pub with: Vec<ReqId>,
    /// Per instance of this resource: how many units of each pruned type its strict subtree
    /// needs (the resource itself not counted).
    pub needs: Vec<(Sym, i64)>,
    /// [`Req::needs`] plus the resource itself: what one instance needs in all.
    pub unit_needs: Vec<(Sym, i64)>,
    /// Fluxion's `user_data`: units of each pruning type (by interning rank) below one
    /// instance, from the children's minimum counts — what a vertex's aggregate must hold
    /// for the vertex to be considered.
    pub user_data: Vec<(u32, i64)>,
}

impl Req {
    /// [`Req::needs`] plus one unit of this resource's own type when it is pruned.
    pub fn needs_with_self<'a>(
        &'a self,
        prune_types: &'a [Sym],
    ) -> impl Iterator<Item = (Sym, i64)> + 'a {
        let own = self
            .kind
            .filter(|k| prune_types.contains(k))
            .map(|k| (k, 1));
        let mut merged = self.needs.clone();
        if let Some((k, n)) = own {
            match merged.iter_mut().find(|(s, _)| *s == k) {
                Some(e) => e.1 += n,
                None => merged.push((k, n)),
            }
        }
        merged.into_iter()
    }

    /// Fluxion's `calc_count`: how many to take when `qualified` are available — the
    /// largest value of the count's sequence within `qualified` and `max`, or 0 when even
    /// `min` is not available.
    pub fn calc_count(&self, qualified: u64) -> u64 {
        calc_count(&self.count, qualified)
    }

    /// Fluxion's `calc_effective_max`: the count taken when everything is available.
    pub fn effective_max(&self) -> u64 {
        calc_count(&self.count, u64::from(u32::MAX))
    }
}

/// Fluxion's `calc_count` on its 32-bit counts (values above `u32::MAX` are clamped).
pub fn calc_count(count: &Count, qualified: u64) -> u64 {
    let clamp = |x: u64| x.min(u64::from(u32::MAX));
    let (min, max, qc) = (clamp(count.min), clamp(count.max), clamp(qualified));
    if min > max || min > qc {
        return 0;
    }
    let operand = count.operand;
    match count.operator {
        CountOp::Add => {
            let top = qc.min(max);
            let range = top - min;
            top - range % operand.max(1)
        }
        CountOp::Mul => {
            if operand <= 1 {
                return min;
            }
            let mut cur = min;
            let mut out = 0;
            // Fluxion loops while cur grows; cur 0 would never grow.
            while cur != 0 && cur <= qc && cur <= max {
                out = cur;
                cur = cur.saturating_mul(operand);
            }
            out
        }
        CountOp::Pow => {
            if operand < 2 || min == 1 {
                return min;
            }
            let mut cur = min;
            let mut out = 0;
            while cur <= qc && cur <= max {
                let base = cur;
                out = cur;
                for _ in 1..operand {
                    cur = cur.saturating_mul(base);
                }
            }
            out
        }
    }
}

/// A compiled jobspec.
#[derive(Clone, Debug)]
pub struct Request {
    pub reqs: Vec<Req>,
    pub top: Vec<ReqId>,
    /// Seconds; 0 means "until the end of the planning horizon".
    pub duration: u64,
    /// RFC 31 constraint, judged at node vertices.
    pub constraint: Option<NodeConstraint>,
    /// Types written `exclusive: true` anywhere: matched vertices of these types are taken
    /// with their whole subtree.
    pub exclusive_types: Vec<Sym>,
    /// Whether any non-slot resource carries a label (labels are recorded on every vertex
    /// the walk matches, chosen or not).
    pub labelled: bool,
    /// Fluxion's top-level `user_data`: units of each pruning type the whole request needs
    /// (by interning rank), from minimum counts.
    pub totals: Vec<(u32, i64)>,
    /// Compiled for the flexible traverser: or-slots (several slots in one list) form by
    /// best score, and `unions` holds, for each list of requests, the union of its members'
    /// contents (by type, the largest minimum count) that the children are visited with.
    pub flexible: bool,
    pub unions: Vec<(Vec<ReqId>, Vec<ReqId>)>,
    /// Whether the request has `xor_slot`s (the flexible traverser tries each alternative).
    pub has_xor: bool,
    /// With `flexible` and `has_xor`: the alternatives to try in turn ([`Request::variants`];
    /// empty when there are too many).
    pub alternatives: Vec<Request>,
}

/// How a request is compiled: just against the graph (the queue manager's use), or with
/// Fluxion's type table and pruning types (the matcher's).
struct Context<'a> {
    graph: &'a ResourceGraph,
    prune_syms: &'a [Sym],
    fluxion: Option<(&'a TypeTable, &'a PruneTypes)>,
    strict: bool,
    flexible: bool,
}

impl Request {
    /// Compiles `js` for `graph`. `prune_types` are the low-level types of the prune filters
    /// (e.g. core, node): each request vertex records how many of them its subtree needs.
    pub fn compile(
        js: &Jobspec,
        graph: &ResourceGraph,
        prune_types: &[Sym],
    ) -> Result<Request, MatchError> {
        let cx = Context {
            graph,
            prune_syms: prune_types,
            fluxion: None,
            strict: false,
            flexible: false,
        };
        Self::build(js, &cx)
    }

    /// Compiles `js` as Fluxion does: types by its table, pruning-type needs by its rules
    /// (the flexible traverser's when `flexible`). A type Fluxion does not know is an error
    /// when `strict` (its jobspec reader refuses it), else a type no vertex has.
    #[allow(clippy::too_many_arguments)]
    pub fn compile_fluxion(
        js: &Jobspec,
        graph: &ResourceGraph,
        prune_syms: &[Sym],
        types: &TypeTable,
        prune: &PruneTypes,
        strict: bool,
        flexible: bool,
    ) -> Result<Request, MatchError> {
        let cx = Context {
            graph,
            prune_syms,
            fluxion: Some((types, prune)),
            strict,
            flexible,
        };
        let mut r = Self::build(js, &cx)?;
        if flexible {
            r.flexible = true;
            r.unions = r.compute_unions(types);
            if r.has_xor {
                r.alternatives = r.variants(types).unwrap_or_default();
            }
        }
        Ok(r)
    }

    fn build(js: &Jobspec, cx: &Context<'_>) -> Result<Request, MatchError> {
        let constraint = js
            .attributes
            .constraints
            .as_ref()
            .map(NodeConstraint::compile)
            .transpose()?;
        let mut out = Request {
            reqs: Vec::new(),
            top: Vec::new(),
            duration: js.attributes.duration,
            constraint,
            exclusive_types: Vec::new(),
            labelled: false,
            totals: Vec::new(),
            flexible: false,
            unions: Vec::new(),
            has_xor: false,
            alternatives: Vec::new(),
        };
        for r in &js.resources {
            let id = out.add(r, cx)?;
            out.top.push(id);
        }
        let mut totals = Vec::new();
        out.prime(&out.top, cx, &mut totals);
        out.totals = totals;
        Ok(out)
    }

    fn add(&mut self, r: &Resource, cx: &Context<'_>) -> Result<ReqId, MatchError> {
        let is_slot = r.kind == "slot";
        let is_xor = r.kind == "xor_slot";
        self.has_xor |= is_xor;
        let kind = if is_slot { None } else { cx.graph.sym(&r.kind) };
        let ty = match cx.fluxion {
            _ if is_slot => SLOT,
            Some((types, _)) => match types.lookup(cx.graph, &r.kind) {
                Some(t) => t,
                None if cx.strict => {
                    return Err(MatchError::BadRequest(UNKNOWN_TYPE_MESSAGE.to_string()));
                }
                None => UNKNOWN_TYPE,
            },
            None => kind.unwrap_or(UNKNOWN_TYPE),
        };
        if r.exclusive == Some(true) && !self.exclusive_types.contains(&ty) {
            self.exclusive_types.push(ty);
        }
        let label = r.label.clone().filter(|_| !is_slot);
        self.labelled |= label.is_some();
        let with: Vec<ReqId> = r
            .with
            .iter()
            .map(|c| self.add(c, cx))
            .collect::<Result<_, _>>()?;
        let mut needs: Vec<(Sym, i64)> = Vec::new();
        for &c in &with {
            let child = &self.reqs[c as usize];
            let mult = i64::try_from(child.count.min).unwrap_or(i64::MAX);
            for (t, n) in child.needs_with_self(cx.prune_syms) {
                bump(&mut needs, t, n.saturating_mul(mult));
            }
        }
        let mut user_data = Vec::new();
        self.prime(&with, cx, &mut user_data);
        let mut req = Req {
            kind,
            ty,
            is_slot,
            is_xor,
            count: r.count,
            exclusive: r.exclusive,
            label,
            with,
            needs,
            unit_needs: Vec::new(),
            user_data,
        };
        req.unit_needs = req.needs_with_self(cx.prune_syms).collect();
        self.reqs.push(req);
        Ok(self.reqs.len() as ReqId - 1)
    }

    /// Fluxion's `prime_jobspec` of the list `ids` into `into`: each request's own minimum
    /// count when it is a pruning type, and its `user_data` times that count. Under the
    /// flexible traverser a slot (or xor_slot) lowers instead: each type it needs to the
    /// least of what is there and what it needs, and the types it does not need to 0.
    fn prime(&self, ids: &[ReqId], cx: &Context<'_>, into: &mut Vec<(u32, i64)>) {
        let Some((types, prune)) = cx.fluxion else {
            return;
        };
        for &id in ids {
            let r = self.req(id);
            let min = i64::try_from(r.count.min.min(u64::from(u32::MAX))).unwrap_or(0);
            let rank = types.rank(r.ty);
            if prune.is_pruning(rank) {
                bump_rank(into, rank, min);
            }
            if cx.flexible && (r.is_slot || r.is_xor) {
                for &(t, n) in &r.user_data {
                    let n = min.saturating_mul(n);
                    match into.iter_mut().find(|e| e.0 == t) {
                        Some(e) => e.1 = e.1.min(n),
                        None => into.push((t, n)),
                    }
                }
                for e in into.iter_mut() {
                    if !r.user_data.iter().any(|u| u.0 == e.0) {
                        e.1 = e.1.min(0);
                    }
                }
                continue;
            }
            for &(t, n) in &r.user_data {
                bump_rank(into, t, min.saturating_mul(n));
            }
        }
    }

    /// For every list of requests (the top list, each `with`, and each union found), the
    /// union of its members' contents: by type (in interning order), the member with the
    /// largest minimum count, the first one seen on ties.
    fn compute_unions(&self, types: &TypeTable) -> Vec<(Vec<ReqId>, Vec<ReqId>)> {
        let mut lists: Vec<Vec<ReqId>> = vec![self.top.clone()];
        lists.extend(self.reqs.iter().map(|r| r.with.clone()));
        let mut out: Vec<(Vec<ReqId>, Vec<ReqId>)> = Vec::new();
        while let Some(list) = lists.pop() {
            if out.iter().any(|(l, _)| *l == list) {
                continue;
            }
            let mut by_type: Vec<(u32, ReqId)> = Vec::new();
            for &s in &list {
                for &c in &self.req(s).with {
                    let q = self.req(c);
                    let rank = types.rank(q.ty);
                    match by_type.iter_mut().find(|e| e.0 == rank) {
                        Some(e) => {
                            if self.req(e.1).count.min < q.count.min {
                                e.1 = c;
                            }
                        }
                        None => by_type.push((rank, c)),
                    }
                }
            }
            by_type.sort_by_key(|e| e.0);
            let union: Vec<ReqId> = by_type.into_iter().map(|e| e.1).collect();
            lists.push(union.clone());
            out.push((list, union));
        }
        out
    }

    /// The union of `list`'s members' contents (see [`Request::unions`]).
    pub fn union_of(&self, list: &[ReqId]) -> &[ReqId] {
        self.unions
            .iter()
            .find(|(l, _)| l == list)
            .map_or(&[][..], |(_, u)| u.as_slice())
    }

    /// The flexible traverser's alternatives of a request with `xor_slot`s (Fluxion's
    /// `split_xor_slots`): every combination of one expansion per required member and one
    /// xor choice per list, each xor choice turned into a slot. `None` past 1000
    /// alternatives. Requirements computed on the whole request are kept.
    pub fn variants(&self, types: &TypeTable) -> Option<Vec<Request>> {
        let trees = self.split(&self.top)?;
        let mut out = Vec::with_capacity(trees.len());
        for tree in trees {
            let mut r = Request {
                reqs: Vec::new(),
                top: Vec::new(),
                duration: self.duration,
                constraint: self.constraint.clone(),
                exclusive_types: self.exclusive_types.clone(),
                labelled: self.labelled,
                totals: self.totals.clone(),
                flexible: self.flexible,
                unions: Vec::new(),
                has_xor: false,
                alternatives: Vec::new(),
            };
            for n in &tree {
                let id = r.adopt(self, n);
                r.top.push(id);
            }
            r.unions = r.compute_unions(types);
            out.push(r);
        }
        Some(out)
    }

    fn adopt(&mut self, from: &Request, n: &XorNode) -> ReqId {
        let with: Vec<ReqId> = n.with.iter().map(|c| self.adopt(from, c)).collect();
        let mut q = from.req(n.id).clone();
        q.with = with;
        if q.is_xor {
            q.is_xor = false;
            q.is_slot = true;
            q.ty = SLOT;
            q.kind = None;
            q.label = None;
        }
        self.reqs.push(q);
        self.reqs.len() as ReqId - 1
    }

    fn split(&self, list: &[ReqId]) -> Option<Vec<Vec<XorNode>>> {
        const MAX: usize = 1000;
        let mut base: Vec<Vec<XorNode>> = vec![Vec::new()];
        let mut options: Vec<XorNode> = Vec::new();
        for &r in list {
            let children = self.split(&self.req(r).with)?;
            if self.req(r).is_xor {
                for c in children {
                    options.push(XorNode { id: r, with: c });
                    if options.len() > MAX {
                        return None;
                    }
                }
                continue;
            }
            let mut next = Vec::new();
            for v in &base {
                for c in &children {
                    let mut n = v.clone();
                    n.push(XorNode {
                        id: r,
                        with: c.clone(),
                    });
                    next.push(n);
                    if next.len() > MAX {
                        return None;
                    }
                }
            }
            base = next;
        }
        if options.is_empty() {
            return Some(base);
        }
        let mut out = Vec::new();
        for v in &base {
            for o in &options {
                let mut n = v.clone();
                n.push(o.clone());
                out.push(n);
                if out.len() > MAX {
                    return None;
                }
            }
        }
        Some(out)
    }

    /// Whether a walk of this request may leave Fluxion's traverser messages that depend on
    /// every vertex its walk visits: a resource written `exclusive: false` (refused under a
    /// slot, `by_excl`), or a list two of whose members could match one vertex (`test`:
    /// siblings requesting the same type). Walks of such requests visit what Fluxion's do
    /// when the messages are kept ([`crate::Matcher::keep_complaints`]).
    pub fn may_complain(&self) -> bool {
        // (Lists are a few requests long: each pair is looked at.)
        let clashes = |list: &[ReqId]| {
            list.iter().enumerate().any(|(i, &a)| {
                let a = self.req(a);
                list[i + 1..].iter().any(|&b| {
                    let b = self.req(b);
                    a.is_slot || b.is_slot || a.ty == b.ty
                })
            })
        };
        self.reqs
            .iter()
            .any(|q| (!q.is_slot && q.exclusive == Some(false)) || clashes(&q.with))
            || clashes(&self.top)
    }

    #[inline]
    pub fn req(&self, id: ReqId) -> &Req {
        &self.reqs[id as usize]
    }

    /// Total units of `kind` the whole request needs at least (for the root's quick check).
    pub fn total_need(&self, kind: Sym) -> i64 {
        self.top
            .iter()
            .map(|&t| {
                let r = self.req(t);
                let per = r
                    .needs_with_self(&[kind])
                    .find(|(s, _)| *s == kind)
                    .map_or(0, |e| e.1);
                per.saturating_mul(i64::try_from(r.count.min).unwrap_or(i64::MAX))
            })
            .fold(0i64, |a, b| a.saturating_add(b))
    }

    /// Units of pruning type `rank` in `data` (0 when absent).
    pub fn amount(data: &[(u32, i64)], rank: u32) -> Option<i64> {
        data.iter().find(|e| e.0 == rank).map(|e| e.1)
    }
}

/// One request of an xor alternative, with its members.
#[derive(Clone, Debug)]
struct XorNode {
    id: ReqId,
    with: Vec<XorNode>,
}

fn bump(needs: &mut Vec<(Sym, i64)>, t: Sym, n: i64) {
    match needs.iter_mut().find(|(s, _)| *s == t) {
        Some(e) => e.1 = e.1.saturating_add(n),
        None => needs.push((t, n)),
    }
}

fn bump_rank(into: &mut Vec<(u32, i64)>, t: u32, n: i64) {
    match into.iter_mut().find(|(s, _)| *s == t) {
        Some(e) => e.1 = e.1.saturating_add(n),
        None => into.push((t, n)),
    }
}

/// How many of a resource to take when `qualified` are available: the largest value of the
/// count's sequence that fits, or 0 when even the minimum does not.
pub fn select_count(count: &Count, qualified: i64) -> i64 {
    let q = u64::try_from(qualified).unwrap_or(0);
    count
        .largest_fitting(q)
        .map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(min: u64, max: u64, operator: CountOp, operand: u64) -> Count {
        Count {
            min,
            max,
            operator,
            operand,
        }
    }

    #[test]
    fn calc_count_follows_fluxion() {
        assert_eq!(calc_count(&Count::exact(3), 5), 3);
        assert_eq!(calc_count(&Count::exact(3), 2), 0);
        assert_eq!(calc_count(&count(2, 64, CountOp::Pow, 4), u64::MAX), 16);
        assert_eq!(calc_count(&count(2, 64, CountOp::Pow, 4), 12), 2);
        assert_eq!(calc_count(&count(1, 10, CountOp::Add, 3), 9), 7);
        assert_eq!(calc_count(&count(1, 8, CountOp::Mul, 2), 5), 4);
        // {min: 2} without max never stops early.
        assert_eq!(
            calc_count(&count(2, u64::MAX, CountOp::Add, 1), u64::from(u32::MAX)),
            u64::from(u32::MAX)
        );
    }
}
