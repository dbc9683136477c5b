//! GRUG reader tests: embedded recipes for errors and ids, Fluxion's grugs for shape and order.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::error::{GRAPH_VERTICES_MAX, Location};
use crate::graph::VertexId;
use crate::testdata::{child_names, child_type_runs, resource_file, type_counts};
use proptest::prelude::*;

/// The key declarations every test recipe shares: 17 lines, so a recipe's `<graph>` is on
/// line 18 and its first node on line 19.
const KEYS: &str = r#"<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
<key id="type" for="node" attr.name="type" attr.type="string"/>
<key id="basename" for="node" attr.name="basename" attr.type="string"/>
<key id="unit" for="node" attr.name="unit" attr.type="string"/>
<key id="size" for="node" attr.name="size" attr.type="long"><default>1</default></key>
<key id="subsystem" for="node" attr.name="subsystem"><default>containment</default></key>
<key id="e_subsystem" for="edge" attr.name="e_subsystem"><default>containment</default></key>
<key id="id_scope" for="edge" attr.name="id_scope" attr.type="int"><default>0</default></key>
<key id="id_start" for="edge" attr.name="id_start" attr.type="int"><default>0</default></key>
<key id="id_stride" for="edge" attr.name="id_stride" attr.type="int"><default>1</default></key>
<key id="gen_method" for="edge" attr.name="gen_method"><default>MULTIPLY</default></key>
<key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
<key id="as_tgt_subsystem" for="edge" attr.name="as_tgt_subsystem"><default>containment</default></key>
<key id="as_tgt_uplvl" for="edge" attr.name="as_tgt_uplvl"><default>1</default></key>
<key id="as_src_uplvl" for="edge" attr.name="as_src_uplvl"><default>1</default></key>
"#;

fn recipe(body: &str) -> String {
    format!("{KEYS}<graph id=\"t\" edgedefault=\"directed\">\n{body}</graph>\n</graphml>\n")
}

/// cluster → 2 racks → 3 nodes each (ids across racks) → 2 cores each.
fn small_body(rack2node_scale: &str) -> String {
    format!(
        r#"<node id="cluster"><data key="root">1</data><data key="type">cluster</data><data key="basename">c</data></node>
<node id="rack"><data key="type">rack</data><data key="basename">rack</data></node>
<node id="node"><data key="type">node</data><data key="basename">node</data></node>
<node id="core"><data key="type">core</data><data key="basename">core</data></node>
<edge id="cluster2rack" source="cluster" target="rack"><data key="multi_scale">2</data></edge>
<edge id="rack2node" source="rack" target="node">
  <data key="id_scope">1</data>
  <data key="multi_scale">{rack2node_scale}</data>
</edge>
<edge id="node2core" source="node" target="core"><data key="multi_scale">2</data></edge>
"#
    )
}

fn read(rel: &str) -> Option<ResourceGraph> {
    let path = resource_file(rel)?;
    Some(read_grug_file(&path).unwrap_or_else(|e| panic!("{e}")))
}

fn counts(g: &ResourceGraph) -> Vec<(String, usize)> {
    type_counts(g).into_iter().collect()
}

fn expect_counts(g: &ResourceGraph, want: &[(&str, usize)]) {
    let mut want: Vec<(String, usize)> = want.iter().map(|(t, n)| (t.to_string(), *n)).collect();
    want.sort();
    assert_eq!(counts(g), want);
}

#[test]
fn embedded_recipe_generates_breadth_by_type_with_scoped_ids() {
    let g = read_grug(&recipe(&small_body("3"))).unwrap();
    let names: Vec<&str> = g.vertices().map(|v| g.name(v)).collect();
    assert_eq!(
        &names[..9],
        [
            "c0", "rack0", "rack1", "node0", "node1", "node2", "node3", "node4", "node5"
        ]
    );
    assert_eq!(
        names[9..].iter().filter(|n| n.starts_with("core")).count(),
        12
    );
    assert_eq!(g.path(VertexId(20)), "/c0/rack1/node5/core1");
    assert_eq!(child_names(&g, VertexId(2)), ["node3", "node4", "node5"]);
    // Fluxion ranks nodes 0, 1, 2… in creation order; every other vertex has rank -1.
    let ranks: Vec<i64> = g.vertices().map(|v| g.rank(v)).collect();
    assert_eq!(&ranks[..9], [-1, -1, -1, 0, 1, 2, 3, 4, 5]);
    assert!(ranks[9..].iter().all(|&r| r == -1));
}

