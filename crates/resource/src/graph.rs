//! The resource graph: topology in petgraph, per-vertex data in dense side arrays.
//!
//! Vertices are numbered densely from 0 in the order they were created (a reader creates them
//! in the order Fluxion would, so that `uniq_id`, traversal order and output order agree with
//! it). The containment tree, which the matcher walks on every match, is kept as each
//! vertex's parent and a compressed child list (`child_start` / `child_list`) so that a walk
//! touches contiguous memory and allocates nothing. Where other edges exist (other
//! subsystems, a second containment parent) petgraph holds every subsystem's edges too.
//!
//! Memory: strings are interned (a vertex holds 4-byte symbols for its type, basename, name
//! and unit), ids, ranks and sizes take 4 bytes unless they do not fit, and petgraph, when
//! kept, stores a node in 8 bytes and an edge in 20; a built tree holds about 44 bytes a
//! vertex ([`ResourceGraph::heap_bytes`]). Readers build through [`GraphBuilder`]'s
//! symbol-based fast path, which allocates nothing per vertex or edge.

use std::collections::BTreeMap;

use petgraph::graph::DiGraph;

use crate::error::GRAPH_DEPTH_MAX;
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
    #[error(
        "the {subsystem} tree is deeper than {GRAPH_DEPTH_MAX} levels (vertex {name} is at level {depth})"
    )]
    TooDeep {
        subsystem: String,
        name: String,
        depth: usize,
    },
}

mod builder;
mod columns;
mod grow;
mod links;
mod paths;
#[cfg(test)]
mod tests;
mod topology;

pub use builder::{GraphBuilder, Siblings, push_int};
use columns::VertexColumns;
pub use grow::AttachError;

/// A frozen resource graph. Topology is fixed; status and properties may change.
#[derive(Clone, Debug)]
pub struct ResourceGraph {
    /// Every subsystem's edges, in the order they were added; empty (not a node) where the
    /// containment tree below is every edge there is, as in nearly every graph
    /// ([`ResourceGraph::topology`]).
    topo: DiGraph<(), Sym, u32>,
    columns: VertexColumns,
    /// Each vertex's `uniq_id`, when some differs from its position (else empty).
    uniq: Vec<i64>,
    /// Containment parent; `u32::MAX` for the root.
    parent: Vec<u32>,
    child_start: Vec<u32>,
    child_list: Vec<u32>,
    /// Some vertex has more than one containment parent ([`GraphBuilder::allow_shared_children`]).
    shared_children: bool,
    root: VertexId,
    interner: Interner,
    /// Paths beyond the containment path of names (other subsystems, a JGF file's own).
    paths: paths::Paths,
    /// Vertices `remove` took out (see [`ResourceGraph::is_removed`]); empty unless it ran.
    removed: std::collections::BTreeSet<u32>,
    /// Changes made since the graph was built (status, properties, attach, detach): what a
    /// reader that keeps answers derived from the graph compares ([`ResourceGraph::revision`]).
    revision: u64,
}

