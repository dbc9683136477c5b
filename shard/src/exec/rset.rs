//! What a job got, per node, read back from its RFC 20 R: the numbers the `exec`
//! executor puts in the job's environment, and the core and GPU ids a node agent confines
//! the job's tasks to.
//!
//! R's `R_lite` groups ranks that have the same children (`{"rank": "0-1", "children":
//! {"core": "0-3"}}`) and `nodelist` names the hosts in rank order. The ranks are the
//! cluster graph's, not positions in the nodelist, so the i-th smallest rank is the i-th
//! host.

use serde_json::Value;
use shardsched_resource::{decode_hostlist, parse_idset};

/// Most ids one idset of an R may hold (ranks, cores or GPUs of one entry).
const IDS_PER_SET_MAX: usize = 1 << 20;

/// One node of an allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeShare {
    /// Host name.
    pub host: String,
    /// The ids of the cores allocated on it, ascending.
    pub core_ids: Vec<u32>,
    /// The ids of the GPUs allocated on it, ascending.
    pub gpu_ids: Vec<u32>,
}

impl NodeShare {
    /// Cores allocated on it.
    pub fn cores(&self) -> u64 {
        self.core_ids.len() as u64
    }

    /// GPUs allocated on it.
    pub fn gpus(&self) -> u64 {
        self.gpu_ids.len() as u64
    }
}

/// The allocation, node by node in rank order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RSummary {
    /// The nodes.
    pub nodes: Vec<NodeShare>,
}

impl RSummary {
    /// Reads an R document. Errors name the field that is wrong.
    pub fn parse(r_json: &str) -> Result<RSummary, String> {
        let r: Value = serde_json::from_str(r_json).map_err(|e| format!("R is not JSON: {e}"))?;
        let execution = r.get("execution").ok_or("R has no `execution` object")?;
        let mut hosts = Vec::new();
        for entry in execution
            .get("nodelist")
            .and_then(Value::as_array)
            .ok_or("R has no `execution.nodelist` list")?
        {
            let text = entry
                .as_str()
                .ok_or("`execution.nodelist` holds a non-string")?;
            hosts.extend(decode_hostlist(text).map_err(|e| e.to_string())?);
        }
        // rank → (core ids, gpu ids)
        let mut per_rank: std::collections::BTreeMap<u64, (Vec<u32>, Vec<u32>)> =
            Default::default();
        for entry in execution
            .get("R_lite")
            .and_then(Value::as_array)
            .ok_or("R has no `execution.R_lite` list")?
        {
            let ranks = idset_field(entry, "rank")?;
            let children = entry.get("children");
            let ids = |kind: &str| -> Result<Vec<u32>, String> {
                let bad = |e: String| format!("`R_lite[].children.{kind}`: {e}");
                match children.and_then(|c| c.get(kind)) {
                    None => Ok(Vec::new()),
                    Some(Value::String(s)) => parse_idset(s, IDS_PER_SET_MAX)
                        .map_err(|e| bad(e.to_string()))?
                        .into_iter()
                        .map(|id| u32::try_from(id).map_err(|_| bad(format!("id {id}"))))
                        .collect(),
                    Some(_) => Err(format!("`R_lite[].children.{kind}` is not an idset")),
                }
            };
            let (cores, gpus) = (ids("core")?, ids("gpu")?);
            for rank in ranks {
                let slot = per_rank.entry(rank).or_default();
                slot.0.extend(&cores);
                slot.1.extend(&gpus);
                slot.0.sort_unstable();
                slot.0.dedup();
                slot.1.sort_unstable();
                slot.1.dedup();
            }
        }
        if per_rank.len() != hosts.len() {
            return Err(format!(
                "R names {} hosts but {} ranks",
                hosts.len(),
                per_rank.len()
            ));
        }
        let nodes = hosts
            .into_iter()
            .zip(per_rank.into_values())
            .map(|(host, (core_ids, gpu_ids))| NodeShare {
                host,
                core_ids,
                gpu_ids,
            })
            .collect();
        Ok(RSummary { nodes })
    }