#[test]
fn tiny_has_fluxions_shape_and_order() {
    let Some(g) = read("grugs/tiny.graphml") else {
        return;
    };
    expect_counts(
        &g,
        &[
            ("cluster", 1),
            ("rack", 1),
            ("node", 2),
            ("socket", 4),
            ("core", 72),
            ("gpu", 4),
            ("memory", 16),
        ],
    );
    let last_core = g
        .vertices()
        .filter(|&v| g.kind_str(v) == "core")
        .last()
        .unwrap();
    assert_eq!(g.path(last_core), "/tiny0/rack0/node1/socket1/core35");
    // Creation order = uniq_id: cluster, rack, nodes, then sockets, cores, gpus, memory.
    let kinds: Vec<&str> = g.vertices().map(|v| g.kind_str(v)).collect();
    assert_eq!(
        &kinds[..8],
        [
            "cluster", "rack", "node", "node", "socket", "socket", "socket", "socket"
        ]
    );
    assert_eq!(kinds[8], "core");
    assert_eq!(kinds[80..84], ["gpu"; 4]);
    assert_eq!(kinds[84..], ["memory"; 16]);
    let socket = g.find_path("/tiny0/rack0/node1/socket1").unwrap();
    let children = child_names(&g, socket);
    assert_eq!(children.first().map(String::as_str), Some("core18"));
    assert_eq!(children[17], "core35");
    assert_eq!(
        children[18..],
        ["gpu1", "memory4", "memory5", "memory6", "memory7"]
    );
    assert_eq!(child_type_runs(&g, socket), ["core", "gpu", "memory"]);
    let mem = g.find_path("/tiny0/rack0/node0/socket0/memory0").unwrap();
    assert_eq!((g.size(mem), g.unit(mem)), (2, "GB"));
}

#[test]
fn resv_test_and_medium_counts_and_scoped_node_ids() {
    let Some(g) = read("grugs/resv_test.graphml") else {
        return;
    };
    expect_counts(
        &g,
        &[
            ("cluster", 1),
            ("rack", 6),
            ("node", 108),
            ("socket", 216),
            ("core", 3888),
            ("gpu", 216),
            ("memory", 864),
        ],
    );
    let rack5 = g.find_path("/resv_test0/rack5").unwrap();
    let nodes = child_names(&g, rack5);
    assert_eq!(
        (nodes[0].as_str(), nodes[17].as_str()),
        ("node90", "node107")
    );

    let Some(g) = read("grugs/medium.graphml") else {
        return;
    };
    expect_counts(
        &g,
        &[
            ("cluster", 1),
            ("rack", 4),
            ("node", 72),
            ("socket", 144),
            ("core", 2592),
            ("gpu", 144),
            ("memory", 576),
        ],
    );
    assert!(
        g.find_path("/medium0/rack3/node71/socket1/core35")
            .is_some()
    );
}

#[test]
fn every_conformance_grug_loads() {
    for rel in [
        "grugs/coarse_iobw.graphml",
        "grugs/medium.graphml",
        "grugs/power.graphml",
        "grugs/resv_test.graphml",
        "grugs/small.graphml",
        "grugs/tiny.graphml",
        "grugs/mt-storage/mtl0.graphml",
        "grugs/mt-storage/mtl2.graphml",
    ] {
        let Some(g) = read(rel) else { return };
        assert!(g.len() > 10, "{rel}");
    }
}

#[test]
fn second_edges_of_a_template_come_after_its_subtree() {
    // mtl0: node2socket precedes node2ssd, so a node's children are sockets then ssds, and
    // ssd ids are scoped by rack (node1 of each rack has ssd4..ssd7).
    let Some(g) = read("grugs/mt-storage/mtl0.graphml") else {
        return;
    };
    let node1 = g.find_path("/mtl0-test0/rack1/node3").unwrap();
    assert_eq!(child_type_runs(&g, node1), ["socket", "ssd"]);
    assert_eq!(
        child_names(&g, node1)[2..],
        ["ssd4", "ssd5", "ssd6", "ssd7"]
    );
    let Some(g) = read("grugs/mt-storage/mtl2.graphml") else {
        return;
    };
    assert_eq!(child_type_runs(&g, g.root()), ["rack", "mtl2unit"]);
}

