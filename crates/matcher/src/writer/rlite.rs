//! RFC 20's R_lite as Fluxion's rlite writer builds it.
//!
//! Core and gpu ids are collected as they come; when a `node` (or `storage_node`) comes,
//! what was collected becomes its children signature — `{"core": "0-3", "gpu": "1"}`, ids
//! sorted and compressed — and is cleared (a node with nothing collected is dropped). Nodes
//! with byte-identical signatures share an entry; entries are ordered by signature text;
//! each lists its nodes' ranks as an idset. The nodelist is every host, by rank.

use std::collections::BTreeMap;

use shardsched_resource::{ResourceGraph, VertexId, encode_hostlist, format_idset};

use super::{Json, WriterError};
use crate::gccsort;

/// What the rlite writer has gathered since its last emit.
#[derive(Clone, Debug, Default)]
pub(super) struct Rlite {
    cores: Vec<i64>,
    gpus: Vec<i64>,
    /// Children signature → (rank, host) of each node with it, in arrival order.
    gathered: BTreeMap<String, Vec<(i64, String)>>,
    /// Property (`k` or `k=v`) → ranks of the nodes that have it.
    props: BTreeMap<String, Vec<i64>>,
}

impl Rlite {
    /// Takes one vertex.
    pub fn vertex(&mut self, g: &ResourceGraph, v: VertexId) {
        match g.kind_str(v) {
            "core" => self.cores.push(g.id(v)),
            "gpu" => self.gpus.push(g.id(v)),
            "node" | "storage_node" => self.gather(g, v),
            _ => {}
        }
    }

    fn gather(&mut self, g: &ResourceGraph, v: VertexId) {
        if self.cores.is_empty() && self.gpus.is_empty() {
            return;
        }
        let mut sig = Json::obj();
        for (name, ids) in [("core", &mut self.cores), ("gpu", &mut self.gpus)] {
            if ids.is_empty() {
                continue;
            }
            ids.sort_unstable();
            // Fluxion cannot write a negative id: the node is not gathered.
            let Ok(set) = idset(ids.iter().copied()) else {
                return;
            };
            sig.set(name, Json::Str(set));
            ids.clear();
        }
        self.gathered
            .entry(sig.dump())
            .or_default()
            .push((g.rank(v), g.name(v).to_string()));
        if let Some(props) = g.properties(v) {
            for (k, val) in props {
                let key = if val.is_empty() {
                    k.clone()
                } else {
                    format!("{k}={val}")
                };
                self.props.entry(key).or_default().push(g.rank(v));
            }
        }
    }

    /// Whether no node was gathered.
    pub fn is_empty(&self) -> bool {
        self.gathered.is_empty()
    }

    /// The R_lite array, the nodelist array and the properties object (if any), and clears
    /// what was gathered. On an error (a negative rank) everything gathered stays, as in
    /// Fluxion's `fill`, so every later emit fails too; the nodes of each signature it got
    /// to are left sorted by rank, as its `std::sort` leaves them.
    pub fn take(&mut self) -> Result<(Json, Json, Option<Json>), WriterError> {
        let mut r_lite = Vec::new();
        let mut all: Vec<(i64, String)> = Vec::new();
        for (sig, nodes) in self.gathered.iter_mut() {
            *nodes = by_rank(std::mem::take(nodes));
            let ranks = idset(nodes.iter().map(|n| n.0))?;
            all.extend(nodes.iter().cloned());
            let mut o = Json::obj();
            o.set("rank", Json::Str(ranks));
            o.set("children", parse_signature(sig));
            r_lite.push(o);
        }
        let properties = if self.props.is_empty() {
            None
        } else {
            let mut p = Json::obj();
            for (k, ranks) in self.props.iter_mut() {
                ranks.sort_unstable();
                p.set(k, Json::Str(idset(ranks.iter().copied())?));
            }
            Some(p)
        };
        let all = by_rank(all);
        let hosts: Vec<&str> = all.iter().map(|n| n.1.as_str()).collect();
        let nodelist = if hosts.is_empty() {
            Json::Arr(Vec::new())
        } else {
            Json::Arr(vec![Json::Str(encode_hostlist(&hosts))])
        };
        self.gathered.clear();
        self.props.clear();
        Ok((Json::Arr(r_lite), nodelist, properties))
    }
}

/// Nodes sorted by rank as Fluxion's `std::sort` leaves them (ties in its order).
fn by_rank(nodes: Vec<(i64, String)>) -> Vec<(i64, String)> {
    let mut idx: Vec<u32> = (0..nodes.len() as u32).collect();
    gccsort::sort_by(&mut idx, &mut |a, b| {
        nodes[*a as usize].0 < nodes[*b as usize].0
    });
    idx.into_iter().map(|i| nodes[i as usize].clone()).collect()
}

fn idset(ids: impl Iterator<Item = i64>) -> Result<String, WriterError> {
    let ids: Vec<u64> = ids
        .map(|i| u64::try_from(i).map_err(|_| WriterError::NegativeId))
        .collect::<Result<_, _>>()?;
    Ok(format_idset(ids))
}

/// The signature object back from its text (`{"core": "0-3", "gpu": "1"}`).
fn parse_signature(sig: &str) -> Json {
    let mut o = Json::obj();
    let inner = sig.trim_start_matches('{').trim_end_matches('}');
    for part in inner.split(", ").filter(|p| !p.is_empty()) {
        if let Some((k, v)) = part.split_once(": ") {
            o.set(
                k.trim_matches('"'),
                Json::Str(v.trim_matches('"').to_string()),
            );
        }
    }
    o
}
