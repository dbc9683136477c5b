//! A vertex's path in every subsystem it belongs to, as Fluxion keeps them (each vertex's
//! `paths` map, written by the JGF writer and looked up by `set-status`, `find` and the
//! like).
//!
//! The containment path is the names from the root ([`ResourceGraph::path`]); nothing is
//! stored for it unless a JGF file gave another one (Fluxion takes a JGF vertex's `paths` as
//! written: `dyn_explore.json` puts its `ssd2` at `/mini/chassis0/ssd0`). Paths in other
//! subsystems (`power`, …) are a JGF file's own, or for a generated graph the names along the
//! subsystem's edges, each vertex under the first parent its subsystem gave it; a vertex
//! belongs to a subsystem when an edge of it ends or starts there. Graphs with one subsystem
//! and no paths of their own (nearly all) keep nothing here.

use std::collections::{HashMap, HashSet};

use super::{ResourceGraph, VertexId};
use crate::intern::Sym;

/// Paths beyond the containment path of names.
#[derive(Clone, Debug, Default)]
pub(crate) struct Paths {
    /// Containment paths a reader gave that differ from the path of names, by vertex.
    given: HashMap<u32, Box<str>>,
    /// Paths in other subsystems, by vertex, in subsystem symbol order.
    other: HashMap<u32, Vec<(Sym, Box<str>)>>,
    /// The vertex of each path in `given` and `other` (the first one, on duplicates).
    by_path: HashMap<Box<str>, u32>,
}

impl Paths {
    /// The paths of a graph whose containment tree is built: `given` are a reader's own
    /// (vertex, subsystem, path); without any for a subsystem other than containment, the
    /// other subsystems' paths follow their edges.
    pub(crate) fn new(g: &mut ResourceGraph, given: Vec<(u32, String, String)>) -> Paths {
        let mut p = Paths::default();
        let containment = g.containment_sym();
        let mut gave_other = false;
        for (v, subsystem, path) in given {
            let v = v as usize;
            if v >= g.len() {
                continue;
            }
            // A subsystem only paths name (no edge of it) is a new symbol.
            let sym = g.interner.intern(&subsystem);
            if sym == containment {
                if path != g.names_path(VertexId(v as u32)) {
                    p.given.insert(v as u32, path.into());
                }
            } else {
                gave_other = true;
                p.other
                    .entry(v as u32)
                    .or_default()
                    .push((sym, path.into()));
            }
        }
        if !gave_other {
            p.other = follow_edges(g, containment);
        }
        for list in p.other.values_mut() {
            list.sort_by_key(|e| e.0.0);
        }
        for (&v, path) in &p.given {
            p.by_path.entry(path.clone()).or_insert(v);
        }
        for (&v, list) in &p.other {
            for (_, path) in list {
                p.by_path.entry(path.clone()).or_insert(v);
            }
        }
        p.given.shrink_to_fit();
        p.other.shrink_to_fit();
        p.by_path.shrink_to_fit();
        p
    }

    /// Gives `v` (a vertex `attach` added) its path in subsystem `sym`: a containment path
    /// only when it is not the path of its names.
    pub(crate) fn add(&mut self, v: VertexId, sym: Sym, containment: bool, path: &str) {
        if containment {
            self.given.insert(v.0, path.into());
        } else {
            let list = self.other.entry(v.0).or_default();
            list.push((sym, path.into()));
            list.sort_by_key(|e| e.0.0);
        }
        self.by_path.entry(path.into()).or_insert(v.0);
    }

    /// Forgets every path of `v` (a vertex `remove` took out of the graph).
    pub(crate) fn forget(&mut self, v: VertexId) {
        let given = self.given.remove(&v.0);
        let other = self.other.remove(&v.0).unwrap_or_default();
        let paths = given.into_iter().chain(other.into_iter().map(|e| e.1));
        for path in paths {
            if self.by_path.get(&path) == Some(&v.0) {
                self.by_path.remove(&path);
            }
        }
    }

    pub(crate) fn given(&self, v: VertexId) -> Option<&str> {
        self.given.get(&v.0).map(|p| &**p)
    }

    pub(crate) fn other(&self, v: VertexId) -> &[(Sym, Box<str>)] {
        self.other.get(&v.0).map_or(&[], |l| l.as_slice())
    }

    /// The vertex at `path` among the paths kept here.
    pub(crate) fn find(&self, path: &str) -> Option<VertexId> {
        self.by_path.get(path).map(|&v| VertexId(v))
    }

    /// Every vertex at `path` among the paths kept here (a reader may give one path to
    /// several), in no particular order.
    pub(crate) fn find_all(&self, path: &str) -> Vec<VertexId> {
        if !self.by_path.contains_key(path) {
            return Vec::new();
        }
        let given = self
            .given
            .iter()
            .filter(|(_, p)| &***p == path)
            .map(|(&v, _)| VertexId(v));
        let other = self
            .other
            .iter()
            .filter(|(_, list)| list.iter().any(|(_, p)| &**p == path))
            .map(|(&v, _)| VertexId(v));
        given.chain(other).collect()
    }

    /// How many paths are kept here.
    pub(crate) fn count(&self) -> usize {
        self.other.values().map(Vec::len).sum::<usize>()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let strs: usize = self.by_path.keys().map(|k| 2 * k.len()).sum();
        strs + (self.given.capacity() + self.other.capacity() + self.by_path.capacity()) * 32
    }
}

/// For each subsystem but containment, the path of every vertex it reaches: names down its
/// edges from its roots, each vertex under the first edge into it.
fn follow_edges(g: &ResourceGraph, containment: Sym) -> HashMap<u32, Vec<(Sym, Box<str>)>> {
    let mut out: HashMap<u32, Vec<(Sym, Box<str>)>> = HashMap::new();
    let mut subsystems: Vec<Sym> = g
        .topo
        .edge_weights()
        .copied()
        .filter(|&s| s != containment)
        .collect();
    subsystems.sort_by_key(|s| s.0);
    subsystems.dedup();
    for sub in subsystems {
        let mut parent: HashMap<u32, u32> = HashMap::new();
        let mut members: Vec<u32> = Vec::new();
        let mut seen: HashSet<u32> = HashSet::new();
        for e in g.topo.raw_edges().iter().filter(|e| e.weight == sub) {
            let (s, t) = (e.source().index() as u32, e.target().index() as u32);
            for v in [s, t] {
                if seen.insert(v) {
                    members.push(v);
                }
            }
            parent.entry(t).or_insert(s);
        }
        for v in members {
            let mut chain = Vec::new();
            let mut cur = Some(v);
            // A cycle of edges would never reach a root: stop after every member.
            while let Some(c) = cur.filter(|_| chain.len() <= parent.len()) {
                chain.push(c);
                cur = parent.get(&c).copied();
            }
            let mut path = String::new();
            for &c in chain.iter().rev() {
                path.push('/');
                path.push_str(g.name(VertexId(c)));
            }
            out.entry(v).or_default().push((sub, path.into()));
        }
    }
    out
}
