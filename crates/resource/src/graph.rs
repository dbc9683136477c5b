//! The resource graph: topology in petgraph, per-vertex data in dense side arrays.
//!
//! Vertices are numbered densely from 0 in the order they were created (a reader creates them
//! in the order Fluxion would, so that `uniq_id`, traversal order and output order agree with
//! it). petgraph owns the topology of every subsystem; the containment tree, which the matcher
//! walks on every match, is additionally flattened into a compressed child list (`child_start`
//! / `child_list`) so that a walk touches contiguous memory and allocates nothing.
//!
//! Memory: strings are interned (a vertex holds 4-byte symbols for its type, basename, name
//! and unit), ids, ranks and sizes take 4 bytes unless they do not fit, and petgraph stores
//! a node in 8 bytes and an edge in 20; a built graph holds about 72 bytes a vertex
//! ([`ResourceGraph::heap_bytes`]). Readers build through [`GraphBuilder`]'s symbol-based
//! fast path, which allocates nothing per vertex or edge.

use std::collections::{BTreeMap, HashMap};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::intern::{FxBuildHasher, Interner, Sym};

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
///
/// The builder keeps the graph's own columns (one array per field, strings interned) and its
/// petgraph topology from the first vertex on, so that [`finish`](GraphBuilder::finish)
/// moves them into the graph instead of copying: a vertex or an edge costs no allocation of
/// its own. (An edge to a vertex not added yet is kept aside, and it and every later edge
/// join the topology, in order, at `finish`.) Readers that create many
/// vertices use the fast path — [`intern`](GraphBuilder::intern) each type, basename and
/// unit once, then [`add_vertex_syms`](GraphBuilder::add_vertex_syms) and
/// [`add_containment_edge`](GraphBuilder::add_containment_edge) /
/// [`add_edge_sym`](GraphBuilder::add_edge_sym) — and [`reserve`](GraphBuilder::reserve)
/// what they know they will add. [`add_vertex`](GraphBuilder::add_vertex) with a
/// [`VertexSpec`] and [`add_edge`](GraphBuilder::add_edge) with a subsystem name build the
/// same graph.
///
/// A default name (`basename` + `id`) is made once per distinct (basename, id) pair, in a
/// reused buffer, and interned; `core3` under a thousand sockets is one string.
///
/// Symbols handed out by [`intern`](GraphBuilder::intern) are the builder's own: `finish`
/// renumbers the strings so that the graph's symbols are numbered exactly as if every
/// vertex's type, basename, name and unit, then every edge's subsystem, had been interned
/// in creation order (after `containment`), and drops strings no vertex or edge uses — so a
/// graph's [`ResourceGraph::sym`] and symbol order do not depend on which reader built it
/// or how.
#[derive(Debug)]
pub struct GraphBuilder {
    interner: Interner,
    containment: Sym,
    /// The graph's number of each builder symbol (`u32::MAX` while no vertex or edge uses
    /// it). Columns hold the graph's numbers from the start; edges hold builder symbols
    /// until `finish`.
    final_of: Vec<u32>,
    /// The builder symbol of each graph number, in graph order.
    final_order: Vec<u32>,
    /// The distinct subsystems of the edges, as builder symbols, in order of first use.
    edge_subsystems: Vec<Sym>,
    kind: Vec<Sym>,
    basename: Vec<Sym>,
    name: Vec<Sym>,
    id: IntColumn,
    rank: IntColumn,
    size: IntColumn,
    unit: Vec<Sym>,
    exclusive: Vec<bool>,
    status: Vec<Status>,
    /// Sparse: most vertices have no properties.
    properties: HashMap<u32, BTreeMap<String, String>>,
    /// Every subsystem's edges, in insertion order, as far as both ends existed when added.
    topo: DiGraph<(), Sym, u32>,
    /// (parent, child, subsystem) of the edges added after the first one whose ends did not
    /// both exist yet, in insertion order.
    pending: Vec<(u32, u32, Sym)>,
    /// Vertices that belong only to other subsystems (e.g. `power`), indexed by vertex.
    outside: Vec<bool>,
    /// The first vertex whose size is below 1 (reported by `finish`).
    bad_size: Option<u32>,
    /// `uniq_id`s that differ from the vertex's position (a JGF file may give its own).
    uniq_override: HashMap<u32, i64>,
    /// Whether a vertex may have more than one containment parent (Fluxion's GRUG
    /// `ASSOCIATE_IN` within containment): the first is its tree parent, the others are
    /// extra containment edges.
    shared_children: bool,
    /// Default names already made: `name_cache[basename][id]`, `NO_SYM` when not yet.
    name_cache: Vec<Vec<Sym>>,
    name_buf: String,
}

