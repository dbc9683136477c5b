//! Whose parent a match took exclusively: the shorthand writers (`jgf_shorthand`,
//! `rv1_shorthand`) leave such vertices, and their edges, out.

use shardsched_resource::{ResourceGraph, VertexId};

use crate::alloc::{AllocVertex, LeftOut};

/// The exclusive flag of each vertex's parent in the walk that listed `vertices` (post-order:
/// children before their parent) and left out `refused`, which the shorthand writers read
/// to leave vertices and edges out: for the vertices, then for those left out.
///
/// In a tree, walking the list backwards gives each vertex after its ancestors, so a stack
/// of the ancestors seen holds its parent, a vertex left out included (its children's
/// edges follow how the walk took it). Levels are not enough: the levels Fluxion's update
/// walk fails to give back (see `Matcher::level_drift`) print vertices after a refusal
/// shallower than their siblings while their parent is the same. Where vertices have
/// several parents, the parent is the last vertex seen one level up, and a vertex left
/// out is under its containment parent as the allocation lists it.
pub(super) fn parents_exclusive(
    g: &ResourceGraph,
    tree: &dyn crate::dfu::Tree,
    vertices: &[AllocVertex],
    refused: &[LeftOut],
) -> (Vec<bool>, Vec<bool>) {
    let mut parent_excl = vec![false; vertices.len()];
    let mut left_parent_excl = vec![false; refused.len()];
    if tree.is_dag() {
        let mut excl_at: Vec<bool> = Vec::new();
        for (i, av) in vertices.iter().enumerate().rev() {
            let d = av.depth as usize;
            if excl_at.len() <= d {
                excl_at.resize(d + 1, false);
            }
            excl_at[d] = av.exclusive;
            parent_excl[i] = d > 0 && excl_at[d - 1];
        }
        for (r, excl) in refused.iter().zip(&mut left_parent_excl) {
            let p = g.parent(r.vertex.v);
            *excl = vertices
                .iter()
                .find(|x| Some(x.v) == p)
                .is_some_and(|x| x.exclusive);
        }
        return (parent_excl, left_parent_excl);
    }
    let mut ancestors: Vec<(VertexId, bool)> = Vec::new();
    let mut parent_of = |v: VertexId, exclusive: bool| {
        let mut excl = false;
        if let Some(p) = tree.parent(v)
            && let Some(k) = ancestors.iter().rposition(|a| a.0 == p)
        {
            ancestors.truncate(k + 1);
            excl = ancestors[k].1;
        }
        ancestors.push((v, exclusive));
        excl
    };
    // One left out with `kept == k` came after the kept vertex k - 1 and before k: walking
    // backwards, after k and before k - 1.
    let mut left = refused.len();
    for i in (0..=vertices.len()).rev() {
        while left > 0 && refused[left - 1].kept >= i {
            left -= 1;
            let r = &refused[left];
            left_parent_excl[left] = parent_of(r.vertex.v, r.vertex.exclusive);
        }
        if let Some(av) = vertices.get(i.wrapping_sub(1)) {
            parent_excl[i - 1] = parent_of(av.v, av.exclusive);
        }
    }
    (parent_excl, left_parent_excl)
}
