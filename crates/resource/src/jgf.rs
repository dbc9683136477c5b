//! JGF: the JSON Graph Format as Fluxion reads and writes it.
//!
//! `{"graph": {"nodes": [{"id": "0", "metadata": {...}}], "edges": [{"source": "0",
//! "target": "1", "metadata": {"subsystem": "containment"}}]}}`. Unlike a GRUG, a JGF lists
//! every vertex, so the reader creates them in file order (that order is their `uniq_id`)
//! and adds the edges in file order (that order is the child order the matcher walks).
//!
//! Metadata, as Fluxion's JGF reader takes it: `type` is required; `basename` defaults to the
//! type; `id` to the vertex's `uniq_id` (else the node's numeric `"id"`, else its position),
//! which is how `jgfs/dyn_explore.json`'s unnamed ssds become `ssd21`, `ssd22` in Fluxion's
//! output; `name` to basename + id; `rank` to -1; `size` to 1; `unit` to ""; `exclusive` to
//! false; `status` (`"up"`/`"down"`, or 0/1) to up; `properties` is an object of strings.
//! An edge's subsystem is `metadata.subsystem`, else the key of the older
//! `metadata.name: {"containment": "contains"}`, else containment (newer Fluxion writes no
//! edge metadata at all).
//!
//! A vertex whose `paths` name subsystems but not containment (a `powerpanel`, say) is
//! outside the containment tree; without `paths`, a vertex that only has edges of other
//! subsystems is. Errors name the JSON path, e.g. `graph.nodes[3].metadata.size: expected
//! an integer, found a string`.
//!
//! [`parse_jgf`] stops before building a graph, for callers that need JGF fragments (the
//! vertices of an allocation, a partial-cancel request) rather than a whole cluster.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::error::{GRAPH_VERTICES_MAX, Location, ReadError, read_file};
use crate::graph::{CONTAINMENT, GraphBuilder, ResourceGraph, Status, VertexId, VertexSpec};
use crate::json::{At, Json};

/// One JGF node.
#[derive(Clone, Debug, PartialEq)]
pub struct JgfVertex {
    /// The node's `"id"` (edges refer to it).
    pub key: String,
    /// Everything the metadata says, defaults filled in.
    pub spec: VertexSpec,
    /// `metadata.uniq_id`, if given.
    pub uniq_id: Option<i64>,
    /// `metadata.paths`: subsystem → path, e.g. `containment` → `/tiny0/rack0`.
    pub paths: BTreeMap<String, String>,
}

impl JgfVertex {
    /// Its `uniq_id` as Fluxion takes it: `metadata.uniq_id`, else the node's numeric
    /// `"id"`, else its `position` in the file.
    pub fn uniq(&self, position: usize) -> i64 {
        self.uniq_id
            .or_else(|| leading_int(&self.key))
            .unwrap_or(position as i64)
    }
}

/// One JGF edge, by index into [`JgfDocument::vertices`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JgfEdge {
    pub source: usize,
    pub target: usize,
    pub subsystem: String,
}

/// A JGF document's vertices and edges in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JgfDocument {
    pub vertices: Vec<JgfVertex>,
    pub edges: Vec<JgfEdge>,
}

/// Reads a JGF document into a resource graph.
pub fn read_jgf(text: &str) -> Result<ResourceGraph, ReadError> {
    parse_jgf(text)?.build()
}

/// [`read_jgf`] on a file; errors start with the file's path.
pub fn read_jgf_file(path: impl AsRef<Path>) -> Result<ResourceGraph, ReadError> {
    read_file(path.as_ref(), read_jgf)
}

