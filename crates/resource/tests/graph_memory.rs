//! The live heap a loaded graph keeps, counted by a global allocator (the `cap` crate
//! wrapping the system allocator): under 200 bytes per vertex for the benchmark shape, and
//! `ResourceGraph::heap_bytes` close to the count. One test function, so that no other test
//! allocates while it counts. `examples/load_time.rs` prints the same figure for the large
//! graphs.

#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::path::PathBuf;

use cap::Cap;
use shardsched_resource::{ResourceGraph, generated_cluster, read_grug_file};

#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

/// (live bytes held by the graph `load` returns, the graph).
fn live_bytes(load: impl FnOnce() -> ResourceGraph) -> (usize, ResourceGraph) {
    let before = ALLOC.allocated();
    let g = load();
    (ALLOC.allocated().saturating_sub(before), g)
}

fn check(what: &str, live: usize, g: &ResourceGraph) {
    let per_vertex = live as f64 / g.len() as f64;
    let estimate = g.heap_bytes() as f64 / g.len() as f64;
    println!(
        "{what}: {} vertices, {per_vertex:.1} live bytes/vertex (heap_bytes {estimate:.1})",
        g.len()
    );
    assert!(
        per_vertex < 200.0,
        "{what}: {per_vertex:.1} bytes per vertex"
    );
    assert!(
        (estimate - per_vertex).abs() < 0.1 * per_vertex,
        "{what}: heap_bytes says {estimate:.1} bytes per vertex, the allocator {per_vertex:.1}"
    );
}

#[test]
fn loaded_graphs_stay_under_200_bytes_per_vertex() {
    let spec = generated_cluster(256);
    let (live, g) = live_bytes(|| spec.build().unwrap());
    check("generated_cluster(256)", live, &g);
    drop(g);

    let bench = match std::env::var_os("SHARDSCHED_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench"),
    };
    let path = bench.join("bench1024.graphml");
    if !path.exists() {
        eprintln!("skipped bench1024: {} not found", path.display());
        return;
    }
    let (live, g) = live_bytes(|| read_grug_file(&path).unwrap());
    check("bench1024.graphml", live, &g);
}
