//! Our compact cluster spec: a TOML file that an administrator writes in a minute.
//!
//! A GRUG describes a uniform cluster in 100 lines of GraphML; most clusters are a few classes
//! of identical nodes, so this format says just that (docs/CLUSTER_SPEC.md has the full
//! reference):
//!
//! ```toml
//! name = "mycluster"            # the root vertex is mycluster0
//! [[nodes]]
//! hosts = "node[0-127]"         # hostlist; ranks follow host order
//! rack_size = 64                # optional: racks of 64 nodes (rack0, rack1, ...)
//! sockets = 2                   # default 1
//! cores_per_socket = 22
//! gpus_per_socket = 2           # default 0
//! memory_per_socket_gb = 64     # default 0 (no memory vertices)
//! memory_pools_per_socket = 4   # default 1: four 16 GB memory vertices per socket
//! properties = ["ssd"]          # node properties, default none
//! ```
//!
//! The graph is the one Fluxion would generate from the equivalent GRUG, vertex for vertex:
//! the same names, ids and sizes, created in the same order (cluster, all racks, all nodes, all
//! sockets, then all cores, all gpus and all memory of every socket), so matches and outputs
//! agree with Fluxion on it. Ids count within a node, as the GRUGs' `id_scope` does: sockets
//! `0..S`, cores `0..S*C` (socket 1 of a 22-core-socket node holds core22..core43), gpus and
//! memory likewise. A node is named by its hostname, with basename the hostname without its
//! trailing digits and id those digits (-1 if none); it gets rank = its position among all
//! hosts, and its descendants carry the same rank.
//!
//! Unknown keys are refused (a typo must not silently mean "default"); errors carry the TOML
//! line and column.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::error::{GRAPH_VERTICES_MAX, Location, ReadError};
use crate::graph::ResourceGraph;
use crate::hostlist::decode_hostlist;

mod build;
#[cfg(test)]
mod tests;

/// The embedded default cluster: 128 nodes in 2 racks, each node 2 sockets × 22 cores,
/// 2 gpus per socket and 4 × 16 GB of memory per socket (the shape of the benchmark graphs).
pub const DEFAULT_CLUSTER_TOML: &str = r#"# shardsched's default cluster (see docs/CLUSTER_SPEC.md).
name = "cluster"

[[nodes]]
hosts = "node[0-127]"
rack_size = 64
sockets = 2
cores_per_socket = 22
gpus_per_socket = 2
memory_per_socket_gb = 64
memory_pools_per_socket = 4
"#;

/// A cluster described as classes of identical nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterSpec {
    /// Basename of the root vertex (type `cluster`, id 0, so named `<name>0`).
    pub name: String,
    /// The node classes, in rank order.
    pub nodes: Vec<NodeClass>,
}

/// A class of identical nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeClass {
    /// The hosts, as a hostlist (`node[0-127]`).
    pub hosts: String,
    /// Nodes per rack; `None` puts the nodes directly under the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rack_size: Option<u32>,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub gpus_per_socket: u32,
    /// Memory of a socket in GB; 0 for no memory vertices.
    pub memory_per_socket_gb: u64,
    /// Number of equal memory vertices the socket's memory is split into.
    pub memory_pools_per_socket: u32,
    pub properties: Vec<String>,
}

impl NodeClass {
    /// A class of `hosts` with one socket of `cores_per_socket` cores and nothing else.
    pub fn new(hosts: &str, cores_per_socket: u32) -> Self {
        NodeClass {
            hosts: hosts.to_string(),
            rack_size: None,
            sockets: 1,
            cores_per_socket,
            gpus_per_socket: 0,
            memory_per_socket_gb: 0,
            memory_pools_per_socket: 1,
            properties: Vec::new(),
        }
    }
}

/// Reads a TOML cluster spec into a resource graph.
pub fn read_cluster_spec(text: &str) -> Result<ResourceGraph, ReadError> {
    CheckedSpec::read(text)?.build()
}

/// A cluster spec checked whole, its hosts decoded: what building its graph, or the part
/// of it some hosts make, needs. Only [`CheckedSpec::build_hosts`] and
/// [`CheckedSpec::build`] make vertices, so a reader that wants the hosts (the
/// coordinator's node-level view) or one queue's part (a shard) never holds the whole
/// cluster's graph.
#[derive(Clone, Debug)]
pub struct CheckedSpec {
    spec: ClusterSpec,
    /// Each class's hosts, in rank order.
    hosts: Vec<Vec<String>>,
}