/// Parses a JGF document without building a graph.
pub fn parse_jgf(text: &str) -> Result<JgfDocument, ReadError> {
    let root = Json::parse(text)?;
    let at = At(String::new());
    let graph = at.member(&root, "graph")?;
    let at = at.key("graph");
    let nodes = at.key("nodes").array(at.member(graph, "nodes")?)?;
    if nodes.len() > GRAPH_VERTICES_MAX {
        let at = Location::Path("graph.nodes".into());
        return Err(ReadError::limit(
            at,
            format!("{} vertices", nodes.len()),
            GRAPH_VERTICES_MAX,
        ));
    }
    let mut doc = JgfDocument::default();
    let mut index: HashMap<String, usize> = HashMap::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let at = at.key("nodes").index(i);
        let vertex = parse_vertex(node, i, &at)?;
        if index.insert(vertex.key.clone(), i).is_some() {
            return Err(at
                .key("id")
                .error(format!("a second node with id {:?}", vertex.key)));
        }
        doc.vertices.push(vertex);
    }
    let edges = match graph.get("edges") {
        None | Some(Json::Null) => &[][..],
        Some(edges) => at.key("edges").array(edges)?,
    };
    for (i, edge) in edges.iter().enumerate() {
        let at = at.key("edges").index(i);
        let end = |which: &str| -> Result<usize, ReadError> {
            let value = at.member(edge, which)?;
            let at = at.key(which);
            let key = node_key(value, &at)?;
            index
                .get(&key)
                .copied()
                .ok_or_else(|| at.error(format!("no node has id {key:?}")))
        };
        let (source, target) = (end("source")?, end("target")?);
        let subsystem = edge_subsystem(edge.get("metadata"), &at.key("metadata"))?;
        doc.edges.push(JgfEdge {
            source,
            target,
            subsystem,
        });
    }
    Ok(doc)
}

impl JgfDocument {
    /// `g`'s containment tree as a document, every vertex with its containment path: what
    /// [`ResourceGraph::attach`] takes to graft `g` onto a graph that shares its upper
    /// levels (a shard's graph growing by the nodes a definition change adds: the vertices
    /// on the way down that the graph has are matched by path, the others appended).
    /// Vertices appear in preorder, so a parent comes before its children; their
    /// `uniq_id`s are `uniq_base` and up, in that order. Give a base above every uniq id of
    /// the graph grafted onto: `first` orders children by uniq id and, as Fluxion's map
    /// does, keeps one child of two that share one.
    pub fn of_graph(g: &ResourceGraph, uniq_base: i64) -> JgfDocument {
        let mut doc = JgfDocument::default();
        let mut position: Vec<Option<usize>> = vec![None; g.len()];
        for v in g.preorder(g.root()) {
            let at = doc.vertices.len();
            position[v.index()] = Some(at);
            doc.vertices.push(JgfVertex {
                key: at.to_string(),
                spec: g.spec_of(v),
                uniq_id: Some(uniq_base.saturating_add(at as i64)),
                paths: BTreeMap::from([(CONTAINMENT.to_owned(), g.path(v))]),
            });
            if let Some(parent) = g.parent(v).and_then(|p| position[p.index()]) {
                doc.edges.push(JgfEdge {
                    source: parent,
                    target: at,
                    subsystem: CONTAINMENT.to_owned(),
                });
            }
        }
        doc
    }

    /// Builds the resource graph.
    pub fn build(&self) -> Result<ResourceGraph, ReadError> {
        let n = self.vertices.len();
        let mut touches_containment = vec![false; n];
        let mut touches_other = vec![false; n];
        for e in &self.edges {
            let mark = if e.subsystem == CONTAINMENT {
                &mut touches_containment
            } else {
                &mut touches_other
            };
            mark[e.source] = true;
            mark[e.target] = true;
        }
        let mut b = GraphBuilder::with_capacity(n, self.edges.len());
        b.allow_shared_children();
        for (i, v) in self.vertices.iter().enumerate() {
            let id = b.add_vertex_spec(&v.spec);
            b.set_uniq_id(id, v.uniq(i));
            let outside = if v.paths.is_empty() {
                !touches_containment[i] && touches_other[i]
            } else {
                !v.paths.contains_key(CONTAINMENT)
            };
            if outside {
                b.mark_outside_containment(id);
            }
            for (subsystem, path) in &v.paths {
                b.set_path(id, subsystem, path);
            }
        }
        for e in &self.edges {
            b.add_edge(
                VertexId(e.source as u32),
                VertexId(e.target as u32),
                &e.subsystem,
            );
        }
        Ok(b.finish()?)
    }
}

