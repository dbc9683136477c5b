//! Cluster spec tests: shapes, TOML locations, and equality with the benchmark GRUGs.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Instant;

use super::*;
use crate::grug::read_grug_file;
use crate::testdata::{bench_file, child_names, child_type_runs, outline, type_counts};

fn counts(g: &ResourceGraph) -> Vec<(String, usize)> {
    type_counts(g).into_iter().collect()
}

fn want(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
    let mut v: Vec<(String, usize)> = pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect();
    v.sort();
    v
}

const TWO_CLASSES: &str = r#"name = "x"
[[nodes]]
hosts = "cn[01-03]"
sockets = 2
cores_per_socket = 4
memory_per_socket_gb = 32
memory_pools_per_socket = 2
properties = ["ssd", "amd"]
[[nodes]]
hosts = "gpu[7-8],login"
rack_size = 1
cores_per_socket = 2
gpus_per_socket = 1
"#;

#[test]
fn default_cluster_builds() {
    let g = read_cluster_spec(DEFAULT_CLUSTER_TOML).unwrap();
    assert_eq!(
        counts(&g),
        want(&[
            ("cluster", 1),
            ("rack", 2),
            ("node", 128),
            ("socket", 256),
            ("core", 5632),
            ("gpu", 512),
            ("memory", 1024)
        ])
    );
    assert_eq!(g.name(g.root()), "cluster0");
    let socket = g.find_path("/cluster0/rack1/node127/socket1").unwrap();
    assert_eq!(child_names(&g, socket)[0], "core22");
    assert_eq!(child_type_runs(&g, socket), ["core", "gpu", "memory"]);
    let mem = g
        .find_path("/cluster0/rack1/node127/socket1/memory7")
        .unwrap();
    assert_eq!((g.size(mem), g.unit(mem), g.rank(mem)), (16, "GB", 127));
}

#[test]
fn classes_ranks_racks_and_properties() {
    let g = read_cluster_spec(TWO_CLASSES).unwrap();
    assert_eq!(
        child_names(&g, g.root()),
        ["rack0", "rack1", "rack2", "cn01", "cn02", "cn03"]
    );
    let cn02 = g.find_path("/x0/cn02").unwrap();
    assert_eq!((g.basename(cn02), g.id(cn02), g.rank(cn02)), ("cn", 2, 1));
    assert!(g.has_property(cn02, "ssd") && g.has_property(cn02, "amd"));
    let socket1 = g.find_path("/x0/cn02/socket1").unwrap();
    assert_eq!(
        child_names(&g, socket1),
        ["core4", "core5", "core6", "core7", "memory2", "memory3"]
    );
    assert_eq!(g.size(g.find_path("/x0/cn02/socket1/memory3").unwrap()), 16);
    let login = g.find_path("/x0/rack2/login").unwrap();
    assert_eq!((g.id(login), g.rank(login)), (-1, 5));
    assert!(!g.has_property(login, "ssd"));
    assert_eq!(
        child_names(&g, g.find_path("/x0/rack0/gpu7/socket0").unwrap()),
        ["core0", "core1", "gpu0"]
    );
}