/// "No symbol" in the name cache.
const NO_SYM: Sym = Sym(u32::MAX);

/// Default names are cached for ids below this (larger ids are formatted every time).
const NAME_CACHE_IDS: i64 = 1 << 16;

impl Default for GraphBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        let mut interner = Interner::default();
        let containment = interner.intern(CONTAINMENT);
        GraphBuilder {
            interner,
            containment,
            // `containment` is always the graph's symbol 0.
            final_of: vec![0],
            final_order: vec![containment.0],
            edge_subsystems: Vec::new(),
            kind: Vec::new(),
            basename: Vec::new(),
            name: Vec::new(),
            id: IntColumn::default(),
            rank: IntColumn::default(),
            size: IntColumn::default(),
            unit: Vec::new(),
            exclusive: Vec::new(),
            status: Vec::new(),
            properties: HashMap::new(),
            topo: DiGraph::default(),
            pending: Vec::new(),
            outside: Vec::new(),
            bad_size: None,
            uniq_override: HashMap::new(),
            shared_children: false,
            name_cache: Vec::new(),
            name_buf: String::new(),
        }
    }

    /// An empty builder with room for `vertices` vertices and `edges` edges.
    pub fn with_capacity(vertices: usize, edges: usize) -> Self {
        let mut b = Self::new();
        b.reserve(vertices, edges);
        b
    }

    /// Makes room for `vertices` more vertices and `edges` more edges, exactly (the arrays
    /// become the graph's: room reserved and not used stays allocated until `finish`
    /// trims it).
    pub fn reserve(&mut self, vertices: usize, edges: usize) {
        self.kind.reserve_exact(vertices);
        self.basename.reserve_exact(vertices);
        self.name.reserve_exact(vertices);
        self.id.reserve_exact(vertices);
        self.rank.reserve_exact(vertices);
        self.size.reserve_exact(vertices);
        self.unit.reserve_exact(vertices);
        self.exclusive.reserve_exact(vertices);
        self.status.reserve_exact(vertices);
        self.topo.reserve_exact_nodes(vertices);
        self.topo.reserve_exact_edges(edges);
    }

    /// The builder's symbol for `s` (for [`add_vertex_syms`](Self::add_vertex_syms) and
    /// [`add_edge_sym`](Self::add_edge_sym); valid for this builder only).
    pub fn intern(&mut self, s: &str) -> Sym {
        self.interner.intern(s)
    }

    /// The string behind one of this builder's symbols.
    pub fn resolve(&self, sym: Sym) -> &str {
        self.interner.resolve(sym)
    }

    /// Adds a vertex; ids are dense and follow insertion order.
    pub fn add_vertex(&mut self, spec: VertexSpec) -> VertexId {
        let v = self.add_spec_fields(&spec);
        if !spec.properties.is_empty() {
            self.properties.insert(v.0, spec.properties);
        }
        v
    }

    /// [`add_vertex`](Self::add_vertex) without giving up the spec.
    pub fn add_vertex_spec(&mut self, spec: &VertexSpec) -> VertexId {
        let v = self.add_spec_fields(spec);
        if !spec.properties.is_empty() {
            self.properties.insert(v.0, spec.properties.clone());
        }
        v
    }

    fn add_spec_fields(&mut self, spec: &VertexSpec) -> VertexId {
        let v = self.add_vertex_parts(
            &spec.kind,
            &spec.basename,
            spec.name.as_deref(),
            spec.id,
            spec.rank,
            spec.size,
            &spec.unit,
            spec.status,
        );
        if spec.exclusive {
            self.exclusive[v.index()] = true;
        }
        v
    }

    /// Adds a vertex from its fields, without a [`VertexSpec`]: `name` `None` means
    /// `basename` followed by `id`. Not exclusive, no properties (see
    /// [`set_exclusive`](Self::set_exclusive), [`set_property`](Self::set_property)).
    #[allow(clippy::too_many_arguments)]
    pub fn add_vertex_parts(
        &mut self,
        kind: &str,
        basename: &str,
        name: Option<&str>,
        id: i64,
        rank: i64,
        size: i64,
        unit: &str,
        status: Status,
    ) -> VertexId {
        let kind = self.interner.intern(kind);
        let basename = self.interner.intern(basename);
        let name = name.map(|n| self.interner.intern(n));
        let unit = self.interner.intern(unit);
        self.add_vertex_syms(kind, basename, name, id, rank, size, unit, status)
    }

    /// [`add_vertex_parts`](Self::add_vertex_parts) with strings already interned by
    /// [`intern`](Self::intern): the fast path for readers that create many vertices of a
    /// few types.
    ///
    /// # Panics
    /// If a symbol does not come from this builder.
    #[allow(clippy::too_many_arguments)]
    pub fn add_vertex_syms(
        &mut self,
        kind: Sym,
        basename: Sym,
        name: Option<Sym>,
        id: i64,
        rank: i64,
        size: i64,
        unit: Sym,
        status: Status,
    ) -> VertexId {
        let strings = self.interner.len() as u32;
        assert!(
            kind.0 < strings && basename.0 < strings && unit.0 < strings,
            "symbol from another interner"
        );
        let name = match name {
            Some(name) => {
                assert!(name.0 < strings, "symbol from another interner");
                name
            }
            None => self.default_name(basename, id),
        };
        if self.final_of.len() < self.interner.len() {
            self.final_of.resize(self.interner.len(), u32::MAX);
        }
        // The graph numbers strings in the order vertices first use them: type, basename,
        // name, unit.
        let kind = self.final_sym(kind);
        let basename = self.final_sym(basename);
        let name = self.final_sym(name);
        let unit = self.final_sym(unit);
        let v = self.kind.len() as u32;
        if size < 1 && self.bad_size.is_none() {
            self.bad_size = Some(v);
        }
        self.kind.push(kind);
        self.basename.push(basename);
        self.name.push(name);
        self.id.push(id);
        self.rank.push(rank);
        self.size.push(size);
        self.unit.push(unit);
        self.exclusive.push(false);
        self.status.push(status);
        self.topo.add_node(());
        VertexId(v)
    }

    /// The graph's number of a builder symbol, numbering it now if it is new.
    #[inline]
    fn final_sym(&mut self, s: Sym) -> Sym {
        let f = &mut self.final_of[s.index()];
        if *f == u32::MAX {
            *f = self.final_order.len() as u32;
            self.final_order.push(s.0);
        }
        Sym(*f)
    }

    /// The builder symbol of a graph number held in a column.
    #[inline]
    fn builder_sym(&self, f: Sym) -> Sym {
        Sym(self.final_order[f.index()])
    }

    /// The string of a graph number held in a column.
    fn column_str(&self, f: Sym) -> &str {
        self.interner.resolve(self.builder_sym(f))
    }

    /// The symbol of `basename` + `id`, made at most once per pair with a small id.
    fn default_name(&mut self, basename: Sym, id: i64) -> Sym {
        let cacheable = (0..NAME_CACHE_IDS).contains(&id);
        if cacheable
            && let Some(&sym) = self
                .name_cache
                .get(basename.index())
                .and_then(|ids| ids.get(id as usize))
            && sym != NO_SYM
        {
            return sym;
        }
        let mut buf = std::mem::take(&mut self.name_buf);
        buf.clear();
        buf.push_str(self.interner.resolve(basename));
        push_int(&mut buf, id);
        let sym = self.interner.intern(&buf);
        self.name_buf = buf;
        if cacheable {
            if self.name_cache.len() <= basename.index() {
                self.name_cache.resize_with(basename.index() + 1, Vec::new);
            }
            let ids = &mut self.name_cache[basename.index()];
            if ids.len() <= id as usize {
                ids.resize((id as usize + 1).next_power_of_two(), NO_SYM);
            }
            ids[id as usize] = sym;
        }
        sym
    }

    /// Marks `v` exclusive (as a graph file may).
    pub fn set_exclusive(&mut self, v: VertexId, exclusive: bool) {
        self.exclusive[v.index()] = exclusive;
    }

    /// Gives `v` a `uniq_id` other than its position (what a JGF file says).
    pub fn set_uniq_id(&mut self, v: VertexId, uniq_id: i64) {
        if uniq_id == i64::from(v.0) {
            self.uniq_override.remove(&v.0);
        } else {
            self.uniq_override.insert(v.0, uniq_id);
        }
    }

    /// Sets (or replaces) one property of `v`.
    pub fn set_property(&mut self, v: VertexId, key: &str, value: &str) {
        self.properties
            .entry(v.0)
            .or_default()
            .insert(key.to_string(), value.to_string());
    }

    /// Adds an edge `parent → child` in `subsystem`. Child order under a parent is the order
    /// of these calls, and it is the order the matcher visits children.
    pub fn add_edge(&mut self, parent: VertexId, child: VertexId, subsystem: &str) {
        let sub = self.interner.intern(subsystem);
        self.push_edge(parent.0, child.0, sub);
    }

    /// [`add_edge`](Self::add_edge) with the subsystem interned by [`intern`](Self::intern).
    ///
    /// # Panics
    /// If `subsystem` does not come from this builder.
    pub fn add_edge_sym(&mut self, parent: VertexId, child: VertexId, subsystem: Sym) {
        assert!(
            (subsystem.0 as usize) < self.interner.len(),
            "symbol from another interner"
        );
        self.push_edge(parent.0, child.0, subsystem);
    }

    /// [`add_edge`](Self::add_edge) in [`CONTAINMENT`].
    #[inline]
    pub fn add_containment_edge(&mut self, parent: VertexId, child: VertexId) {
        self.push_edge(parent.0, child.0, self.containment);
    }

    #[inline]
    fn push_edge(&mut self, parent: u32, child: u32, subsystem: Sym) {
        if self.edge_subsystems.last() != Some(&subsystem)
            && !self.edge_subsystems.contains(&subsystem)
        {
            self.edge_subsystems.push(subsystem);
        }
        let n = self.kind.len() as u32;
        if self.pending.is_empty() && parent < n && child < n {
            self.topo.add_edge(
                NodeIndex::new(parent as usize),
                NodeIndex::new(child as usize),
                subsystem,
            );
        } else {
            self.pending.push((parent, child, subsystem));
        }
    }

    /// Lets a vertex have several containment parents (see [`ResourceGraph::has_shared_children`]).
    pub fn allow_shared_children(&mut self) {
        self.shared_children = true;
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
        self.kind.len()
    }

    /// Whether no vertex was added.
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// Number of edges added so far.
    pub fn edge_len(&self) -> usize {
        self.topo.edge_count() + self.pending.len()
    }

    /// The vertex added as `v`, rebuilt as a [`VertexSpec`] (it allocates; readers that
    /// look at vertices while building use [`vertex_kind`](Self::vertex_kind) and the
    /// other accessors). `name` is `None` when the name is `basename` + `id`.
    pub fn vertex(&self, v: VertexId) -> VertexSpec {
        let i = v.index();
        let basename = self.column_str(self.basename[i]);
        let name = self.column_str(self.name[i]);
        let default = format!("{basename}{}", self.id.get(i));
        VertexSpec {
            kind: self.column_str(self.kind[i]).to_string(),
            basename: basename.to_string(),
            name: (name != default).then(|| name.to_string()),
            id: self.id.get(i),
            rank: self.rank.get(i),
            size: self.size.get(i),
            unit: self.column_str(self.unit[i]).to_string(),
            properties: self.properties.get(&v.0).cloned().unwrap_or_default(),
            status: self.status[i],
            exclusive: self.exclusive[i],
        }
    }

    /// The type of vertex `v`, as this builder's symbol.
    #[inline]
    pub fn vertex_kind(&self, v: VertexId) -> Sym {
        self.builder_sym(self.kind[v.index()])
    }

    /// The name of vertex `v`.
    pub fn vertex_name(&self, v: VertexId) -> &str {
        self.column_str(self.name[v.index()])
    }

    /// The rank of vertex `v`.
    #[inline]
    pub fn vertex_rank(&self, v: VertexId) -> i64 {
        self.rank.get(v.index())
    }

    /// Checks the containment tree (one root, one parent each, all reachable) and freezes.
    pub fn finish(mut self) -> Result<ResourceGraph, GraphError> {
        let n = self.kind.len();
        if n == 0 {
            return Err(GraphError::Empty);
        }
        if let Some(v) = self.bad_size {
            let v = v as usize;
            let name = self.column_str(self.name[v]).to_string();
            let size = self.size.get(v);
            return Err(GraphError::BadSize { name, size });
        }
        self.renumber_strings();
        let containment = Sym(0);
        let mut topo = std::mem::take(&mut self.topo);
        let mut parent = vec![u32::MAX; n];
        // child_start[p] counts p's containment children, then becomes the end of p's range.
        let mut child_start = vec![0u32; n + 1];
        let shared_ok = self.shared_children;
        let mut shared = false;
        let mut link = |p: u32, c: u32, name: &[Sym], interner: &Interner| {
            if parent[c as usize] != u32::MAX {
                if shared_ok {
                    shared = true;
                    return Ok(());
                }
                let name = interner.resolve(name[c as usize]).to_string();
                return Err(GraphError::TwoParents { child: c, name });
            }
            parent[c as usize] = p;
            child_start[p as usize] += 1;
            Ok(())
        };
        for e in topo.raw_edges() {
            if e.weight == containment {
                let (p, c) = (e.source().index() as u32, e.target().index() as u32);
                link(p, c, &self.name, &self.interner)?;
            }
        }
        for &(p, c, sub) in &self.pending {
            for end in [p, c] {
                if end as usize >= n {
                    return Err(GraphError::NoSuchVertex(end));
                }
            }
            topo.add_edge(NodeIndex::new(p as usize), NodeIndex::new(c as usize), sub);
            if sub == containment {
                link(p, c, &self.name, &self.interner)?;
            }
        }
        self.pending = Vec::new();
        topo.shrink_to_fit();
        let mut end = 0;
        for count in &mut child_start[..n] {
            end += *count;
            *count = end;
        }
        child_start[n] = end;
        // Fill each range from its end, walking the edges backwards: children keep their
        // edge order and each range's end becomes its start.
        let mut child_list = vec![0u32; end as usize];
        // With shared children only the edge from the tree parent is a tree edge (the first
        // one: the last met walking backwards).
        let mut placed = vec![false; if shared { n } else { 0 }];
        for e in topo.raw_edges().iter().rev() {
            if e.weight == containment {
                let p = e.source().index();
                let c = e.target().index();
                if shared {
                    if parent[c] as usize != p || placed[c] {
                        continue;
                    }
                    placed[c] = true;
                }
                child_start[p] -= 1;
                child_list[child_start[p] as usize] = c as u32;
            }
        }
        let outside = std::mem::take(&mut self.outside);
        let is_outside = |v: usize| outside.get(v).copied().unwrap_or(false);
        let mut root = None;
        let mut roots = 0;
        let mut detached = 0;
        for (v, &p) in parent.iter().enumerate() {
            if p == u32::MAX {
                if is_outside(v) {
                    detached += 1;
                } else {
                    roots += 1;
                    root.get_or_insert(v);
                }
            }
        }
        let (1, Some(root)) = (roots, root) else {
            return Err(GraphError::Roots(roots));
        };
        let mut g = ResourceGraph {
            topo,
            kind: shrink(self.kind),
            basename: shrink(self.basename),
            name: shrink(self.name),
            id: self.id.shrunk(),
            rank: self.rank.shrunk(),
            size: self.size.shrunk(),
            unit: shrink(self.unit),
            exclusive: shrink(self.exclusive),
            status: shrink(self.status),
            properties: self.properties,
            uniq: Vec::new(),
            parent,
            child_start,
            child_list,
            root: VertexId(root as u32),
            interner: self.interner,
            shared_children: shared,
        };
        g.properties.shrink_to_fit();
        if !self.uniq_override.is_empty() {
            g.uniq = (0..n as u32)
                .map(|v| self.uniq_override.get(&v).copied().unwrap_or(i64::from(v)))
                .collect();
        }
        let expected = n - detached;
        let reached = g.reachable_count();
        if reached != expected {
            return Err(GraphError::Unreachable(format!(
                "{reached} of {expected} vertices reachable"
            )));
        }
        Ok(g)
    }

    /// Numbers the subsystems that only edges use (after every vertex string, in order of
    /// first use), rewrites the edges' symbols if their numbers differ, and renumbers the
    /// interner to the graph's numbering, dropping strings nothing uses.
    fn renumber_strings(&mut self) {
        if self.final_of.len() < self.interner.len() {
            self.final_of.resize(self.interner.len(), u32::MAX);
        }
        for k in 0..self.edge_subsystems.len() {
            let s = self.edge_subsystems[k];
            self.final_sym(s);
        }
        let final_of = &self.final_of;
        if self
            .edge_subsystems
            .iter()
            .any(|s| final_of[s.index()] != s.0)
        {
            for w in self.topo.edge_weights_mut() {
                *w = Sym(final_of[w.index()]);
            }
            for e in &mut self.pending {
                e.2 = Sym(final_of[e.2.index()]);
            }
        }
        let identity = self.final_order.len() == self.interner.len()
            && self
                .final_order
                .iter()
                .enumerate()
                .all(|(k, &o)| k as u32 == o);
        if !identity {
            self.interner.renumber(&self.final_order, &self.final_of);
        }
    }
}