impl CheckedSpec {
    /// Reads and checks TOML spec `text`; errors carry the TOML line and column.
    pub fn read(text: &str) -> Result<CheckedSpec, ReadError> {
        let (spec, spans) = parse(text)?;
        let at = |class: Option<usize>, field: &str| spans.locate(text, class, field);
        let hosts = build::check(&spec, &at)?;
        Ok(CheckedSpec { spec, hosts })
    }

    /// Every host with its class, in rank order.
    pub fn hosts(&self) -> impl Iterator<Item = (&str, &NodeClass)> {
        self.spec
            .nodes
            .iter()
            .zip(&self.hosts)
            .flat_map(|(class, hosts)| hosts.iter().map(move |h| (h.as_str(), class)))
    }

    /// The resource types the whole graph has vertices of.
    pub fn kinds(&self) -> BTreeSet<&'static str> {
        let mut kinds = BTreeSet::from(["cluster", "node", "socket", "core"]);
        for class in &self.spec.nodes {
            if class.rack_size.is_some() {
                kinds.insert("rack");
            }
            if class.gpus_per_socket > 0 {
                kinds.insert("gpu");
            }
            if class.memory_per_socket_gb > 0 {
                kinds.insert("memory");
            }
        }
        kinds
    }

    /// The whole graph.
    pub fn build(&self) -> Result<ResourceGraph, ReadError> {
        self.build_hosts(&|_| true)
    }

    /// The graph of the hosts `keep` accepts: the whole graph without the other hosts'
    /// subtrees and the racks left empty; names, ids, ranks and the order of the vertices
    /// are the whole graph's (see `build::build_hosts`).
    pub fn build_hosts(&self, keep: &dyn Fn(&str) -> bool) -> Result<ResourceGraph, ReadError> {
        build::build_hosts(&self.spec, &self.hosts, keep)
    }
}

/// A benchmark cluster of `nodes` nodes named `node0..`: racks of 64, 2 sockets × 22 cores,
/// 2 gpus per socket and 4 × 16 GB memory per socket, root `bench0`; the same graph as
/// `bench/bench<nodes>.graphml`.
pub fn generated_cluster(nodes: usize) -> ClusterSpec {
    let hosts = match nodes {
        0 => String::new(),
        1 => "node0".to_string(),
        n => format!("node[0-{}]", n - 1),
    };
    ClusterSpec {
        name: "bench".to_string(),
        nodes: vec![NodeClass {
            hosts,
            rack_size: Some(64),
            sockets: 2,
            cores_per_socket: 22,
            gpus_per_socket: 2,
            memory_per_socket_gb: 64,
            memory_pools_per_socket: 4,
            properties: Vec::new(),
        }],
    }
}

impl ClusterSpec {
    /// Parses a TOML spec (checking only its syntax and types; [`ClusterSpec::build`]
    /// checks the rest).
    pub fn parse(text: &str) -> Result<ClusterSpec, ReadError> {
        parse(text).map(|(spec, _)| spec)
    }

    /// Builds the graph. Errors point at fields by path, e.g. `nodes[1].hosts`.
    pub fn build(&self) -> Result<ResourceGraph, ReadError> {
        let hosts = build::check(self, &|class, field| path_of(class, field))?;
        build::build_hosts(self, &hosts, &|_| true)
    }

    /// The spec as TOML text that [`read_cluster_spec`] reads back.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

fn path_of(class: Option<usize>, field: &str) -> Location {
    match class {
        Some(i) if field.is_empty() => Location::Path(format!("nodes[{i}]")),
        Some(i) => Location::Path(format!("nodes[{i}].{field}")),
        None => Location::Path(field.to_string()),
    }
}

/// The spec as written, with the byte span of every value for error messages.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<Spanned<String>>,
    nodes: Spanned<Vec<Spanned<RawClass>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    hosts: Spanned<String>,
    rack_size: Option<Spanned<u32>>,
    sockets: Option<Spanned<u32>>,
    cores_per_socket: Spanned<u32>,
    gpus_per_socket: Option<Spanned<u32>>,
    memory_per_socket_gb: Option<Spanned<u64>>,
    memory_pools_per_socket: Option<Spanned<u32>>,
    properties: Option<Spanned<Vec<String>>>,
}

