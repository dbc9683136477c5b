//! The resource graph: topology in petgraph, per-vertex data in dense side arrays.
//!
//! Vertices are numbered densely from 0 in the order they were created (a reader creates them
//! in the order Fluxion would, so that `uniq_id`, traversal order and output order agree with
//! it). petgraph owns the topology of every subsystem; the containment tree, which the matcher
//! walks on every match, is additionally flattened into a compressed child list (`child_start`
//! / `child_list`) so that a walk touches contiguous memory and allocates nothing.

use std::collections::{BTreeMap, HashMap};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::intern::{Interner, Sym};

/// Index of a vertex in the graph and in every side array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VertexId(pub u32);

impl VertexId {
    /// The index as `usize`, for side arrays.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Whether a vertex may be scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Up,
    Down,
}

impl Status {
    /// Fluxion's spelling: `up` / `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Up => "up",
            Status::Down => "down",
        }
    }
}

/// The name of the containment subsystem, the one the matcher walks.
pub const CONTAINMENT: &str = "containment";

/// Everything a reader knows about one vertex.
#[derive(Clone, Debug, PartialEq)]
pub struct VertexSpec {
    /// Resource type, e.g. `node`, `core`.
    pub kind: String,
    /// Name without the id, e.g. `node` for `node12`.
    pub basename: String,
    /// Full name; `None` means basename followed by id.
    pub name: Option<String>,
    /// Logical id among siblings of the same type (may repeat across parents).
    pub id: i64,
    /// Execution-target rank; -1 when unknown.
    pub rank: i64,
    /// Amount this vertex stands for (memory in `unit`s; 1 for cores).
    pub size: i64,
    /// Unit of `size`, e.g. `GB`; empty for counted resources.
    pub unit: String,
    /// Key/value properties.
    pub properties: BTreeMap<String, String>,
    /// Initial status.
    pub status: Status,
    /// Whether the graph file marks the vertex exclusive.
    pub exclusive: bool,
}

impl VertexSpec {
    /// A vertex of `kind` named `basename` + `id`, size 1, up, rank -1.
    pub fn new(kind: &str, basename: &str, id: i64) -> Self {
        VertexSpec {
            kind: kind.to_string(),
            basename: basename.to_string(),
            name: None,
            id,
            rank: -1,
            size: 1,
            unit: String::new(),
            properties: BTreeMap::new(),
            status: Status::Up,
            exclusive: false,
        }
    }
}

/// Why a graph could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    #[error("the graph has no vertices")]
    Empty,
    #[error("edge refers to vertex {0}, which does not exist")]
    NoSuchVertex(u32),
    #[error("vertex {child} ({name}) has two containment parents")]
    TwoParents { child: u32, name: String },
    #[error("the containment subsystem has {0} roots; exactly one is required")]
    Roots(usize),
    #[error("the containment subsystem has a cycle or vertices unreachable from the root ({0})")]
    Unreachable(String),
    #[error("vertex {name} has size {size}; sizes must be at least 1")]
    BadSize { name: String, size: i64 },
}

/// Collects vertices and edges, then checks and freezes them into a [`ResourceGraph`].
#[derive(Debug, Default)]
pub struct GraphBuilder {
    vertices: Vec<VertexSpec>,
    /// (parent, child, subsystem) in insertion order.
    edges: Vec<(u32, u32, String)>,
    /// Vertices that belong only to other subsystems (e.g. `power`), indexed by vertex.
    outside: Vec<bool>,
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a vertex; ids are dense and follow insertion order.
    pub fn add_vertex(&mut self, spec: VertexSpec) -> VertexId {
        self.vertices.push(spec);
        VertexId(self.vertices.len() as u32 - 1)
    }

    /// Adds an edge `parent → child` in `subsystem`. Child order under a parent is the order
    /// of these calls, and it is the order the matcher visits children.
    pub fn add_edge(&mut self, parent: VertexId, child: VertexId, subsystem: &str) {
        self.edges.push((parent.0, child.0, subsystem.to_string()));
    }

