//! rv1exec: a graph rebuilt from an R document (RFC 20, version 1) without `scheduling`.
//!
//! R says which ranks a job got and, per rank, which cores and gpus: `R_lite` is a list of
//! `{"rank": IDSET, "children": {"core": IDSET, "gpu": IDSET}}` and `nodelist` names the hosts
//! of those ranks as hostlists. flux-core hands this to Fluxion when no JGF is available, and
//! Fluxion's rv1exec reader builds the smallest graph that can express it, which this reader
//! reproduces:
//!
//! - a root `cluster0` (type `cluster`, basename `cluster`, id 0, rank -1);
//! - for each `R_lite` entry in order, for each of its ranks in ascending order, a `node`
//!   vertex named after its host, with basename = the hostname without its trailing digits and
//!   id = those digits (-1 for a hostname without digits), rank = the rank; then, in the order
//!   the `children` object lists the types, one vertex per id of each idset (`core0`, `gpu1`;
//!   any type name is accepted, e.g. `memory`), with the node's rank;
//! - hosts: the i-th host of the expanded `nodelist` belongs to the i-th smallest rank of all
//!   `R_lite` entries (RFC 20), so `"rank": "18-19"` goes with `"nodelist": ["node[18-19]"]`;
//! - `execution.properties` (`{"ssd": "0-1"}`) become properties, with value "", of the nodes
//!   of those ranks.
//!
//! `starttime`, `expiration` and `scheduling` are ignored. Errors name the JSON path.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{GRAPH_VERTICES_MAX, Location, ReadError, read_file};
use crate::graph::{GraphBuilder, ResourceGraph, Status, VertexId};
use crate::hostlist::decode_hostlist;
use crate::idset::IdSet;
use crate::intern::Sym;
use crate::json::{At, Json};

/// Reads an R (rv1exec) document into a resource graph.
pub fn read_rv1exec(text: &str) -> Result<ResourceGraph, ReadError> {
    let root = Json::parse(text)?;
    let top = At(String::new());
    let version = top.key("version").int(top.member(&root, "version")?)?;
    if version != 1 {
        return Err(top
            .key("version")
            .error(format!("expected 1, found {version}")));
    }
    let exec = top.member(&root, "execution")?;
    let at = top.key("execution");
    let entries = at.key("R_lite").array(at.member(exec, "R_lite")?)?;

    // Parse every entry first: ranks, and the children types in file order.
    let mut parsed: Vec<(IdSet, Vec<(String, IdSet)>)> = Vec::with_capacity(entries.len());
    let mut all_ranks = IdSet::new();
    let mut vertices: u128 = 1;
    for (i, entry) in entries.iter().enumerate() {
        let at = at.key("R_lite").index(i);
        let ranks = idset(at.member(entry, "rank")?, &at.key("rank"))?;
        let union = all_ranks.union(&ranks);
        if union.len() != all_ranks.len() + ranks.len() {
            return Err(at.key("rank").error("a rank appears in two R_lite entries"));
        }
        all_ranks = union;
        let mut children = Vec::new();
        let mut per_rank: u128 = 1;
        if let Some(c) = entry.get("children") {
            let at = at.key("children");
            for (kind, ids) in at.object(c)? {
                let set = idset(ids, &at.key(kind))?;
                per_rank += set.len();
                children.push((kind.clone(), set));
            }
        }
        vertices += ranks.len() * per_rank;
        if vertices > GRAPH_VERTICES_MAX as u128 {
            let what = format!("{vertices} vertices");
            return Err(ReadError::limit(
                Location::Path(at.0),
                what,
                GRAPH_VERTICES_MAX,
            ));
        }
        parsed.push((ranks, children));
    }

    let hosts = nodelist(exec, &at)?;
    if hosts.len() as u128 != all_ranks.len() {
        let msg = format!("{} hosts for {} ranks", hosts.len(), all_ranks.len());
        return Err(at.key("nodelist").error(msg));
    }
    let host_of: BTreeMap<u64, &str> = all_ranks
        .iter()
        .zip(hosts.iter().map(String::as_str))
        .collect();
    let properties = properties(exec, &at, &all_ranks)?;

    // Below the vertex bound, checked above; a tree has one edge fewer than vertices.
    let count = vertices as usize;
    let mut b = GraphBuilder::with_capacity(count, count - 1);
    let none = b.intern("");
    let node_kind = b.intern("node");
    let cluster_sym = b.intern("cluster");
    let cluster = b.add_vertex_syms(cluster_sym, cluster_sym, None, 0, -1, 1, none, Status::Up);
    for (ranks, children) in &parsed {
        let kinds: Vec<Sym> = children.iter().map(|(kind, _)| b.intern(kind)).collect();
        for rank in ranks.iter() {
            let host = host_of.get(&rank).copied().unwrap_or_default();
            let rank_i = i64::try_from(rank).map_err(|_| {
                at.key("R_lite")
                    .error(format!("rank {rank} is out of range"))
            })?;
            let (basename, id) = host_id(host).ok_or_else(|| {
                at.key("nodelist").error(format!(
                    "error splitting hostname={host}: its number does not fit a 64-bit signed integer"
                ))
            })?;
            let basename = b.intern(basename);
            let name = b.intern(host);
            let node = b.add_vertex_syms(
                node_kind,
                basename,
                Some(name),
                id,
                rank_i,
                1,
                none,
                Status::Up,
            );
            for (name, ranks) in &properties {
                if ranks.contains(rank) {
                    b.set_property(node, name, "");
                }
            }
            b.add_containment_edge(cluster, node);
            add_children(&mut b, node, rank_i, children, &kinds, none, &at)?;
        }
    }
    Ok(b.finish()?)
}

