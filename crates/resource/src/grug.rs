//! GRUG: Fluxion's GraphML "generating recipe" for resource graphs.
//!
//! A GRUG does not list vertices; it lists *templates* (a GraphML `<node>` with `type`,
//! `basename`, `size`, `unit`, `subsystem` and a `root` flag) and *rules* (a GraphML `<edge>`:
//! "each `rack` contains 18 `node`s, numbered from 0 across racks"). Fluxion's
//! `resource_gen` expands the recipe depth-first; the order in which it creates vertices is
//! their `uniq_id`, and the order of a vertex's edges is the order in which Fluxion's
//! traverser visits children. Both show in `resource-query` output (which vertex a `low`
//! policy picks, which path `find` prints first), so this reader reproduces the expansion
//! step for step rather than building "an equivalent tree".
//!
//! GraphML values: a template's or rule's value comes from its own `<data>`, else from the
//! `<default>` its `<key>` declares, else it is what Boost's GraphML reader would leave in
//! Fluxion's structs (the empty string or 0); nothing else is assumed.
//!
//! Expansion:
//!
//! The walk is Boost's `depth_first_search` over the recipe: it starts at the containment
//! root template, then at every template still undiscovered, in file order; from a template it
//! follows the out-edges in file order. Only *tree* edges (to an undiscovered template)
//! generate anything; an edge to a template already discovered is skipped, as in Fluxion.
//!
//! - Discovering a root template emits its subsystem's root vertex (`basename0`, id 0).
//! - A `MULTIPLY` tree edge creates, for every vertex already generated from the source
//!   template (in generation order), `multi_scale` vertices of the target template, with an
//!   edge of `e_subsystem` from the parent to each. Hence the breadth-by-type numbering: in
//!   `tiny.graphml` all sockets come before all cores.
//! - Ids (Fluxion's `gen_id`): with `id_scope` 0, `id_start + i * id_stride`; with
//!   `id_scope` s > 0, `id_start + (j % wrap) * multi_scale * id_stride + i * id_stride`, where
//!   `j` is the parent's index among its template's vertices and `wrap` the product of the
//!   `multi_scale`s of the s tree edges just above on the DFS path (Fluxion's `m_hier_scales`,
//!   pushed on each tree edge and popped as each template finishes); a negative `id_scope`
//!   gives id -1, as Fluxion does.
//! - `ASSOCIATE_IN` links every source vertex to every already generated vertex of the target
//!   template's *type* that is a member of `as_tgt_subsystem`, with an `e_subsystem` edge;
//!   `ASSOCIATE_BY_PATH_IN` does so only for the pairs whose `as_tgt_subsystem` paths agree
//!   once the last `as_src_uplvl` components are dropped from the source's path and
//!   `as_tgt_uplvl` from the target's. Associated vertices become the target template's
//!   vertices, so that the recipe can go on below them (power.graphml hangs `power` vertices
//!   under every node this way). This reproduces Fluxion's `jgfs/power.json` exactly.
//!
//! Vertices of templates outside the containment subsystem (power.graphml's `powerpanel`
//! and `power`) are marked outside containment.
//!
//! Where this reader is stricter or had to choose: every recipe in Fluxion's test data puts
//! the containment root first, where Boost's search starts; starting at the containment root
//! wherever it is written gives the same result for them and a sensible one otherwise. A
//! recipe needs exactly one root per subsystem, one of them in containment, and no rule into
//! a root; `multi_scale` and the `uplvl`s may not be negative. Whether Fluxion pushes a
//! `multi_scale` for `ASSOCIATE_*` tree edges too is not visible in its test data (no id
//! below an association is scoped); this reader does, so the scales always mirror the path.
//!
//! Ranks: Fluxion's GRUG reader gives every vertex rank -1 (there are no execution targets
//! in a recipe; `jgfs/power.json`, which Fluxion wrote from `power.graphml`, shows -1 on
//! every vertex), and so does this one. Status is up, no properties.
//!
//! Errors name the line of the offending element or value, e.g.
//! `tiny.graphml:57: edge "rack2node": multi_scale "x" is not an integer`. The generated
//! graph is bounded by [`GRAPH_VERTICES_MAX`](crate::GRAPH_VERTICES_MAX).

mod generate;
mod ids;
mod recipe;
#[cfg(test)]
mod tests;
mod xml;

use std::path::Path;

use crate::error::{ReadError, read_file};
use crate::graph::ResourceGraph;

/// Expands a GRUG recipe into its resource graph.
pub fn read_grug(text: &str) -> Result<ResourceGraph, ReadError> {
    let recipe = recipe::parse(text)?;
    generate::generate(&recipe)
}

/// [`read_grug`] on a file; errors start with the file's path.
pub fn read_grug_file(path: impl AsRef<Path>) -> Result<ResourceGraph, ReadError> {
    read_file(path.as_ref(), read_grug)
}
