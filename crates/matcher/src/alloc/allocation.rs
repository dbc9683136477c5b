//! An allocation's vertex list, with the nodes taken whole kept as one entry each.
//!
//! Why: a match that takes a node whole lists every vertex below it (59 for a bench node),
//! and a conservative re-plan of whole-node jobs makes hundreds of such reservations per
//! event, nearly all cancelled by the next re-plan before anything reads them. Copying each
//! node's kept listing (`state::listing`) into each reservation's list was the largest
//! single cost of the 5,000-job conservative replay (`memmove`, 15 % of its time). So a
//! node whose listing is kept is held here as its own entry plus the number of its whole,
//! with one shared reference per allocation to the state's kept listings
//! (`state::listing::KeptListings`, set once per whole and never changed), and the list is
//! expanded only when read ([`Allocation::iter`], [`Allocation::vertices`]): what any
//! reader sees is the list the walk would have written, vertex for vertex. (A reference
//! per node, an `Arc` per listing, wrote its count at every reservation and every cancel:
//! a cache miss per node each time.)

use std::borrow::Cow;
use std::sync::Arc;

use super::{AllocVertex, Depth};
use crate::state::{Below, KeptListings};

/// What a match got: vertices in writer order (children before parents, siblings in graph
/// order), and the time window.
#[derive(Clone, Debug)]
pub struct Allocation {
    /// The entries in writer order; a node taken whole stands for its listing when
    /// `wholes` names it.
    entries: Vec<AllocVertex>,
    /// The nodes whose listings are kept elsewhere, by their entry's index (ascending).
    wholes: Vec<WholeEntry>,
    /// How many vertices the listings in `wholes` hold (the nodes' own entries aside).
    below: usize,
    /// Where those listings are (none while `wholes` is empty).
    kept: Option<Arc<KeptListings>>,
    pub at: i64,
    pub duration: u64,
}

/// The two lists of an allocation, empty, with the room an ended one left
/// ([`super::Spares`]).
#[derive(Debug, Default)]
pub(crate) struct SpareLists {
    pub(crate) entries: Vec<AllocVertex>,
    pub(crate) wholes: Vec<WholeEntry>,
}

/// A node whose listing below it is a kept one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WholeEntry {
    /// Its node's entry in [`Allocation::entries`].
    pub(crate) at: u32,
    /// Its whole, whose kept listing is the vertices below the node as first listed, at
    /// the depths they had then.
    whole: u32,
    /// What to add to those depths (wrapping) to put them under the node's entry here.
    shift: Depth,
}

impl WholeEntry {
    /// The whole its node is (the emission's `SchedState::whole_listing_of` said so).
    pub(crate) fn whole(&self) -> u32 {
        self.whole
    }
}

impl Allocation {
    /// An allocation of `vertices` (in writer order) over `[at, at + duration)`.
    pub fn new(vertices: Vec<AllocVertex>, at: i64, duration: u64) -> Allocation {
        Allocation {
            entries: vertices,
            wholes: Vec::new(),
            below: 0,
            kept: None,
            at,
            duration,
        }
    }

    /// An allocation of no vertex over `[at, at + duration)` (a window alone).
    pub fn window(at: i64, duration: u64) -> Allocation {
        Allocation::new(Vec::new(), at, duration)
    }

    /// How many vertices it lists.
    pub fn len(&self) -> usize {
        self.entries.len() + self.below
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Its vertices in writer order.
    pub fn iter(&self) -> Vertices<'_> {
        Vertices {
            alloc: self,
            entry: 0,
            whole: 0,
            inside: 0,
        }
    }

