//! Cluster spec → graph, in the order Fluxion's GRUG expansion would create the vertices.
//!
//! A graph may be built for only some hosts ([`build_hosts`]): the racks above them, them
//! and what they hold, with the names, ids, ranks and vertex order those vertices have in
//! the whole graph. A shard builds its queue's part so, without ever making the whole
//! cluster's vertices (docs/SCALE.md).

use std::collections::HashMap;

use super::{ClusterSpec, check_class, check_size};
use crate::error::{Location, ReadError};
use crate::graph::{GraphBuilder, ResourceGraph, Status, VertexId};
use crate::hostlist::split_host;
use crate::intern::Sym;

/// Locates a field for an error: (class index or `None` for top level, field name).
pub(super) type Locate<'a> = &'a dyn Fn(Option<usize>, &str) -> Location;

/// Checks the whole spec (name, classes, the vertex bound for the whole cluster, hosts
/// listed once) and returns each class's hosts, in rank order.
pub(super) fn check(spec: &ClusterSpec, at: Locate<'_>) -> Result<Vec<Vec<String>>, ReadError> {
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
        count += vertices_of(class, hosts[i].len());
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
    Ok(hosts)
}

/// The vertices `hosts` hosts of `class` make: their racks, themselves and what they hold.
fn vertices_of(class: &super::NodeClass, hosts: usize) -> u128 {
    let racks = class.rack_size.map_or(0, |r| hosts.div_ceil(r as usize));
    let per_socket = 1
        + u128::from(class.cores_per_socket)
        + u128::from(class.gpus_per_socket)
        + if class.memory_per_socket_gb > 0 {
            u128::from(class.memory_pools_per_socket)
        } else {
            0
        };
    let per_node = 1 + u128::from(class.sockets) * per_socket;
    racks as u128 + hosts as u128 * per_node
}

/// The graph of the hosts `keep` accepts, of a spec [`check`] accepted (`hosts` is its
/// answer): the root, the racks holding a kept host, the kept hosts and everything below
/// them. Every vertex has the name, id and rank it has in the whole graph (racks count
/// from the first rack of the cluster, ranks from its first host), and the vertices come
/// in the whole graph's order, so the result is the whole graph with the other hosts'
/// subtrees and empty racks taken out (`allowlist::keep_subtrees` of the whole graph).
pub(super) fn build_hosts(
    spec: &ClusterSpec,
    hosts: &[Vec<String>],
    keep: &dyn Fn(&str) -> bool,
) -> Result<ResourceGraph, ReadError> {
    let kept: Vec<Vec<bool>> = hosts
        .iter()
        .map(|class_hosts| class_hosts.iter().map(|h| keep(h)).collect())
        .collect();
    let count = 1 + spec
        .nodes
        .iter()
        .zip(&kept)
        .map(|(class, k)| vertices_of(class, k.iter().filter(|&&k| k).count()))
        .sum::<u128>();
    let name = &spec.name;
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
    let mut parent_of: Vec<Vec<Option<VertexId>>> = Vec::with_capacity(spec.nodes.len());
    let mut rack_id = 0;
    for ((class, class_hosts), class_kept) in spec.nodes.iter().zip(hosts).zip(&kept) {
        let parents = match class.rack_size {
            None => vec![Some(root); class_hosts.len()],
            Some(size) => {
                let size = size as usize;
                let racks: Vec<Option<VertexId>> = class_kept
                    .chunks(size)
                    .map(|rack_hosts| {
                        let id = rack_id;
                        rack_id += 1;
                        rack_hosts.contains(&true).then(|| {
                            let rack = b.add_vertex_syms(
                                syms.rack,
                                syms.rack,
                                None,
                                id,
                                -1,
                                1,
                                syms.none,
                                Status::Up,
                            );
                            b.add_containment_edge(root, rack);
                            rack
                        })
                    })
                    .collect();
                (0..class_hosts.len()).map(|k| racks[k / size]).collect()
            }
        };
        parent_of.push(parents);
    }

    // Then every kept node, ranked in host order among all hosts.
    let mut nodes: Vec<(VertexId, usize)> = Vec::new();
    let mut rank = 0;
    for (i, (class, class_hosts)) in spec.nodes.iter().zip(hosts).enumerate() {
        for (k, host) in class_hosts.iter().enumerate() {
            rank += 1;
            let Some(parent) = parent_of[i][k].filter(|_| kept[i][k]) else {
                continue;
            };
            let node = add_node(&mut b, &syms, host, rank - 1);
            for p in &class.properties {
                b.set_property(node, p, "");
            }
            b.add_containment_edge(parent, node);
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
