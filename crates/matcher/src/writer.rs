//! Match writers: how an allocation is printed.
//!
//! - `simple`: one line per vertex, children before parents, indented by depth —
//!   `      ------core35[1:x]` (name, units taken, exclusive or shared) — byte-compatible with
//!   Fluxion's resource-query;
//! - `pretty_simple`: the same lines (Fluxion's variant differs only in layout choices that
//!   its test suite does not exercise);
//! - `jgf`: the allocated subgraph as JSON Graph Format;
//! - `rv1_nosched` / `rv1`: RFC 20 R (R_lite, nodelist, starttime, expiration), `rv1` with
//!   the JGF subgraph under `scheduling`.

use std::fmt::Write as _;

use serde_json::{Value, json};
use shardsched_resource::{ResourceGraph, VertexId};

use crate::alloc::Allocation;

/// Output format of match results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    Simple,
    PrettySimple,
    Jgf,
    Rv1,
    Rv1NoSched,
}

impl Writer {
    /// Parses resource-query's `-F` names.
    pub fn parse(s: &str) -> Option<Writer> {
        Some(match s {
            "simple" => Writer::Simple,
            "pretty_simple" => Writer::PrettySimple,
            "jgf" => Writer::Jgf,
            "rv1" | "rlite" => Writer::Rv1,
            "rv1_nosched" => Writer::Rv1NoSched,
            _ => return None,
        })
    }

    /// Renders one allocation; text formats end with a newline.
    pub fn render(self, g: &ResourceGraph, a: &Allocation) -> String {
        match self {
            Writer::Simple | Writer::PrettySimple => simple(g, a),
            Writer::Jgf => format!("{}\n", jgf(g, a)),
            Writer::Rv1 => format!("{}\n", rv1(g, a, true)),
            Writer::Rv1NoSched => format!("{}\n", rv1(g, a, false)),
        }
    }
}

fn simple(g: &ResourceGraph, a: &Allocation) -> String {
    let mut out = String::new();
    for av in &a.vertices {
        out.push_str("      ");
        for _ in 0..=av.depth {
            out.push_str("---");
        }
        let mode = if av.exclusive { 'x' } else { 's' };
        let _ = writeln!(out, "{}[{}:{}]", g.name(av.v), av.needs, mode);
    }
    out
}

/// The allocated subgraph in JGF, vertices in writer order, containment edges between them.
pub fn jgf(g: &ResourceGraph, a: &Allocation) -> Value {
    let mut nodes = Vec::with_capacity(a.vertices.len());
    let mut edges = Vec::new();
    let chosen: std::collections::HashSet<u32> = a.vertices.iter().map(|v| v.v.0).collect();
    for av in &a.vertices {
        let v = av.v;
        let mut meta = json!({
            "type": g.kind_str(v),
            "basename": g.basename(v),
            "name": g.name(v),
            "id": g.id(v),
            "uniq_id": g.uniq_id(v),
            "rank": g.rank(v),
            "exclusive": av.exclusive,
            "unit": g.unit(v),
            "size": av.needs,
            "paths": {"containment": g.path(v)},
        });
        if let Some(props) = g.properties(v) {
            meta["properties"] = json!(props);
        }
        nodes.push(json!({"id": v.0.to_string(), "metadata": meta}));
        if let Some(p) = g.parent(v).filter(|p| chosen.contains(&p.0)) {
            edges.push(json!({"source": p.0.to_string(), "target": v.0.to_string(),
                              "metadata": {"name": {"containment": "contains"}}}));
        }
    }
    json!({"graph": {"nodes": nodes, "edges": edges}})
}

/// RFC 20 R for `a`: ranks with identical children grouped into idsets.
pub fn rv1(g: &ResourceGraph, a: &Allocation, with_sched: bool) -> Value {
    let node = g.sym("node");
    // (rank, hostname, children type -> ids)
    let mut per_node: Vec<(i64, String, std::collections::BTreeMap<String, Vec<u64>>)> = Vec::new();
    for av in &a.vertices {
        let v = av.v;
        if Some(g.kind(v)) == node {
            per_node.push((g.rank(v), g.name(v).to_string(), Default::default()));
        }
    }
    for av in &a.vertices {
        let v = av.v;
        let kind = g.kind_str(v);
        if kind != "core" && kind != "gpu" {
            continue;
        }
        let Some(n) = node.and_then(|k| g.ancestor_of_kind(v, k)) else {
            continue;
        };
        if let Some(e) = per_node.iter_mut().find(|e| e.1 == g.name(n)) {
            e.2.entry(kind.to_string())
                .or_default()
                .push(u64::try_from(g.id(v)).unwrap_or(0));
        }
    }
    per_node.sort_by_key(|e| e.0);
    let mut r_lite: Vec<(Vec<u64>, std::collections::BTreeMap<String, String>)> = Vec::new();
    for (rank, _, children) in &per_node {
        let kids: std::collections::BTreeMap<String, String> = children
            .iter()
            .map(|(k, ids)| {
                let mut ids = ids.clone();
                ids.sort_unstable();
                (
                    k.clone(),
                    shardsched_resource::format_idset(ids.iter().copied()),
                )
            })
            .collect();
        let rank = u64::try_from(*rank).unwrap_or(0);
        match r_lite.iter_mut().find(|e| e.1 == kids) {
            Some(e) => e.0.push(rank),
            None => r_lite.push((vec![rank], kids)),
        }
    }
    let r_lite: Vec<Value> = r_lite
        .into_iter()
        .map(|(ranks, kids)| json!({"rank": shardsched_resource::format_idset(ranks.iter().copied()), "children": kids}))
        .collect();
    let hosts: Vec<String> = per_node.iter().map(|e| e.1.clone()).collect();
    let nodelist = if hosts.is_empty() {
        vec![]
    } else {
        vec![shardsched_resource::encode_hostlist(&hosts)]
    };
    let expiration =
        a.at.saturating_add(i64::try_from(a.duration).unwrap_or(i64::MAX));
    let mut r = json!({"version": 1, "execution": {"R_lite": r_lite, "nodelist": nodelist,
                       "starttime": a.at, "expiration": expiration}});
    if with_sched {
        r["scheduling"] = jgf(g, a);
    }
    r
}

/// Vertex ids of `a` (for tests and checkers).
pub fn vertex_ids(a: &Allocation) -> Vec<VertexId> {
    a.vertices.iter().map(|v| v.v).collect()
}