    /// Declares that `v` belongs only to other subsystems than containment (Fluxion's power
    /// subsystem, say: a `powerpanel` and its `power` vertices have no containment parent).
    /// Such a vertex is neither a containment root nor required to be reachable from the
    /// root; if it gets a containment parent anyway, the mark has no effect.
    pub fn mark_outside_containment(&mut self, v: VertexId) {
        if self.outside.len() <= v.index() {
            self.outside.resize(v.index() + 1, false);
        }
        self.outside[v.index()] = true;
    }

    /// Number of vertices added so far.
    pub fn len(&self) -> usize {
        self.vertices.len()
    }

    /// Whether no vertex was added.
    pub fn is_empty(&self) -> bool {
        self.vertices.is_empty()
    }

    /// The vertex added as `v`.
    pub fn vertex(&self, v: VertexId) -> &VertexSpec {
        &self.vertices[v.index()]
    }

    /// Checks the containment tree (one root, one parent each, all reachable) and freezes.
    pub fn finish(self) -> Result<ResourceGraph, GraphError> {
        let n = self.vertices.len();
        if n == 0 {
            return Err(GraphError::Empty);
        }
        let outside = self.outside;
        let mut interner = Interner::default();
        let mut g = ResourceGraph {
            topo: DiGraph::with_capacity(n, self.edges.len()),
            kind: Vec::with_capacity(n),
            basename: Vec::with_capacity(n),
            name: Vec::with_capacity(n),
            id: Vec::with_capacity(n),
            rank: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            unit: Vec::with_capacity(n),
            exclusive: Vec::with_capacity(n),
            status: Vec::with_capacity(n),
            properties: HashMap::new(),
            parent: vec![u32::MAX; n],
            child_start: vec![0; n + 1],
            child_list: Vec::new(),
            root: VertexId(0),
            interner: Interner::default(),
        };
        let containment = interner.intern(CONTAINMENT);
        for (i, v) in self.vertices.into_iter().enumerate() {
            let name = match &v.name {
                Some(name) => name.clone(),
                None => format!("{}{}", v.basename, v.id),
            };
            if v.size < 1 {
                return Err(GraphError::BadSize { name, size: v.size });
            }
            g.topo.add_node(());
            g.kind.push(interner.intern(&v.kind));
            g.basename.push(interner.intern(&v.basename));
            g.name.push(interner.intern(&name));
            g.id.push(v.id);
            g.rank.push(v.rank);
            g.size.push(v.size);
            g.unit.push(interner.intern(&v.unit));
            g.exclusive.push(v.exclusive);
            g.status.push(v.status);
            if !v.properties.is_empty() {
                g.properties.insert(i as u32, v.properties);
            }
        }
        let mut child_count = vec![0u32; n];
        for (p, c, subsystem) in &self.edges {
            for &end in [p, c] {
                if end as usize >= n {
                    return Err(GraphError::NoSuchVertex(end));
                }
            }
            let sub = interner.intern(subsystem);
            g.topo.add_edge(
                NodeIndex::new(*p as usize),
                NodeIndex::new(*c as usize),
                sub,
            );
            if sub == containment {
                if g.parent[*c as usize] != u32::MAX {
                    let name = interner.resolve(g.name[*c as usize]).to_string();
                    return Err(GraphError::TwoParents { child: *c, name });
                }
                g.parent[*c as usize] = *p;
                child_count[*p as usize] += 1;
            }
        }
        for (v, count) in child_count.iter().enumerate() {
            g.child_start[v + 1] = g.child_start[v] + count;
        }
        let mut fill: Vec<u32> = g.child_start[..n].to_vec();
        g.child_list = vec![0; g.child_start[n] as usize];
        for (p, c, subsystem) in &self.edges {
            if interner.get(subsystem) == Some(containment) {
                g.child_list[fill[*p as usize] as usize] = *c;
                fill[*p as usize] += 1;
            }
        }
        let is_outside = |v: usize| outside.get(v).copied().unwrap_or(false);
        let roots: Vec<usize> = (0..n)
            .filter(|&v| g.parent[v] == u32::MAX && !is_outside(v))
            .collect();
        if roots.len() != 1 {
            return Err(GraphError::Roots(roots.len()));
        }
        g.root = VertexId(roots[0] as u32);
        let detached = (0..n)
            .filter(|&v| g.parent[v] == u32::MAX && is_outside(v))
            .count();
        let expected = n - detached;
        let reached = g.preorder(g.root).count();
        if reached != expected {
            return Err(GraphError::Unreachable(format!(
                "{reached} of {expected} vertices reachable"
            )));
        }
        g.interner = interner;
        Ok(g)
    }
}

