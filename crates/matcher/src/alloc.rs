//! Allocations, and recording them in the calendars as Fluxion's update walk does.

use shardsched_resource::{ResourceGraph, VertexId};

use crate::MatchError;
use crate::dfu::Tree;
use crate::state::{CoverMemo, SchedState, SpanRef};

mod allocation;
mod whole;
use allocation::SpareLists;
pub use allocation::{Allocation, Vertices};
use whole::{Listing, kept_whole, whole_listing};

/// One vertex of an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocVertex {
    pub v: VertexId,
    /// Units of the vertex taken (a 2 GB memory pool taken whole has 2).
    pub needs: i64,
    pub exclusive: bool,
    /// Depth of the walk at this vertex (root = 0), for writers.
    pub depth: Depth,
}

/// A depth in the walk's tree. Graphs are at most [`GRAPH_DEPTH_MAX`] deep, so 16 bits hold
/// any, and keep an [`AllocVertex`] at 16 bytes (it was 24 with 32 bits: an allocation
/// lists every vertex it takes, ~600 bytes a job on first-1024). Shifts between a listing's
/// depths and the walk's wrap, as the depths do.
///
/// [`GRAPH_DEPTH_MAX`]: shardsched_resource::GRAPH_DEPTH_MAX
pub type Depth = u16;

const _: () = assert!(size_of::<AllocVertex>() == 16);

/// Vertex `v`'s depth in `g`'s containment tree, as an allocation lists it.
pub(crate) fn depth_in(g: &ResourceGraph, v: VertexId) -> Depth {
    Depth::try_from(g.depth(v)).unwrap_or(Depth::MAX)
}

/// Fluxion's outputs are indented one level deeper for every vertex a calendar refused
/// before (its walk level is not given back there); the drift stops growing here, so that
/// a drifted depth still holds the graph's deepest vertex below it. Only a session with
/// over 65,000 refused vertices meets it (Fluxion's indentation would grow on).
pub(crate) const LEVEL_DRIFT_MAX: Depth =
    Depth::MAX - 1 - shardsched_resource::GRAPH_DEPTH_MAX as Depth;

/// A vertex a lenient commit left out because its calendar refused it: Fluxion's update
/// walk writes no vertex for it but still the edge into it, and its children's edges say
/// whether it was taken exclusively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// How many vertices the allocation keeps before it.
    pub kept: usize,
    /// The vertex as the match listed it, at the depth it would have been written at.
    pub vertex: AllocVertex,
    /// Only its pruning filter refused it: its own calendar took it, and Fluxion tagged it
    /// with the job before the filter's update failed (`upd_txfilter` before
    /// `upd_agfilter`), so the job's cancel walk still goes through it.
    pub tagged: bool,
}

/// Lists of allocations that ended, kept for the next ones, so that a whole-node
/// allocation does not take fresh pages on every match.
pub const SPARE_VERTEX_LISTS_MAX: usize = 8;

/// Spare allocation lists (at most [`SPARE_VERTEX_LISTS_MAX`]). Scratch only: a clone
/// starts empty.
#[derive(Debug, Default)]
pub struct Spares {
    spare: Vec<SpareLists>,
}

impl Clone for Spares {
    fn clone(&self) -> Self {
        Spares::default()
    }
}

impl Spares {
    /// Empty lists with room for `n` entries, reusing the memory of an ended allocation
    /// when one is large enough.
    pub(crate) fn lists(&mut self, n: usize) -> SpareLists {
        let fit = (0..self.spare.len())
            .filter(|&i| self.spare[i].entries.capacity() >= n)
            .min_by_key(|&i| self.spare[i].entries.capacity());
        if let Some(i) = fit {
            return self.spare.swap_remove(i);
        }
        if let Some(i) = self.roomiest() {
            drop(self.spare.swap_remove(i));
        }
        SpareLists {
            entries: Vec::with_capacity(n),
            wholes: Vec::new(),
        }
    }

