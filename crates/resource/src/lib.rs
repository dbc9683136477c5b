//! The resource graph of a cluster and the readers that build it.
//!
//! A [`ResourceGraph`] is Fluxion's containment model — cluster → rack → node → socket →
//! core / gpu / memory, and any other type a graph file names — frozen after loading so that
//! the matcher can keep its scheduling state in arrays indexed by [`VertexId`]. Readers (GRUG
//! GraphML recipes, JGF, rv1exec R and our TOML cluster spec) all go through
//! [`GraphBuilder`], which checks the tree before anything can schedule on it.
//!
//! | format | module | what it is |
//! |---|---|---|
//! | `grug` | [`grug`] | Fluxion's GraphML generating recipe, expanded exactly as Fluxion does |
//! | `jgf` | [`jgf`] | Fluxion's JSON Graph Format: every vertex and edge listed |
//! | `rv1exec` | [`rv1exec`] | an RFC 20 R document: cluster → nodes → cores / gpus |
//! | `hwloc` | [`hwloc`] | one node's hwloc XML, as Fluxion's hwloc reader loads it (`-W` types only) |
//! | `spec` | [`spec`] | our TOML cluster spec (docs/CLUSTER_SPEC.md) |
//!
//! [`read_graph`] / [`read_graph_file`] dispatch on a [`GraphFormat`]; every reader fails
//! with a [`ReadError`] that names the file and the place in it. [`hostlist`] and [`idset`]
//! are Flux's compact host and id notations, used by R, constraints and the spec.
//!
//! ```
//! let g = shardsched_resource::read_cluster_spec(shardsched_resource::DEFAULT_CLUSTER_TOML)
//!     .unwrap();
//! assert_eq!(g.path(g.root()), "/cluster0");
//! ```
//!
//! ```
//! use shardsched_resource::{GraphBuilder, VertexSpec, CONTAINMENT};
//! let mut b = GraphBuilder::new();
//! let cluster = b.add_vertex(VertexSpec::new("cluster", "c", 0));
//! let node = b.add_vertex(VertexSpec::new("node", "node", 0));
//! b.add_edge(cluster, node, CONTAINMENT);
//! let g = b.finish().unwrap();
//! assert_eq!(g.path(node), "/c0/node0");
//! ```

pub mod allowlist;
pub mod error;
pub mod graph;
pub mod grug;
pub mod hostlist;
pub mod hwloc;
pub mod idset;
pub mod intern;
pub mod jgf;
mod json;
pub mod read;
pub mod rv1exec;
pub mod spec;
#[cfg(test)]
mod testdata;
mod xml;

pub use allowlist::{SCHEDULER_TYPES, keep_subtrees, keep_types};
pub use error::{GRAPH_DEPTH_MAX, GRAPH_VERTICES_MAX, Location, ReadError};
pub use graph::{
    AttachError, CONTAINMENT, GraphBuilder, GraphError, ResourceGraph, Siblings, Status, VertexId,
    VertexSpec,
};
pub use grug::{read_grug, read_grug_file};
pub use hostlist::{
    HostRanges, HostlistError, decode_hostlist, encode_hostlist, host_order, sort_hosts,
};
pub use hwloc::{read_hwloc, read_hwloc_file};
pub use idset::{IdSet, IdsetError, format_idset, parse_idset};
pub use intern::{Interner, Sym};
pub use jgf::{JgfDocument, JgfEdge, JgfVertex, parse_jgf, read_jgf, read_jgf_file};
pub use read::{GraphFormat, read_graph, read_graph_file};
pub use rv1exec::{read_rv1exec, read_rv1exec_file};
pub use spec::{
    CheckedSpec, ClusterSpec, DEFAULT_CLUSTER_TOML, NodeClass, generated_cluster, read_cluster_spec,
};