    /// Cores over all nodes.
    pub fn cores(&self) -> u64 {
        self.nodes.iter().map(NodeShare::cores).sum()
    }

    /// GPUs over all nodes.
    pub fn gpus(&self) -> u64 {
        self.nodes.iter().map(NodeShare::gpus).sum()
    }
}

fn idset_field(entry: &Value, field: &str) -> Result<Vec<u64>, String> {
    let text = entry
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`R_lite[].{field}` is missing or not a string"))?;
    parse_idset(text, IDS_PER_SET_MAX).map_err(|e| format!("`R_lite[].{field}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nodes_in_rank_order() {
        let r = r#"{"version":1,"execution":{"R_lite":[
            {"rank":"5,9","children":{"core":"0-3"}},
            {"rank":"7","children":{"core":"0-1","gpu":"0-1"}}],
            "nodelist":["node[5,7,9]"],"starttime":0,"expiration":10}}"#;
        let s = RSummary::parse(r).expect("R");
        let hosts: Vec<_> = s
            .nodes
            .iter()
            .map(|n| (n.host.as_str(), n.cores(), n.gpus()))
            .collect();
        assert_eq!(
            hosts,
            vec![("node5", 4, 0), ("node7", 2, 2), ("node9", 4, 0)]
        );
        assert_eq!((s.cores(), s.gpus()), (10, 2));
    }

    #[test]
    fn bad_r_names_the_field() {
        let e = RSummary::parse(r#"{"execution":{"nodelist":["n0"],"R_lite":[{"rank":"x"}]}}"#)
            .expect_err("bad rank");
        assert!(e.contains("rank"), "{e}");
        let e = RSummary::parse(r#"{"execution":{"nodelist":["n[0-1]"],"R_lite":[{"rank":"0"}]}}"#)
            .expect_err("count mismatch");
        assert!(e.contains("2 hosts but 1 ranks"), "{e}");
        assert!(RSummary::parse("[").is_err());
    }

    proptest::proptest! {
        /// Any text is read or refused, never a panic.
        #[test]
        fn any_text_is_read_or_refused(text in ".{0,200}") {
            let _ = RSummary::parse(&text);
        }

        /// An R written the way the matcher writes it (ranks of the cluster, hosts in rank
        /// order, ranks with the same children grouped) reads back node by node.
        #[test]
        fn written_r_reads_back(
            shares in proptest::collection::vec((1u64..4, 0u64..9, 0u64..3), 1..12),
        ) {
            let mut rank = 0u64;
            let mut nodes = Vec::new();
            let mut groups: Vec<(Vec<u64>, (u64, u64))> = Vec::new();
            for (gap, cores, gpus) in shares {
                rank += gap;
                nodes.push(NodeShare {
                    host: format!("n{rank}"),
                    core_ids: (0..cores as u32).collect(),
                    gpu_ids: (0..gpus as u32).collect(),
                });
                match groups.iter_mut().find(|g| g.1 == (cores, gpus)) {
                    Some(g) => g.0.push(rank),
                    None => groups.push((vec![rank], (cores, gpus))),
                }
            }
            let r_lite: Vec<Value> = groups
                .iter()
                .map(|(ranks, (cores, gpus))| {
                    let mut children = serde_json::Map::new();
                    if *cores > 0 {
                        children.insert("core".into(), format!("0-{}", cores - 1).into());
                    }
                    if *gpus > 0 {
                        children.insert("gpu".into(), format!("0-{}", gpus - 1).into());
                    }
                    serde_json::json!({
                        "rank": shardsched_resource::format_idset(ranks.iter().copied()),
                        "children": children,
                    })
                })
                .collect();
            let hosts: Vec<&str> = nodes.iter().map(|n| n.host.as_str()).collect();
            let r = serde_json::json!({"version": 1, "execution": {
                "R_lite": r_lite,
                "nodelist": [shardsched_resource::encode_hostlist(&hosts)],
            }});
            let read = RSummary::parse(&r.to_string()).expect("R reads");
            proptest::prop_assert_eq!(read.nodes, nodes);
        }
    }
}