/// A frozen resource graph. Topology is fixed; status and properties may change.
#[derive(Clone, Debug)]
pub struct ResourceGraph {
    topo: DiGraph<(), Sym, u32>,
    kind: Vec<Sym>,
    basename: Vec<Sym>,
    name: Vec<Sym>,
    id: Vec<i64>,
    rank: Vec<i64>,
    size: Vec<i64>,
    unit: Vec<Sym>,
    exclusive: Vec<bool>,
    status: Vec<Status>,
    /// Sparse: most vertices have no properties.
    properties: HashMap<u32, BTreeMap<String, String>>,
    /// Containment parent; `u32::MAX` for the root.
    parent: Vec<u32>,
    child_start: Vec<u32>,
    child_list: Vec<u32>,
    root: VertexId,
    interner: Interner,
}

impl ResourceGraph {
    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    /// Whether the graph is empty (never true for a built graph).
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// The containment root (e.g. the cluster).
    pub fn root(&self) -> VertexId {
        self.root
    }

    /// All vertices in creation order.
    pub fn vertices(&self) -> impl ExactSizeIterator<Item = VertexId> + use<> {
        (0..self.kind.len() as u32).map(VertexId)
    }

    /// Containment children of `v`, in the order the graph file gave them.
    #[inline]
    pub fn children(&self, v: VertexId) -> &[u32] {
        let s = self.child_start[v.index()] as usize;
        let e = self.child_start[v.index() + 1] as usize;
        &self.child_list[s..e]
    }

    /// Containment parent of `v`, `None` for the root.
    #[inline]
    pub fn parent(&self, v: VertexId) -> Option<VertexId> {
        let p = self.parent[v.index()];
        (p != u32::MAX).then_some(VertexId(p))
    }

    /// Whether `v` is in the containment tree (the root or a vertex with a containment
    /// parent). Only vertices marked with [`GraphBuilder::mark_outside_containment`] are not.
    #[inline]
    pub fn in_containment(&self, v: VertexId) -> bool {
        v == self.root || self.parent[v.index()] != u32::MAX
    }

    /// Children of `v` in `subsystem` (any subsystem, containment included), in the order
    /// their edges were added.
    pub fn subsystem_children(&self, v: VertexId, subsystem: &str) -> Vec<VertexId> {
        let Some(sym) = self.interner.get(subsystem) else {
            return Vec::new();
        };
        let mut out: Vec<VertexId> = self
            .topo
            .edges(NodeIndex::new(v.index()))
            .filter(|e| *e.weight() == sym)
            .map(|e| VertexId(e.target().index() as u32))
            .collect();
        // petgraph lists a vertex's outgoing edges newest first.
        out.reverse();
        out
    }

