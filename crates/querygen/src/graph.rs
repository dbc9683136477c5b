//! Random resource graphs: a GRUG recipe (a tree of templates, each multiplied under its
//! parent), its expansion into vertices exactly as Fluxion's GRUG reader names and numbers
//! them, and the same graph written as GRUG GraphML or as JGF.
//!
//! The text forms (GRUG GraphML, JGF) are in [`crate::graph_text`]. The expansion matters
//! for two reasons: command streams name real vertex paths
//! (`set-status /tiny0/rack0/node1 down`), and the JGF form of a graph must be the graph the
//! GRUG form describes, so one generator covers both readers.

use std::collections::VecDeque;

use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;

/// Most vertices a generated graph has; larger draws are shrunk (keeps a case fast).
pub const GRAPH_VERTICES_MAX: usize = 2_500;

/// How a template's vertices are made under each parent vertex (a GRUG `MULTIPLY` edge).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeGen {
    /// `multi_scale`: copies under each parent.
    pub scale: i64,
    /// `id_scope`: 0 numbers copies per parent; n > 0 numbers them across the n levels above.
    pub id_scope: i64,
    pub id_start: i64,
    pub id_stride: i64,
}

/// One recipe template: a resource type, its pool size, and its child templates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// The recipe's own id for the template (unique in the recipe).
    pub key: String,
    pub ty: &'static str,
    pub basename: String,
    pub size: i64,
    pub unit: &'static str,
    /// How it is generated under its parent (unused for the root).
    pub edge: EdgeGen,
    pub children: Vec<Template>,
}

/// One vertex of the expanded graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vertex {
    pub uniq_id: usize,
    pub ty: &'static str,
    pub basename: String,
    pub name: String,
    pub id: i64,
    pub rank: i64,
    pub size: i64,
    pub unit: &'static str,
    pub path: String,
    pub parent: Option<usize>,
}

/// A generated graph: the recipe and its expansion (vertices in creation order).
#[derive(Clone, Debug)]
pub struct Graph {
    pub name: String,
    pub root: Template,
    pub vertices: Vec<Vertex>,
}

fn edge(rng: &mut ChaCha8Rng, scale: i64) -> EdgeGen {
    let id_scope = *[0, 0, 1, 1, 1, 2].choose(rng).unwrap_or(&0);
    let id_start = if rng.random_bool(0.1) { 1 } else { 0 };
    let id_stride = if rng.random_bool(0.08) { 2 } else { 1 };
    EdgeGen {
        scale,
        id_scope,
        id_start,
        id_stride,
    }
}

fn template(key: &str, ty: &'static str, basename: &str, edge: EdgeGen) -> Template {
    Template {
        key: key.to_string(),
        ty,
        basename: basename.to_string(),
        size: 1,
        unit: "",
        edge,
        children: Vec::new(),
    }
}

/// The compute part under a node or socket: cores, maybe gpus, maybe memory pools.
fn compute(rng: &mut ChaCha8Rng, suffix: &str, with_memory: bool) -> Vec<Template> {
    let mut out = Vec::new();
    let cores = *[1, 2, 4, 4, 8, 18].choose(rng).unwrap_or(&4);
    out.push(template(
        &format!("core{suffix}"),
        "core",
        "core",
        edge(rng, cores),
    ));
    if rng.random_bool(0.5) {
        let gpus = rng.random_range(1..=2);
        out.push(template(
            &format!("gpu{suffix}"),
            "gpu",
            "gpu",
            edge(rng, gpus),
        ));
    }
    if with_memory {
        let pools = rng.random_range(1..=4);
        let mut m = template(
            &format!("memory{suffix}"),
            "memory",
            "memory",
            edge(rng, pools),
        );
        m.size = *[1, 2, 2, 4, 16, 32].choose(rng).unwrap_or(&2);
        m.unit = "GB";
        out.push(m);
    }
    // Fluxion's own recipes list cores first; other orders change the graph order.
    if rng.random_bool(0.15) {
        out.shuffle(rng);
    }
    out
}