/// Where each value was written: (class, field) → byte span.
#[derive(Default)]
struct Spans {
    fields: HashMap<(Option<usize>, &'static str), Range<usize>>,
}

impl Spans {
    fn locate(&self, text: &str, class: Option<usize>, field: &str) -> Location {
        let span = self
            .fields
            .iter()
            .find(|((c, f), _)| *c == class && *f == field)
            .or_else(|| {
                self.fields
                    .iter()
                    .find(|((c, f), _)| *c == class && f.is_empty())
            })
            .map(|(_, span)| span.start);
        match span {
            Some(start) => Location::of_offset(text, start),
            None => path_of(class, field),
        }
    }
}

fn parse(text: &str) -> Result<(ClusterSpec, Spans), ReadError> {
    let raw: RawSpec = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map_or(Location::None, |s| Location::of_offset(text, s.start));
        ReadError::invalid(at, e.message().trim_end().to_string())
    })?;
    let mut spans = Spans::default();
    let name = match raw.name {
        Some(n) => {
            spans.fields.insert((None, "name"), n.span());
            n.into_inner()
        }
        None => "cluster".to_string(),
    };
    spans.fields.insert((None, "nodes"), raw.nodes.span());
    let mut nodes = Vec::new();
    for (i, class) in raw.nodes.into_inner().into_iter().enumerate() {
        spans.fields.insert((Some(i), ""), class.span());
        let c = class.into_inner();
        let mut field = |name: &'static str, span: Option<Range<usize>>| {
            if let Some(span) = span {
                spans.fields.insert((Some(i), name), span);
            }
        };
        field("hosts", Some(c.hosts.span()));
        field("rack_size", c.rack_size.as_ref().map(Spanned::span));
        field("sockets", c.sockets.as_ref().map(Spanned::span));
        field("cores_per_socket", Some(c.cores_per_socket.span()));
        field(
            "gpus_per_socket",
            c.gpus_per_socket.as_ref().map(Spanned::span),
        );
        field(
            "memory_per_socket_gb",
            c.memory_per_socket_gb.as_ref().map(Spanned::span),
        );
        field(
            "memory_pools_per_socket",
            c.memory_pools_per_socket.as_ref().map(Spanned::span),
        );
        field("properties", c.properties.as_ref().map(Spanned::span));
        nodes.push(NodeClass {
            hosts: c.hosts.into_inner(),
            rack_size: c.rack_size.map(Spanned::into_inner),
            sockets: c.sockets.map_or(1, Spanned::into_inner),
            cores_per_socket: c.cores_per_socket.into_inner(),
            gpus_per_socket: c.gpus_per_socket.map_or(0, Spanned::into_inner),
            memory_per_socket_gb: c.memory_per_socket_gb.map_or(0, Spanned::into_inner),
            memory_pools_per_socket: c.memory_pools_per_socket.map_or(1, Spanned::into_inner),
            properties: c.properties.map(Spanned::into_inner).unwrap_or_default(),
        });
    }
    Ok((ClusterSpec { name, nodes }, spans))
}

/// Checks a class's counts and returns its hostnames.
fn check_class(
    class: &NodeClass,
    i: usize,
    at: &dyn Fn(Option<usize>, &str) -> Location,
) -> Result<Vec<String>, ReadError> {
    let bad = |field: &str, msg: String| ReadError::invalid(at(Some(i), field), msg);
    for (field, value) in [
        ("sockets", class.sockets),
        ("cores_per_socket", class.cores_per_socket),
        ("memory_pools_per_socket", class.memory_pools_per_socket),
        ("rack_size", class.rack_size.unwrap_or(1)),
    ] {
        if value == 0 {
            return Err(bad(field, format!("{field} must be at least 1")));
        }
    }
    let pools = u64::from(class.memory_pools_per_socket);
    if !class.memory_per_socket_gb.is_multiple_of(pools)
        || class.memory_per_socket_gb > i64::MAX as u64
    {
        let msg = format!(
            "memory_per_socket_gb = {} does not split into {pools} equal pools",
            class.memory_per_socket_gb
        );
        return Err(bad("memory_per_socket_gb", msg));
    }
    for p in &class.properties {
        if p.is_empty() || p.starts_with('^') || p.chars().any(char::is_whitespace) {
            let msg = format!("property {p:?} must be non-empty, without spaces or a leading '^'");
            return Err(bad("properties", msg));
        }
    }
    let hosts = decode_hostlist(&class.hosts).map_err(|e| bad("hosts", e.to_string()))?;
    if hosts.is_empty() {
        return Err(bad("hosts", "no hosts".to_string()));
    }
    if let Some(h) = hosts.iter().find(|h| h.contains('/')) {
        return Err(bad("hosts", format!("host {h:?} contains '/'")));
    }
    Ok(hosts)
}

/// The vertex bound, checked before anything is allocated.
fn check_size(count: u128, at: Location) -> Result<(), ReadError> {
    if count > GRAPH_VERTICES_MAX as u128 {
        return Err(ReadError::limit(
            at,
            format!("{count} vertices"),
            GRAPH_VERTICES_MAX,
        ));
    }
    Ok(())
}
