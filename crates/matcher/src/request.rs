//! A jobspec compiled against one graph: types interned, slots marked, subtree needs summed.
//!
//! The traverser walks the graph and the request together; comparing interned symbols
//! instead of type strings keeps that walk free of string work.

use shardsched_jobspec::{Count, Jobspec, Resource};

use crate::MatchError;
use crate::constraint::NodeConstraint;
use shardsched_resource::{ResourceGraph, Sym};

/// Index of a [`Req`] in [`Request::reqs`].
pub type ReqId = u32;

/// One resource vertex of the jobspec.
#[derive(Clone, Debug)]
pub struct Req {
    /// The graph's symbol for this type; `None` when no vertex has it (or for a slot).
    pub kind: Option<Sym>,
    /// `type: slot`.
    pub is_slot: bool,
    pub count: Count,
    /// Explicit `exclusive`; slots are exclusive for their contents regardless.
    pub exclusive: Option<bool>,
    pub with: Vec<ReqId>,
    /// Per instance of this resource: how many units of each pruned type its strict subtree
    /// needs (the resource itself not counted).
    pub needs: Vec<(Sym, i64)>,
    /// [`Req::needs`] plus the resource itself: what one instance needs in all.
    pub unit_needs: Vec<(Sym, i64)>,
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
}

impl Request {
    /// Compiles `js` for `graph`. `prune_types` are the low-level types of the prune filters
    /// (e.g. core, node): each request vertex records how many of them its subtree needs.
    pub fn compile(
        js: &Jobspec,
        graph: &ResourceGraph,
        prune_types: &[Sym],
    ) -> Result<Request, MatchError> {
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
        };
        for r in &js.resources {
            let id = out.add(r, graph, prune_types);
            out.top.push(id);
        }
        Ok(out)
    }

    fn add(&mut self, r: &Resource, graph: &ResourceGraph, prune_types: &[Sym]) -> ReqId {
        let is_slot = r.kind == "slot";
        let kind = if is_slot { None } else { graph.sym(&r.kind) };
        let with: Vec<ReqId> = r
            .with
            .iter()
            .map(|c| self.add(c, graph, prune_types))
            .collect();
        let mut needs: Vec<(Sym, i64)> = Vec::new();
        let bump = |needs: &mut Vec<(Sym, i64)>, t: Sym, n: i64| match needs
            .iter_mut()
            .find(|(s, _)| *s == t)
        {
            Some(e) => e.1 = e.1.saturating_add(n),
            None => needs.push((t, n)),
        };
        for &c in &with {
            let child = &self.reqs[c as usize];
            let mult = i64::try_from(child.count.min).unwrap_or(i64::MAX);
            for (t, n) in child.needs_with_self(prune_types) {
                bump(&mut needs, t, n.saturating_mul(mult));
            }
        }
        let mut req = Req {
            kind,
            is_slot,
            count: r.count,
            exclusive: r.exclusive,
            with,
            needs,
            unit_needs: Vec::new(),
        };
        req.unit_needs = req.needs_with_self(prune_types).collect();
        self.reqs.push(req);
        self.reqs.len() as ReqId - 1
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
}

/// How many of a resource to take when `qualified` are available: the largest value of the
/// count's sequence that fits, or 0 when even the minimum does not.
pub fn select_count(count: &Count, qualified: i64) -> i64 {
    let q = u64::try_from(qualified).unwrap_or(0);
    count
        .largest_fitting(q)
        .map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX))
}
