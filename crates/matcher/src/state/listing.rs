//! Whole listings: what the update walk lists for a node taken whole, kept from its first
//! listing.
//!
//! Why: a match that takes a node whole lists every vertex below it, all units,
//! exclusively (Fluxion's exclusive walk; `update.rs`): 59 entries for a bench node. Walking
//! the subtree for them — children looked up, sizes read, one call per vertex — was the
//! largest single cost of a conservative replay of whole-node jobs (`perf`: 14 % of the
//! 5,000-job replay's samples, before this), where the same nodes are reserved again and
//! again. What such a listing holds depends on the graph and the walk's tree alone: the same
//! vertices, sizes and depths every time. So the first listing of each whole is kept, entry
//! for entry as the walk listed it (24 bytes a vertex, in one list for all wholes), and
//! later listings copy it: one `memcpy` where the node is at the depth it was learned at (in
//! a tree, always). Its *layout* (units, depths less the node's), which nodes alike share,
//! is kept once per distinct layout: it bounds how many kinds of whole are kept
//! ([`WHOLE_LAYOUTS_MAX`]) and sizes lists before a whole's first listing.
//!
//! Entries are kept per whole, not as offsets from the node's: generated graphs number
//! vertices level by level, so a node's cores are not at the same distance from it as the
//! next node's are from that one. They were kept as ids alone with the shared layout (4
//! bytes a vertex) until the 1,000-job conservative replay showed the copy that put them
//! back together at 14 instructions an entry, a tenth of the run.
//!
//! Whole `c`'s listing is learned from the walk's own output, so a copy is what the walk
//! lists by construction; the state that keeps it is made again whenever the graph or the
//! walk's tree changes (`regraph.rs`, `set_dominant_subsystem`).

use shardsched_resource::{ResourceGraph, Sym, VertexId};

use super::SchedState;
use super::distinct::Distinct;
use crate::alloc::AllocVertex;

/// Distinct layouts kept; a whole first listed once they are all taken is walked each time.
pub const WHOLE_LAYOUTS_MAX: usize = 256;

/// Not learned yet.
const UNKNOWN: u32 = u32::MAX;
/// Never kept (no room left for its layout).
const WALKED: u32 = u32::MAX - 1;

/// One entry of a layout: what a listing says of a vertex besides its id, and its type.
/// With the types, a layout is all a whole's shape depends on (`state::shape`): nodes of one
/// layout share one, learned once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LayoutEntry {
    /// Its units; the node's own size for the node's entry (a listing takes what the
    /// request asks of the node, which the layout leaves out).
    needs: i64,
    exclusive: bool,
    /// Depth less the node's.
    depth: u32,
    kind: Sym,
}

/// The wholes' kept listings.
#[derive(Clone, Debug, Default)]
pub(super) struct Listings {
    /// Per whole: where its entries start in `entries`, and its layout (or [`UNKNOWN`],
    /// [`WALKED`]).
    of: Vec<(u32, u32)>,
    /// The entries of every kept listing, one after another, at the depths they were
    /// listed at.
    entries: Vec<AllocVertex>,
    /// Distinct layouts; a layout's last entry is the node's, with no units.
    layouts: Distinct<Box<[LayoutEntry]>>,
}

impl Listings {
    pub(super) fn new(wholes: usize) -> Listings {
        Listings {
            of: vec![(0, UNKNOWN); wholes],
            ..Listings::default()
        }
    }
}

/// What is known of the listing of a vertex taken whole.
pub(crate) enum WholeListing<'a> {
    /// Its entries as first listed (the node's last).
    Kept(&'a [AllocVertex]),
    /// Whole `c`'s node, not listed yet: learn it from the walk's listing.
    Learn(u32),
    /// Walk it.
    Walk,
}

impl SchedState {
    /// The listing of `u` taken whole, if `u` is a whole's node.
    pub(crate) fn whole_listing_of(&self, u: VertexId) -> WholeListing<'_> {
        let Some(c) = self.whole_of(u).filter(|&c| self.whole_vertex(c) == u) else {
            return WholeListing::Walk;
        };
        let ls = &self.wholes.listings;
        match ls.of[c as usize] {
            (_, UNKNOWN) => WholeListing::Learn(c),
            (_, WALKED) => WholeListing::Walk,
            (at, i) => {
                let at = at as usize;
                let kept = ls
                    .layouts
                    .get(i)
                    .and_then(|l| ls.entries.get(at..at + l.len()));
                match kept {
                    Some(entries) => WholeListing::Kept(entries),
                    None => WholeListing::Walk,
                }
            }
        }
    }

    /// The number of whole `c`'s layout, once its listing is kept.
    pub(crate) fn whole_layout(&self, c: u32) -> Option<u32> {
        let (_, layout) = self.wholes.listings.of[c as usize];
        (layout != UNKNOWN && layout != WALKED).then_some(layout)
    }

    /// How many vertices a listing of `u` taken whole holds: its kept listing's count, or
    /// about (the layout kept last; 1 when none is).
    pub(crate) fn whole_listing_len(&self, u: VertexId) -> usize {
        match self.whole_listing_of(u) {
            WholeListing::Kept(entries) => entries.len(),
            _ => {
                let ls = &self.wholes.listings;
                ls.layouts.last().map_or(1, |l| l.len())
            }
        }
    }

    /// Keeps `listed`, the walk's listing of whole `c` at `depth` (its node last), as
    /// [`WholeListing::Kept`] says. Its layout is compared first with the one kept last,
    /// which nodes listed one after another nearly always share: no hashing, no copy.
    pub(crate) fn learn_whole_listing(
        &mut self,
        g: &ResourceGraph,
        c: u32,
        listed: &[AllocVertex],
        depth: u32,
    ) {
        let top = self.whole_vertex(c);
        let entry = |av: &AllocVertex| LayoutEntry {
            needs: if av.v == top { g.size(top) } else { av.needs },
            exclusive: av.exclusive,
            depth: av.depth.wrapping_sub(depth),
            kind: g.kind(av.v),
        };
        let ls = &mut self.wholes.listings;
        let layout = ls
            .layouts
            .number(
                |kept| {
                    kept.len() == listed.len()
                        && listed
                            .iter()
                            .zip(kept.iter())
                            .all(|(av, e)| entry(av) == *e)
                },
                || listed.iter().map(entry).collect(),
                WHOLE_LAYOUTS_MAX,
            )
            .unwrap_or(WALKED);
        let Ok(at) = u32::try_from(ls.entries.len()) else {
            ls.of[c as usize] = (0, WALKED);
            return;
        };
        if layout != WALKED {
            ls.entries.extend_from_slice(listed);
        }
        ls.of[c as usize] = (at, layout);
    }
}

/// Appends a kept listing ([`WholeListing::Kept`]) of node `u` at `depth` taking `needs` of
/// its own units.
pub(crate) fn copy_listing(
    out: &mut Vec<AllocVertex>,
    entries: &[AllocVertex],
    needs: i64,
    depth: u32,
) {
    let Some((top, below)) = entries.split_last() else {
        return;
    };
    if top.depth == depth {
        out.extend_from_slice(below);
    } else {
        out.extend(below.iter().map(|av| AllocVertex {
            depth: av.depth.wrapping_sub(top.depth).wrapping_add(depth),
            ..*av
        }));
    }
    out.push(AllocVertex {
        needs,
        depth,
        ..*top
    });
}