/// A node template named `basename`, with or without a socket level.
fn node(rng: &mut ChaCha8Rng, key: &str, basename: &str, scale: i64) -> Template {
    let mut n = template(key, "node", basename, edge(rng, scale));
    let memory = rng.random_bool(0.6);
    let memory_at_node = memory && rng.random_bool(0.25);
    if rng.random_bool(0.75) {
        let sockets = rng.random_range(1..=2);
        let mut s = template(
            &format!("socket_{key}"),
            "socket",
            "socket",
            edge(rng, sockets),
        );
        s.children = compute(rng, &format!("_{key}"), memory && !memory_at_node);
        n.children.push(s);
        if memory_at_node {
            let mut m = template(&format!("nodemem_{key}"), "memory", "memory", edge(rng, 1));
            m.size = *[4, 16, 64].choose(rng).unwrap_or(&16);
            m.unit = "GB";
            n.children.push(m);
        }
    } else {
        n.children = compute(rng, &format!("_{key}"), memory);
    }
    if rng.random_bool(0.12) {
        let mut ssd = template(&format!("ssd_{key}"), "ssd", "ssd", edge(rng, 1));
        ssd.size = *[100, 616, 800].choose(rng).unwrap_or(&616);
        ssd.unit = "GB";
        n.children.push(ssd);
    }
    n
}

/// A random recipe: cluster, maybe racks, one or two kinds of node, compute below.
pub fn random_recipe(rng: &mut ChaCha8Rng) -> Template {
    let names = ["tiny", "small", "medium", "c", "cl"];
    let mut root = template(
        "cluster",
        "cluster",
        names.choose(rng).unwrap_or(&"tiny"),
        edge(rng, 1),
    );
    let racks = rng.random_bool(0.6);
    let nodes = rng.random_range(1..=if racks { 4 } else { 8 });
    let mut kinds = vec![node(rng, "node", "node", nodes)];
    if rng.random_bool(0.15) {
        let fat = rng.random_range(1..=2);
        kinds.push(node(rng, "fat", "fat", fat));
    }
    if racks {
        let racks = rng.random_range(1..=3);
        let mut rack = template("rack", "rack", "rack", edge(rng, racks));
        rack.children = kinds;
        root.children.push(rack);
    } else {
        root.children = kinds;
    }
    root
}

/// Fluxion's `dfs_emitter_t::gen_id`: the id of copy `i` (of `sz`) under the `j`-th parent,
/// with `hier` the scales of the edges above, nearest first.
fn gen_id(e: &EdgeGen, i: i64, sz: i64, j: i64, hier: &VecDeque<i64>) -> i64 {
    if e.id_scope < 0 {
        return -1;
    }
    if e.id_scope == 0 {
        return e.id_start + i;
    }
    let scope = (e.id_scope as usize).min(hier.len());
    let wrap: i64 = hier.iter().take(scope).product();
    e.id_start + (j % wrap * sz * e.id_stride) + i * e.id_stride
}

/// Expands `root` as Fluxion's GRUG reader does: depth-first over the recipe, all copies
/// of a template (under all parents) made before its own children.
pub fn expand(root: &Template) -> Vec<Vertex> {
    let name = format!("{}0", root.basename);
    let mut out = vec![Vertex {
        uniq_id: 0,
        ty: root.ty,
        basename: root.basename.clone(),
        path: format!("/{name}"),
        name,
        id: 0,
        rank: if root.ty == "node" { 0 } else { -1 },
        size: root.size,
        unit: root.unit,
        parent: None,
    }];
    let mut node_rank = if root.ty == "node" { 0 } else { -1 };
    let mut hier = VecDeque::new();
    expand_children(root, &[0], &mut hier, &mut node_rank, &mut out);
    out
}

