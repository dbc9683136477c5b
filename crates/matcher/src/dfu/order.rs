//! `first`'s sticky child order (Fluxion's `by_outedges`).

use shardsched_resource::{ResourceGraph, VertexId};

use super::Tree;

/// `first`'s learned child order (Fluxion's `by_outedges`): each vertex's children sorted by
/// (weight of the edge into them, uniq_id), both descending. Weights start at `u64::MAX`.
///
/// Until a weight changes among a vertex's children, they are in their first order: by
/// uniq_id, descending. Readers list children by ascending uniq_id as a rule, so that is the
/// tree's list reversed, and only the vertices whose order was learned (or whose list is
/// not in that order) keep a list of their own. Why: a list of every vertex's children, a
/// weight and a uniq_id each was 24 bytes a vertex written at start (1.45 MB, ~380 page
/// faults and 6 million instructions on the 1,024-node bench graph: `query`'s start took
/// 9.5 ms with it, 8.4 without), where `first` reorders the children of a thousand-odd
/// vertices there (the cluster, its racks, its nodes).
#[derive(Clone, Debug, Default)]
pub struct EdgeOrder {
    /// Where each vertex's own list starts in `lists`, plus one; 0 while its children are
    /// in their first order. Zeroed memory: pages of vertices never reordered stay unwritten.
    at: Vec<u32>,
    /// The lists kept: each its length, then the children in order.
    lists: Vec<u32>,
    /// The weight of the edge into each vertex, inverted (`!w`), so that the first weight,
    /// `u64::MAX`, is 0 and the vector starts as zeroed memory.
    inverted_weight: Vec<u64>,
    /// Each vertex's uniq_id when the graph gives some that differ from the vertex's
    /// position (else empty: the uniq_id is the position).
    uniq: Vec<i64>,
}

impl EdgeOrder {
    pub fn new(g: &ResourceGraph, tree: &dyn Tree) -> EdgeOrder {
        let n = g.len();
        let mut order = EdgeOrder {
            at: vec![0; n],
            lists: Vec::new(),
            inverted_weight: vec![0; n],
            uniq: g.own_uniq_ids().map(<[i64]>::to_vec).unwrap_or_default(),
        };
        let (start, list) = tree.child_lists();
        let mut end = start[0] as usize;
        for v in 0..n {
            let begin = end;
            end = start[v + 1] as usize;
            // Fewer than two children are in order: most vertices are leaves, and slicing
            // and testing every range was most of this (2.0 M instructions on the 1,024-node
            // bench graph, 1.2 M this way).
            if end - begin < 2 {
                continue;
            }
            let kids = &list[begin..end];
            // Reversed, they are in order and distinct: nothing to keep.
            let in_order = if order.uniq.is_empty() {
                kids.is_sorted_by(|a, b| a < b)
            } else {
                kids.is_sorted_by(|&a, &b| order.uniq_of(a) < order.uniq_of(b))
            };
            if in_order {
                continue;
            }
            // std::map keyed (weight, uniq_id) with std::greater: equal keys keep the first.
            let mut sorted = kids.to_vec();
            sorted.sort_by_key(|&c| std::cmp::Reverse(order.uniq_of(c)));
            sorted.dedup_by(|a, b| order.uniq_of(*a) == order.uniq_of(*b));
            push_list(&mut order.at, &mut order.lists, VertexId(v as u32), sorted);
        }
        order
    }

    /// This order for `g` after `attach` or `remove` changed it (same vertex ids): the
    /// children `tree` gives now, ordered by the weights learned so far (an edge `attach`
    /// added starts at `u64::MAX`, as every edge did).
    pub fn regrown(&self, g: &ResourceGraph, tree: &dyn Tree) -> EdgeOrder {
        let mut new = EdgeOrder::new(g, tree);
        let kept = self.inverted_weight.len().min(new.inverted_weight.len());
        new.inverted_weight[..kept].copy_from_slice(&self.inverted_weight[..kept]);
        // Only the children of a vertex with a learned weight among them can be out of
        // their first order.
        for v in g.vertices() {
            let learned = |&c: &u32| new.inverted_weight.get(c as usize).is_some_and(|&w| w != 0);
            if !tree.children(v).iter().any(learned) {
                continue;
            }
            let (weight, uniq) = (&new.inverted_weight, &new.uniq);
            let list = keep_first(&mut new.at, &mut new.lists, tree, v);
            list.sort_by_key(|&c| std::cmp::Reverse((!weight[c as usize], uniq_in(uniq, c))));
        }
        new
    }