/// An `i64` per vertex in 4 bytes where it fits, as ids, ranks and sizes nearly always do;
/// the others are kept aside by vertex.
#[derive(Clone, Debug, Default)]
struct IntColumn {
    small: Vec<i32>,
    big: HashMap<u32, i64, FxBuildHasher>,
}

/// The `small` value that sends a lookup to `big`.
const BIG: i32 = i32::MIN;

impl IntColumn {
    #[inline]
    fn push(&mut self, x: i64) {
        match i32::try_from(x) {
            Ok(small) if small != BIG => self.small.push(small),
            _ => self.push_big(x),
        }
    }

    #[cold]
    #[inline(never)]
    fn push_big(&mut self, x: i64) {
        self.big.insert(self.small.len() as u32, x);
        self.small.push(BIG);
    }

    #[inline]
    fn get(&self, i: usize) -> i64 {
        match self.small[i] {
            BIG => self.get_big(i),
            small => i64::from(small),
        }
    }

    #[cold]
    #[inline(never)]
    fn get_big(&self, i: usize) -> i64 {
        self.big.get(&(i as u32)).copied().unwrap_or(i64::from(BIG))
    }

    fn reserve_exact(&mut self, additional: usize) {
        self.small.reserve_exact(additional);
    }

    fn shrunk(mut self) -> Self {
        self.small.shrink_to_fit();
        self.big.shrink_to_fit();
        self
    }

