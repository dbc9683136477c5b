//! [`GraphBuilder::add_children_syms`]: a run of alike children in one call.

use std::iter::repeat_n;
use std::ops::Range;

use super::GraphBuilder;
use crate::graph::{Status, VertexId};
use crate::intern::Sym;

/// What a run of sibling vertices shares (a GRUG template's vertices under one parent), as
/// this builder's symbols: see [`GraphBuilder::add_children_syms`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Siblings {
    pub kind: Sym,
    pub basename: Sym,
    pub unit: Sym,
    pub size: i64,
    pub status: Status,
}

impl GraphBuilder {
    /// Adds a child of `parent` for each of `ids`, in order, each a vertex of `siblings`
    /// named `basename` + id, joined to `parent` by an edge of `subsystem`; ranks count up
    /// from `first_rank` (Fluxion's nodes) or are all -1 when it is `None`. The graph is
    /// the one [`add_vertex_syms`](Self::add_vertex_syms) and then
    /// [`add_edge_sym`](Self::add_edge_sym) for each child in turn would build: the same
    /// vertices, names, symbol numbers and edges. Returns the new vertices' range.
    ///
    /// Why: one by one, a vertex cost ~190 instructions and its edge ~60 (the GRUG reader
    /// made 60,433 so on the 1,024-node bench graph); here the fields the run shares are
    /// numbered once and their columns extended in one go.
    ///
    /// # Panics
    /// If a symbol does not come from this builder, or `ids` gives another number of ids
    /// than its `len`.
    pub fn add_children_syms(
        &mut self,
        parent: VertexId,
        subsystem: Sym,
        siblings: &Siblings,
        ids: impl ExactSizeIterator<Item = i64> + Clone,
        first_rank: Option<i64>,
    ) -> Range<u32> {
        let strings = self.interner.len() as u32;
        assert!(
            subsystem.0 < strings && siblings.kind.0 < strings,
            "symbol from another interner"
        );
        assert!(
            siblings.basename.0 < strings && siblings.unit.0 < strings,
            "symbol from another interner"
        );
        let start = self.columns.kind.len() as u32;
        let mut ids = ids;
        let count = ids.len();
        let Some(first_id) = ids.next() else {
            return start..start;
        };
        let Siblings {
            kind,
            basename,
            unit,
            size,
            status,
        } = *siblings;
        if size < 1 && self.bad_size.is_none() {
            self.bad_size = Some(start);
        }
        // The graph numbers strings in the order vertices first use them: type, basename,
        // name, unit; after the first child only names can be new.
        if self.final_of.len() < self.interner.len() {
            self.final_of.resize(self.interner.len(), u32::MAX);
        }
        let kind = self.final_sym(kind);
        let graph_basename = self.final_sym(basename);
        self.push_name(basename, first_id);
        let unit = self.final_sym(unit);
        let columns = &mut self.columns;
        columns.kind.extend(repeat_n(kind, count));
        columns.basename.extend_repeated(graph_basename, count);
        columns.unit.extend_repeated(unit, count);
        columns.size.extend_repeated(size, count);
        columns.exclusive.extend(repeat_n(false, count));
        columns.status.extend(repeat_n(status, count));
        for id in ids.clone() {
            self.push_name(basename, id);
        }
        assert_eq!(
            self.columns.name.len(),
            self.columns.kind.len(),
            "ids gave another number of ids than its len"
        );
        // The other columns and the edges in one go each (a push per child and column was
        // most of the cost left).
        let columns = &mut self.columns;
        columns.id.push(first_id);
        columns.id.extend_exact(ids);
        match first_rank {
            Some(r) => (0..count).for_each(|k| columns.rank.push(r + k as i64)),
            None => columns.rank.extend_repeated(-1, count),
        }
        let end = start + count as u32;
        self.push_edges_to(parent.0, start..end, subsystem);
        start..self.columns.kind.len() as u32
    }

