//! The resource graph of a cluster and the readers that build it.
//!
//! A [`ResourceGraph`] is Fluxion's containment model — cluster → rack → node → socket →
//! core / gpu / memory, and any other type a graph file names — frozen after loading so that
//! the matcher can keep its scheduling state in arrays indexed by [`VertexId`]. Readers (GRUG
//! GraphML recipes, JGF, rv1exec R and our TOML cluster spec) all go through
//! [`GraphBuilder`], which checks the tree before anything can schedule on it.
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

pub mod graph;
pub mod intern;

pub use graph::{CONTAINMENT, GraphBuilder, GraphError, ResourceGraph, Status, VertexId, VertexSpec};
pub use intern::{Interner, Sym};
