//! Whether an allocation lists a node whole, so that one whole cover records it
//! (`state::whole`).

use shardsched_resource::{ResourceGraph, VertexId};

use super::{AllocVertex, PruneRank};
use crate::dfu::Tree;
use crate::state::{Below, SchedState};

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
    seen: &mut Seen,
) -> Option<usize> {
    let i = listing.first;
    if !st.whole_free(c, at, dur) {
        return None;
    }
    let node = st.whole_vertex(c);
    let end = if let Some(end) = listing.listed_whole
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
        end
    } else {
        node_entry(g, st, listing, c, (at, dur), seen)?
    };
    // Asked last, so that a listing that takes part of a node (a socket of it) learns no
    // shape.
    (st.whole_shape(g, tree, ranks, c)?.vertices as usize == end + 1 - i).then_some(end)
}

/// Whether one whole cover can record `node`, the entry of a node taken whole that stands
/// for its kept listing `below` (`alloc::allocation`), the emission having found it the
/// node of whole `c`: `c`, if it is (asked by whole, not by vertex: the node's row is a
/// line of memory of its own), the node is taken exclusively with all its units,
/// nothing else is recorded in the whole over the window, and the listing is the whole's
/// every vertex. (What the listing holds is the walk's own listing of the node:
/// `state::listing`.)
///
/// Inlined into the commit's loop: called once for every node taken whole.
#[inline(always)]
pub(super) fn kept_whole(
    g: &ResourceGraph,
    tree: &dyn Tree,
    st: &mut SchedState,
    ranks: &dyn PruneRank,
    (node, c, below): (AllocVertex, u32, Below<'_>),
    (at, dur): (i64, u64),
) -> Option<u32> {
    debug_assert!(below.clone().all(|av| st.whole_of(av.v) == Some(c)));
    if c as usize >= st.wholes_len()
        || st.whole_vertex(c) != node.v
        || !node.exclusive
        || node.needs != g.size(node.v)
        || !st.whole_free(c, at, dur)
    {
        return None;
    }
    (st.whole_shape(g, tree, ranks, c)?.vertices as usize == below.len() + 1).then_some(c)
}

/// Where the node's own entry is in a listing of whole `c` listed vertex by vertex from
/// `listing.first`: each of the whole's vertices once before it, exclusively with all its
/// units.
fn node_entry(
    g: &ResourceGraph,
    st: &SchedState,
    listing: &Listing,
    c: u32,
    (at, dur): (i64, u64),
    seen: &mut Seen,
) -> Option<usize> {
    let node = st.whole_vertex(c);
    // The node's entry, every entry before it taken whole; then, only if there is one,
    // whether each of them is listed once. Two passes: most listings checked here take part
    // of a node (a socket of it) and stop at the node's entry, and marking what they met
    // wrote a page of `seen` (one entry a vertex) for every node a session takes part of.
    let (k, _) = listing
        .vertices
        .iter()
        .enumerate()
        .skip(listing.first)
        .take_while(|(_, av)| {
            av.exclusive && av.needs == g.size(av.v) && st.whole_of(av.v) == Some(c)
        })
        .find(|(_, av)| av.v == node)?;
    seen.start(g.len());
    for av in &listing.vertices[listing.first..=k] {
        if !seen.first_time(av.v)? {
            return None;
        }
        // Nothing else recorded in the whole: every record of the listing would be taken.
        debug_assert!(
            st.untouched(av.v, at, dur) && st.units_free(av.v, av.needs, at, dur) >= av.needs,
            "a whole listing over a vertex in use"
        );
    }
    Some(k)
}

/// The vertices one listing check met, by vertex: the check's number (so a new check
/// clears nothing).
#[derive(Debug, Default)]
pub(super) struct Seen {
    marks: Vec<u32>,
    mark: u32,
}

impl Seen {
    /// Starts a check over a graph of `n` vertices.
    fn start(&mut self, n: usize) {
        if self.marks.len() < n {
            // Zeroed memory from the allocator, not zeros written: pages of vertices never
            // checked stay unwritten. Earlier checks' marks need not be kept: a check asks
            // only for its own number, and zero is none.
            self.marks = vec![0; n];
        }
        self.mark = self.mark.wrapping_add(1);
        if self.mark == 0 {
            self.marks.fill(0);
            self.mark = 1;
        }
    }

    /// Whether this check meets `v` for the first time (`None`: not a vertex of the
    /// graph).
    fn first_time(&mut self, v: VertexId) -> Option<bool> {
        let seen = self.marks.get_mut(v.index())?;
        let first = *seen != self.mark;
        *seen = self.mark;
        Some(first)
    }
}

/// Where a whole's listing may start in an allocation.
pub(super) struct Listing<'a> {
    pub(super) vertices: &'a [AllocVertex],
    pub(super) first: usize,
    /// The last index of the subtree the emission listed whole from `first`, if it did.
    pub(super) listed_whole: Option<usize>,
}
