//! Whether an allocation lists a node whole, so that one whole cover records it
//! (`state::whole`).

use shardsched_resource::ResourceGraph;

use super::{AllocVertex, PruneRank};
use crate::dfu::Tree;
use crate::state::SchedState;

/// Where the listing of whole `c` that starts at `vertices[i]` ends, when one whole cover can
/// record it: it lists every vertex of the whole once, exclusively with all its units, the
/// node last (children come before parents), and nothing else is recorded in the whole
/// over the window (so that no vertex of it could refuse its record).
#[allow(clippy::too_many_arguments)]
pub(super) fn whole_listing(
    g: &ResourceGraph,
    tree: &dyn Tree,
    st: &mut SchedState,
    ranks: &dyn PruneRank,
    listing: &Listing,
    c: u32,
    (at, dur): (i64, u64),
    marks: &mut Vec<u32>,
    mark: &mut u32,
) -> Option<usize> {
    let i = listing.first;
    if !st.whole_free(c, at, dur) {
        return None;
    }
    let node = st.whole_vertex(c);
    if let Some(end) = listing.listed_whole
        && let Some(top) = listing.vertices.get(end)
        && top.v == node
        && top.exclusive
        && top.needs == g.size(top.v)
    {
        // The emission listed the node's subtree whole: its vertices are the whole's, once
        // each, exclusively with all their units (checked vertex by vertex in debug builds).
        let listed = listing.vertices.get(i..=end)?;
        debug_assert!(listed.iter().all(|av| {
            av.exclusive && av.needs == g.size(av.v) && st.whole_of(av.v) == Some(c)
        }));
        return (st.whole_shape(g, tree, ranks, c)?.vertices as usize == listed.len())
            .then_some(end);
    }
    // Listed vertex by vertex: each of the whole's vertices once, exclusively with all its
    // units, up to the node's own entry. Checked before the shape is asked for, so that a
    // listing that takes part of a node (a socket of it) learns no shape.
    if marks.len() < g.len() {
        marks.resize(g.len(), 0);
    }
    *mark = mark.wrapping_add(1);
    if *mark == 0 {
        marks.fill(0);
        *mark = 1;
    }
    let mut end = None;
    for (k, av) in listing.vertices.iter().enumerate().skip(i) {
        let seen = marks.get_mut(av.v.index())?;
        let whole = av.exclusive && av.needs == g.size(av.v) && st.whole_of(av.v) == Some(c);
        if !whole || *seen == *mark {
            return None;
        }
        *seen = *mark;
        // Nothing else recorded in the whole: every record of the listing would be taken.
        debug_assert!(
            st.untouched(av.v, at, dur) && st.units_free(av.v, av.needs, at, dur) >= av.needs,
            "a whole listing over a vertex in use"
        );
        if av.v == node {
            end = Some(k);
            break;
        }
    }
    let end = end?;
    (st.whole_shape(g, tree, ranks, c)?.vertices as usize == end + 1 - i).then_some(end)
}

/// Where a whole's listing may start in an allocation.
pub(super) struct Listing<'a> {
    pub(super) vertices: &'a [AllocVertex],
    pub(super) first: usize,
    /// The last index of the subtree the emission listed whole from `first`, if it did.
    pub(super) listed_whole: Option<usize>,
}