fn expand_children(
    t: &Template,
    parents: &[usize],
    hier: &mut VecDeque<i64>,
    node_rank: &mut i64,
    out: &mut Vec<Vertex>,
) {
    for child in &t.children {
        let mut mine = Vec::new();
        let sz = child.edge.scale;
        for (j, &p) in parents.iter().enumerate() {
            for i in 0..sz {
                let id = gen_id(&child.edge, i, sz, j as i64, hier);
                let name = if id < 0 {
                    child.basename.clone()
                } else {
                    format!("{}{id}", child.basename)
                };
                let rank = if child.ty == "node" {
                    *node_rank += 1;
                    *node_rank
                } else {
                    -1
                };
                let path = format!("{}/{name}", out[p].path);
                mine.push(out.len());
                out.push(Vertex {
                    uniq_id: out.len(),
                    ty: child.ty,
                    basename: child.basename.clone(),
                    name,
                    id,
                    rank,
                    size: child.size,
                    unit: child.unit,
                    path,
                    parent: Some(p),
                });
            }
        }
        hier.push_front(sz);
        expand_children(child, &mine, hier, node_rank, out);
        hier.pop_front();
    }
}

/// A random graph of at most [`GRAPH_VERTICES_MAX`] vertices.
pub fn random_graph(rng: &mut ChaCha8Rng) -> Graph {
    loop {
        let root = random_recipe(rng);
        let vertices = expand(&root);
        if vertices.len() <= GRAPH_VERTICES_MAX {
            return Graph {
                name: root.basename.clone(),
                root,
                vertices,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn tiny() -> Template {
        let e = |scale, id_scope| EdgeGen {
            scale,
            id_scope,
            id_start: 0,
            id_stride: 1,
        };
        let mut core = template("core", "core", "core", e(18, 1));
        core.children.clear();
        let mut socket = template("socket", "socket", "socket", e(2, 0));
        socket.children = vec![core, template("gpu", "gpu", "gpu", e(1, 1))];
        let mut node = template("node", "node", "node", e(2, 1));
        node.children = vec![socket];
        let mut rack = template("rack", "rack", "rack", e(1, 0));
        rack.children = vec![node];
        let mut root = template("cluster", "cluster", "tiny", e(1, 0));
        root.children = vec![rack];
        root
    }

    #[test]
    fn expansion_names_and_numbers_as_fluxion_does() {
        let v = expand(&tiny());
        // tiny0, rack0, node0-1, socket0-3, 72 cores, 4 gpus: creation level by level.
        assert_eq!(v.len(), 1 + 1 + 2 + 4 + 72 + 4);
        assert_eq!(v[2].path, "/tiny0/rack0/node0");
        assert_eq!(v[3].rank, 1);
        // node2socket has id_scope 0: socket ids restart under each node.
        assert_eq!(v[7].path, "/tiny0/rack0/node1/socket1");
        // socket2core has id_scope 1: core ids run across the node (0-35).
        assert_eq!(v[8 + 18].path, "/tiny0/rack0/node0/socket1/core18");
        assert_eq!(v[8 + 36].path, "/tiny0/rack0/node1/socket0/core0");
        assert_eq!(v[8 + 72].path, "/tiny0/rack0/node0/socket0/gpu0");
        assert_eq!(v[8 + 73].path, "/tiny0/rack0/node0/socket1/gpu1");
        assert!(v.iter().filter(|x| x.ty != "node").all(|x| x.rank == -1));
    }

    #[test]
    fn same_seed_same_graph_text() {
        let text = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let g = random_graph(&mut rng);
            (g.to_grug(), g.to_jgf(&mut rng, true, true))
        };
        assert_eq!(text(7), text(7));
        assert_ne!(text(7), text(8));
    }

    #[test]
    fn jgf_has_every_vertex_and_one_edge_per_child() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let g = random_graph(&mut rng);
        let doc: serde_json::Value =
            serde_json::from_str(&g.to_jgf(&mut rng, false, false)).expect("valid JSON");
        let nodes = doc["graph"]["nodes"].as_array().map(Vec::len);
        let edges = doc["graph"]["edges"].as_array().map(Vec::len);
        assert_eq!(nodes, Some(g.vertices.len()));
        assert_eq!(edges, Some(g.vertices.len() - 1));
    }
}
