//! Whole listings: what the update walk lists for a node taken whole, kept from its first
//! listing.
//!
//! Why: a match that takes a node whole lists every vertex below it, all units,
//! exclusively (Fluxion's exclusive walk; `update.rs`): 59 entries for a bench node. Walking
//! the subtree for them — children looked up, sizes read, one call per vertex — was the
//! largest single cost of a conservative replay of whole-node jobs (`perf`: 14 % of the
//! 5,000-job replay's samples, before this), where the same nodes are reserved again and
//! again. What such a listing holds depends on the graph and the walk's tree alone: the same
//! vertices, sizes and depths every time. So the first listing of each whole is kept,
//! shared, and an allocation refers to it instead of copying it (`alloc::allocation`:
//! copying it into every reservation was 15 % of the 5,000-job replay's time). Its *layout*
//! (units, depths less the node's, types), which nodes alike share, is kept once per
//! distinct layout, and bounds how many kinds of whole are kept ([`WHOLE_LAYOUTS_MAX`]); a
//! kept listing is its vertices' ids and its layout ([`KeptListings`]).
//!
//! Entries are kept per whole, not as offsets from the node's: generated graphs number
//! vertices level by level, so a node's cores are not at the same distance from it as the
//! next node's are from that one.
//!
//! Whole `c`'s listing is learned from the walk's own output, so what an allocation refers
//! to is what the walk lists by construction; the state that keeps it is made again
//! whenever the graph or the walk's tree changes (`regraph.rs`, `set_dominant_subsystem`).

use std::sync::{Arc, OnceLock};

use shardsched_resource::{ResourceGraph, Sym, VertexId};

use super::SchedState;
use super::distinct::Distinct;
use crate::alloc::{AllocVertex, Depth};

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
    depth: Depth,
    kind: Sym,
}

/// The wholes' kept listings.
#[derive(Clone, Debug, Default)]
pub(super) struct Listings {
    /// Per whole: its layout (or [`UNKNOWN`], [`WALKED`]).
    of: Vec<u32>,
    /// The kept listings themselves, shared with the allocations that refer to them.
    kept: Arc<KeptListings>,
    /// Distinct layouts; a layout's last entry is the node's (with the node's size, not
    /// what a request takes of it).
    layouts: Distinct<Arc<[LayoutEntry]>>,
}

impl Listings {
    pub(super) fn new(wholes: usize) -> Listings {
        Listings {
            of: vec![UNKNOWN; wholes],
            kept: Arc::new(KeptListings {
                slots: (0..wholes).map(|_| OnceLock::new()).collect(),
            }),
            ..Listings::default()
        }
    }
}

/// The kept listings of one state's wholes: each set once, at the whole's first listing,
/// and never changed (a state made again, for another graph or tree, makes its own). An
/// allocation refers to the whole set by one shared reference and to a node's listing by
/// its whole (`alloc::allocation`): no count to write per node, only per allocation. A
/// clone of the state shares it: what a listing holds depends on the graph and the tree
/// alone, the same for both.
///
/// A listing is kept as its vertices' ids and a shared reference to its layout, everything
/// else an entry says being its layout's (4 bytes a vertex, not 24): a match that takes
/// fresh nodes keeps one listing per node, and that memory, new to the process, cost a page
/// fault per 4 kB on top of writing it (a quarter of the 64-node exclusive match's time on
/// 4,096 nodes, `perf`, when each listing was kept whole).
#[derive(Default)]
pub struct KeptListings {
    slots: Box<[OnceLock<Kept>]>,
}

/// (An allocation's debug form names the listings, not all of them: what it lists is its
/// `iter()`.)
impl std::fmt::Debug for KeptListings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.slots.iter().filter(|s| s.get().is_some()).count();
        write!(f, "KeptListings({kept} of {} wholes)", self.slots.len())
    }
}

#[derive(Debug)]
struct Kept {
    /// The vertices below the node, in the order first listed.
    below: Box<[u32]>,
    /// Its layout, which says the rest of each entry (shared with the state that learned
    /// it: clones of a state share the kept listings, not the numbering of layouts).
    layout: Arc<[LayoutEntry]>,
    /// The node's entry then (its depth, the one the layout's depths are from).
    top: AllocVertex,
}

impl KeptListings {
    /// Kept listings of wholes numbered from 0, each its entries below the node and the
    /// node's entry (for tests of what refers to them), each with a layout of its own.
    #[cfg(test)]
    pub(crate) fn of(listings: Vec<(Vec<AllocVertex>, AllocVertex)>) -> KeptListings {
        let layout = |below: &[AllocVertex], top: &AllocVertex| -> Arc<[LayoutEntry]> {
            below
                .iter()
                .chain([top])
                .map(|av| LayoutEntry {
                    needs: av.needs,
                    exclusive: av.exclusive,
                    depth: av.depth.wrapping_sub(top.depth),
                    kind: Sym(0),
                })
                .collect()
        };
        KeptListings {
            slots: listings
                .into_iter()
                .map(|(below, top)| {
                    OnceLock::from(Kept {
                        below: below.iter().map(|av| av.v.0).collect(),
                        layout: layout(&below, &top),
                        top,
                    })
                })
                .collect(),
        }
    }