/// A node's basename and id from its hostname, as Fluxion's reader splits it
/// (`resource_reader_base_t::split_hostname`): the trailing digits are the id (-1 without
/// any); `None` when they do not fit an `i64`, which Fluxion's `stoll` refuses and so does
/// the load.
fn host_id(host: &str) -> Option<(&str, i64)> {
    let digits = host.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Some((host, -1));
    }
    let (basename, number) = host.split_at(host.len() - digits);
    // A name of digits only keeps it whole as its basename.
    let basename = if basename.is_empty() { host } else { basename };
    Some((basename, number.parse().ok()?))
}

/// [`read_rv1exec`] on a file; errors start with the file's path.
pub fn read_rv1exec_file(path: impl AsRef<Path>) -> Result<ResourceGraph, ReadError> {
    read_file(path.as_ref(), read_rv1exec)
}

fn add_children(
    b: &mut GraphBuilder,
    node: VertexId,
    rank: i64,
    children: &[(String, IdSet)],
    kinds: &[Sym],
    none: Sym,
    at: &At,
) -> Result<(), ReadError> {
    for ((kind, ids), &sym) in children.iter().zip(kinds) {
        for id in ids.iter() {
            let id = i64::try_from(id).map_err(|_| {
                at.key("R_lite")
                    .error(format!("{kind} id {id} is out of range"))
            })?;
            let v = b.add_vertex_syms(sym, sym, None, id, rank, 1, none, Status::Up);
            b.add_containment_edge(node, v);
        }
    }
    Ok(())
}

/// An idset of the R, read as flux-core's `idset_decode` reads it (RFC 22, strict), as
/// Fluxion's reader does for the ranks, the children's ids and the properties.
fn idset(value: &Json, at: &At) -> Result<IdSet, ReadError> {
    IdSet::parse_rfc22(at.str(value)?).map_err(|e| at.error(e.to_string()))
}