    fn heap_bytes(&self) -> usize {
        self.small.capacity() * size_of::<i32>()
            + self.big.capacity() * (size_of::<(u32, i64)>() + 1)
    }
}

/// A column without spare capacity (the builder's arrays become the graph's).
fn shrink<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

/// Appends the decimal form of `n`.
fn push_int(buf: &mut String, n: i64) {
    let mut digits = [0u8; 20];
    let mut k = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        k -= 1;
        digits[k] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        buf.push('-');
    }
    for &d in &digits[k..] {
        buf.push(char::from(d));
    }
}

/// A frozen resource graph. Topology is fixed; status and properties may change.
#[derive(Clone, Debug)]
pub struct ResourceGraph {
    topo: DiGraph<(), Sym, u32>,
    kind: Vec<Sym>,
    basename: Vec<Sym>,
    name: Vec<Sym>,
    id: IntColumn,
    rank: IntColumn,
    size: IntColumn,
    unit: Vec<Sym>,
    exclusive: Vec<bool>,
    status: Vec<Status>,
    /// Sparse: most vertices have no properties.
    properties: HashMap<u32, BTreeMap<String, String>>,
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

    /// Number of edges leaving `v`, in every subsystem (Fluxion's `out_degree`: a vertex is a
    /// leaf when it has none).
    pub fn out_degree(&self, v: VertexId) -> usize {
        self.topo.edges(NodeIndex::new(v.index())).count()
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

    /// How many symbols the graph has: every symbol it hands out is below this.
    pub fn sym_count(&self) -> usize {
        self.interner.len()
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
        self.id.get(v.index())
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
    pub fn rank(&self, v: VertexId) -> i64 {
        self.rank.get(v.index())
    }
    #[inline]
    pub fn size(&self, v: VertexId) -> i64 {
        self.size.get(v.index())
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
        let properties: usize = self
            .properties
            .values()
            .map(|p| {
                p.iter()
                    .map(|(k, v)| k.capacity() + v.capacity() + 2 * size_of::<String>())
                    .sum::<usize>()
            })
            .sum::<usize>()
            + self.properties.capacity() * (size_of::<(u32, BTreeMap<String, String>)>() + 1);
        bytes(&self.kind)
            + bytes(&self.basename)
            + bytes(&self.name)
            + self.id.heap_bytes()
            + self.rank.heap_bytes()
            + self.size.heap_bytes()
            + bytes(&self.unit)
            + bytes(&self.exclusive)
            + bytes(&self.status)
            + bytes(&self.parent)
            + bytes(&self.child_start)
            + bytes(&self.child_list)
            + topo.0 * 2 * size_of::<u32>()
            + topo.1 * (size_of::<Sym>() + 4 * size_of::<u32>())
            + self.interner.heap_bytes()
            + properties
    }

    /// How many vertices a preorder walk from the root reaches.
    fn reachable_count(&self) -> usize {
        let mut stack: Vec<u32> = Vec::with_capacity(64);
        stack.push(self.root.0);
        let mut count = 0;
        while let Some(v) = stack.pop() {
            count += 1;
            stack.extend_from_slice(self.children(VertexId(v)));
        }
        count
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

    /// Every field of every vertex, the strings in symbol order and the edges of each
    /// subsystem: two graphs with equal descriptions are the same graph.
    fn describe(g: &ResourceGraph) -> Vec<String> {
        let mut out: Vec<String> = (0..g.interner.len() as u32)
            .map(|k| format!("sym {k} {:?}", g.str(Sym(k))))
            .collect();
        for v in g.vertices() {
            out.push(format!(
                "{} {} {:?} {} {} {} {} {} {:?} {} {:?} {:?} {:?} {:?}",
                v.0,
                g.name(v),
                g.kind(v),
                g.basename(v),
                g.id(v),
                g.rank(v),
                g.size(v),
                g.unit(v),
                g.status(v),
                g.marked_exclusive(v),
                g.properties(v),
                g.parent(v),
                g.children(v),
                g.subsystem_children(v, "power"),
            ));
        }
        out
    }

    #[test]
    fn fast_path_builds_the_same_graph_as_vertex_specs() {
        let mut slow = GraphBuilder::new();
        let c = slow.add_vertex(VertexSpec::new("cluster", "c", 0));
        let mut spec = VertexSpec::new("node", "n", 7);
        spec.name = Some("login7".into());
        spec.rank = 3;
        spec.exclusive = true;
        spec.properties.insert("ssd".into(), String::new());
        let n = slow.add_vertex(spec);
        let mut mem = VertexSpec::new("memory", "memory", 1 << 40);
        mem.size = i64::MAX;
        mem.unit = "GB".into();
        mem.rank = i64::from(i32::MIN);
        let m = slow.add_vertex(mem);
        let p = slow.add_vertex(VertexSpec::new("pdu", "pdu", -1));
        slow.add_edge(c, n, CONTAINMENT);
        slow.add_edge(n, m, CONTAINMENT);
        slow.add_edge(c, p, CONTAINMENT);
        slow.add_edge(p, n, "power");
        let slow = slow.finish().unwrap();

        let mut fast = GraphBuilder::new();
        // Interned out of creation order, with strings no vertex uses.
        let gb = fast.intern("GB");
        let unused = fast.intern("gpu");
        let power = fast.intern("power");
        let memory = fast.intern("memory");
        let c = fast.add_vertex_parts("cluster", "c", None, 0, -1, 1, "", Status::Up);
        let node = fast.intern("node");
        let basename = fast.intern("n");
        let name = fast.intern("login7");
        let none = fast.intern("");
        let n = fast.add_vertex_syms(node, basename, Some(name), 7, 3, 1, none, Status::Up);
        fast.set_exclusive(n, true);
        fast.set_property(n, "ssd", "");
        let m = fast.add_vertex_syms(
            memory,
            memory,
            None,
            1 << 40,
            i64::from(i32::MIN),
            i64::MAX,
            gb,
            Status::Up,
        );
        let p = fast.add_vertex_parts("pdu", "pdu", None, -1, -1, 1, "", Status::Up);
        fast.add_containment_edge(c, n);
        fast.add_edge_sym(n, m, Sym(0));
        fast.add_containment_edge(c, p);
        fast.add_edge_sym(p, n, power);
        assert_eq!(fast.resolve(unused), "gpu");
        assert_eq!(fast.vertex(m).size, i64::MAX);
        assert_eq!(fast.vertex(n).name.as_deref(), Some("login7"));
        assert_eq!(fast.vertex(m).name, None);
        let fast = fast.finish().unwrap();

        assert_eq!(describe(&fast), describe(&slow));
        assert_eq!(fast.sym("gpu"), None, "strings no vertex uses are dropped");
        assert_eq!(fast.sym(CONTAINMENT), Some(Sym(0)));
        assert_eq!(
            fast.sym("cluster"),
            Some(Sym(1)),
            "numbered in creation order"
        );
        assert_eq!(fast.name(m), "memory1099511627776");
        assert_eq!((fast.id(m), fast.size(m)), (1 << 40, i64::MAX));
        assert_eq!(fast.rank(m), i64::from(i32::MIN));
        assert_eq!(fast.name(p), "pdu-1");
        assert!(fast.marked_exclusive(n) && !fast.marked_exclusive(m));
    }

    #[test]
    fn edges_to_vertices_added_later_keep_their_order() {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        b.add_edge(c, VertexId(2), CONTAINMENT);
        let n0 = b.add_vertex(VertexSpec::new("node", "node", 0));
        let n1 = b.add_vertex(VertexSpec::new("node", "node", 1));
        b.add_edge(c, n0, CONTAINMENT);
        b.add_edge(n1, n0, "power");
        assert_eq!(b.edge_len(), 3);
        let g = b.finish().unwrap();
        assert_eq!(g.children(c), &[2, 1]);
        assert_eq!(g.subsystem_children(c, CONTAINMENT), vec![n1, n0]);
        assert_eq!(g.subsystem_children(n1, "power"), vec![n0]);
        assert_eq!(g.edge_count(None), 3);

        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        b.add_edge(c, VertexId(5), CONTAINMENT);
        assert_eq!(b.finish().unwrap_err(), GraphError::NoSuchVertex(5));
    }

    #[test]
    fn bad_sizes_are_reported_first_and_by_name() {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        b.add_edge(c, VertexId(9), CONTAINMENT);
        let mut bad = VertexSpec::new("memory", "memory", 3);
        bad.size = 0;
        b.add_vertex(bad.clone());
        bad.size = -1;
        b.add_vertex(bad);
        assert_eq!(
            b.finish().unwrap_err(),
            GraphError::BadSize {
                name: "memory3".into(),
                size: 0
            }
        );
    }

    #[test]
    fn default_names_are_basename_and_id() {
        let mut b = GraphBuilder::with_capacity(4, 3);
        let c = b.add_vertex_parts("cluster", "c", None, 0, -1, 1, "", Status::Up);
        for id in [70_000, -12, 0] {
            let v = b.add_vertex_parts("core", "core", None, id, -1, 1, "", Status::Up);
            b.add_containment_edge(c, v);
        }
        let g = b.finish().unwrap();
        let names: Vec<&str> = g.vertices().map(|v| g.name(v)).collect();
        assert_eq!(names, ["c0", "core70000", "core-12", "core0"]);
        assert!(g.heap_bytes() > 0);
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