    /// The spare lists with the most room, or new ones with room for `n` entries: for a
    /// list whose length is not known before (one growing by doubling copies itself, and
    /// its list of nodes taken whole, eight times on the way to a 320-node reservation).
    pub(crate) fn roomiest_lists(&mut self, n: usize) -> SpareLists {
        match self.roomiest() {
            Some(i) if self.spare[i].entries.capacity() >= n => self.spare.swap_remove(i),
            _ => self.lists(n),
        }
    }

    fn roomiest(&self) -> Option<usize> {
        (0..self.spare.len()).max_by_key(|&i| self.spare[i].entries.capacity())
    }

    /// Keeps `alloc`'s memory for a later allocation (up to [`SPARE_VERTEX_LISTS_MAX`]).
    pub fn give_back(&mut self, alloc: Allocation) {
        let mut lists = alloc.into_lists();
        if self.spare.len() < SPARE_VERTEX_LISTS_MAX && lists.entries.capacity() > 0 {
            lists.entries.clear();
            lists.wholes.clear();
            self.spare.push(lists);
        }
    }
}

/// Working memory of a commit, kept between matches so that recording one allocates only
/// what it keeps (its records). Scratch only: a clone starts empty.
#[derive(Debug, Default)]
pub struct CommitScratch {
    /// below[d]: what the children (at depth d) of the vertex being finished at depth d-1
    /// take of each pruning type.
    below: Vec<Vec<(u32, i64)>>,
    /// Leaves taken whole that a cover of their group may stand for (state::cover): (leaf,
    /// cover group), recorded when their parent comes (children come before parents).
    pending: Vec<(u32, u32)>,
    /// The covers of the group whose leaves are being checked, read once for all of them.
    memo: CoverMemo,
    /// The vertices a whole listing was checked for, so that each is counted once.
    seen: whole::Seen,
    /// The subtrees the emission of the allocation being committed listed whole (first
    /// and last index), set by the match just before its commit and taken by it: a whole
    /// listed so needs no check vertex by vertex.
    pub(crate) whole_ranges: Vec<(u32, u32)>,
    /// Wholes held in a row whose covers are not added yet ([`cover_held`]).
    to_cover: Vec<u32>,
    /// The last commit's allocation (entries, nodes kept whole) and how many spans it
    /// recorded: the room the next one of that shape takes.
    last_spans: Option<((usize, usize), usize)>,
}

impl Clone for CommitScratch {
    fn clone(&self) -> Self {
        CommitScratch::default()
    }
}

/// How the pruning types of a graph are known to [`commit`]: the interning rank of each
/// vertex's type when it is a pruning type.
pub trait PruneRank {
    fn prune_rank(&self, v: VertexId) -> Option<u32>;
}

/// Records `alloc` in the calendars as Fluxion's update walk does, vertex by vertex in the
/// allocation's (post-)order: one job on every vertex's job count, its units on every
/// exclusive vertex, and on every inner vertex that tracks pruning types the units of them
/// its listed descendants take (an exclusive vertex all of its size, a shared one what it
/// leaves). `after`, when given, is called on each vertex once it is recorded (the `first`
/// policy reads the aggregates then), but on the leaves a whole cover records and those a
/// cover group may stand for. (Without it a node held whole is not read again: its
/// listing's inner vertices were a cache line or two a node of a reservation. A leaf keeps
/// no calendar of its own for `first` to learn from.)
///
/// A vertex whose calendar cannot take it: with `lenient` (a match), it is left out of the
/// allocation as Fluxion leaves it out of its output, with the depth of every later vertex
/// one deeper (a `*nodex` match over a vertex another job holds); otherwise (restoring or
/// holding) nothing stays recorded and the conflict is the error. Returns the records, so
/// cancel can remove exactly them.
///
/// A node listed whole with nothing else recorded below it over the window is recorded as
/// one whole cover (`state::whole`); `tree` is the tree `st` was made on.
pub fn commit(
    g: &ResourceGraph,
    tree: &dyn Tree,
    st: &mut SchedState,
    ranks: &dyn PruneRank,
    alloc: &mut Allocation,
    lenient: bool,
    after: Option<impl FnMut(&SchedState, VertexId)>,
) -> Result<Vec<SpanRef>, MatchError> {
    let mut scratch = CommitScratch::default();
    commit_noting(
        g,
        tree,
        st,
        ranks,
        alloc,
        lenient,
        after,
        &mut Vec::new(),
        &mut scratch,
    )
}

