//! Scores under the id policies, and where the graph's order already says which is best.

use shardsched_resource::{ResourceGraph, Sym, VertexId};

use super::Tree;
use crate::policy::MatchPolicy;

/// Fluxion's multilevel factor of a node under node-centric policies:
/// `(id + 2) · 10000 + |uniq_id mod 10000 − 1|`. It lifts the node's descendants (a node's
/// own score leaves it out).
pub fn node_factor(g: &ResourceGraph, v: VertexId) -> i64 {
    const MULTIPLY_BY: i64 = 10_000;
    let add = g.id(v).saturating_add(2);
    let tie = (g.uniq_id(v) % MULTIPLY_BY - 1).abs();
    add.saturating_mul(MULTIPLY_BY).saturating_add(tie)
}

/// For which types every vertex's score strictly increases along the graph's preorder
/// under a policy: for those, the best candidates of a type are the last ones found (high)
/// or the first (low) walking in graph order, so a walk in that order may stop once it has
/// its count and choose exactly what a full walk would.
///
/// A decision among one vertex's own children only (a slot forming at it, a matched
/// resource choosing its contents) needs less: the order among siblings.
#[derive(Clone, Debug, Default)]
pub struct ScoreOrder {
    /// Indexed by type symbol.
    monotone: Vec<bool>,
    /// Indexed by type symbol: among every vertex's children of the type.
    among_siblings: Vec<bool>,
    /// Indexed by type symbol: among every vertex's grandchildren of the type.
    among_cousins: Vec<bool>,
    /// Indexed by type symbol: every vertex of the type has size 1.
    unit: Vec<bool>,
}

/// Which candidates a decision sees, for [`ScoreOrder::ordered`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Among {
    /// Candidates from anywhere below the root.
    Walk,
    /// One vertex's own children.
    Siblings,
    /// One vertex's grandchildren (slots formed at its children, chosen by it).
    Cousins,
}

impl ScoreOrder {
    /// Computes the order facts of `g` under `policy` (one pass over the tree), or none
    /// (every type unordered) under a policy whose walks never ask
    /// ([`MatchPolicy::stops_by_score_order`]): the pass was a fifth of `first`'s start-up
    /// on a 1,024-node graph.
    pub fn new(g: &ResourceGraph, tree: &dyn Tree, policy: &MatchPolicy) -> ScoreOrder {
        if !policy.stops_by_score_order() {
            return ScoreOrder::default();
        }
        let node = g.sym("node");
        let nkinds = g.sym_count();
        let mut monotone = vec![true; nkinds];
        let mut among_siblings = vec![true; nkinds];
        let mut among_cousins = vec![true; nkinds];
        let mut unit = vec![true; nkinds];
        let mut last: Vec<Option<i64>> = vec![None; nkinds];
        // The last sibling (cousin) id of each type, and the parent (grandparent) it was
        // under.
        let mut last_sibling: Vec<(u32, i64)> = vec![(u32::MAX, 0); nkinds];
        let mut last_cousin: Vec<(u32, i64)> = vec![(u32::MAX, 0); nkinds];
        // Preorder with the node-centric term of the node ancestors carried down.
        let mut stack = vec![(tree.root(), 0i64)];
        while let Some((v, inherited)) = stack.pop() {
            let own = if policy.node_centric && Some(g.kind(v)) == node {
                node_factor(g, v)
            } else {
                0
            };
            let k = g.kind(v).0 as usize;
            unit[k] &= g.size(v) == 1;
            let score = inherited + g.id(v) + 2;
            if last[k].is_some_and(|l| score <= l) {
                monotone[k] = false;
            }
            last[k] = Some(score);
            for &c in tree.children(v) {
                let c_own = if policy.node_centric && Some(g.kind(VertexId(c))) == node {
                    node_factor(g, VertexId(c))
                } else {
                    0
                };
                // Siblings share the node-centric term: their ids decide.
                let ck = g.kind(VertexId(c)).0 as usize;
                let id = g.id(VertexId(c));
                if last_sibling[ck].0 == v.0 && id <= last_sibling[ck].1 {
                    among_siblings[ck] = false;
                }
                last_sibling[ck] = (v.0, id);
                for &gc in tree.children(VertexId(c)) {
                    // Cousins differ by their parent's node-centric term, if any.
                    let gk = g.kind(VertexId(gc)).0 as usize;
                    let gid = c_own + g.id(VertexId(gc));
                    if last_cousin[gk].0 == v.0 && gid <= last_cousin[gk].1 {
                        among_cousins[gk] = false;
                    }
                    last_cousin[gk] = (v.0, gid);
                }
            }
            for &c in tree.children(v).iter().rev() {
                stack.push((VertexId(c), inherited + own));
            }
        }
        ScoreOrder {
            monotone,
            among_siblings,
            among_cousins,
            unit,
        }
    }

