//! Graph building and reading tests.

#![allow(clippy::unwrap_used)]

use super::links::Links;
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

#[test]
fn push_int_prints_what_format_prints() {
    for n in [0, 1, 9, 10, 22, -1, -10, 1 << 40, i64::MAX, i64::MIN] {
        let mut s = String::from("x");
        push_int(&mut s, n);
        assert_eq!(s, format!("x{n}"));
    }
}

#[test]
fn unreachable_vertices_are_refused_whatever_their_order() {
    // A cycle below no root: each vertex has one parent, the root reaches neither.
    let mut b = GraphBuilder::new();
    let root = b.add_vertex(VertexSpec::new("cluster", "c", 0));
    let x = b.add_vertex(VertexSpec::new("node", "node", 0));
    let y = b.add_vertex(VertexSpec::new("node", "node", 1));
    b.add_edge(x, y, CONTAINMENT);
    b.add_edge(y, x, CONTAINMENT);
    let _ = root;
    let e = b.finish().unwrap_err();
    assert_eq!(
        e,
        GraphError::Unreachable("1 of 3 vertices reachable".into())
    );

    // A vertex outside containment with a containment child: the child is unreachable.
    let mut b = GraphBuilder::new();
    let root = b.add_vertex(VertexSpec::new("cluster", "c", 0));
    let panel = b.add_vertex(VertexSpec::new("powerpanel", "powerpanel", 0));
    let n = b.add_vertex(VertexSpec::new("node", "node", 0));
    b.add_edge(panel, n, CONTAINMENT);
    b.mark_outside_containment(panel);
    let _ = root;
    let e = b.finish().unwrap_err();
    assert_eq!(
        e,
        GraphError::Unreachable("1 of 2 vertices reachable".into())
    );
}

/// The links [`Links::of`] makes of `g`'s edges (the tree's, as petgraph would hold them).
fn links_of(g: &ResourceGraph) -> Links {
    Links::of(
        super::links::edges_of(&g.topology()),
        g.len(),
        Sym(0),
        false,
    )
    .unwrap()
}

#[test]
fn reachable_count_in_order_agrees_with_the_walk() {
    // Parents first (the pass), then a child created before its parent (the walk).
    let g = tiny();
    let links = links_of(&g);
    assert_eq!(links.reachable_in_order(0), Some(7));
    assert_eq!(g.reachable_count(), Ok(7));

    let mut b = GraphBuilder::new();
    let core = b.add_vertex(VertexSpec::new("core", "core", 0));
    let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
    let n = b.add_vertex(VertexSpec::new("node", "node", 0));
    b.add_edge(c, n, CONTAINMENT);
    b.add_edge(n, core, CONTAINMENT);
    let g = b.finish().unwrap();
    let links = links_of(&g);
    assert_eq!(links.reachable_in_order(1), None);
    assert_eq!(g.reachable_count(), Ok(3));
    assert_eq!(g.path(core), "/c0/node0/core0");

    // Deeper than the pass counts: the walk does, to the same answer.
    let mut b = GraphBuilder::new();
    let mut up = b.add_vertex(VertexSpec::new("cluster", "c", 0));
    for i in 0..255 {
        let v = b.add_vertex(VertexSpec::new("node", "node", i));
        b.add_edge(up, v, CONTAINMENT);
        up = v;
    }
    let g = b.finish().unwrap();
    let links = links_of(&g);
    assert_eq!(links.reachable_in_order(0), None);
    assert_eq!(g.reachable_count(), Ok(256));
}