    /// Its vertices in writer order, as one slice (copied when nodes taken whole are kept
    /// as one entry each).
    pub fn vertices(&self) -> Cow<'_, [AllocVertex]> {
        if self.wholes.is_empty() {
            Cow::Borrowed(&self.entries)
        } else {
            Cow::Owned(self.listed_out())
        }
    }

    /// Its vertices in writer order, every node taken whole listed out: each kept listing
    /// copied in one run, not through [`Allocation::iter`]'s step per vertex, which looks
    /// the listing up again at each (a fifth of low-4096's instructions went to that for
    /// its 64-node writes).
    fn listed_out(&self) -> Vec<AllocVertex> {
        let mut out = Vec::with_capacity(self.len());
        let mut next = 0;
        for w in &self.wholes {
            // The node's own entry comes after its listing (writer order is post-order).
            let at = w.at as usize;
            out.extend_from_slice(&self.entries[next..at]);
            out.extend(self.listed(w));
            next = at;
        }
        out.extend_from_slice(&self.entries[next..]);
        debug_assert!(
            out.iter().copied().eq(self.iter()),
            "a listing out of order"
        );
        out
    }

    /// Its last vertex (the top of what it takes).
    pub fn last(&self) -> Option<AllocVertex> {
        self.entries.last().copied()
    }

    /// Its vertices to change, every node taken whole listed out first.
    pub fn vertices_mut(&mut self) -> &mut Vec<AllocVertex> {
        self.expand_all();
        &mut self.entries
    }

    /// Its vertex list, every node taken whole listed out.
    pub fn into_vertices(mut self) -> Vec<AllocVertex> {
        self.expand_all();
        self.entries
    }

    /// Its lists as kept (the entries, a node taken whole as one, and the nodes taken
    /// whole): for giving back their memory.
    pub(crate) fn into_lists(self) -> SpareLists {
        SpareLists {
            entries: self.entries,
            wholes: self.wholes,
        }
    }

    /// A copy in `lists` (empty, with room: spare lists).
    pub(crate) fn copy_into(&self, lists: SpareLists) -> Allocation {
        let SpareLists {
            mut entries,
            mut wholes,
        } = lists;
        entries.extend_from_slice(&self.entries);
        wholes.extend_from_slice(&self.wholes);
        Allocation {
            entries,
            wholes,
            kept: self.kept.clone(),
            ..*self
        }
    }

    /// An allocation over `[at, at + duration)` to list in `lists` (empty, with room).
    pub(crate) fn in_lists(lists: SpareLists, at: i64, duration: u64) -> Allocation {
        Allocation {
            wholes: lists.wholes,
            ..Allocation::new(lists.entries, at, duration)
        }
    }

    fn expand_all(&mut self) {
        if !self.wholes.is_empty() {
            self.entries = self.listed_out();
            self.wholes.clear();
            self.below = 0;
            self.kept = None;
        }
    }

    // The builder and the commit's access (crate::update, crate::alloc).

    pub(crate) fn entries(&self) -> &[AllocVertex] {
        &self.entries
    }

    pub(crate) fn entries_mut(&mut self) -> &mut Vec<AllocVertex> {
        &mut self.entries
    }

    pub(crate) fn push(&mut self, av: AllocVertex) {
        self.entries.push(av);
    }

    /// Appends node `node` taken whole, its listing below it being whole `whole`'s in
    /// `kept`, as kept when the node was at depth `learned_at`. Returns how many vertices
    /// that listing holds.
    #[inline(always)]
    pub(crate) fn push_whole(
        &mut self,
        node: AllocVertex,
        kept: &Arc<KeptListings>,
        whole: u32,
        learned_at: Depth,
    ) -> usize {
        let listing = kept.below(whole);
        let n = listing.len();
        let shift = node.depth.wrapping_sub(learned_at);
        let same = self.lists_from(kept);
        let at = u32::try_from(self.entries.len());
        let (true, Ok(at)) = (same, at) else {
            // (Listings of another state, or past u32::MAX entries: listed out.)
            self.entries.extend(listing.map(|av| shifted(&av, shift)));
            self.entries.push(node);
            return n;
        };
        if self.kept.is_none() {
            self.kept = Some(Arc::clone(kept));
        }
        self.entries.push(node);
        self.below += n;
        self.wholes.push(WholeEntry { at, whole, shift });
        n
    }

    /// Whether the listings it refers to (if any) are those of `kept`.
    pub(crate) fn lists_from(&self, kept: &Arc<KeptListings>) -> bool {
        self.kept.as_ref().is_none_or(|k| Arc::ptr_eq(k, kept))
    }

    /// The listing below the node of `w`, at the depths it was kept at.
    pub(crate) fn listing(&self, w: &WholeEntry) -> Below<'_> {
        below(self.kept.as_deref(), w.whole)
    }

    /// The vertices below the node of `w`, as this allocation lists them.
    pub(crate) fn listed(&self, w: &WholeEntry) -> impl Iterator<Item = AllocVertex> + '_ {
        let shift = w.shift;
        self.listing(w).map(move |av| shifted(&av, shift))
    }

    /// The nodes kept as one entry, by their entry's index (ascending).
    pub(crate) fn wholes(&self) -> &[WholeEntry] {
        &self.wholes
    }

    /// Moves the `w`th node kept whole to entry `at` (the commit closing gaps), its whole
    /// listing `skew` levels deeper.
    pub(crate) fn move_whole(&mut self, w: usize, at: usize, skew: Depth) {
        let entry = &mut self.wholes[w];
        entry.at = at as u32;
        entry.shift = entry.shift.wrapping_add(skew);
    }

    /// Lists out the `w`th node kept whole in place: its listing's entries before its
    /// node's.
    pub(crate) fn expand_whole(&mut self, w: usize) {
        let entry = self.wholes.remove(w);
        // (The listings borrowed apart from the entries, which change.)
        let listing = below(self.kept.as_deref(), entry.whole);
        let at = entry.at as usize;
        let n = listing.len();
        self.entries
            .splice(at..at, listing.map(|av| shifted(&av, entry.shift)));
        self.below -= n;
        for later in &mut self.wholes[w..] {
            later.at += n as u32;
        }
    }

    /// Keeps the first `n` entries (the commit, after closing gaps).
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        self.entries.truncate(n);
        while let Some(w) = self.wholes.last().copied().filter(|w| w.at as usize >= n) {
            self.below -= self.listing(&w).len();
            self.wholes.pop();
        }
    }
}