    /// Whether scores of `kind` strictly increase along the graph order.
    pub fn monotone(&self, kind: Sym) -> bool {
        self.monotone.get(kind.0 as usize).copied().unwrap_or(false)
    }

    /// Whether every vertex of `kind` has size 1 (so each backs one unit of a slot).
    pub fn unit_sized(&self, kind: Sym) -> bool {
        self.unit.get(kind.0 as usize).copied().unwrap_or(false)
    }

    /// Whether scores of `kind` strictly increase along the graph order among the
    /// candidates a decision sees.
    pub fn ordered(&self, kind: Sym, among: Among) -> bool {
        let flags = match among {
            Among::Walk => &self.monotone,
            Among::Siblings => &self.among_siblings,
            Among::Cousins => &self.among_cousins,
        };
        flags.get(kind.0 as usize).copied().unwrap_or(false)
    }
}

/// The variation policy's score of a vertex: its `perf_class` property read as C's `stoi`
/// does (leading blanks and sign, then digits), 9999 when missing, unreadable, negative or
/// above 9999.
pub fn perf_class(g: &ResourceGraph, v: VertexId) -> i64 {
    const WORST: i64 = 9999;
    let Some(text) = g.properties(v).and_then(|p| p.get("perf_class")) else {
        return WORST;
    };
    let s = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return WORST;
    }
    let Ok(n) = digits[..end].parse::<i64>() else {
        return WORST;
    };
    let n = if neg { -n } else { n };
    if !(i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&n) || !(0..=WORST).contains(&n) {
        return WORST;
    }
    n
}

#[cfg(test)]
mod tests {
    use shardsched_resource::{CONTAINMENT, GraphBuilder, VertexSpec};

    use super::*;

    /// A cluster of two nodes (ids `node_ids`) with two cores each, core ids 0..4 in graph
    /// order.
    fn graph(node_ids: [i64; 2]) -> ResourceGraph {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        let mut core_id = 0;
        for id in node_ids {
            let n = b.add_vertex(VertexSpec::new("node", "node", id));
            b.add_edge(c, n, CONTAINMENT);
            for _ in 0..2 {
                let core = b.add_vertex(VertexSpec::new("core", "core", core_id));
                b.add_edge(n, core, CONTAINMENT);
                core_id += 1;
            }
        }
        b.finish().expect("graph")
    }

    fn order(g: &ResourceGraph, policy: &str) -> ScoreOrder {
        ScoreOrder::new(g, g, &MatchPolicy::parse(policy).expect("policy"))
    }

    #[test]
    fn cousins_are_ordered_by_ids_and_their_parents_node_centric_term() {
        // Core ids rise along the graph, node ids fall: under `low` the cores are in order
        // everywhere; under `lonode` a core's score carries its node's id, so the cores of
        // the second node score below those of the first.
        let g = graph([5, 3]);
        let core = g.sym("core").expect("core");
        let low = order(&g, "low");
        for among in [Among::Walk, Among::Siblings, Among::Cousins] {
            assert!(low.ordered(core, among), "low {among:?}");
        }
        let lonode = order(&g, "lonode");
        assert!(lonode.ordered(core, Among::Siblings));
        assert!(!lonode.ordered(core, Among::Cousins));
        assert!(!lonode.ordered(core, Among::Walk));
        assert!(lonode.unit_sized(core));
    }

    #[test]
    fn ids_restarting_per_parent_are_ordered_among_siblings_only() {
        let g = crate::test_support::two_node_graph();
        let core = g.sym("core").expect("core");
        let low = order(&g, "low");
        assert!(low.ordered(core, Among::Siblings));
        assert!(!low.ordered(core, Among::Cousins));
        assert!(!low.ordered(core, Among::Walk));
    }
}
