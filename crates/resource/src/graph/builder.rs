//! [`GraphBuilder`]: collects a reader's vertices and edges and freezes them.

use std::collections::HashMap;

mod edges;
mod finish;
mod siblings;

use edges::BuiltEdges;
pub use siblings::Siblings;

#[cfg(doc)]
use super::ResourceGraph;
use super::{CONTAINMENT, Status, VertexColumns, VertexId, VertexSpec};
use crate::intern::{Interner, Sym};

/// Collects vertices and edges, then checks and freezes them into a [`ResourceGraph`].
///
/// The builder keeps the graph's own columns (one array per field, strings interned) from
/// the first vertex on, so that [`finish`](GraphBuilder::finish) moves them into the graph
/// instead of copying: a vertex or an edge costs no allocation of its own. Edges are kept in
/// order (an edge may name a vertex not added yet) — while every one is a containment edge
/// to a later child than the last, as only each child's parent (`builder::edges`); `finish`
/// derives the containment arrays from them and builds the graph's petgraph topology only
/// when they are not all there is ([`ResourceGraph`]'s `topo`). Readers that create many
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
    /// The graph's columns, in the graph's symbols.
    columns: VertexColumns,
    /// Every subsystem's edges, in insertion order.
    edges: BuiltEdges,
    /// Vertices that belong only to other subsystems (e.g. `power`), indexed by vertex.
    outside: Vec<bool>,
    /// The first vertex whose size is below 1 (reported by `finish`).
    bad_size: Option<u32>,
    /// `uniq_id`s that differ from the vertex's position (a JGF file may give its own).
    uniq_override: HashMap<u32, i64>,
    /// Paths a reader gave: (vertex, subsystem, path).
    given_paths: Vec<(u32, String, String)>,
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
            columns: VertexColumns::default(),
            edges: BuiltEdges::new(containment),
            outside: Vec::new(),
            bad_size: None,
            uniq_override: HashMap::new(),
            given_paths: Vec::new(),
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
        self.columns.reserve_exact(vertices);
        self.edges.reserve_exact(vertices, edges);
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
            self.columns.properties.insert(v.0, spec.properties);
        }
        v
    }

    /// [`add_vertex`](Self::add_vertex) without giving up the spec.
    pub fn add_vertex_spec(&mut self, spec: &VertexSpec) -> VertexId {
        let v = self.add_spec_fields(spec);
        if !spec.properties.is_empty() {
            self.columns.properties.insert(v.0, spec.properties.clone());
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
            self.columns.exclusive[v.index()] = true;
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
        let v = self.columns.kind.len() as u32;
        if size < 1 && self.bad_size.is_none() {
            self.bad_size = Some(v);
        }
        self.columns.kind.push(kind);
        self.columns.basename.push(basename);
        self.columns.name.push(name);
        self.columns.id.push(id);
        self.columns.rank.push(rank);
        self.columns.size.push(size);
        self.columns.unit.push(unit);
        self.columns.exclusive.push(false);
        self.columns.status.push(status);
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
    #[inline]
    fn default_name(&mut self, basename: Sym, id: i64) -> Sym {
        if (0..NAME_CACHE_IDS).contains(&id)
            && let Some(&sym) = self
                .name_cache
                .get(basename.index())
                .and_then(|ids| ids.get(id as usize))
            && sym != NO_SYM
        {
            return sym;
        }
        self.make_default_name(basename, id)
    }

    /// [`default_name`](Self::default_name) of a pair not in the cache (kept apart so that
    /// the cached lookup, every vertex but a thousand-odd on the bench graphs, is inlined).
    #[inline(never)]
    fn make_default_name(&mut self, basename: Sym, id: i64) -> Sym {
        let cacheable = (0..NAME_CACHE_IDS).contains(&id);
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
        self.columns.exclusive[v.index()] = exclusive;
    }

    /// Gives `v` its path in `subsystem`, as a graph file writes it (see
    /// [`ResourceGraph::paths`]).
    pub fn set_path(&mut self, v: VertexId, subsystem: &str, path: &str) {
        self.given_paths
            .push((v.0, subsystem.to_string(), path.to_string()));
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
        self.columns
            .properties
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
        self.edges
            .push(parent, child, subsystem, self.columns.kind.len());
    }

    /// [`push_edge`](Self::push_edge) `parent → c` for each of `children`, in order.
    fn push_edges_to(&mut self, parent: u32, children: std::ops::Range<u32>, subsystem: Sym) {
        if children.is_empty() {
            return;
        }
        self.push_edge(parent, children.start, subsystem);
        let vertices = self.columns.kind.len();
        self.edges.push_run(
            parent,
            children.start + 1..children.end,
            subsystem,
            vertices,
        );
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
        self.columns.kind.len()
    }

    /// Whether no vertex was added.
    pub fn is_empty(&self) -> bool {
        self.columns.kind.is_empty()
    }

    /// Number of edges added so far.
    pub fn edge_len(&self) -> usize {
        self.edges.len()
    }

    /// The vertex added as `v`, rebuilt as a [`VertexSpec`] (it allocates; readers that
    /// look at vertices while building use [`vertex_kind`](Self::vertex_kind) and the
    /// other accessors). `name` is `None` when the name is `basename` + `id`.
    pub fn vertex(&self, v: VertexId) -> VertexSpec {
        let i = v.index();
        let basename = self.column_str(self.columns.basename.get(i));
        let name = self.column_str(self.columns.name[i]);
        let default = format!("{basename}{}", self.columns.id.get(i));
        VertexSpec {
            kind: self.column_str(self.columns.kind[i]).to_string(),
            basename: basename.to_string(),
            name: (name != default).then(|| name.to_string()),
            id: self.columns.id.get(i),
            rank: self.columns.rank.get(i),
            size: self.columns.size.get(i),
            unit: self.column_str(self.columns.unit.get(i)).to_string(),
            properties: self
                .columns
                .properties
                .get(&v.0)
                .cloned()
                .unwrap_or_default(),
            status: self.columns.status[i],
            exclusive: self.columns.exclusive[i],
        }
    }

    /// The type of vertex `v`, as this builder's symbol.
    #[inline]
    pub fn vertex_kind(&self, v: VertexId) -> Sym {
        self.builder_sym(self.columns.kind[v.index()])
    }

    /// The name of vertex `v`.
    pub fn vertex_name(&self, v: VertexId) -> &str {
        self.column_str(self.columns.name[v.index()])
    }

    /// The rank of vertex `v`.
    #[inline]
    pub fn vertex_rank(&self, v: VertexId) -> i64 {
        self.columns.rank.get(v.index())
    }
}

/// Appends the decimal form of `n`, as `write!(buf, "{n}")` does, without the formatting
/// machinery: vertex names here, and the matcher's simple writer (one number per line of
/// `query`'s output, most of them one digit: a unit of a core), where formatting was a
/// measurable part of a whole run. (The `itoa` crate was measured here and was slower for
/// such short numbers: 21.3 against 18.5 M instructions on low-4096.)
///
/// Inline for the one digit most calls print (a line of `query`'s output each); the rest
/// out of line.
#[inline]
pub fn push_int(buf: &mut String, n: i64) {
    match u8::try_from(n) {
        Ok(d @ 0..=9) => buf.push(char::from(b'0' + d)),
        _ => push_long_int(buf, n),
    }
}

/// [`push_int`] for a number of more than one digit, or a negative one.
fn push_long_int(buf: &mut String, n: i64) {
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