#[test]
fn errors_have_toml_lines_and_columns() {
    let err = |text: &str| read_cluster_spec(text).unwrap_err().to_string();
    let e = err(&TWO_CLASSES.replace("gpu[7-8]", "cn03"));
    assert_eq!(e, "line 10, column 9: host \"cn03\" is already in nodes[0]");
    let e = err(&TWO_CLASSES.replace("cores_per_socket = 2", "cores = 2"));
    assert!(
        e.starts_with("line 12, column 1: unknown field `cores`"),
        "{e}"
    );
    let e = err(&TWO_CLASSES.replace("sockets = 2", "sockets = 0"));
    assert_eq!(e, "line 4, column 11: sockets must be at least 1");
    let e = err(&TWO_CLASSES.replace("sockets = 2", "sockets = -2"));
    assert!(e.starts_with("line 4, column 11: "), "{e}");
    let e = err(&TWO_CLASSES.replace("pools_per_socket = 2", "pools_per_socket = 3"));
    assert!(
        e.starts_with("line 6, column 24: memory_per_socket_gb = 32 does not split"),
        "{e}"
    );
    let e = err(&TWO_CLASSES.replace("cn[01-03]", "cn[01-03"));
    assert!(e.starts_with("line 3, column 9: hostlist"), "{e}");
    let e = err(&TWO_CLASSES.replace("name = \"x\"", "name = \"a b\""));
    assert!(e.starts_with("line 1, column 8: name"), "{e}");
    let e = err("name = \"x\"\n[[nodes]]\nhosts = \"n1\"\n");
    assert!(
        e.starts_with("line 2, column 1: ") && e.contains("cores_per_socket"),
        "{e}"
    );
    assert!(err("name = \"x\"\nnodes = []\n").starts_with("line 2, column 9: no [[nodes]]"));
    assert!(err("name = ").starts_with("line 1, column 8: "));
    let e = err(&TWO_CLASSES
        .replace("cn[01-03]", "cn[0-99999]")
        .replace("cores_per_socket = 4", "cores_per_socket = 4000"));
    assert!(e.contains("would exceed the limit"), "{e}");
}

#[test]
fn build_errors_name_the_field_path() {
    let mut spec = ClusterSpec::parse(TWO_CLASSES).unwrap();
    spec.nodes[1].cores_per_socket = 0;
    assert_eq!(
        spec.build().unwrap_err().to_string(),
        "nodes[1].cores_per_socket: cores_per_socket must be at least 1"
    );
    spec.nodes.clear();
    assert_eq!(
        spec.build().unwrap_err().to_string(),
        "nodes: no [[nodes]] class"
    );
    assert!(generated_cluster(0).build().is_err());
    assert_eq!(
        generated_cluster(1).build().unwrap().len(),
        1 + 1 + 1 + 2 * (1 + 22 + 2 + 4)
    );
}

#[test]
fn to_toml_reads_back() {
    let spec = ClusterSpec::parse(TWO_CLASSES).unwrap();
    assert_eq!(ClusterSpec::parse(&spec.to_toml()).unwrap(), spec);
    let spec = generated_cluster(96);
    assert_eq!(ClusterSpec::parse(&spec.to_toml()).unwrap(), spec);
    let mut spec = ClusterSpec {
        name: "c".into(),
        nodes: vec![NodeClass::new("n[0-1]", 4)],
    };
    spec.nodes[0].gpus_per_socket = 1;
    assert_eq!(spec.build().unwrap().len(), 1 + 2 * (1 + 1 + 4 + 1));
}

/// The generated benchmark cluster is bench128.graphml vertex for vertex: same paths, types,
/// ids, sizes and units, created in the same order, with the same child order.
#[test]
fn generated_cluster_is_the_bench_grug() {
    let Some(path) = bench_file("bench128.graphml") else {
        return;
    };
    let grug = read_grug_file(path).unwrap();
    let spec = generated_cluster(128).build().unwrap();
    assert_eq!(counts(&spec), counts(&grug));
    assert_eq!(outline(&spec), outline(&grug));
    let names = |g: &ResourceGraph| g.vertices().map(|v| g.path(v)).collect::<Vec<_>>();
    assert_eq!(names(&spec), names(&grug));
    for kind in ["cluster", "rack", "node", "socket"] {
        let first = |g: &ResourceGraph| g.vertices().find(|&v| g.kind_str(v) == kind).unwrap();
        assert_eq!(
            child_type_runs(&spec, first(&spec)),
            child_type_runs(&grug, first(&grug))
        );
    }
}

/// Not an assertion: how long the benchmark graphs take to load (run with --release and
/// --nocapture to see it).
#[test]
fn bench_graph_load_times() {
    for name in ["bench1024.graphml", "bench4096.graphml"] {
        let Some(path) = bench_file(name) else { return };
        let start = Instant::now();
        let g = read_grug_file(&path).unwrap();
        let grug = start.elapsed();
        let start = Instant::now();
        let nodes = g.vertices().filter(|&v| g.kind_str(v) == "node").count();
        let spec = generated_cluster(nodes).build().unwrap();
        let built = start.elapsed();
        assert_eq!(spec.len(), g.len());
        println!(
            "{name}: {} vertices; read_grug {:.1} ms, generated_cluster({nodes}).build() {:.1} ms",
            g.len(),
            grug.as_secs_f64() * 1e3,
            built.as_secs_f64() * 1e3
        );
    }
}