    /// No entries.
    pub(crate) fn none() -> Below<'static> {
        Below {
            ids: &[],
            layout: &[],
            depth: 0,
            next: 0,
        }
    }

    /// The kept entries below whole `c`'s node (none before its first listing).
    pub(crate) fn below(&self, c: u32) -> Below<'_> {
        match self.slots.get(c as usize).and_then(OnceLock::get) {
            Some(k) => Below {
                ids: &k.below,
                layout: &k.layout,
                depth: k.top.depth,
                next: 0,
            },
            _ => KeptListings::none(),
        }
    }
}

/// A kept listing's entries below its node, at the depths first listed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Below<'a> {
    ids: &'a [u32],
    /// Its layout (one more entry, the node's, at the end).
    layout: &'a [LayoutEntry],
    /// The node's depth when it was first listed.
    depth: Depth,
    /// The next entry to give.
    next: usize,
}

impl Below<'_> {
    /// Entry `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<AllocVertex> {
        let (&v, e) = (self.ids.get(i)?, self.layout.get(i)?);
        Some(AllocVertex {
            v: VertexId(v),
            needs: e.needs,
            exclusive: e.exclusive,
            depth: e.depth.wrapping_add(self.depth),
        })
    }
}

impl Iterator for Below<'_> {
    type Item = AllocVertex;

    #[inline]
    fn next(&mut self) -> Option<AllocVertex> {
        let av = self.get(self.next)?;
        self.next += 1;
        Some(av)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.ids.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Below<'_> {}

/// What is known of the listing of a vertex taken whole.
pub(crate) enum WholeListing<'a> {
    /// Kept: the kept listings, the whole, and its node's entry as first listed.
    Kept(&'a Arc<KeptListings>, u32, AllocVertex),
    /// Whole `c`'s node, not listed yet: learn it from the walk's listing.
    Learn(u32),
    /// Walk it.
    Walk,
}

impl SchedState {
    /// The listing of `u` taken whole, if `u` is a whole's node. (Inlined into the update
    /// walk, which asks it of every node a reservation takes.)
    #[inline(always)]
    pub(crate) fn whole_listing_of(&self, u: VertexId) -> WholeListing<'_> {
        let Some(c) = self.whole_at(u) else {
            return WholeListing::Walk;
        };
        let ls = &self.wholes.listings;
        let kept = ls.kept.slots.get(c as usize).and_then(OnceLock::get);
        match (ls.of[c as usize], kept) {
            (UNKNOWN, _) => WholeListing::Learn(c),
            (WALKED, _) | (_, None) => WholeListing::Walk,
            (_, Some(k)) => WholeListing::Kept(&ls.kept, c, k.top),
        }
    }

    /// The wholes' kept listings, which allocations refer to.
    pub(crate) fn kept_listings(&self) -> &Arc<KeptListings> {
        &self.wholes.listings.kept
    }

    /// The number of whole `c`'s layout, once its listing is kept.
    pub(crate) fn whole_layout(&self, c: u32) -> Option<u32> {
        let layout = self.wholes.listings.of[c as usize];
        (layout != UNKNOWN && layout != WALKED).then_some(layout)
    }

    /// Keeps `listed`, the walk's listing of whole `c` at `depth` (its node last), as
    /// [`WholeListing::Kept`] says. Its layout is compared first with the one kept last,
    /// which nodes listed one after another nearly always share: no hashing, no copy.
    /// Returns the kept listing's node entry, as `WholeListing::Kept` would give it (none
    /// when no room was left for its layout: it is walked each time).
    pub(crate) fn learn_whole_listing(
        &mut self,
        g: &ResourceGraph,
        c: u32,
        listed: &[AllocVertex],
        depth: Depth,
    ) -> Option<AllocVertex> {
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
        ls.of[c as usize] = layout;
        if layout == WALKED {
            return None;
        }
        let (top, below) = listed.split_last()?;
        let slot = ls.kept.slots.get(c as usize)?;
        let entries = ls.layouts.get(layout)?;
        // (Set already by a clone of this state: the same listing.)
        let _ = slot.set(Kept {
            below: below.iter().map(|av| av.v.0).collect(),
            layout: Arc::clone(entries),
            top: *top,
        });
        slot.get().map(|k| k.top)
    }
}
