//! RFC 31 constraints compiled for matching: which nodes a job may use.
//!
//! Constraints are judged at node vertices, as Fluxion does: a node that fails the
//! constraint is pruned with its whole subtree. Hostlists and rank idsets are expanded once
//! per match into sets, so the check on each node is a hash lookup.

use std::collections::HashSet;

use shardsched_jobspec::Constraint;
use shardsched_resource::{IdSet, ResourceGraph, VertexId, decode_hostlist};

use crate::MatchError;

/// A constraint ready to be evaluated against nodes.
#[derive(Clone, Debug)]
pub enum NodeConstraint {
    /// (property, required) pairs: `^p` compiles to (p, false).
    Properties(Vec<(String, bool)>),
    Hosts(HashSet<String>),
    Ranks(IdSet),
    And(Vec<NodeConstraint>),
    Or(Vec<NodeConstraint>),
    Not(Vec<NodeConstraint>),
}

impl NodeConstraint {
    /// Compiles `c`, expanding hostlists and idsets.
    pub fn compile(c: &Constraint) -> Result<NodeConstraint, MatchError> {
        let bad =
            |what: &str, e: String| MatchError::BadRequest(format!("constraints: {what}: {e}"));
        Ok(match c {
            Constraint::Properties(ps) => NodeConstraint::Properties(
                ps.iter()
                    .map(|p| match p.strip_prefix('^') {
                        Some(neg) => (neg.to_string(), false),
                        None => (p.clone(), true),
                    })
                    .collect(),
            ),
            Constraint::Hostlist(hls) => {
                let mut hosts = HashSet::new();
                for h in hls {
                    hosts.extend(
                        decode_hostlist(h)
                            .map_err(|e| bad(&format!("hostlist {h:?}"), e.to_string()))?,
                    );
                }
                NodeConstraint::Hosts(hosts)
            }
            Constraint::Ranks(rs) => {
                let joined = rs.join(",");
                NodeConstraint::Ranks(
                    IdSet::parse(&joined)
                        .map_err(|e| bad(&format!("ranks {joined:?}"), e.to_string()))?,
                )
            }
            Constraint::And(cs) => {
                NodeConstraint::And(cs.iter().map(Self::compile).collect::<Result<_, _>>()?)
            }
            Constraint::Or(cs) => {
                NodeConstraint::Or(cs.iter().map(Self::compile).collect::<Result<_, _>>()?)
            }
            Constraint::Not(cs) => {
                NodeConstraint::Not(cs.iter().map(Self::compile).collect::<Result<_, _>>()?)
            }
        })
    }

    /// Whether node `v` satisfies the constraint.
    pub fn admits(&self, g: &ResourceGraph, v: VertexId) -> bool {
        match self {
            NodeConstraint::Properties(ps) => {
                ps.iter().all(|(p, want)| g.has_property(v, p) == *want)
            }
            NodeConstraint::Hosts(hosts) => hosts.contains(g.name(v)),
            NodeConstraint::Ranks(ranks) => {
                u64::try_from(g.rank(v)).is_ok_and(|r| ranks.contains(r))
            }
            NodeConstraint::And(cs) => cs.iter().all(|c| c.admits(g, v)),
            NodeConstraint::Or(cs) => cs.iter().any(|c| c.admits(g, v)),
            NodeConstraint::Not(cs) => !cs.iter().all(|c| c.admits(g, v)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use shardsched_resource::{CONTAINMENT, GraphBuilder, VertexSpec};

    #[test]
    fn properties_hosts_ranks_and_combinators() {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        let mut nodes = Vec::new();
        for i in 0..4 {
            let mut s = VertexSpec::new("node", "node", i);
            s.rank = i;
            if i % 2 == 0 {
                s.properties.insert("ssd".into(), String::new());
            }
            let n = b.add_vertex(s);
            b.add_edge(c, n, CONTAINMENT);
            nodes.push(n);
        }
        let g = b.finish().unwrap();
        let admitted = |c: Constraint| {
            let nc = NodeConstraint::compile(&c).unwrap();
            nodes.iter().filter(|&&n| nc.admits(&g, n)).count()
        };
        assert_eq!(admitted(Constraint::Properties(vec!["ssd".into()])), 2);
        assert_eq!(admitted(Constraint::Properties(vec!["^ssd".into()])), 2);
        assert_eq!(admitted(Constraint::Hostlist(vec!["node[0-2]".into()])), 3);
        assert_eq!(admitted(Constraint::Ranks(vec!["3".into()])), 1);
        let both = Constraint::And(vec![
            Constraint::Properties(vec!["ssd".into()]),
            Constraint::Hostlist(vec!["node[1-3]".into()]),
        ]);
        assert_eq!(admitted(both.clone()), 1);
        assert_eq!(admitted(Constraint::Not(vec![both])), 3);
        assert!(NodeConstraint::compile(&Constraint::Hostlist(vec!["node[0-".into()])).is_err());
    }
}