/// The example of docs/CLUSTER_SPEC.md.
#[test]
fn documented_example_builds() {
    let text = r#"name = "mycluster"
[[nodes]]
hosts = "node[0-127]"
rack_size = 64
sockets = 2
cores_per_socket = 22
gpus_per_socket = 2
memory_per_socket_gb = 64
memory_pools_per_socket = 4
properties = ["gpu-a100"]
[[nodes]]
hosts = "fat[1-4]"
sockets = 4
cores_per_socket = 32
memory_per_socket_gb = 512
properties = ["bigmem", "ssd"]
"#;
    let g = read_cluster_spec(text).unwrap();
    assert!(
        g.find_path("/mycluster0/rack0/node0/socket1/core22")
            .is_some()
    );
    let mem = g.find_path("/mycluster0/fat3/socket2/memory2").unwrap();
    assert_eq!((g.size(mem), g.rank(mem)), (512, 130));
    assert!(g.has_property(g.find_path("/mycluster0/fat1").unwrap(), "bigmem"));
}

/// Every vertex of `g` in order: path, kind, id, rank, size, unit, properties, status.
fn listing(g: &ResourceGraph) -> Vec<String> {
    g.vertices()
        .map(|v| {
            format!(
                "{} {} {} {} {} {} {:?} {:?}",
                g.path(v),
                g.kind_str(v),
                g.id(v),
                g.rank(v),
                g.size(v),
                g.unit(v),
                g.properties(v),
                g.status(v)
            )
        })
        .collect()
}

/// A part built for some hosts is the whole graph with the others taken out: the same
/// vertices in the same order, and the same queue subgraph once cut.
#[test]
fn a_part_is_the_whole_without_the_other_hosts() {
    let two = CheckedSpec::read(TWO_CLASSES).unwrap();
    let bench = CheckedSpec::read(&generated_cluster(300).to_toml()).unwrap();
    let wanted: [&[&str]; 5] = [
        &["cn02", "gpu8"],
        &["login"],
        &[],
        &["node0", "node63", "node64", "node299"],
        &["node130", "node131", "node140"],
    ];
    for spec in [&two, &bench] {
        let whole = spec.build().unwrap();
        let kinds: Vec<&str> = spec.kinds().into_iter().collect();
        assert_eq!(
            kinds.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>(),
            whole
                .vertices()
                .map(|v| whole.kind_str(v).to_string())
                .collect()
        );
        for names in wanted {
            let keep = |h: &str| names.contains(&h);
            let part = spec.build_hosts(&keep).unwrap();
            let cut = crate::keep_subtrees(&whole, &kinds, &keep).unwrap();
            let part_paths: BTreeSet<String> = part.vertices().map(|v| part.path(v)).collect();
            let whole_order: Vec<String> = listing(&whole)
                .into_iter()
                .filter(|l| part_paths.contains(l.split(' ').next().unwrap()))
                .collect();
            assert_eq!(listing(&part), whole_order, "{names:?}");
            let part_cut = crate::keep_subtrees(&part, &kinds, &keep).unwrap();
            assert_eq!(listing(&part_cut), listing(&cut), "{names:?}");
            let parents = |g: &ResourceGraph| {
                g.vertices()
                    .map(|v| g.parent(v).map(|p| g.path(p)))
                    .collect::<Vec<_>>()
            };
            assert_eq!(parents(&part_cut), parents(&cut));
        }
    }
    let hosts: Vec<&str> = two.hosts().map(|(h, _)| h).collect();
    assert_eq!(hosts, ["cn01", "cn02", "cn03", "gpu7", "gpu8", "login"]);
}
