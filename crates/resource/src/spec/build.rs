//! Cluster spec → graph, in the order Fluxion's GRUG expansion would create the vertices.

use std::collections::HashMap;

use super::{ClusterSpec, check_class, check_size};
use crate::error::{Location, ReadError};
use crate::graph::{GraphBuilder, ResourceGraph, Status, VertexId};
use crate::hostlist::split_host;
use crate::intern::Sym;

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

    // `count` is below the vertex bound; a tree has one edge fewer than vertices.
    let count = count as usize;
    let mut b = GraphBuilder::with_capacity(count, count - 1);
    let syms = Syms::new(&mut b);
    let root = {
        let basename = b.intern(name);
        b.add_vertex_syms(
            syms.cluster,
            basename,
            None,
            0,
            -1,
            1,
            syms.none,
            Status::Up,
        )
    };

    // Racks of every class first, as a GRUG's cluster → rack rule creates them.
    let mut parent_of: Vec<Vec<VertexId>> = Vec::with_capacity(spec.nodes.len());
    let mut rack_id = 0;
    for (class, class_hosts) in spec.nodes.iter().zip(&hosts) {
        let parents = match class.rack_size {
            None => vec![root; class_hosts.len()],
            Some(size) => {
                let racks: Vec<VertexId> = (0..class_hosts.len().div_ceil(size as usize))
                    .map(|_| {
                        let rack = b.add_vertex_syms(
                            syms.rack,
                            syms.rack,
                            None,
                            rack_id,
                            -1,
                            1,
                            syms.none,
                            Status::Up,
                        );
                        rack_id += 1;
                        b.add_containment_edge(root, rack);
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
    let mut nodes: Vec<(VertexId, usize)> = Vec::with_capacity(seen.len());
    for (i, (class, class_hosts)) in spec.nodes.iter().zip(&hosts).enumerate() {
        for (k, host) in class_hosts.iter().enumerate() {
            let node = add_node(&mut b, &syms, host, nodes.len());
            for p in &class.properties {
                b.set_property(node, p, "");
            }
            b.add_containment_edge(parent_of[i][k], node);
            nodes.push((node, i));
        }
    }

    // Then sockets of every node, and below every socket cores, then gpus, then memory:
    // one pass per type, as the socket → core / gpu / memory rules run one after another.
    let mut sockets: Vec<(VertexId, i64, i64, usize)> = Vec::new();
    for &(node, i) in &nodes {
        let rank = b.vertex_rank(node);
        for s in 0..spec.nodes[i].sockets {
            let socket = child(&mut b, node, syms.socket, i64::from(s), rank, 1, syms.none);
            sockets.push((socket, i64::from(s), rank, i));
        }
    }
    let pass = |b: &mut GraphBuilder, kind: Sym, per: &dyn Fn(usize) -> (u32, i64, Sym)| {
        for &(socket, s, rank, i) in &sockets {
            let (n, size, unit) = per(i);
            for k in 0..i64::from(n) {
                child(b, socket, kind, s * i64::from(n) + k, rank, size, unit);
            }
        }
    };
    pass(&mut b, syms.core, &|i| {
        (spec.nodes[i].cores_per_socket, 1, syms.none)
    });
    pass(&mut b, syms.gpu, &|i| {
        (spec.nodes[i].gpus_per_socket, 1, syms.none)
    });
    pass(&mut b, syms.memory, &|i| {
        let c = &spec.nodes[i];
        match c.memory_per_socket_gb {
            0 => (0, 1, syms.gb),
            gb => {
                let pool = gb / u64::from(c.memory_pools_per_socket);
                (
                    c.memory_pools_per_socket,
                    i64::try_from(pool).unwrap_or(i64::MAX),
                    syms.gb,
                )
            }
        }
    });
    Ok(b.finish()?)
}

/// The strings the spec's vertices share, interned once.
struct Syms {
    cluster: Sym,
    rack: Sym,
    node: Sym,
    socket: Sym,
    core: Sym,
    gpu: Sym,
    memory: Sym,
    none: Sym,
    gb: Sym,
}

impl Syms {
    fn new(b: &mut GraphBuilder) -> Self {
        Syms {
            cluster: b.intern("cluster"),
            rack: b.intern("rack"),
            node: b.intern("node"),
            socket: b.intern("socket"),
            core: b.intern("core"),
            gpu: b.intern("gpu"),
            memory: b.intern("memory"),
            none: b.intern(""),
            gb: b.intern("GB"),
        }
    }
}

/// Node vertex of `host`: basename and id from its trailing digits, rank its position.
fn add_node(b: &mut GraphBuilder, syms: &Syms, host: &str, rank: usize) -> VertexId {
    let (basename, digits) = split_host(host);
    let id = digits.and_then(|d| i64::try_from(d).ok()).unwrap_or(-1);
    let basename = b.intern(basename);
    let name = b.intern(host);
    b.add_vertex_syms(
        syms.node,
        basename,
        Some(name),
        id,
        rank as i64,
        1,
        syms.none,
        Status::Up,
    )
}

/// Adds a `kind` vertex named `kind<id>` under `parent`.
fn child(
    b: &mut GraphBuilder,
    parent: VertexId,
    kind: Sym,
    id: i64,
    rank: i64,
    size: i64,
    unit: Sym,
) -> VertexId {
    let v = b.add_vertex_syms(kind, kind, None, id, rank, size, unit, Status::Up);
    b.add_containment_edge(parent, v);
    v
}
