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
#[derive(Clone, Debug, Default)]
pub struct ScoreOrder {
    /// Indexed by type symbol.
    monotone: Vec<bool>,
}

impl ScoreOrder {
    /// Computes the order facts of `g` under `policy` (one pass over the tree).
    pub fn new(g: &ResourceGraph, tree: &dyn Tree, policy: &MatchPolicy) -> ScoreOrder {
        let node = g.sym("node");
        let nkinds = g.sym_count();
        let mut monotone = vec![true; nkinds];
        let mut last: Vec<Option<i64>> = vec![None; nkinds];
        // Preorder with the node-centric term of the node ancestors carried down.
        let mut stack = vec![(tree.root(), 0i64)];
        while let Some((v, inherited)) = stack.pop() {
            let own = if policy.node_centric && Some(g.kind(v)) == node {
                node_factor(g, v)
            } else {
                0
            };
            let k = g.kind(v).0 as usize;
            let score = inherited + g.id(v) + 2;
            if last[k].is_some_and(|l| score <= l) {
                monotone[k] = false;
            }
            last[k] = Some(score);
            for &c in tree.children(v).iter().rev() {
                stack.push((VertexId(c), inherited + own));
            }
        }
        ScoreOrder { monotone }
    }

    /// Whether scores of `kind` strictly increase along the graph order.
    pub fn monotone(&self, kind: Sym) -> bool {
        self.monotone.get(kind.0 as usize).copied().unwrap_or(false)
    }
}