impl ResourceGraph {
    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.columns.kind.len()
    }

    /// Whether the graph is empty (never true for a built graph).
    pub fn is_empty(&self) -> bool {
        self.columns.kind.is_empty()
    }

    /// The containment root (e.g. the cluster).
    pub fn root(&self) -> VertexId {
        self.root
    }

    /// All vertices in creation order.
    pub fn vertices(&self) -> impl ExactSizeIterator<Item = VertexId> + use<> {
        (0..self.columns.kind.len() as u32).map(VertexId)
    }

    /// Containment children of `v`, in the order the graph file gave them.
    #[inline]
    pub fn children(&self, v: VertexId) -> &[u32] {
        let s = self.child_start[v.index()] as usize;
        let e = self.child_start[v.index() + 1] as usize;
        &self.child_list[s..e]
    }

    /// The containment children of every vertex, compressed: `v`'s are
    /// `list[start[v]..start[v + 1]]` ([`ResourceGraph::children`]), for walks that visit
    /// many vertices in a row.
    #[inline]
    pub fn child_lists(&self) -> (&[u32], &[u32]) {
        (&self.child_start, &self.child_list)
    }

    /// Containment parent of `v`, `None` for the root.
    #[inline]
    pub fn parent(&self, v: VertexId) -> Option<VertexId> {
        let p = self.parent[v.index()];
        (p != u32::MAX).then_some(VertexId(p))
    }

    /// Whether some vertex has more than one containment parent: [`ResourceGraph::children`]
    /// and [`ResourceGraph::parent`] then give the tree of first parents, and
    /// [`ResourceGraph::subsystem_children`] every containment edge.
    pub fn has_shared_children(&self) -> bool {
        self.shared_children
    }

    /// Whether `v` is in the containment tree (the root or a vertex with a containment
    /// parent). Only vertices marked with [`GraphBuilder::mark_outside_containment`] are not.
    #[inline]
    pub fn in_containment(&self, v: VertexId) -> bool {
        v == self.root || self.parent[v.index()] != u32::MAX
    }

    /// Vertices of the containment tree below and including `v`, parents before children.
    pub fn preorder(&self, v: VertexId) -> Preorder<'_> {
        Preorder {
            graph: self,
            stack: vec![v.0],
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

    /// How many symbols the graph has: every symbol it hands out is below this.
    pub fn sym_count(&self) -> usize {
        self.interner.len()
    }

    #[inline]
    pub fn kind(&self, v: VertexId) -> Sym {
        self.columns.kind[v.index()]
    }
    pub fn kind_str(&self, v: VertexId) -> &str {
        self.str(self.columns.kind[v.index()])
    }
    pub fn basename(&self, v: VertexId) -> &str {
        self.str(self.columns.basename.get(v.index()))
    }
    pub fn name(&self, v: VertexId) -> &str {
        self.str(self.columns.name[v.index()])
    }
    #[inline]
    pub fn id(&self, v: VertexId) -> i64 {
        self.columns.id.get(v.index())
    }
    /// Unique id: the creation index, as Fluxion numbers a GRUG's vertices, or what a JGF
    /// file gives.
    #[inline]
    pub fn uniq_id(&self, v: VertexId) -> i64 {
        match self.uniq.get(v.index()) {
            Some(&u) => u,
            None => i64::from(v.0),
        }
    }
    /// Every vertex's uniq_id, when the graph gives some that differ from the vertex's
    /// position (a JGF file's own); `None` when each is its position.
    pub fn own_uniq_ids(&self) -> Option<&[i64]> {
        (!self.uniq.is_empty()).then_some(&self.uniq[..])
    }

    pub fn rank(&self, v: VertexId) -> i64 {
        self.columns.rank.get(v.index())
    }
    #[inline]
    pub fn size(&self, v: VertexId) -> i64 {
        self.columns.size.get(v.index())
    }
    pub fn unit(&self, v: VertexId) -> &str {
        self.str(self.columns.unit.get(v.index()))
    }
    pub fn marked_exclusive(&self, v: VertexId) -> bool {
        self.columns.exclusive[v.index()]
    }
    #[inline]
    pub fn status(&self, v: VertexId) -> Status {
        self.columns.status[v.index()]
    }
    pub fn set_status(&mut self, v: VertexId, status: Status) {
        self.columns.status[v.index()] = status;
        self.revised();
    }

    /// How many changes the graph has had since it was built: equal numbers of one graph
    /// mean the same statuses, properties and vertices.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Counts a change ([`ResourceGraph::revision`]).
    pub(crate) fn revised(&mut self) {
        self.revision = self.revision.wrapping_add(1);
    }

    /// Properties of `v`, sorted by key.
    pub fn properties(&self, v: VertexId) -> Option<&BTreeMap<String, String>> {
        self.columns.properties.get(&v.0)
    }

    /// Sets (or replaces) one property.
    pub fn set_property(&mut self, v: VertexId, key: &str, value: &str) {
        self.revised();
        self.columns
            .properties
            .entry(v.0)
            .or_default()
            .insert(key.to_string(), value.to_string());
    }

    /// Whether `v` has property `key` (any value).
    pub fn has_property(&self, v: VertexId, key: &str) -> bool {
        self.columns
            .properties
            .get(&v.0)
            .is_some_and(|p| p.contains_key(key))
    }

    /// What `v` was built from, as [`GraphBuilder::add_vertex`] takes it (its name given
    /// in full): to copy it into another graph.
    pub fn spec_of(&self, v: VertexId) -> VertexSpec {
        let mut spec = VertexSpec::new(self.kind_str(v), self.basename(v), self.id(v));
        spec.name = Some(self.name(v).to_string());
        spec.rank = self.rank(v);
        spec.size = self.size(v);
        spec.unit = self.unit(v).to_string();
        spec.status = self.status(v);
        spec.exclusive = self.marked_exclusive(v);
        if let Some(p) = self.properties(v) {
            spec.properties = p.clone();
        }
        spec
    }

    /// Containment path, e.g. `/tiny0/rack0/node0`: the names from the root, unless the
    /// graph file gave the vertex another one (a JGF file's `paths`, taken as Fluxion takes
    /// them).
    pub fn path(&self, v: VertexId) -> String {
        match self.paths.given(v) {
            Some(p) => p.to_string(),
            None => self.names_path(v),
        }
    }

    /// Every path of `v`, by subsystem (Fluxion's `paths` map): containment first when `v`
    /// is in it, then the other subsystems it belongs to in the order they were first named.
    pub fn paths(&self, v: VertexId) -> Vec<(&str, String)> {
        let mut out = Vec::new();
        if self.in_containment(v) {
            out.push((CONTAINMENT, self.path(v)));
        }
        for (sub, p) in self.paths.other(v) {
            out.push((self.str(*sub), p.to_string()));
        }
        out
    }

    /// How many paths the graph's vertices have in all (Fluxion's `by_path` entries).
    pub fn path_count(&self) -> usize {
        let in_tree = self.vertices().filter(|&v| self.in_containment(v)).count();
        in_tree + self.paths.count()
    }

    /// The symbol of the containment subsystem (always the first the graph interns).
    fn containment_sym(&self) -> Sym {
        Sym(0)
    }

    /// The names from the root to `v`, as a path.
    fn names_path(&self, v: VertexId) -> String {
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

    /// The vertex at a path such as `/tiny0/rack0/node0`: one the graph file gave, or a
    /// path in another subsystem, else walking the containment tree down from the root by
    /// name (no index of those is kept: it would cost more memory than the whole graph).
    pub fn find_path(&self, path: &str) -> Option<VertexId> {
        if let Some(v) = self.paths.find(path) {
            return Some(v);
        }
        // A vertex the file placed elsewhere is not at the path of its names.
        self.find_names_path(path)
            .filter(|&v| self.paths.given(v).is_none())
    }

    /// Every vertex at `path`, in vertex order (Fluxion's `by_path` keeps a list per path:
    /// two nodes an R names alike are both at `/cluster0/fluke`, and `set-property`,
    /// `get-property`, `set-status` and `get-status` act on each).
    pub fn find_paths(&self, path: &str) -> Vec<VertexId> {
        let mut found = self.paths.find_all(path);
        let mut level = vec![self.root];
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        if parts.next() != Some(self.name(self.root)) {
            level.clear();
        }
        for part in parts {
            level = level
                .iter()
                .flat_map(|&v| self.children(v).iter().map(|&c| VertexId(c)))
                .filter(|&c| self.name(c) == part)
                .collect();
        }
        found.extend(level.into_iter().filter(|&v| self.paths.given(v).is_none()));
        found.sort_unstable();
        found.dedup();
        found
    }

    fn find_names_path(&self, path: &str) -> Option<VertexId> {
        // By symbol: a name the graph never interned is no vertex's (one hash lookup, not a
        // scan of the children: an attach looks up every vertex of what it adds, most of
        // them new, under nodes with thousands of siblings).
        let names = self.columns.name.as_slice();
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let first = self.interner.get(parts.next()?)?;
        if names[self.root.index()] != first {
            return None;
        }
        let mut cur = self.root;
        for part in parts {
            let name = self.interner.get(part)?;
            cur = self
                .children(cur)
                .iter()
                .map(|&c| VertexId(c))
                .find(|&c| names[c.index()] == name)?;
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

    /// Approximate heap bytes held by the graph (for memory reports): the per-vertex
    /// columns, the containment arrays, petgraph's node and edge lists, the interned strings
    /// and the properties, by capacity; allocator overhead is not counted.
    pub fn heap_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * size_of::<T>()
        }
        // petgraph: a node is its two edge-list heads, an edge its weight, two endpoints and
        // two next links (all u32).
        let topo = self.topo.capacity();
        self.columns.heap_bytes()
            + bytes(&self.parent)
            + bytes(&self.child_start)
            + bytes(&self.child_list)
            + topo.0 * 2 * size_of::<u32>()
            + topo.1 * (size_of::<Sym>() + 4 * size_of::<u32>())
            + self.interner.heap_bytes()
            + self.paths.heap_bytes()
    }

    /// How many vertices the containment tree reaches from the root; `Err` with the first
    /// vertex found deeper than [`GRAPH_DEPTH_MAX`].
    fn reachable_count(&self) -> Result<usize, GraphError> {
        let mut stack: Vec<(u32, usize)> = Vec::with_capacity(64);
        stack.push((self.root.0, 0));
        let mut count = 0;
        while let Some((v, depth)) = stack.pop() {
            if depth > GRAPH_DEPTH_MAX {
                return Err(self.too_deep(CONTAINMENT, VertexId(v), depth));
            }
            count += 1;
            stack.extend(self.children(VertexId(v)).iter().map(|&c| (c, depth + 1)));
        }
        Ok(count)
    }

    /// The error of vertex `v`, at `depth` in `subsystem`'s tree, deeper than allowed.
    pub fn too_deep(&self, subsystem: &str, v: VertexId, depth: usize) -> GraphError {
        GraphError::TooDeep {
            subsystem: subsystem.to_string(),
            name: self.name(v).to_string(),
            depth,
        }
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