/// The hostnames of `execution.nodelist`, expanded in order.
fn nodelist(exec: &Json, at: &At) -> Result<Vec<String>, ReadError> {
    let at = at.key("nodelist");
    let list = exec
        .get("nodelist")
        .ok_or_else(|| at.error("missing (rv1exec needs hostnames)"))?;
    let mut hosts = Vec::new();
    for (i, item) in at.array(list)?.iter().enumerate() {
        let at = at.index(i);
        let mut expanded = decode_hostlist(at.str(item)?).map_err(|e| at.error(e.to_string()))?;
        if hosts.len() + expanded.len() > GRAPH_VERTICES_MAX {
            return Err(ReadError::limit(
                Location::Path(at.0),
                "hosts",
                GRAPH_VERTICES_MAX,
            ));
        }
        hosts.append(&mut expanded);
    }
    Ok(hosts)
}

/// `execution.properties`: property name → ranks, each rank one of R's.
fn properties(exec: &Json, at: &At, ranks: &IdSet) -> Result<Vec<(String, IdSet)>, ReadError> {
    let Some(props) = exec.get("properties").filter(|p| **p != Json::Null) else {
        return Ok(Vec::new());
    };
    let at = at.key("properties");
    let mut out = Vec::new();
    for (name, value) in at.object(props)? {
        let at = at.key(name);
        let set = idset(value, &at)?;
        if !set.is_subset(ranks) {
            return Err(at.error(format!("ranks {set} are not all ranks of R_lite")));
        }
        out.push((name.clone(), set));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testdata::{child_names, child_type_runs, resource_file};
    use proptest::prelude::*;

    const R: &str = r#"{"version": 1, "execution": {
        "R_lite": [{"rank": "0-1", "children": {"gpu": "0-1", "core": "0-3"}},
                   {"rank": "3", "children": {"core": "7"}}],
        "nodelist": ["node[08-09]", "login3"],
        "properties": {"ssd": "1,3"}, "starttime": 0, "expiration": 0}}"#;

    #[test]
    fn a_host_number_beyond_i64_fails_the_load_as_in_fluxion() {
        let r = |host: &str| {
            format!(
                r#"{{"version": 1, "execution": {{"R_lite": [{{"rank": "0", "children": {{"core": "0"}}}}],
                "nodelist": ["{host}"], "starttime": 0, "expiration": 0}}}}"#
            )
        };
        let err = read_rv1exec(&r("fluke9223372036854775808")).unwrap_err();
        assert!(
            err.to_string()
                .contains("error splitting hostname=fluke9223372036854775808"),
            "{err}"
        );
        let g = read_rv1exec(&r("fluke9223372036854775807")).unwrap();
        let n = g.find_path("/cluster0/fluke9223372036854775807").unwrap();
        assert_eq!((g.basename(n), g.id(n)), ("fluke", i64::MAX));
        let g = read_rv1exec(&r("0042")).unwrap();
        let n = g.find_path("/cluster0/0042").unwrap();
        assert_eq!((g.basename(n), g.id(n)), ("0042", 42));
    }

    #[test]
    fn two_hosts_named_alike_are_both_at_their_path() {
        let g = read_rv1exec(
            r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}],
                "nodelist": ["fluke", "fluke"], "starttime": 0, "expiration": 0}}"#,
        )
        .unwrap();
        let both = g.find_paths("/cluster0/fluke");
        assert_eq!(both.len(), 2);
        assert_eq!(g.find_path("/cluster0/fluke"), Some(both[0]));
        assert_eq!(g.find_paths("/cluster0/fluke/core0").len(), 2);
        assert!(g.find_paths("/cluster0/flukes").is_empty());
        assert!(g.find_paths("/other0/fluke").is_empty());
    }

    #[test]
    fn builds_cluster_nodes_and_children_in_r_order() {
        let g = read_rv1exec(R).unwrap();
        assert_eq!(g.name(g.root()), "cluster0");
        assert_eq!(child_names(&g, g.root()), ["node08", "node09", "login3"]);
        let n = g.find_path("/cluster0/node09").unwrap();
        assert_eq!((g.basename(n), g.id(n), g.rank(n)), ("node", 9, 1));
        assert_eq!(
            child_names(&g, n),
            ["gpu0", "gpu1", "core0", "core1", "core2", "core3"]
        );
        assert_eq!(g.rank(VertexId(g.children(n)[0])), 1);
        assert!(g.has_property(n, "ssd") && !g.has_property(VertexId(1), "ssd"));
        let login = g.find_path("/cluster0/login3").unwrap();
        assert_eq!(
            (g.basename(login), g.id(login), g.rank(login)),
            ("login", 3, 3)
        );
        assert_eq!(child_names(&g, login), ["core7"]);
    }

    #[test]
    fn errors_name_the_json_path() {
        let err = |text: &str| read_rv1exec(text).unwrap_err().to_string();
        assert_eq!(
            err(&R.replace("\"version\": 1", "\"version\": 2")),
            "version: expected 1, found 2"
        );
        assert!(
            err(&R.replace("login3", "login[3-4]"))
                .starts_with("execution.nodelist: 4 hosts for 3 ranks")
        );
        assert!(
            err(&R.replace("\"0-3\"", "\"0-x\""))
                .starts_with("execution.R_lite[0].children.core: idset")
        );
        assert!(
            err(&R.replace("\"rank\": \"3\"", "\"rank\": \"1\"")).contains("two R_lite entries")
        );
        assert!(
            err(&R.replace("\"1,3\"", "\"2\""))
                .starts_with("execution.properties.ssd: ranks 2 are")
        );
        assert!(err(&R.replace("\"0-3\"", "\"0-2000000000\"")).contains("exceed the limit"));
        assert_eq!(err(r#"{"version": 1}"#), "missing \"execution\"");
    }

    /// Fluxion reads every idset of an R with flux-core's `idset_decode` (checked against
    /// its binary: `1,0`, `0,0-1`, `01` and `1-1` refuse the load, `0-1,` loads).
    #[test]
    fn idsets_are_read_as_rfc_22_says() {
        let with_rank = |rank: &str| R.replace("\"rank\": \"3\"", &format!("\"rank\": \"{rank}\""));
        assert!(read_rv1exec(&with_rank("3,")).is_ok());
        for bad in ["4,3", "3,3-4", "03", "3-3"] {
            let e = read_rv1exec(&with_rank(bad)).unwrap_err().to_string();
            assert!(
                e.starts_with("execution.R_lite[1].rank: idset"),
                "{bad}: {e}"
            );
        }
        let e = read_rv1exec(&R.replace("\"0-3\"", "\"3,0-2\"")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("execution.R_lite[0].children.core: idset")
        );
    }

    #[test]
    fn conformance_r_documents_load() {
        let Some(path) = resource_file("rv1exec/tiny_rv1exec.json") else {
            return;
        };
        let g = read_rv1exec_file(path).unwrap();
        assert_eq!(g.len(), 1 + 2 * (1 + 16 + 4));
        let node0 = g.find_path("/cluster0/node0").unwrap();
        assert_eq!(child_type_runs(&g, node0), ["core", "gpu"]);
        for rel in [
            "rank0_cancel-jgfgraph.json",
            "rank0_cancel_nonexcl.json",
            "rank1_cancel.json",
            "rank1_cancel_nonexcl.json",
            "ranks_cancel_crossracks_simple.json",
        ] {
            let Some(path) = resource_file(&format!("rv1exec/cancel/{rel}")) else {
                return;
            };
            read_rv1exec_file(&path).unwrap_or_else(|e| panic!("{e}"));
        }
        let path = resource_file("rv1exec/cancel/ranks_cancel_crossracks_simple.json").unwrap();
        let g = read_rv1exec_file(path).unwrap();
        let n = g.find_path("/cluster0/node19").unwrap();
        assert_eq!((g.rank(n), g.children(n).len()), (19, 36 + 2 + 8));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = read_rv1exec(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn damaged_documents_never_panic(at in 0usize..300, len in 0usize..10, junk in "[\\[\\]{}:,\"a-z0-9 -]{0,6}") {
            let mut text = R.to_string();
            let at = at.min(text.len());
            let end = (at + len).min(text.len());
            text.replace_range(at..end, &junk);
            let _ = read_rv1exec(&text);
        }
    }
}