/// Whole `whole`'s kept listing in `kept`, if any.
fn below(kept: Option<&KeptListings>, whole: u32) -> Below<'_> {
    match kept {
        Some(k) => k.below(whole),
        None => KeptListings::none(),
    }
}

/// `av` `shift` levels deeper (wrapping: a node listed higher than its listing was learned
/// shifts it up).
fn shifted(av: &AllocVertex, shift: Depth) -> AllocVertex {
    AllocVertex {
        depth: av.depth.wrapping_add(shift),
        ..*av
    }
}

impl PartialEq for Allocation {
    fn eq(&self, other: &Allocation) -> bool {
        if (self.at, self.duration, self.len()) != (other.at, other.duration, other.len()) {
            return false;
        }
        let same_kept = match (&self.kept, &other.kept) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        let same_wholes = same_kept && self.wholes == other.wholes;
        if same_wholes {
            return self.entries == other.entries;
        }
        self.iter().eq(other.iter())
    }
}

impl Eq for Allocation {}

/// An allocation's vertices in writer order ([`Allocation::iter`]).
#[derive(Clone, Debug)]
pub struct Vertices<'a> {
    alloc: &'a Allocation,
    /// The next entry.
    entry: usize,
    /// The next node kept whole.
    whole: usize,
    /// How much of its listing is given already.
    inside: usize,
}