/// [`commit`], noting in `refused` each vertex left out (lenient) with the number of kept
/// vertices before it: Fluxion still writes the edge into it there. `scratch`: working
/// memory, kept by the caller for its next commit.
#[allow(clippy::too_many_arguments)]
pub fn commit_noting(
    g: &ResourceGraph,
    tree: &dyn Tree,
    st: &mut SchedState,
    ranks: &dyn PruneRank,
    alloc: &mut Allocation,
    lenient: bool,
    after: Option<impl FnMut(&SchedState, VertexId)>,
    refused: &mut Vec<LeftOut>,
    scratch: &mut CommitScratch,
) -> Result<Vec<SpanRef>, MatchError> {
    // As many as the last commit of as many entries recorded (streams repeat a jobspec),
    // else a bound: a node kept whole is one span, and the vertices above the nodes kept
    // whole (racks, the cluster) two each, an aggregate and their own; listed out, a
    // node's leaves share cover spans. (The bound alone left 10 of a socket match's 21
    // unused: 160 bytes a job kept. Half a span for a vertex above nodes kept whole grew
    // the list again in a quarter of the 5,000-job replay's commits: 0.7 % of its time.)
    let shape = (alloc.entries().len(), alloc.wholes().len());
    let rest = shape.0.saturating_sub(shape.1);
    let mut spans = match scratch.last_spans {
        Some((last, n)) if last == shape => Vec::with_capacity(n),
        _ if shape.1 > 0 => Vec::with_capacity(shape.1 + 2 * rest + 2),
        _ => Vec::with_capacity(rest / 2 + 8),
    };
    refused.clear();
    let result = commit_inner(
        g, tree, st, ranks, alloc, lenient, after, &mut spans, refused, scratch,
    );
    // They were this allocation's only.
    scratch.whole_ranges.clear();
    match result {
        Ok(()) => {
            scratch.last_spans = Some((shape, spans.len()));
            Ok(spans)
        }
        Err(e) => {
            for s in spans {
                // Removing what was just added cannot fail; the first error is the one to report.
                let _ = st.remove(s);
            }
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn commit_inner(
    g: &ResourceGraph,
    tree: &dyn Tree,
    st: &mut SchedState,
    ranks: &dyn PruneRank,
    alloc: &mut Allocation,
    lenient: bool,
    mut after: Option<impl FnMut(&SchedState, VertexId)>,
    spans: &mut Vec<SpanRef>,
    refused: &mut Vec<LeftOut>,
    scratch: &mut CommitScratch,
) -> Result<(), MatchError> {
    let (at, dur) = (alloc.at, alloc.duration);
    let CommitScratch {
        below,
        pending,
        memo,
        seen,
        whole_ranges,
        to_cover,
        last_spans: _,
    } = scratch;
    // Nodes kept whole name this state's listings by whole; another state's (a matcher
    // made again, another matcher) are listed out here and checked vertex by vertex.
    if !alloc.lists_from(st.kept_listings()) {
        alloc.vertices_mut();
    }
    let mut ranges = whole_ranges.iter().copied().peekable();
    // How many entries the nodes kept whole that were listed out here added before the
    // ranges not reached yet (their indices are from before).
    let mut range_shift = 0;
    // A commit that failed may have left rows and leaves behind.
    for row in below.iter_mut() {
        row.clear();
    }
    pending.clear();
    to_cover.clear();
    let mut skew: Depth = 0;
    let mut kept = 0;
    // How many vertices the kept nodes kept whole stand for, their own entries aside: a
    // refused vertex's place counts them.
    let mut kept_below = 0;
    memo.clear();
    // The pruning rank of the last cover group's leaves (one type per group).
    let mut group_rank: Option<(u32, Option<u32>)> = None;
    // The whole whose listing is recorded vertex by vertex.
    let mut declined = None;
    // The next node kept whole, by its place in the allocation's wholes.
    let mut w = 0;
    // The next entry to record: a whole cover records a node's listing at once and skips
    // it.
    let mut next = 0;
    // What the nodes held whole just before add to their parent's sums, not added yet.
    let mut held_up = None;
    while next < alloc.entries().len() {
        let i = next;
        next += 1;
        // A node kept as one entry for its listing: one whole cover for all of it, or
        // listed out to be recorded vertex by vertex.
        if let Some(entry) = alloc.wholes().get(w)
            && entry.at as usize == i
        {
            let node = alloc.entries()[i];
            let listing = alloc.listing(entry);
            let below_n = listing.len();
            let as_whole = (node, entry.whole(), listing);
            let Some(c) = kept_whole(g, tree, st, ranks, as_whole, (at, dur)) else {
                alloc.expand_whole(w);
                range_shift += below_n;
                next = i;
                continue;
            };
            let depth = node.depth as usize;
            hold_whole_node(st, c, (depth, below), &mut held_up, to_cover);
            // In the tree's order: the inner vertices are where the shape says.
            if let Some(after) = after.as_mut() {
                // (What it reads includes the cover.)
                cover_held(st, to_cover, (at, dur), spans, memo)?;
                for &k in inner_at_of(st, c) {
                    after(st, listing.get(k as usize).map_or(node.v, |av| av.v));
                }
            }
            // Where nothing was left out before it (nearly always), it is in place.
            if skew > 0 || kept != i {
                alloc.entries_mut()[kept] = AllocVertex {
                    depth: node.depth + skew,
                    ..node
                };
                alloc.move_whole(w, kept, skew);
            }
            kept += 1;
            kept_below += below_n;
            w += 1;
            continue;
        }
        // Whatever reads the sums or the calendars below comes after the nodes held whole
        // before it.
        add_held_up(st, below, &mut held_up);
        cover_held(st, to_cover, (at, dur), spans, memo)?;
        let av = alloc.entries()[i];
        let d = av.depth as usize;
        if below.len() < d + 2 {
            below.resize_with(d + 2, Vec::new);
        }
        while ranges
            .next_if(|r| (r.0 as usize + range_shift) < i)
            .is_some()
        {}
        let listed_whole = ranges
            .peek()
            .filter(|r| r.0 as usize + range_shift == i)
            .map(|r| r.1 as usize + range_shift);
        // A node listed whole: one whole cover for it and everything below it.
        if let Some(c) = st.whole_of(av.v)
            && declined != Some(c)
        {
            let window = (at, dur);
            let listing = Listing {
                vertices: alloc.entries(),
                first: i,
                listed_whole,
            };
            match whole_listing(g, tree, st, ranks, &listing, c, window, seen) {
                Some(end) => {
                    let depth = alloc.entries()[end].depth as usize;
                    hold_whole_node(st, c, (depth, below), &mut held_up, to_cover);
                    cover_held(st, to_cover, (at, dur), spans, memo)?;
                    let entries = alloc.entries_mut();
                    match after.as_mut() {
                        None => {}
                        // In the tree's order: the inner vertices are where the shape says.
                        Some(after) if listed_whole == Some(end) => {
                            for &k in inner_at_of(st, c) {
                                after(st, entries[i + k as usize].v);
                            }
                        }
                        Some(after) => {
                            for v in entries[i..=end].iter().map(|av| av.v) {
                                // (A leaf keeps no calendar of its own for `after` to read.)
                                if st.inner_index(v).is_some() {
                                    after(st, v);
                                }
                            }
                        }
                    }
                    if skew > 0 || kept != i {
                        for k in i..=end {
                            let av = entries[k];
                            entries[kept + k - i] = AllocVertex {
                                depth: av.depth + skew,
                                ..av
                            };
                        }
                    }
                    kept += end + 1 - i;
                    next = end + 1;
                    continue;
                }
                None => declined = Some(c),
            }
        }
        // Most of a large match: a leaf taken whole that its cover group may stand for,
        // with the group's rank read once.
        if let Some(p) = st.cover_group(av.v).filter(|_| av.exclusive)
            && av.needs == g.size(av.v)
        {
            let size = av.needs;
            // The check `record_vertex` makes; the hold waits for the parent.
            let free = st.leaf_units_free(av.v, size, at, dur, memo) >= av.needs;
            if !free {
                let place = kept + kept_below;
                leave_out(
                    g,
                    &av,
                    (at, dur),
                    lenient,
                    (place, &mut skew, false),
                    refused,
                )?;
                below[d + 1].clear();
                continue;
            }
            let rank = match group_rank {
                Some((q, r)) if q == p => r,
                _ => {
                    let r = ranks.prune_rank(av.v);
                    group_rank = Some((p, r));
                    r
                }
            };
            let (up, this) = below.split_at_mut(d + 1);
            let (row, own) = (&mut up[d], &mut this[0]);
            // It, then the leaves of its group that follow it taken whole as it is: what the
            // loop does for each, less what it asked for this one (no node held whole waits,
            // and the group's whole, rank and covers are this leaf's). Why: a socket's 22
            // cores each went through the whole loop (~100 instructions a core).
            let mut leaf = av;
            loop {
                pending.push((leaf.v.0, p));
                if let Some(r) = rank {
                    add(row, r, leaf.needs);
                }
                // A leaf lists nothing below it; summed all the same, as for any vertex.
                if !own.is_empty() {
                    for &(t, n) in own.iter() {
                        add(row, t, n);
                    }
                    own.clear();
                }
                alloc.entries_mut()[kept] = AllocVertex {
                    depth: leaf.depth + skew,
                    ..leaf
                };
                kept += 1;
                let Some(&n) = alloc.entries().get(next) else {
                    break;
                };
                if n.depth != av.depth
                    || !n.exclusive
                    || st.cover_group(n.v) != Some(p)
                    || n.needs != g.size(n.v)
                    || alloc.wholes().get(w).is_some_and(|e| e.at as usize == next)
                    || st.leaf_units_free(n.v, n.needs, at, dur, memo) < n.needs
                {
                    break;
                }
                leaf = n;
                next += 1;
            }
            continue;
        }
        // Taken out for this vertex and put back emptied, so its memory serves the next.
        let mut dfu = std::mem::take(&mut below[d + 1]);
        if let Some(p) = st.inner_index(av.v) {
            flush_leaves(st, pending, Some(p), at, dur, g, spans)?;
            // It may have added covers.
            memo.clear();
        }
        let recorded = record_vertex(g, st, &av, &dfu, at, dur, spans)?;
        if let Some(after) = after.as_mut() {
            after(st, av.v);
        }
        if recorded != Recorded::All {
            let place = kept + kept_below;
            let tagged = recorded == Recorded::AllButFilter;
            leave_out(
                g,
                &av,
                (at, dur),
                lenient,
                (place, &mut skew, tagged),
                refused,
            )?;
            dfu.clear();
            below[d + 1] = dfu;
            continue;
        }
        let row = &mut below[d];
        if let Some(r) = ranks.prune_rank(av.v) {
            let size = g.size(av.v);
            add(row, r, if av.exclusive { size } else { size - av.needs });
        }
        for &(t, n) in &dfu {
            add(row, t, n);
        }
        dfu.clear();
        below[d + 1] = dfu;
        alloc.entries_mut()[kept] = AllocVertex {
            depth: av.depth + skew,
            ..av
        };
        kept += 1;
    }
    add_held_up(st, below, &mut held_up);
    cover_held(st, to_cover, (at, dur), spans, memo)?;
    flush_leaves(st, pending, None, at, dur, g, spans)?;
    alloc.truncate_entries(kept);
    Ok(())
}

/// Notes whole `c` to be recorded as one whole cover (`to_cover`, by [`cover_held`]) and
/// in `held_up` what its node (at `depth`) adds to its parent's sums, as its records would:
/// nodes of one shape in a row (a reservation's, ~290 in the 5,000-job replay) are added to
/// `below[depth]` once, times their number, by [`add_held_up`], and their covers over the
/// one window in one call.
///
/// Inlined into the commit's loop, as [`kept_whole`] is: called once for every node taken
/// whole, its tuples stay in registers (the two inlined took 4.8 % off the 1,000-job replay).
#[inline(always)]
fn hold_whole_node(
    st: &SchedState,
    c: u32,
    (depth, below): (usize, &mut Vec<Vec<(u32, i64)>>),
    held_up: &mut Option<HeldUp>,
    to_cover: &mut Vec<u32>,
) {
    if below.len() < depth + 2 {
        below.resize_with(depth + 2, Vec::new);
    }
    match held_up {
        Some(h) if h.depth == depth && same_shape(st, h.whole, c) => h.nodes += 1,
        _ => {
            add_held_up(st, below, held_up);
            *held_up = st.learned_shape(c).map(|_| HeldUp {
                depth,
                whole: c,
                nodes: 1,
            });
        }
    }
    to_cover.push(c);
}

/// Records the whole covers of the wholes `to_cover` over the allocation's window, all at
/// once: the window's bounds and references are found and counted once, and each node's row
/// is two words or'ed (a call per node was 6 % of the 5,000-job replay's time). Called before
/// anything reads the calendars below. (The checks of the wholes noted before do not see
/// these covers: a whole named twice is refused here, by `hold_wholes`.)
fn cover_held(
    st: &mut SchedState,
    to_cover: &mut Vec<u32>,
    (at, dur): (i64, u64),
    spans: &mut Vec<SpanRef>,
    memo: &mut CoverMemo,
) -> Result<(), MatchError> {
    if to_cover.is_empty() {
        return Ok(());
    }
    let held = st.hold_wholes(to_cover, at, dur, spans);
    to_cover.clear();
    // What it knew of the covers may have changed.
    memo.clear();
    held
}

/// Nodes held whole in a row whose sums are not added yet: how many, at what depth, and a
/// whole of their shape.
#[derive(Clone, Copy, Debug)]
struct HeldUp {
    depth: usize,
    whole: u32,
    nodes: i64,
}

/// Whether wholes `a` and `b` have one learned shape.
fn same_shape(st: &SchedState, a: u32, b: u32) -> bool {
    match (st.learned_shape(a), st.learned_shape(b)) {
        (Some(x), Some(y)) => std::ptr::eq(x, y),
        _ => false,
    }
}

/// Adds what the nodes of `held_up` add to their parent's sums, times their number.
fn add_held_up(st: &SchedState, below: &mut [Vec<(u32, i64)>], held_up: &mut Option<HeldUp>) {
    let Some(h) = held_up.take() else {
        return;
    };
    if let (Some(shape), Some(row)) = (st.learned_shape(h.whole), below.get_mut(h.depth)) {
        add_all(row, &shape.up, h.nodes);
    }
}

/// Where the inner vertices of whole `c` are in a listing of it in the tree's order (its
/// learned shape's; none when it has none).
fn inner_at_of(st: &SchedState, c: u32) -> &[u32] {
    st.learned_shape(c).map_or(&[], |shape| &shape.inner_at)
}

/// A vertex whose calendar cannot take it during `(at, dur)`: a strict commit fails; a
/// lenient one leaves it out, noting it after the `kept` vertices before it, and every
/// later vertex one level deeper (`skew`).
fn leave_out(
    g: &ResourceGraph,
    av: &AllocVertex,
    (at, dur): (i64, u64),
    lenient: bool,
    (kept, skew, tagged): (usize, &mut Depth, bool),
    refused: &mut Vec<LeftOut>,
) -> Result<(), MatchError> {
    if !lenient {
        return Err(MatchError::Internal(format!(
            "{} cannot take {} units during [{at}, +{dur})",
            g.path(av.v),
            av.needs
        )));
    }
    refused.push(LeftOut {
        kept,
        vertex: AllocVertex {
            depth: av.depth + *skew,
            ..*av
        },
        tagged,
    });
    *skew += 1;
    Ok(())
}

/// Records the pending leaves whose parent is inner index `parent` (the tail of
/// `pending`): one cover per cover group they fill, else a hold each. With `None`, every
/// pending leaf gets its own hold (a leaf whose parent the allocation does not list).
fn flush_leaves(
    st: &mut SchedState,
    pending: &mut Vec<(u32, u32)>,
    parent: Option<u32>,
    at: i64,
    dur: u64,
    g: &ResourceGraph,
    spans: &mut Vec<SpanRef>,
) -> Result<(), MatchError> {
    let from = match parent {
        Some(p) => {
            let n = pending
                .iter()
                .rev()
                .take_while(|e| st.cover_group_parent(e.1) == p)
                .count();
            pending.len() - n
        }
        None => 0,
    };
    if parent.is_some() {
        // A group's leaves together: the graph may interleave types among a vertex's
        // children (a node whose sockets were dropped lists each socket's cores, gpus and
        // memory in turn), and a cover stands for every leaf of its group however they
        // are listed. Stable, so a group's leaves keep their order; which leaf is held
        // first changes no answer (each leaf and each group has its own hold list).
        pending[from..].sort_by_key(|e| e.1);
    }
    let mut i = from;
    while i < pending.len() {
        let group = pending[i].1;
        if parent.is_some() {
            // Leaves of a group taken only in part get holds.
            let n = pending[i..].iter().take_while(|e| e.1 == group).count();
            let mine = &pending[i..i + n];
            if mine.len() == st.cover_group_leaves(group) as usize && distinct(mine) {
                st.hold_cover(group, at, dur, spans)?;
                i += n;
                continue;
            }
        }
        let v = VertexId(pending[i].0);
        st.hold(v, at, dur, g.size(v), true, spans)?;
        i += 1;
    }
    pending.truncate(from);
    Ok(())
}

/// Whether the leaves are distinct (a cover stands for each leaf of its group once).
fn distinct(leaves: &[(u32, u32)]) -> bool {
    if leaves.windows(2).all(|w| w[0].0 < w[1].0) {
        return true;
    }
    let mut ids: Vec<u32> = leaves.iter().map(|e| e.0).collect();
    ids.sort_unstable();
    ids.windows(2).all(|w| w[0] != w[1])
}

/// Records one vertex; false when its calendar refuses it (nothing of it is kept then but
/// its job count, as in Fluxion).
/// What [`record_vertex`] recorded of a vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recorded {
    All,
    /// Its calendar refused it.
    Nothing,
    /// Its calendar took it; its pruning filter refused what the match takes below it.
    AllButFilter,
}

fn record_vertex(
    g: &ResourceGraph,
    st: &mut SchedState,
    av: &AllocVertex,
    dfu: &[(u32, i64)],
    at: i64,
    dur: u64,
    spans: &mut Vec<SpanRef>,
) -> Result<Recorded, MatchError> {
    let v = av.v;
    if av.exclusive && st.units_free(v, g.size(v), at, dur) < av.needs {
        return Ok(Recorded::Nothing);
    }
    if st.is_leaf(v) {
        st.hold(v, at, dur, av.needs, av.exclusive, spans)?;
        return Ok(Recorded::All);
    }
    // One record for the job count, the units and the aggregate's part (`state::inner`).
    let units = av.exclusive.then_some(av.needs);
    let needs = (!dfu.is_empty()).then_some(dfu);
    if st.hold_inner(v, (at, dur), units, needs, spans)? {
        return Ok(Recorded::AllButFilter);
    }
    Ok(Recorded::All)
}

/// [`add`] of each of `sums`, `times` over. A vertex's children are mostly alike, their
/// sums holding the same types in the same order, so each type is looked for first at its
/// place in `sums` (the search by type was ~50 instructions per node taken whole).
fn add_all(row: &mut Vec<(u32, i64)>, sums: &[(u32, i64)], times: i64) {
    for (k, &(t, n)) in sums.iter().enumerate() {
        let n = n.saturating_mul(times);
        match row.get_mut(k) {
            Some(e) if e.0 == t => e.1 = e.1.saturating_add(n),
            _ => add(row, t, n),
        }
    }
}

fn add(row: &mut Vec<(u32, i64)>, t: u32, n: i64) {
    match row.iter_mut().find(|e| e.0 == t) {
        Some(e) => e.1 = e.1.saturating_add(n),
        None => row.push((t, n)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests;
