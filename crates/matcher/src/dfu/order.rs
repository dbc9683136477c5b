//! `first`'s sticky child order (Fluxion's `by_outedges`).

use shardsched_resource::{ResourceGraph, VertexId};

use super::Tree;

/// `first`'s learned child order (Fluxion's `by_outedges`): each vertex's children sorted by
/// (weight of the edge into them, uniq_id), both descending. Weights start at `u64::MAX`.
#[derive(Clone, Debug, Default)]
pub struct EdgeOrder {
    start: Vec<u32>,
    order: Vec<u32>,
    pub weight: Vec<u64>,
    uniq: Vec<i64>,
}

impl EdgeOrder {
    pub fn new(g: &ResourceGraph, tree: &dyn Tree) -> EdgeOrder {
        let n = g.len();
        let mut start = Vec::with_capacity(n + 1);
        let mut order = Vec::new();
        let uniq: Vec<i64> = g.vertices().map(|v| g.uniq_id(v)).collect();
        for v in g.vertices() {
            start.push(order.len() as u32);
            let from = order.len();
            order.extend_from_slice(tree.children(v));
            // std::map keyed (weight, uniq_id) with std::greater: equal keys keep the first.
            let kids = &mut order[from..];
            // Readers list children by ascending uniq_id as a rule: reversed, they are in
            // order and distinct, with no sort (this runs for every vertex at start).
            if kids.is_sorted_by(|a, b| uniq[*a as usize] < uniq[*b as usize]) {
                kids.reverse();
            } else if kids.len() > 1 {
                kids.sort_by(|a, b| uniq[*b as usize].cmp(&uniq[*a as usize]));
                let mut keep = 1;
                for i in 1..kids.len() {
                    if uniq[kids[i] as usize] != uniq[kids[keep - 1] as usize] {
                        kids[keep] = kids[i];
                        keep += 1;
                    }
                }
                order.truncate(from + keep);
            }
        }
        start.push(order.len() as u32);
        EdgeOrder {
            start,
            order,
            weight: vec![u64::MAX; n],
            uniq,
        }
    }

    /// This order for `g` after `attach` or `remove` changed it (same vertex ids): the
    /// children `tree` gives now, ordered by the weights learned so far (an edge `attach`
    /// added starts at `u64::MAX`, as every edge did).
    pub fn regrown(&self, g: &ResourceGraph, tree: &dyn Tree) -> EdgeOrder {
        let mut new = EdgeOrder::new(g, tree);
        let kept = self.weight.len().min(new.weight.len());
        new.weight[..kept].copy_from_slice(&self.weight[..kept]);
        let (weight, uniq) = (&new.weight, &new.uniq);
        for v in 0..g.len() {
            let (s, e) = (new.start[v] as usize, new.start[v + 1] as usize);
            new.order[s..e].sort_by(|&a, &b| {
                let key = |c: u32| (weight[c as usize], uniq[c as usize]);
                key(b).cmp(&key(a))
            });
        }
        new
    }

    /// `v`'s children in visiting order.
    pub fn children(&self, v: VertexId) -> &[u32] {
        let s = self.start[v.index()] as usize;
        let e = self.start[v.index() + 1] as usize;
        &self.order[s..e]
    }

    /// Sets the weight of the edge `parent → child` and moves the child to its place.
    pub fn set_weight(&mut self, parent: VertexId, child: u32, w: u64) {
        self.weight[child as usize] = w;
        let s = self.start[parent.index()] as usize;
        let e = self.start[parent.index() + 1] as usize;
        let list = &mut self.order[s..e];
        let Some(pos) = list.iter().position(|&c| c == child) else {
            return;
        };
        let (weight, uniq) = (&self.weight, &self.uniq);
        let key = |c: u32| (weight[c as usize], uniq[c as usize]);
        let mine = key(child);
        // Where it goes among the others: before the first with a smaller key.
        let at = list
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != pos)
            .position(|(_, &c)| key(c) < mine)
            .unwrap_or(list.len() - 1);
        if at < pos {
            list[at..=pos].rotate_right(1);
        } else if at > pos {
            list[pos..=at].rotate_left(1);
        }
    }
}