    /// Vertices of the containment tree below and including `v`, parents before children.
    pub fn preorder(&self, v: VertexId) -> Preorder<'_> {
        Preorder {
            graph: self,
            stack: vec![v.0],
        }
    }

    /// Number of edges of `subsystem` in the topology (all subsystems when `None`).
    pub fn edge_count(&self, subsystem: Option<&str>) -> usize {
        match subsystem {
            None => self.topo.edge_count(),
            Some(s) => match self.interner.get(s) {
                None => 0,
                Some(sym) => self.topo.edge_weights().filter(|w| **w == sym).count(),
            },
        }
    }

    /// The interned symbol of a type name, if any vertex (or field) uses it.
    pub fn sym(&self, s: &str) -> Option<Sym> {
        self.interner.get(s)
    }

    /// The string behind a symbol.
    pub fn str(&self, sym: Sym) -> &str {
        self.interner.resolve(sym)
    }

    #[inline]
    pub fn kind(&self, v: VertexId) -> Sym {
        self.kind[v.index()]
    }
    pub fn kind_str(&self, v: VertexId) -> &str {
        self.str(self.kind[v.index()])
    }
    pub fn basename(&self, v: VertexId) -> &str {
        self.str(self.basename[v.index()])
    }
    pub fn name(&self, v: VertexId) -> &str {
        self.str(self.name[v.index()])
    }
    #[inline]
    pub fn id(&self, v: VertexId) -> i64 {
        self.id[v.index()]
    }
    /// Unique id: the creation index, as Fluxion numbers `uniq_id`.
    pub fn uniq_id(&self, v: VertexId) -> i64 {
        v.0 as i64
    }
    pub fn rank(&self, v: VertexId) -> i64 {
        self.rank[v.index()]
    }
    #[inline]
    pub fn size(&self, v: VertexId) -> i64 {
        self.size[v.index()]
    }
    pub fn unit(&self, v: VertexId) -> &str {
        self.str(self.unit[v.index()])
    }
    pub fn marked_exclusive(&self, v: VertexId) -> bool {
        self.exclusive[v.index()]
    }
    #[inline]
    pub fn status(&self, v: VertexId) -> Status {
        self.status[v.index()]
    }
    pub fn set_status(&mut self, v: VertexId, status: Status) {
        self.status[v.index()] = status;
    }

    /// Properties of `v`, sorted by key.
    pub fn properties(&self, v: VertexId) -> Option<&BTreeMap<String, String>> {
        self.properties.get(&v.0)
    }

    /// Sets (or replaces) one property.
    pub fn set_property(&mut self, v: VertexId, key: &str, value: &str) {
        self.properties
            .entry(v.0)
            .or_default()
            .insert(key.to_string(), value.to_string());
    }

    /// Whether `v` has property `key` (any value).
    pub fn has_property(&self, v: VertexId, key: &str) -> bool {
        self.properties
            .get(&v.0)
            .is_some_and(|p| p.contains_key(key))
    }

    /// Containment path, e.g. `/tiny0/rack0/node0`.
    pub fn path(&self, v: VertexId) -> String {
        let mut parts = vec![self.name(v)];
        let mut cur = v;
        while let Some(p) = self.parent(cur) {
            parts.push(self.name(p));
            cur = p;
        }
        let mut out = String::new();
        for part in parts.iter().rev() {
            out.push('/');
            out.push_str(part);
        }
        out
    }

    /// The vertex at a containment path such as `/tiny0/rack0/node0`, walking down from the
    /// root by name (no path index is kept: it would cost more memory than the whole graph).
    pub fn find_path(&self, path: &str) -> Option<VertexId> {
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let first = parts.next()?;
        if self.name(self.root) != first {
            return None;
        }
        let mut cur = self.root;
        for part in parts {
            cur = self
                .children(cur)
                .iter()
                .map(|&c| VertexId(c))
                .find(|&c| self.name(c) == part)?;
        }
        Some(cur)
    }

    /// The containment ancestor of `v` (or `v` itself) of type `kind`.
    pub fn ancestor_of_kind(&self, v: VertexId, kind: Sym) -> Option<VertexId> {
        let mut cur = Some(v);
        while let Some(c) = cur {
            if self.kind(c) == kind {
                return Some(c);
            }
            cur = self.parent(c);
        }
        None
    }

    /// Depth in the containment tree; the root has depth 0.
    pub fn depth(&self, v: VertexId) -> usize {
        let mut d = 0;
        let mut cur = v;
        while let Some(p) = self.parent(cur) {
            d += 1;
            cur = p;
        }
        d
    }

    /// Approximate heap bytes held by the graph (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        let n = self.len();
        n * (4 * 4 + 8 * 3 + 1 + 1 + 4 + 4)
            + self.child_list.len() * 4
            + self.topo.node_count() * 8
            + self.topo.edge_count() * 16
    }
}

/// Iterator of [`ResourceGraph::preorder`].
pub struct Preorder<'g> {
    graph: &'g ResourceGraph,
    stack: Vec<u32>,
}