    /// Pushes the default name of `basename` (a builder symbol) + `id` onto the names.
    #[inline]
    fn push_name(&mut self, basename: Sym, id: i64) {
        let name = self.default_name(basename, id);
        if self.final_of.len() <= name.index() {
            self.final_of.resize(self.interner.len(), u32::MAX);
        }
        let name = self.final_sym(name);
        self.columns.name.push(name);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::graph::{CONTAINMENT, ResourceGraph};

    /// Everything a graph shows: its strings in symbol order, each vertex's fields, tree
    /// and edges.
    fn shown(g: &ResourceGraph) -> Vec<String> {
        let mut out: Vec<String> = (0..g.sym_count() as u32)
            .map(|s| g.str(Sym(s)).to_string())
            .collect();
        for v in g.vertices() {
            out.push(format!(
                "{:?} {:?} {:?} {:?} {} {:?}",
                g.spec_of(v),
                g.parent(v),
                g.children(v),
                g.subsystem_children(v, "power"),
                g.out_degree(v),
                g.paths(v)
            ));
        }
        out.push(format!(
            "{} {}",
            g.edge_count(None),
            g.edge_count(Some(CONTAINMENT))
        ));
        out
    }

    /// Runs of children under each parent, made by `add_children_syms` and one by one:
    /// new strings on the way (a unit, names past the cache), ranks or none, sizes.
    fn build(bulk: bool, power: bool) -> ResourceGraph {
        let mut b = GraphBuilder::new();
        let s = |b: &mut GraphBuilder, k: &str, base: &str, unit: &str, size: i64| Siblings {
            kind: b.intern(k),
            basename: b.intern(base),
            unit: b.intern(unit),
            size,
            status: Status::Up,
        };
        let containment = b.intern(CONTAINMENT);
        let root = b.add_vertex_parts("cluster", "c", None, 0, -1, 1, "", Status::Up);
        let node = s(&mut b, "node", "node", "", 1);
        let mem = s(&mut b, "memory", "memory", "GB", 16);
        let core = s(&mut b, "core", "core", "", 1);
        let add = |b: &mut GraphBuilder,
                   p: VertexId,
                   sib: &Siblings,
                   ids: Vec<i64>,
                   rank: Option<i64>| {
            if bulk {
                return b.add_children_syms(p, containment, sib, ids.into_iter(), rank);
            }
            let start = b.len() as u32;
            for (k, id) in ids.into_iter().enumerate() {
                let r = rank.map_or(-1, |r| r + k as i64);
                let v = b.add_vertex_syms(
                    sib.kind,
                    sib.basename,
                    None,
                    id,
                    r,
                    sib.size,
                    sib.unit,
                    sib.status,
                );
                b.add_edge_sym(p, v, containment);
            }
            start..b.len() as u32
        };
        let nodes = add(&mut b, root, &node, vec![0, 1, 2], Some(0));
        assert_eq!(nodes, 1..4);
        assert_eq!(add(&mut b, root, &core, vec![], None), 4..4);
        for n in nodes {
            let big = vec![70_000, 0, -5, i64::MAX, i64::from(i32::MIN)];
            add(&mut b, VertexId(n), &mem, big, None);
            add(
                &mut b,
                VertexId(n),
                &core,
                (0..5).map(|i| 2 * i + i64::from(n)).collect(),
                None,
            );
        }
        if power {
            // An edge of another subsystem: the edges are listed from here on.
            let panel = b.add_vertex_parts("pdu", "pdu", None, 0, -1, 1, "", Status::Up);
            b.mark_outside_containment(panel);
            b.add_edge(panel, VertexId(1), "power");
            let more = add(&mut b, VertexId(2), &core, vec![9, 10], None);
            assert_eq!(more.len(), 2);
        }
        b.finish().unwrap()
    }

    #[test]
    fn children_in_a_run_are_the_children_one_by_one() {
        for power in [false, true] {
            let (bulk, single) = (build(true, power), build(false, power));
            assert_eq!(shown(&bulk), shown(&single), "power edges: {power}");
        }
        let g = build(true, false);
        assert_eq!(g.name(VertexId(4)), "memory70000");
        assert_eq!(g.rank(VertexId(3)), 2);
        assert_eq!(g.size(VertexId(5)), 16);
        assert_eq!(g.unit(VertexId(5)), "GB");
    }

    #[test]
    fn a_run_of_bad_size_is_refused_as_one_by_one() {
        let mut b = GraphBuilder::new();
        let root = b.add_vertex_parts("cluster", "c", None, 0, -1, 1, "", Status::Up);
        let sib = Siblings {
            kind: b.intern("core"),
            basename: b.intern("core"),
            unit: b.intern(""),
            size: 0,
            status: Status::Up,
        };
        let containment = b.intern(CONTAINMENT);
        b.add_children_syms(root, containment, &sib, [0, 1].into_iter(), None);
        let e = b.finish().unwrap_err();
        assert_eq!(
            e.to_string(),
            "vertex core0 has size 0; sizes must be at least 1"
        );
    }
}
