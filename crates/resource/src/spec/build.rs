//! Cluster spec → graph, in the order Fluxion's GRUG expansion would create the vertices.

use std::collections::HashMap;

use super::{ClusterSpec, check_class, check_size, contain, node_spec};
use crate::error::{Location, ReadError};
use crate::graph::{GraphBuilder, ResourceGraph, VertexId, VertexSpec};

/// Locates a field for an error: (class index or `None` for top level, field name).
pub(super) type Locate<'a> = &'a dyn Fn(Option<usize>, &str) -> Location;

/// Checks the whole spec, then builds its graph.
pub(super) fn build(spec: &ClusterSpec, at: Locate<'_>) -> Result<ResourceGraph, ReadError> {
    let name = &spec.name;
    if name.is_empty() || name.contains('/') || name.chars().any(char::is_whitespace) {
        let msg = format!("name {name:?} must be non-empty, without '/' or spaces");
        return Err(ReadError::invalid(at(None, "name"), msg));
    }
    if spec.nodes.is_empty() {
        return Err(ReadError::invalid(at(None, "nodes"), "no [[nodes]] class"));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut hosts: Vec<Vec<String>> = Vec::with_capacity(spec.nodes.len());
    let mut count: u128 = 1;
    for (i, class) in spec.nodes.iter().enumerate() {
        hosts.push(check_class(class, i, at)?);
        let racks = class
            .rack_size
            .map_or(0, |r| hosts[i].len().div_ceil(r as usize));
        let per_socket = 1
            + u128::from(class.cores_per_socket)
            + u128::from(class.gpus_per_socket)
            + if class.memory_per_socket_gb > 0 {
                u128::from(class.memory_pools_per_socket)
            } else {
                0
            };
        let per_node = 1 + u128::from(class.sockets) * per_socket;
        count += racks as u128 + hosts[i].len() as u128 * per_node;
        check_size(count, at(Some(i), "hosts"))?;
    }
    for (i, class_hosts) in hosts.iter().enumerate() {
        for h in class_hosts {
            if let Some(first) = seen.insert(h, i) {
                let msg = if first == i {
                    format!("host {h:?} is listed twice")
                } else {
                    format!("host {h:?} is already in nodes[{first}]")
                };
                return Err(ReadError::invalid(at(Some(i), "hosts"), msg));
            }
        }
    }

    let mut b = GraphBuilder::new();
    let root = b.add_vertex(VertexSpec::new("cluster", name, 0));

    // Racks of every class first, as a GRUG's cluster → rack rule creates them.
    let mut parent_of: Vec<Vec<VertexId>> = Vec::with_capacity(spec.nodes.len());
    let mut rack_id = 0;
    for (class, class_hosts) in spec.nodes.iter().zip(&hosts) {
        let parents = match class.rack_size {
            None => vec![root; class_hosts.len()],
            Some(size) => {
                let racks: Vec<VertexId> = (0..class_hosts.len().div_ceil(size as usize))
                    .map(|_| {
                        let rack = b.add_vertex(VertexSpec::new("rack", "rack", rack_id));
                        rack_id += 1;
                        contain(&mut b, root, rack);
                        rack
                    })
                    .collect();
                (0..class_hosts.len())
                    .map(|k| racks[k / size as usize])
                    .collect()
            }
        };
        parent_of.push(parents);
    }

    // Then every node, ranked in host order.
    let mut nodes: Vec<(VertexId, usize)> = Vec::new();
    for (i, (class, class_hosts)) in spec.nodes.iter().zip(&hosts).enumerate() {
        for (k, host) in class_hosts.iter().enumerate() {
            let mut s = node_spec(host, nodes.len());
            for p in &class.properties {
                s.properties.insert(p.clone(), String::new());
            }
            let node = b.add_vertex(s);
            contain(&mut b, parent_of[i][k], node);
            nodes.push((node, i));
        }
    }

    // Then sockets of every node, and below every socket cores, then gpus, then memory:
    // one pass per type, as the socket → core / gpu / memory rules run one after another.
    let mut sockets: Vec<(VertexId, i64, i64, usize)> = Vec::new();
    for &(node, i) in &nodes {
        let rank = b.vertex(node).rank;
        for s in 0..spec.nodes[i].sockets {
            let socket = child(&mut b, node, "socket", i64::from(s), rank, 1, "");
            sockets.push((socket, i64::from(s), rank, i));
        }
    }
    let pass =
        |b: &mut GraphBuilder, kind: &str, per: &dyn Fn(usize) -> (u32, i64, &'static str)| {
            for &(socket, s, rank, i) in &sockets {
                let (n, size, unit) = per(i);
                for k in 0..i64::from(n) {
                    child(b, socket, kind, s * i64::from(n) + k, rank, size, unit);
                }
            }
        };
    pass(&mut b, "core", &|i| (spec.nodes[i].cores_per_socket, 1, ""));
    pass(&mut b, "gpu", &|i| (spec.nodes[i].gpus_per_socket, 1, ""));
    pass(&mut b, "memory", &|i| {
        let c = &spec.nodes[i];
        match c.memory_per_socket_gb {
            0 => (0, 1, "GB"),
            gb => {
                let pool = gb / u64::from(c.memory_pools_per_socket);
                (
                    c.memory_pools_per_socket,
                    i64::try_from(pool).unwrap_or(i64::MAX),
                    "GB",
                )
            }
        }
    });
    Ok(b.finish()?)
}

/// Adds a `kind` vertex named `kind<id>` under `parent`.
fn child(
    b: &mut GraphBuilder,
    parent: VertexId,
    kind: &str,
    id: i64,
    rank: i64,
    size: i64,
    unit: &str,
) -> VertexId {
    let mut spec = VertexSpec::new(kind, kind, id);
    spec.rank = rank;
    spec.size = size;
    spec.unit = unit.to_string();
    let v = b.add_vertex(spec);
    contain(b, parent, v);
    v
}