impl Iterator for Vertices<'_> {
    type Item = AllocVertex;

    fn next(&mut self) -> Option<AllocVertex> {
        let a = self.alloc;
        if let Some(w) = a.wholes.get(self.whole)
            && w.at as usize == self.entry
        {
            if let Some(av) = a.listing(w).get(self.inside) {
                self.inside += 1;
                return Some(shifted(&av, w.shift));
            }
            self.whole += 1;
            self.inside = 0;
        }
        let av = a.entries.get(self.entry)?;
        self.entry += 1;
        Some(*av)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let a = self.alloc;
        let listed_before = a.wholes[..self.whole]
            .iter()
            .map(|w| a.listing(w).len())
            .sum::<usize>()
            + self.inside;
        let n = a.len() - self.entry - listed_before;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Vertices<'_> {}

impl<'a> IntoIterator for &'a Allocation {
    type Item = AllocVertex;
    type IntoIter = Vertices<'a>;

    fn into_iter(self) -> Vertices<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardsched_resource::VertexId;

    fn av(v: u32, depth: Depth) -> AllocVertex {
        AllocVertex {
            v: VertexId(v),
            needs: 1,
            exclusive: true,
            depth,
        }
    }

    /// Two nodes (5 and 9) kept whole around a plain entry, the second learned one level
    /// higher than it is listed here.
    fn mixed() -> (Allocation, Vec<AllocVertex>) {
        let kept = Arc::new(KeptListings::of(vec![
            (vec![av(1, 3), av(2, 3), av(3, 2)], av(5, 1)),
            (vec![av(7, 2), av(8, 2)], av(9, 1)),
        ]));
        let mut a = Allocation::new(Vec::with_capacity(4), 10, 20);
        a.push_whole(av(5, 1), &kept, 0, 1);
        a.push(av(6, 1));
        a.push_whole(av(9, 2), &kept, 1, 1);
        a.push(av(0, 0));
        let flat = vec![
            av(1, 3),
            av(2, 3),
            av(3, 2),
            av(5, 1),
            av(6, 1),
            av(7, 3),
            av(8, 3),
            av(9, 2),
            av(0, 0),
        ];
        (a, flat)
    }

    #[test]
    fn reads_as_the_list_it_stands_for() {
        let (a, flat) = mixed();
        assert_eq!(a.entries().len(), 4);
        assert_eq!(a.len(), flat.len());
        assert_eq!(a.iter().len(), flat.len());
        assert_eq!(a.iter().collect::<Vec<_>>(), flat);
        assert_eq!(&*a.vertices(), &flat[..]);
        assert_eq!(a.last(), Some(av(0, 0)));
        // Equal to the same list held flat, either way round; not to one that differs.
        let plain = Allocation::new(flat.clone(), 10, 20);
        assert_eq!(a, plain);
        assert_eq!(plain, a);
        let mut other = flat.clone();
        other[5].depth = 2;
        assert_ne!(a, Allocation::new(other, 10, 20));
        assert_ne!(a, Allocation::new(flat.clone(), 11, 20));
        assert_eq!(a.clone().into_vertices(), flat);
    }

    #[test]
    fn listed_out_moved_and_cut_as_the_list() {
        let (mut a, flat) = mixed();
        // The first node listed out in place: the second's entry moves with it.
        a.expand_whole(0);
        assert_eq!(a.entries().len(), 7);
        assert_eq!(a.wholes()[0].at, 5);
        assert_eq!(a.iter().collect::<Vec<_>>(), flat);
        // A commit closing a gap of one and skewing one level.
        let (mut b, _) = mixed();
        b.entries_mut()[0] = av(5, 2);
        b.entries_mut().remove(1);
        b.move_whole(1, 1, 1);
        let got: Vec<_> = b.iter().collect();
        let want: Vec<u32> = vec![1, 2, 3, 5, 7, 8, 9, 0];
        assert_eq!(got.iter().map(|x| x.v.0).collect::<Vec<_>>(), want);
        assert_eq!(got[4].depth, 4, "the moved listing one level deeper");
        // Cut before the second node: its listing goes with it.
        let (mut c, _) = mixed();
        c.truncate_entries(2);
        assert_eq!(c.iter().collect::<Vec<_>>(), flat[..5].to_vec());
        assert_eq!(c.len(), 5);
    }
}
