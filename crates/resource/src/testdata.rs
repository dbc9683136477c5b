//! Test helpers: where the shared conformance and benchmark data live.
//!
//! The data is not part of the repository. Tests find it through `SHARDSCHED_CONFORMANCE_DIR`
//! (default `<crate>/../../../shared/conformance/fluxion`) and `SHARDSCHED_BENCH_DIR`
//! (default `<crate>/../../../shared/bench`), and print why they skip when it is absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::graph::{ResourceGraph, VertexId};

fn dir(var: &str, default: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(var) {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(default),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} not found (set {var})", dir.display());
        None
    }
}

/// `<conformance>/t/data/resource/<rel>`, or `None` (with a skip message) when absent.
pub(crate) fn resource_file(rel: &str) -> Option<PathBuf> {
    let base = dir(
        "SHARDSCHED_CONFORMANCE_DIR",
        "../../../shared/conformance/fluxion",
    )?;
    let path = base.join("t/data/resource").join(rel);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} not found", path.display());
        None
    }
}

/// `<bench>/<name>`, or `None` (with a skip message) when absent.
pub(crate) fn bench_file(name: &str) -> Option<PathBuf> {
    let path = dir("SHARDSCHED_BENCH_DIR", "../../../shared/bench")?.join(name);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: {} not found", path.display());
        None
    }
}

/// Number of vertices of each type.
pub(crate) fn type_counts(g: &ResourceGraph) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for v in g.vertices() {
        *counts.entry(g.kind_str(v).to_string()).or_default() += 1;
    }
    counts
}

/// The containment tree as text, one line per vertex in preorder: path, type, id, size,
/// unit. Two graphs with equal outlines have the same tree, names and child order.
pub(crate) fn outline(g: &ResourceGraph) -> Vec<String> {
    g.preorder(g.root())
        .map(|v| {
            format!(
                "{} {} id={} size={} unit={}",
                g.path(v),
                g.kind_str(v),
                g.id(v),
                g.size(v),
                g.unit(v)
            )
        })
        .collect()
}

/// Children names of `v`, e.g. `["core0", "core1", "gpu0"]`.
pub(crate) fn child_names(g: &ResourceGraph, v: VertexId) -> Vec<String> {
    g.children(v)
        .iter()
        .map(|&c| g.name(VertexId(c)).to_string())
        .collect()
}

/// Type sequence of `v`'s children with runs collapsed, e.g. `["core", "gpu", "memory"]`.
pub(crate) fn child_type_runs(g: &ResourceGraph, v: VertexId) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for &c in g.children(v) {
        let t = g.kind_str(VertexId(c));
        if runs.last().map(String::as_str) != Some(t) {
            runs.push(t.to_string());
        }
    }
    runs
}
