//! JGF reader tests: metadata defaults, JSON-path errors, and agreement with the GRUG reader.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::graph::VertexId;
use crate::grug::read_grug_file;
use crate::testdata::{child_names, child_type_runs, outline, resource_file};
use proptest::prelude::*;

const SMALL: &str = r#"{"graph": {"nodes": [
  {"id": "0", "metadata": {"type": "cluster", "basename": "c", "id": 0}},
  {"id": "1", "metadata": {"type": "node", "name": "n7", "rank": 3, "properties": {"ssd": ""}}},
  {"id": "2", "metadata": {"type": "core", "status": "down"}},
  {"id": "3", "metadata": {"type": "memory", "size": 16, "unit": "GB", "exclusive": true}}
 ],
 "edges": [
  {"source": "0", "target": "1", "metadata": {"subsystem": "containment"}},
  {"source": "1", "target": "3", "metadata": {"name": {"containment": "contains"}}},
  {"source": "1", "target": "2"}
 ]}}"#;

fn read(rel: &str) -> Option<ResourceGraph> {
    let path = resource_file(rel)?;
    Some(read_jgf_file(&path).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn reads_metadata_with_fluxions_defaults() {
    let g = read_jgf(SMALL).unwrap();
    let v = |i| VertexId(i);
    assert_eq!(g.name(v(0)), "c0");
    // No `id`: a node's is the number its name ends with, as Fluxion infers it.
    assert_eq!((g.name(v(1)), g.rank(v(1)), g.id(v(1))), ("n7", 3, 7));
    assert!(g.has_property(v(1), "ssd"));
    assert_eq!(
        (g.name(v(2)), g.basename(v(2)), g.status(v(2))),
        ("core2", "core", Status::Down)
    );
    // Fluxion's JGF reader reads `unit` but does not keep it.
    assert_eq!(
        (g.size(v(3)), g.unit(v(3)), g.marked_exclusive(v(3))),
        (16, "", true)
    );
    // Child order is edge order.
    assert_eq!(g.children(v(1)), &[3, 2]);
    assert_eq!(g.path(v(2)), "/c0/n7/core2");
}

#[test]
fn malformed_documents_name_the_json_path() {
    let err = |text: &str| read_jgf(text).unwrap_err().to_string();
    assert_eq!(
        err(&SMALL.replace(r#""size": 16"#, r#""size": "16""#)),
        "graph.nodes[3].metadata.size: expected an integer, found a string"
    );
    assert_eq!(
        err(&SMALL.replace(
            r#""source": "1", "target": "2""#,
            r#""source": "9", "target": "2""#
        )),
        "graph.edges[2].source: no node has id \"9\""
    );
    assert_eq!(err(r#"{"nodes": []}"#), "missing \"graph\"");
    assert_eq!(
        err(&SMALL.replace(r#""type": "core", "#, "")),
        "graph.nodes[2].metadata: missing \"type\""
    );
    assert_eq!(
        err(&SMALL.replace(r#""size": 16"#, r#""size": 0"#)),
        "graph.nodes[3].metadata.size: must be at least 1, found 0"
    );
    assert!(err(&SMALL.replace(r#""id": "3""#, r#""id": "2""#)).contains("a second node with id"));
    assert!(
        err(&SMALL.replace(r#""status": "down""#, r#""status": "sideways""#)).contains("status")
    );
    let e = err(&SMALL[..SMALL.len() - 20]);
    assert!(
        e.starts_with("line ") && e.contains("column") && e.contains("invalid JSON"),
        "{e}"
    );
    assert!(err(r#"{"graph": {"nodes": []}}"#).contains("no vertices"));
    // Two roots: the reverse edge is missing.
    let e = err(&SMALL.replace(
        r#"{"source": "0", "target": "1", "metadata": {"subsystem": "containment"}},"#,
        "",
    ));
    assert!(e.contains("2 roots"), "{e}");
}

#[test]
fn tiny_json_is_tiny_graphml() {
    let (Some(jgf), Some(grug)) = (read("jgfs/tiny.json"), resource_file("grugs/tiny.graphml"))
    else {
        return;
    };
    let grug = read_grug_file(grug).unwrap();
    // The same but for units, which Fluxion's JGF reader drops.
    let no_units = |g: &ResourceGraph| {
        outline(g)
            .into_iter()
            .map(|l| l.split(" unit=").next().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(no_units(&jgf), no_units(&grug));
    assert!(jgf.vertices().all(|v| jgf.unit(v).is_empty()));
    let names = |g: &ResourceGraph| {
        g.vertices()
            .map(|v| g.name(v).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&jgf), names(&grug), "same creation (uniq_id) order");
    let node1 = jgf.find_path("/tiny0/rack0/node1").unwrap();
    assert_eq!(jgf.rank(node1), 1);
}

/// `jgfs/power.json` is what Fluxion wrote for `grugs/power.graphml`: our GRUG expansion,
/// power subsystem included, must give the same vertices in the same order with the same
/// edges of every subsystem (units aside: Fluxion's JGF reader drops them).
#[test]
fn power_json_is_power_graphml_vertex_for_vertex() {
    let (Some(jgf), Some(grug)) = (
        read("jgfs/power.json"),
        resource_file("grugs/power.graphml"),
    ) else {
        return;
    };
    let grug = read_grug_file(grug).unwrap();
    assert_eq!(jgf.len(), grug.len());
    for v in jgf.vertices() {
        let describe = |g: &ResourceGraph| {
            (
                g.name(v).to_string(),
                g.kind_str(v).to_string(),
                g.id(v),
                g.size(v),
                g.in_containment(v),
                g.subsystem_children(v, "containment"),
                g.subsystem_children(v, "power"),
            )
        };
        assert_eq!(describe(&jgf), describe(&grug), "vertex {}", v.0);
    }
}

#[test]
fn other_conformance_jgfs_load() {
    let Some(g) = read("jgfs/dyn_explore.json") else {
        return;
    };
    assert_eq!(g.name(g.root()), "mini");
    let chassis1 = g.find_path("/mini/chassis1").unwrap();
    assert_eq!(child_type_runs(&g, chassis1), ["node", "ssd"]);
    assert_eq!(
        child_names(&g, chassis1)[4..],
        ["ssd19", "ssd20", "ssd21", "ssd22"]
    );
    // Its paths are the file's own: the vertex named ssd21 is at .../ssd2.
    let ssd = g.find_path("/mini/chassis1/ssd2").unwrap();
    assert_eq!((g.name(ssd), g.size(ssd)), ("ssd21", 616));
    assert_eq!(g.find_path("/mini/chassis1/ssd21"), None);

    let Some(g) = read("jgfs/elastic/tiny-partial-cancel.json") else {
        return;
    };
    assert_eq!(g.len(), 100);
}

/// `jgfs/elastic/node-1-partial-cancel.json` is not a graph to load but the argument of a
/// `partial-cancel` command: one node's subgraph, with every containment edge written both
/// ways (socket0 → node0 as well as node0 → socket0). It parses; it does not form a tree.
#[test]
fn partial_cancel_fragment_parses_but_is_not_a_graph() {
    let Some(path) = resource_file("jgfs/elastic/node-1-partial-cancel.json") else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let doc = parse_jgf(&text).unwrap();
    assert_eq!((doc.vertices.len(), doc.edges.len()), (49, 96));
    assert_eq!(doc.vertices[0].paths["containment"], "/tiny0/rack0/node0");
    let e = read_jgf(&text).unwrap_err();
    assert!(matches!(e, ReadError::Graph { .. }), "{e}");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_jgf(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn damaged_documents_never_panic(at in 0usize..600, len in 0usize..30, junk in "[\\[\\]{}:,\"a-z0-9 -]{0,6}") {
        let mut text = SMALL.to_string();
        let at = at.min(text.len());
        let end = (at + len).min(text.len());
        text.replace_range(at..end, &junk);
        let _ = read_jgf(&text);
    }
}

/// A JGF vertex's `paths` are taken as written (Fluxion's reader does): a containment path
/// other than the names' one is where the vertex is found, and other subsystems' paths
/// follow it.
#[test]
fn given_paths_are_kept() {
    let text = r#"{"graph": {"nodes": [
      {"id": "0", "metadata": {"type": "cluster", "name": "mini", "paths": {"containment": "/mini"}}},
      {"id": "1", "metadata": {"type": "ssd", "paths": {"containment": "/mini/ssd0", "power": "/p0/ssd0"}}},
      {"id": "2", "metadata": {"type": "ssd", "paths": {"containment": "/mini/ssd1"}}}
     ],
     "edges": [{"source": "0", "target": "1"}, {"source": "0", "target": "2"}]}}"#;
    let g = read_jgf(text).unwrap();
    let (a, b) = (VertexId(1), VertexId(2));
    assert_eq!((g.name(a), g.name(b)), ("ssd1", "ssd2"));
    assert_eq!(g.path(a), "/mini/ssd0");
    assert_eq!(
        g.paths(a),
        [
            ("containment", "/mini/ssd0".into()),
            ("power", "/p0/ssd0".into())
        ]
    );
    assert_eq!(g.find_path("/mini/ssd0"), Some(a));
    assert_eq!(g.find_path("/mini/ssd1"), Some(b));
    assert_eq!(
        g.find_path("/mini/ssd2"),
        None,
        "ssd2 is not where its name says"
    );
    assert_eq!(g.find_path("/p0/ssd0"), Some(a));
    assert_eq!(g.path_count(), 4);
}

#[test]
fn a_graph_grown_by_another_cut_of_its_cluster_holds_both_cuts() {
    let full = crate::read_cluster_spec(crate::DEFAULT_CLUSTER_TOML).unwrap();
    let cut = |names: &[&str]| {
        crate::keep_subtrees(&full, crate::SCHEDULER_TYPES, &|n| names.contains(&n)).unwrap()
    };
    let mut grown = cut(&["node0", "node1"]);
    let added = cut(&["node1", "node5"]);
    let n0 = grown.len();
    let doc = JgfDocument::of_graph(&added, n0 as i64);
    let appended = grown.attach(&doc).unwrap();
    // The root, racks and node1 were there: only node5's subtree is new.
    let whole = cut(&["node0", "node1", "node5"]);
    assert_eq!(grown.len(), whole.len());
    assert_eq!(appended, grown.len() - n0);
    let described = |g: &ResourceGraph| {
        let mut all: Vec<(String, String, i64)> = g
            .vertices()
            .map(|v| (g.path(v), g.kind_str(v).to_owned(), g.rank(v)))
            .collect();
        all.sort();
        all
    };
    assert_eq!(described(&grown), described(&whole));
    // Attaching the same document again adds nothing.
    assert_eq!(grown.attach(&doc).unwrap(), 0);
}

#[test]
fn a_graft_in_rank_order_puts_the_new_nodes_where_a_whole_build_has_them() {
    let full = crate::read_cluster_spec(crate::DEFAULT_CLUSTER_TOML).unwrap();
    let cut = |names: &[&str]| {
        crate::keep_subtrees(&full, crate::SCHEDULER_TYPES, &|n| names.contains(&n)).unwrap()
    };
    let children = |g: &ResourceGraph, path: &str| -> Vec<String> {
        let v = g.find_path(path).unwrap();
        g.children(v)
            .iter()
            .map(|&c| g.name(VertexId(c)).to_owned())
            .collect()
    };
    let whole = cut(&["node0", "node1", "node2"]);
    let node1_in_whole = whole
        .vertices()
        .find(|&v| whole.name(v) == "node1")
        .unwrap();
    let rack = whole.path(whole.parent(node1_in_whole).unwrap());
    let mut appended = cut(&["node0", "node2"]);
    let mut ordered = cut(&["node0", "node2"]);
    let doc = JgfDocument::of_graph(&cut(&["node1"]), 1000);
    appended.attach(&doc).unwrap();
    ordered.attach_in_rank_order(&doc).unwrap();
    assert_eq!(children(&appended, &rack), ["node0", "node2", "node1"]);
    assert_eq!(children(&ordered, &rack), children(&whole, &rack));
    let node1 = |g: &ResourceGraph| children(g, &format!("{rack}/node1"));
    assert_eq!(
        node1(&ordered),
        node1(&whole),
        "a node's contents keep their order"
    );
    // Numbered as the whole build numbers them: in preorder.
    let numbered = |g: &ResourceGraph| -> Vec<(String, i64)> {
        g.preorder(g.root())
            .map(|v| (g.path(v), g.uniq_id(v)))
            .collect()
    };
    assert_eq!(numbered(&ordered), numbered(&whole));
}

/// A JGF of a chain: a cluster and `levels` groups, each inside the one before.
fn chain_jgf(levels: usize) -> String {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut path = String::new();
    for i in 0..=levels {
        let kind = if i == 0 { "cluster" } else { "group" };
        path.push_str(&format!("/{kind}{i}"));
        nodes.push(format!(
            r#"{{"id": "{i}", "metadata": {{"type": "{kind}", "basename": "{kind}", "name": "{kind}{i}", "id": {i}, "rank": -1, "size": 1, "paths": {{"containment": "{path}"}}}}}}"#
        ));
        if i > 0 {
            edges.push(format!(
                r#"{{"source": "{}", "target": "{i}", "metadata": {{"name": {{"containment": "contains"}}}}}}"#,
                i - 1
            ));
        }
    }
    format!(
        r#"{{"graph": {{"nodes": [{}], "edges": [{}]}}}}"#,
        nodes.join(", "),
        edges.join(", ")
    )
}

#[test]
fn a_tree_deeper_than_the_bound_is_refused_before_any_walk() {
    // One level more than the bound: refused with the vertex named (a 10,000-level chain
    // overflowed the walk's stack and killed the process).
    let err = read_jgf(&chain_jgf(crate::GRAPH_DEPTH_MAX + 1)).unwrap_err();
    assert!(
        err.to_string().contains("deeper than 256 levels") && err.to_string().contains("group257"),
        "{err}"
    );
    let mut g = read_jgf(&chain_jgf(crate::GRAPH_DEPTH_MAX)).unwrap();
    assert_eq!(g.depth(VertexId(crate::GRAPH_DEPTH_MAX as u32)), 256);
    // Growing it one level deeper changes nothing.
    let n = g.len();
    let doc = parse_jgf(&chain_jgf(crate::GRAPH_DEPTH_MAX + 1)).unwrap();
    let err = g.attach(&doc).unwrap_err();
    assert!(err.to_string().contains("deeper than 256 levels"), "{err}");
    assert_eq!(g.len(), n);
}