    /// `v`'s children in visiting order, as a list and whether to read it backwards
    /// (`child_lists`: those of the tree this order was made for, [`Tree::child_lists`]).
    #[inline]
    pub fn children<'a>(
        &'a self,
        child_lists: (&'a [u32], &'a [u32]),
        v: VertexId,
    ) -> (&'a [u32], bool) {
        match self.at[v.index()] {
            0 => {
                let (start, list) = child_lists;
                let (s, e) = (start[v.index()] as usize, start[v.index() + 1] as usize);
                (&list[s..e], true)
            }
            at => {
                let s = at as usize;
                let len = self.lists[s - 1] as usize;
                (&self.lists[s..s + len], false)
            }
        }
    }

    /// The weight of the edge into `v`.
    #[inline]
    pub fn weight(&self, v: VertexId) -> u64 {
        !self.inverted_weight[v.index()]
    }

    /// Sets the weight of the edge `parent → child` and moves the child to its place.
    pub fn set_weight(&mut self, tree: &dyn Tree, parent: VertexId, child: u32, w: u64) {
        self.inverted_weight[child as usize] = !w;
        if !tree.children(parent).contains(&child) {
            return;
        }
        let (inverted_weight, uniq) = (&self.inverted_weight, &self.uniq);
        let key = |c: u32| (!inverted_weight[c as usize], uniq_in(uniq, c));
        let mine = key(child);
        let list = keep_first(&mut self.at, &mut self.lists, tree, parent);
        let Some(pos) = list.iter().position(|&c| c == child) else {
            return;
        };
        // Where it goes among the others: before the first with a smaller key. The others
        // are in order (keys differ: uniq_ids do), so a search of the side it moves to
        // finds it (a rack's 64 nodes were three scans at every weight a match changed).
        let at = if pos > 0 && key(list[pos - 1]) < mine {
            list[..pos].partition_point(|&c| key(c) >= mine)
        } else {
            pos + list[pos + 1..].partition_point(|&c| key(c) >= mine)
        };
        if at < pos {
            list[at..=pos].rotate_right(1);
        } else if at > pos {
            list[pos..=at].rotate_left(1);
        }
    }

    fn uniq_of(&self, c: u32) -> i64 {
        uniq_in(&self.uniq, c)
    }
}

/// Keeps `list` in `lists` as `v`'s children in order (see [`EdgeOrder`]).
fn push_list(
    at: &mut [u32],
    lists: &mut Vec<u32>,
    v: VertexId,
    list: impl IntoIterator<Item = u32, IntoIter: ExactSizeIterator>,
) {
    let list = list.into_iter();
    lists.push(list.len() as u32);
    at[v.index()] = lists.len() as u32;
    lists.extend(list);
}

/// `v`'s kept list in `lists` (see [`EdgeOrder`]), kept first in its first order (the tree's
/// list reversed) if it was not.
fn keep_first<'a>(
    at: &mut [u32],
    lists: &'a mut Vec<u32>,
    tree: &dyn Tree,
    v: VertexId,
) -> &'a mut [u32] {
    if at[v.index()] == 0 {
        push_list(at, lists, v, tree.children(v).iter().rev().copied());
    }
    let s = at[v.index()] as usize;
    let len = lists[s - 1] as usize;
    &mut lists[s..s + len]
}

/// Vertex `c`'s uniq_id, from `uniq` as [`EdgeOrder`] keeps it (empty: the position).
fn uniq_in(uniq: &[i64], c: u32) -> i64 {
    uniq.get(c as usize).copied().unwrap_or(i64::from(c))
}

#[cfg(test)]
mod tests;
