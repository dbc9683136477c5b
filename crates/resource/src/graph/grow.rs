//! Changing a loaded graph: `attach` (resource-query's grow: Fluxion's JGF reader unpacking a
//! document into the running graph, `readers/resource_reader_jgf.cpp` `unpack_at`) and
//! `remove` (its `remove_subgraph`, `traversers/dfu_impl_update.cpp:831`).
//!
//! Vertex ids never change: `attach` appends vertices after the last one (their strings
//! interned after the graph's, so every symbol already handed out keeps its meaning), and
//! `remove` keeps a removed vertex's row but takes every edge into or out of it and its
//! paths, as Fluxion clears the vertex without deleting it. A removed vertex is then in no
//! subsystem: no walk, `find` or writer reaches it, and [`ResourceGraph::is_removed`] says so
//! to what looks vertices up by rank. The containment arrays are derived again from the
//! edges ([`super::links`]). Both cost a pass over the graph, and nothing when unused.

use std::collections::BTreeSet;

use petgraph::graph::{DiGraph, NodeIndex};

use super::links::{Links, edges_of, two_parents};
use super::{CONTAINMENT, GraphError, ResourceGraph, VertexId};
use crate::error::{GRAPH_DEPTH_MAX, GRAPH_VERTICES_MAX};
use crate::jgf::{JgfDocument, JgfVertex};