#[test]
fn power_subsystem_hangs_off_the_containment_vertices() {
    let Some(g) = read("grugs/power.graphml") else {
        return;
    };
    assert_eq!(g.len(), 4042);
    assert_eq!(g.edge_count(Some("containment")), 3536);
    assert_eq!(g.edge_count(Some("power")), 580);
    let panel = g
        .vertices()
        .find(|&v| g.kind_str(v) == "powerpanel")
        .unwrap();
    assert!(!g.in_containment(panel));
    let pdu0 = g.find_path("/power0/rack0/pdu0").unwrap();
    let fed = g.subsystem_children(pdu0, "power");
    assert_eq!(fed.len(), 18 + 40);
    assert_eq!(g.name(fed[0]), "node0");
    assert_eq!(g.subsystem_children(panel, "power")[0], pdu0);
}

#[test]
fn malformed_recipes_fail_with_lines() {
    let err = |text: &str| read_grug(text).unwrap_err().to_string();
    // Line 19 is the first node; rack2node's multi_scale is on line 26.
    let e = err(&recipe(&small_body("x")));
    assert_eq!(
        e,
        r#"line 26: edge "rack2node": multi_scale "x" is not an integer"#
    );
    let text = recipe(&small_body("3"));
    let e = err(&text[..text.len() / 2]);
    assert!(e.contains("not closed") || e.contains("malformed"), "{e}");
    let e = err(&recipe(&small_body("3")).replace(r#"<data key="root">1</data>"#, ""));
    assert!(e.starts_with("line 18: no root template"), "{e}");
    let e = err(&recipe(&small_body("3")).replace(r#"source="rack" "#, r#"source="rakc" "#));
    assert_eq!(
        e,
        r#"line 24: edge "rack2node": source "rakc" is not a node of the recipe"#
    );
    let e =
        err(&recipe(&small_body("3")).replace(r#"key="basename">rack"#, r#"key="colour">rack"#));
    assert_eq!(
        e,
        r#"line 20: node "rack": data key "colour" is not declared"#
    );
    let e = err(&recipe(&small_body("3")).replace("MULTIPLY", "DIVIDE"));
    assert!(
        e.starts_with("line 13: edge \"cluster2rack\": gen_method \"DIVIDE\""),
        "{e}"
    );
    assert!(err("").contains("no <graphml>"));
    assert!(err("<html/>").contains("expected <graphml>"));
    assert!(err("<graphml><graph><node/></graph></graphml>").contains("<node> has no id"));
    let e = read_grug(&recipe(&small_body("3")).replace("</graphml>", "</graphmk>")).unwrap_err();
    assert!(matches!(e.location(), Location::Line(_)), "{e}");
}

#[test]
fn huge_multi_scale_fails_cleanly() {
    let e = read_grug(&recipe(&small_body("999999999999"))).unwrap_err();
    assert!(
        matches!(
            e,
            ReadError::Limit {
                limit: GRAPH_VERTICES_MAX,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("line 24: edge \"rack2node\""),
        "{e}"
    );
}

#[test]
fn file_errors_name_the_file() {
    let e = read_grug_file("/nonexistent/x.graphml").unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/x.graphml: "), "{e}");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_grug(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn damaged_recipes_never_panic(cut in 0usize..2000, at in 0usize..2000, junk in "[<>/=\"a-z0-9 &;]{0,8}") {
        let mut text = recipe(&small_body("3"));
        let at = at.min(text.len());
        let cut = (at + cut % 40).min(text.len());
        if text.is_char_boundary(at) && text.is_char_boundary(cut) {
            text.replace_range(at..cut, &junk);
        }
        let _ = read_grug(&text);
    }
}

/// A generated graph's vertices have a path in every subsystem whose edges reach them
/// (`power.graphml`: nodes and pdus in containment and power, the power panel only in power).
#[test]
fn power_paths_follow_the_power_edges() {
    let Some(g) = read("grugs/power.graphml") else {
        return;
    };
    let node = g.find_path("/power0/rack0/node0").unwrap();
    assert_eq!(
        g.paths(node),
        [
            ("containment", "/power0/rack0/node0".into()),
            ("power", "/powerpanel0/pdu0/node0".into())
        ]
    );
    let panel = g.find_path("/powerpanel0").unwrap();
    assert_eq!(g.kind_str(panel), "powerpanel");
    assert!(!g.in_containment(panel));
    assert_eq!(
        g.path_count(),
        4118,
        "resource-query -e: by_path Key-Value Pairs"
    );
}