fn node_key(value: &Json, at: &At) -> Result<String, ReadError> {
    match value {
        Json::Str(s) => Ok(s.clone()),
        Json::Int(i) => Ok(i.to_string()),
        other => Err(at.error(format!("expected a string, found {}", other.describe()))),
    }
}

fn parse_vertex(node: &Json, position: usize, at: &At) -> Result<JgfVertex, ReadError> {
    let key = node_key(at.member(node, "id")?, &at.key("id"))?;
    let meta = at.member(node, "metadata")?;
    let at = at.key("metadata");
    at.object(meta)?;
    let field = |k: &str| {
        meta.get(k)
            .filter(|v| **v != Json::Null)
            .map(|v| (v, at.key(k)))
    };
    let string = |k: &str| {
        field(k)
            .map(|(v, at)| at.str(v).map(str::to_string))
            .transpose()
    };
    let int = |k: &str| field(k).map(|(v, at)| at.int(v)).transpose();

    let kind = at.key("type").str(at.member(meta, "type")?)?.to_string();
    if kind.is_empty() {
        return Err(at.key("type").error("must not be empty"));
    }
    let basename = string("basename")?.unwrap_or_else(|| kind.clone());
    let uniq_id = int("uniq_id")?;
    let name = string("name")?;
    let id = match int("id")? {
        Some(id) => id,
        // Fluxion: the uniq_id; for a node, the digits its name ends with.
        None => {
            let uniq = uniq_id
                .or_else(|| leading_int(&key))
                .unwrap_or(position as i64);
            let suffix = name
                .as_deref()
                .filter(|_| kind == "node")
                .and_then(trailing_digits);
            suffix.unwrap_or(uniq)
        }
    };
    let mut spec = VertexSpec::new(&kind, &basename, id);
    spec.name = name;
    spec.rank = int("rank")?.unwrap_or(-1);
    spec.size = int("size")?.unwrap_or(1);
    if spec.size < 1 {
        return Err(at
            .key("size")
            .error(format!("must be at least 1, found {}", spec.size)));
    }
    // Fluxion's JGF reader reads `unit` but does not keep it.
    string("unit")?;
    if let Some((v, at)) = field("exclusive") {
        spec.exclusive = at.bool(v)?;
    }
    if let Some((v, at)) = field("status") {
        spec.status = match v {
            Json::Str(s) if s == "up" => Status::Up,
            Json::Str(s) if s == "down" => Status::Down,
            Json::Int(0) => Status::Up,
            Json::Int(1) => Status::Down,
            _ => return Err(at.error("expected \"up\" or \"down\"")),
        };
    }
    if let Some((v, at)) = field("properties") {
        for (k, value) in at.object(v)? {
            spec.properties
                .insert(k.clone(), at.key(k).str(value)?.to_string());
        }
    }
    let mut paths = BTreeMap::new();
    if let Some((v, at)) = field("paths") {
        for (k, value) in at.object(v)? {
            paths.insert(k.clone(), at.key(k).str(value)?.to_string());
        }
    }
    Ok(JgfVertex {
        key,
        spec,
        uniq_id,
        paths,
    })
}

/// C's `stoll` on a node id: leading blanks, a sign, digits (`None` when there are none or
/// they overflow). The hwloc reader reads numbers in names and infos with it too.
pub(crate) fn leading_int(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = rest
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len());
    let n: i64 = rest[..end].parse().ok()?;
    Some(if neg { -n } else { n })
}

/// The number a host name ends with (`node12` → 12).
fn trailing_digits(name: &str) -> Option<i64> {
    let start = name
        .bytes()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |p| p + 1);
    name[start..].parse().ok()
}

fn edge_subsystem(meta: Option<&Json>, at: &At) -> Result<String, ReadError> {
    let Some(meta) = meta.filter(|m| **m != Json::Null) else {
        return Ok(CONTAINMENT.to_string());
    };
    at.object(meta)?;
    if let Some(s) = meta.get("subsystem") {
        return Ok(at.key("subsystem").str(s)?.to_string());
    }
    if let Some(name) = meta.get("name")
        && let Some((subsystem, _)) = at.key("name").object(name)?.first()
    {
        return Ok(subsystem.clone());
    }
    Ok(CONTAINMENT.to_string())
}

#[cfg(test)]
mod tests;