/// Why `attach` changed nothing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AttachError {
    /// A new vertex is a root (its path has one component) of a subsystem that has one:
    /// Fluxion's own words.
    #[error(
        "add_graph_metadata: failed to add root metadata for {0} subsystem. Possible duplicate root."
    )]
    DuplicateRoot(String),
    #[error("the graph would have more than {GRAPH_VERTICES_MAX} vertices")]
    TooManyVertices,
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl ResourceGraph {
    /// Adds the vertices of `doc` the graph does not have, and the edges of `doc` that
    /// touch one of them, as Fluxion's JGF reader does into a running graph: a vertex is
    /// the graph's when one of its paths names a vertex of the same rank (then nothing of
    /// it is read); an edge between two vertices the graph had is ignored. New vertices
    /// come after the others, in file order, so new children come after old ones. All or
    /// nothing: on an error the graph is unchanged. Returns how many vertices were added.
    pub fn attach(&mut self, doc: &JgfDocument) -> Result<usize, AttachError> {
        self.revised();
        let n0 = self.len();
        let mut ids: Vec<VertexId> = Vec::with_capacity(doc.vertices.len());
        let mut new: Vec<usize> = Vec::new();
        let mut roots: BTreeSet<&str> = BTreeSet::new();
        for (i, v) in doc.vertices.iter().enumerate() {
            if let Some(old) = self.vertex_of(v) {
                ids.push(old);
                continue;
            }
            for (subsystem, path) in &v.paths {
                let is_root = path.matches('/').count() == 1;
                if is_root && (self.has_root(subsystem) || !roots.insert(subsystem)) {
                    return Err(AttachError::DuplicateRoot(subsystem.clone()));
                }
            }
            ids.push(VertexId((n0 + new.len()) as u32));
            new.push(i);
        }
        if n0 + new.len() > GRAPH_VERTICES_MAX {
            return Err(AttachError::TooManyVertices);
        }
        let is_new = |k: usize| ids[k].index() >= n0;
        let edges: Vec<_> = doc
            .edges
            .iter()
            .filter(|e| is_new(e.source) || is_new(e.target))
            .collect();
        let mut topo = self.topology().into_owned();
        for _ in &new {
            topo.add_node(());
        }
        for e in &edges {
            let sub = self.interner.intern(&e.subsystem);
            let (s, t) = (ids[e.source].index(), ids[e.target].index());
            topo.add_edge(NodeIndex::new(s), NodeIndex::new(t), sub);
        }
        let n = n0 + new.len();
        // A JGF vertex may have several containment parents (as when a JGF is loaded).
        let links = Links::of(edges_of(&topo), n, self.containment_sym(), true)
            .map_err(|c| two_parents(c, "an attached vertex"))?;
        for (&i, v) in new.iter().zip(n0..) {
            let depth = links.depth(v);
            if depth > GRAPH_DEPTH_MAX {
                return Err(AttachError::Graph(GraphError::TooDeep {
                    subsystem: CONTAINMENT.to_string(),
                    name: doc.vertices[i].key.clone(),
                    depth,
                }));
            }
        }
        // Checked: now change the graph.
        for &i in &new {
            self.push_vertex(&doc.vertices[i], i);
        }
        self.topo = topo;
        self.set_links(links);
        for &i in &new {
            let v = ids[i];
            for (subsystem, path) in &doc.vertices[i].paths {
                let sym = self.interner.intern(subsystem);
                let containment = sym == self.containment_sym();
                if !containment || *path != self.names_path(v) {
                    self.paths.add(v, sym, containment, path);
                }
            }
        }
        Ok(new.len())
    }

    /// [`ResourceGraph::attach`], then every vertex that gained containment children has
    /// its children ordered by rank, ties kept in their order: where a graph built whole
    /// from a cluster spec has them (nodes in host order, a node's contents in theirs);
    /// and every `uniq_id` becomes the vertex's place in preorder, as such a build numbers
    /// them (`first` breaks ties by it). A shard whose definition grows grafts the new
    /// nodes where a restart would have built them, so that the walks visit them in the
    /// same order. (`attach` itself keeps Fluxion's order, new children last.)
    pub fn attach_in_rank_order(&mut self, doc: &JgfDocument) -> Result<usize, AttachError> {
        let n0 = self.len();
        let added = self.attach(doc)?;
        if added == 0 {
            return Ok(0);
        }
        let gained: BTreeSet<usize> = (n0..self.len())
            .filter_map(|v| self.parent(VertexId(v as u32)))
            .map(|p| p.index())
            .filter(|&p| p < n0)
            .collect();
        let containment = self.containment_sym();
        let old = self.topology();
        let mut topo: DiGraph<(), super::Sym, u32> =
            DiGraph::with_capacity(self.len(), old.edge_count());
        for _ in 0..self.len() {
            topo.add_node(());
        }
        let mut regrouped: Vec<(usize, i64, usize, NodeIndex<u32>)> = Vec::new();
        for (i, e) in old.raw_edges().iter().enumerate() {
            let (s, t) = (e.source(), e.target());
            if e.weight == containment && gained.contains(&s.index()) {
                regrouped.push((s.index(), self.rank(VertexId(t.index() as u32)), i, t));
            } else {
                topo.add_edge(s, t, e.weight);
            }
        }
        regrouped.sort_unstable_by_key(|&(p, rank, i, _)| (p, rank, i));
        drop(old);
        for (p, _, _, t) in regrouped {
            topo.add_edge(NodeIndex::new(p), t, containment);
        }
        // The same edges in another order: the links cannot fail where they did not.
        if let Ok(links) = Links::of(edges_of(&topo), self.len(), containment, true) {
            self.topo = topo;
            self.set_links(links);
        }
        // Removed rows are in no walk; they keep numbers above every other.
        let mut uniq: Vec<i64> = (0..self.len()).map(|i| (self.len() + i) as i64).collect();
        for (at, v) in self.preorder(self.root()).enumerate() {
            uniq[v.index()] = at as i64;
        }
        self.uniq = uniq;
        Ok(added)
    }

    /// Takes `vertices` out of the graph: every edge into or out of them goes (the edges
    /// between the others keep their order), and their paths; their rows stay, marked
    /// removed.
    pub fn detach(&mut self, vertices: &BTreeSet<u32>) {
        if vertices.is_empty() {
            return;
        }
        self.revised();
        let old = self.topology();
        let mut topo: DiGraph<(), super::Sym, u32> =
            DiGraph::with_capacity(self.len(), old.edge_count());
        for _ in 0..self.len() {
            topo.add_node(());
        }
        for e in old.raw_edges() {
            let (s, t) = (e.source(), e.target());
            if !vertices.contains(&(s.index() as u32)) && !vertices.contains(&(t.index() as u32)) {
                topo.add_edge(s, t, e.weight);
            }
        }
        drop(old);
        // The links of fewer edges of a graph that had them cannot fail.
        if let Ok(links) = Links::of(edges_of(&topo), self.len(), self.containment_sym(), true) {
            self.topo = topo;
            self.set_links(links);
        }
        for &v in vertices {
            self.paths.forget(VertexId(v));
        }
        self.removed.extend(vertices.iter().copied());
    }

    /// The vertices of rank `rank` still in the graph (those `remove` took out are not), in
    /// id order.
    pub fn rank_vertices(&self, rank: i64) -> impl Iterator<Item = VertexId> + '_ {
        self.vertices()
            .filter(move |&v| self.rank(v) == rank && !self.is_removed(v))
    }

    /// Whether `remove` took `v` out of the graph (see [`ResourceGraph::detach`]).
    pub fn is_removed(&self, v: VertexId) -> bool {
        !self.removed.is_empty() && self.removed.contains(&v.0)
    }

    /// The vertex of the graph a JGF vertex names: one at one of its paths with its rank
    /// (Fluxion's `vtx_in_graph`).
    fn vertex_of(&self, v: &JgfVertex) -> Option<VertexId> {
        v.paths.iter().find_map(|(subsystem, path)| {
            let found = if subsystem == CONTAINMENT {
                self.find_path(path)
            } else {
                self.paths.find(path)
            };
            found.filter(|&u| self.rank(u) == v.spec.rank && !self.is_removed(u))
        })
    }

    /// Whether some vertex of the graph is the root of `subsystem` (a path of one name).
    fn has_root(&self, subsystem: &str) -> bool {
        if subsystem == CONTAINMENT {
            return true;
        }
        let Some(sym) = self.interner.get(subsystem) else {
            return false;
        };
        self.vertices().any(|v| {
            self.paths
                .other(v)
                .iter()
                .any(|(s, p)| *s == sym && p.matches('/').count() == 1)
        })
    }

    /// Appends the row of a new vertex (`position`: its place in the file).
    fn push_vertex(&mut self, v: &JgfVertex, position: usize) {
        let id = self.len() as u32;
        let spec = &v.spec;
        let c = &mut self.columns;
        let kind = self.interner.intern(&spec.kind);
        let basename = self.interner.intern(&spec.basename);
        let name = match &spec.name {
            Some(name) => self.interner.intern(name),
            None => self
                .interner
                .intern(&format!("{}{}", spec.basename, spec.id)),
        };
        let unit = self.interner.intern(&spec.unit);
        c.kind.push(kind);
        c.basename.push(basename);
        c.name.push(name);
        c.id.push(spec.id);
        c.rank.push(spec.rank);
        c.size.push(spec.size);
        c.unit.push(unit);
        c.exclusive.push(spec.exclusive);
        c.status.push(spec.status);
        if !spec.properties.is_empty() {
            c.properties.insert(id, spec.properties.clone());
        }
        let uniq = v.uniq(position);
        if self.uniq.is_empty() && uniq != i64::from(id) {
            self.uniq = (0..id).map(i64::from).collect();
        }
        if !self.uniq.is_empty() {
            self.uniq.push(uniq);
        }
    }

    fn set_links(&mut self, links: Links) {
        self.parent = links.parent;
        self.child_start = links.child_start;
        self.child_list = links.child_list;
        self.shared_children = links.shared;
    }
}