impl Iterator for Preorder<'_> {
    type Item = VertexId;
    fn next(&mut self) -> Option<VertexId> {
        let v = VertexId(self.stack.pop()?);
        // Push in reverse so the first child is visited first.
        self.stack.extend(self.graph.children(v).iter().rev());
        Some(v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tiny() -> ResourceGraph {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "tiny", 0));
        let n0 = b.add_vertex(VertexSpec::new("node", "node", 0));
        let n1 = b.add_vertex(VertexSpec::new("node", "node", 1));
        b.add_edge(c, n0, CONTAINMENT);
        b.add_edge(c, n1, CONTAINMENT);
        for n in [n0, n1] {
            for i in 0..2 {
                let core = b.add_vertex(VertexSpec::new("core", "core", i));
                b.add_edge(n, core, CONTAINMENT);
            }
        }
        b.finish().expect("valid graph")
    }

    #[test]
    fn builds_tree_with_ordered_children_and_paths() {
        let g = tiny();
        assert_eq!(g.len(), 7);
        assert_eq!(g.root(), VertexId(0));
        assert_eq!(g.children(VertexId(0)), &[1, 2]);
        assert_eq!(g.children(VertexId(2)), &[5, 6]);
        assert_eq!(g.path(VertexId(6)), "/tiny0/node1/core1");
        assert_eq!(g.find_path("/tiny0/node1/core1"), Some(VertexId(6)));
        assert_eq!(g.find_path("/tiny0/node7"), None);
        assert_eq!(g.depth(VertexId(6)), 2);
        let order: Vec<u32> = g.preorder(g.root()).map(|v| v.0).collect();
        assert_eq!(order, vec![0, 1, 3, 4, 2, 5, 6]);
    }

    #[test]
    fn rejects_two_roots_and_two_parents() {
        let mut b = GraphBuilder::new();
        b.add_vertex(VertexSpec::new("node", "node", 0));
        b.add_vertex(VertexSpec::new("node", "node", 1));
        assert_eq!(b.finish().unwrap_err(), GraphError::Roots(2));

        let mut b = GraphBuilder::new();
        let a = b.add_vertex(VertexSpec::new("rack", "rack", 0));
        let c = b.add_vertex(VertexSpec::new("node", "node", 0));
        b.add_edge(a, c, CONTAINMENT);
        b.add_edge(a, c, CONTAINMENT);
        assert!(matches!(b.finish(), Err(GraphError::TwoParents { .. })));
    }

    #[test]
    fn vertices_outside_containment_are_allowed_when_marked() {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        let n = b.add_vertex(VertexSpec::new("node", "node", 0));
        let panel = b.add_vertex(VertexSpec::new("powerpanel", "powerpanel", 0));
        let p0 = b.add_vertex(VertexSpec::new("power", "power", 0));
        let p1 = b.add_vertex(VertexSpec::new("power", "power", 1));
        b.add_edge(c, n, CONTAINMENT);
        b.add_edge(panel, n, "power");
        b.add_edge(panel, p0, "power");
        b.add_edge(panel, p1, "power");
        b.mark_outside_containment(panel);
        b.mark_outside_containment(p0);
        // p1 is not marked: it is a second containment root.
        assert_eq!(b.finish().unwrap_err(), GraphError::Roots(2));

        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        let n = b.add_vertex(VertexSpec::new("node", "node", 0));
        let panel = b.add_vertex(VertexSpec::new("powerpanel", "powerpanel", 0));
        let p0 = b.add_vertex(VertexSpec::new("power", "power", 0));
        b.add_edge(c, n, CONTAINMENT);
        b.add_edge(panel, n, "power");
        b.add_edge(panel, p0, "power");
        b.mark_outside_containment(panel);
        b.mark_outside_containment(p0);
        let g = b.finish().unwrap();
        assert_eq!(g.root(), c);
        assert!(g.in_containment(n) && !g.in_containment(panel) && !g.in_containment(p0));
        assert_eq!(g.preorder(g.root()).count(), 2);
        assert_eq!(g.subsystem_children(panel, "power"), vec![n, p0]);
        assert_eq!(g.subsystem_children(c, CONTAINMENT), vec![n]);
        assert!(g.subsystem_children(c, "ibnet").is_empty());
    }

    #[test]
    fn properties_and_status_change() {
        let mut g = tiny();
        let n0 = VertexId(1);
        g.set_property(n0, "class", "1");
        g.set_property(n0, "class", "2");
        assert_eq!(g.properties(n0).map(|p| p["class"].as_str()), Some("2"));
        assert!(g.has_property(n0, "class"));
        g.set_status(n0, Status::Down);
        assert_eq!(g.status(n0), Status::Down);
    }
}
