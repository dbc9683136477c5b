//! Each whole's covers, as one row of bits per whole over instants all wholes share.

use std::cell::Cell;

use super::bits::{self, Row};
use change::AddAt;

/// One whole cover: `[start, end)`. Its start names it among its whole's covers (they
/// never overlap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WholeCover {
    pub(super) start: i64,
    pub(super) end: i64,
}

/// The whole covers of every whole, as rows of bits over shared *segments* of time.
///
/// The instants where some cover starts or ends (`bounds`, in order) cut time into
/// segments, segment `i` being `[bounds[i], bounds[i + 1])`. Each whole has a row of bits:
/// one per segment saying whether one of its covers holds there (`busy`), and one per
/// segment saying whether one of its covers starts at the segment's first instant
/// (`starts`, which tells two covers apart when one ends where the next begins). A whole's
/// covers never overlap (a cover is recorded only where none meets its window:
/// `SchedState::hold_wholes`), so those bits say which covers it has.
///
/// Why: a conservative re-plan takes out each reservation it places again and records it
/// anew, one cover per node taken (~320 nodes a reservation in the 5,000-job replay: 14
/// million covers added and as many removed), and asks of every node it considers whether
/// a cover meets a window (90 million questions). With a list of covers per whole, each of
/// those read or shifted a list of its own — a cache miss or several per node, a quarter of
/// the replay's time. A row is a word or two per whole in one array for all wholes; a
/// window is found among the bounds once for all the nodes asked about it; a cover is a
/// range of bits set or cleared. What costs more is a new bound: every row gets a bit
/// there — once per instant a reservation starts or ends, not once per node.
#[derive(Clone, Debug)]
pub(super) struct WholeCovers {
    /// The instants where a live cover starts or ends, in order.
    bounds: Vec<i64>,
    /// How many cover starts and ends lie at each bound. A bound none is left at is
    /// *dead*: both segments it parts hold the same covers, and no cover starts there.
    refs: Vec<u32>,
    /// How many bounds are dead. They are left in place and taken out together
    /// (`change.rs`, `drop_dead`): a re-plan takes a reservation out and places it again,
    /// often over the same window, and every bound taken out and made again moved every
    /// whole's row twice.
    dead: usize,
    /// The `busy` rows, in planes (`bits`): room for a multiple of 64 bounds.
    busy: Vec<u64>,
    /// The `starts` rows, in planes like `busy`.
    starts: Vec<u64>,
    /// Covers per whole.
    count: Vec<u32>,
    /// Words in each row: planes of `busy` (and of `starts`).
    words: usize,
    /// Covers of all wholes.
    pub(super) live: usize,
    /// The last window asked about and the segments it meets; a change of bounds resets it.
    window: Cell<Window>,
    /// The last segment [`WholeCovers::segment`] found: most questions in a row are about
    /// one instant.
    segment: Cell<usize>,
    /// Counts the changes of `bounds`: what was found among them is good while it stands.
    epoch: u64,
    /// The bounds of the last cover added, while `epoch` stands.
    last_add: Option<AddAt>,
}

/// Segments `[lo, hi)` meet `[at, end)`.
#[derive(Clone, Copy, Debug)]
struct Window {
    at: i64,
    end: i64,
    lo: usize,
    hi: usize,
    /// When the segments lie in one plane (`lo < hi`): that plane and their bits in it.
    /// Why: a select asks of every node it meets whether a cover meets one window, and
    /// one word of its row, masked, answers most of them.
    plane: Option<(usize, u64)>,
}

impl Window {
    /// Answers for no window.
    const NONE: Window = Window {
        at: i64::MAX,
        end: i64::MIN,
        lo: 0,
        hi: 0,
        plane: None,
    };
}

/// Equal when every whole has the same covers, whatever the room in their rows and the
/// dead bounds left in them.
impl PartialEq for WholeCovers {
    fn eq(&self, other: &Self) -> bool {
        if self.dead > 0 || other.dead > 0 {
            return self.count == other.count
                && (0..self.count.len() as u32).all(|c| self.all(c).eq(other.all(c)));
        }
        let used = self.bounds.len().div_ceil(64) * self.count.len();
        self.bounds == other.bounds
            && self.count == other.count
            && self.busy[..used] == other.busy[..used]
            && self.starts[..used] == other.starts[..used]
    }
}

impl WholeCovers {
    /// No covers, for `n` wholes.
    pub(super) fn new(n: usize) -> WholeCovers {
        WholeCovers {
            bounds: Vec::new(),
            refs: Vec::new(),
            dead: 0,
            busy: Vec::new(),
            words: 0,
            starts: Vec::new(),
            count: vec![0; n],
            live: 0,
            window: Cell::new(Window::NONE),
            segment: Cell::new(0),
            epoch: 0,
            last_add: None,
        }
    }

    /// Whole `c`'s rows: its `busy` and `starts` bits.
    #[inline]
    fn rows(&self, c: u32) -> (Row<'_>, Row<'_>) {
        let n = self.count.len();
        let c = c as usize;
        let w = self.words;
        (
            Row::with_len(&self.busy, n, c, w),
            Row::with_len(&self.starts, n, c, w),
        )
    }

    /// Whether whole `c` has no cover.
    #[inline]
    pub(super) fn is_empty(&self, c: u32) -> bool {
        self.count[c as usize] == 0
    }

    /// The segments meeting `[at, end)`: from the one holding `at` (the first, when `at`
    /// is before every bound) to the last starting before `end`.
    #[inline]
    fn segments(&self, at: i64, end: i64) -> (usize, usize) {
        let w = self.window(at, end);
        (w.lo, w.hi)
    }

    /// [`WholeCovers::segments`], with the one plane they may lie in.
    #[inline]
    fn window(&self, at: i64, end: i64) -> Window {
        let last = self.window.get();
        if last.at == at && last.end == end {
            return last;
        }
        let lo = self.segment(at);
        let hi = self.bounds.partition_point(|&b| b < end);
        let plane = (lo < hi && lo / 64 == (hi - 1) / 64)
            .then(|| (lo / 64, bits::range_mask(lo / 64, lo, hi)));
        let w = Window {
            at,
            end,
            lo,
            hi,
            plane,
        };
        self.window.set(w);
        w
    }

    /// The segment holding `at` (the first, when `at` is before every bound).
    #[inline]
    fn segment(&self, at: i64) -> usize {
        let h = self.segment.get();
        let b = &self.bounds;
        if b.get(h).is_some_and(|&s| s <= at) && b.get(h + 1).is_none_or(|&e| at < e) {
            return h;
        }
        let h = b.partition_point(|&s| s <= at).saturating_sub(1);
        self.segment.set(h);
        h
    }

    /// The earliest instant at or after `at` from which no cover of whole `c` meets a
    /// window of `dur` seconds, given `own`: the earliest such start of other records.
    pub(super) fn free_from(
        &self,
        c: u32,
        at: i64,
        dur: i64,
        own: impl Fn(i64) -> Option<i64>,
    ) -> Option<i64> {
        let mut t = own(at)?;
        if self.count[c as usize] == 0 {
            return Some(t);
        }
        let (busy, starts) = self.rows(c);
        let mut i = self.segment(t);
        loop {
            let (free, g) = self.clear_from(busy, starts, t, i, dur);
            if free == t {
                return Some(t);
            }
            (t, i) = (own(free)?, g);
            while self.bounds.get(i + 1).is_some_and(|&b| b <= t) {
                i += 1;
            }
        }
    }

    /// The earliest instant at or after `t` (in segment `i`) from which no cover of a
    /// whole (`busy`, `starts`, with a cover at least) meets a window of `dur` seconds, and
    /// its segment.
    ///
    /// Why by runs: a long job asks this past every cover of a node before a gap wide
    /// enough (14 covers a question in the 5,000-job replay); a run of covers one after
    /// another, as a conservative plan places them, is one step.
    fn clear_from(&self, busy: Row, starts: Row, t: i64, i: usize, dur: i64) -> (i64, usize) {
        let b = &self.bounds;
        let n = b.len();
        if dur == 0 {
            // An empty window meets only a cover holding `t` that started before it.
            let inside = t >= b[0] && busy.get(i) && (t > b[i] || !starts.get(i));
            if !inside {
                return (t, i);
            }
            let e = bits::next_end(busy, starts, i + 1).min(n - 1);
            return (b[e], e);
        }
        let (mut s, mut g) = (t, i);
        if t < b[0] {
            // Free until the first cover.
            match busy.next_set(0).filter(|&j| j < n) {
                Some(j) if b[j] < t.saturating_add(dur) => g = j,
                _ => return (t, i),
            }
        }
        loop {
            if busy.get(g) {
                // Past the run of covers holding `g`.
                g = busy.next_clear(g).min(n - 1);
                s = b[g];
            }
            match busy.next_set(g).filter(|&j| j < n) {
                Some(j) if b[j] < s.saturating_add(dur) => g = j,
                _ => return (s, g),
            }
        }
    }

    /// Whether a cover of whole `c` meets `[at, end)`: ends after `at` and starts before
    /// `end`.
    #[inline]
    pub(super) fn meets(&self, c: u32, at: i64, end: i64) -> bool {
        if self.count[c as usize] == 0 {
            return false;
        }
        let Window { lo, hi, plane, .. } = self.window(at, end);
        if let Some(plane) = plane {
            return self.meets_in_plane(c, plane);
        }
        if lo < hi {
            return self.rows(c).0.any_in(lo, hi);
        }
        // An empty window (`end <= at`): the cover holding `at`, if it starts before `end`.
        self.covers_from(c, lo)
            .next()
            .is_some_and(|w| w.start < end && w.end > at)
    }

    /// [`WholeCovers::meets`], inlined up to the window's one word: for a select and a
    /// commit, which ask it of every node they meet or take whole, all over one window.
    #[inline(always)]
    pub(super) fn meets_inlined(&self, c: u32, at: i64, end: i64) -> bool {
        if self.count[c as usize] == 0 {
            return false;
        }
        let last = self.window.get();
        if last.at == at
            && last.end == end
            && let Some(plane) = last.plane
        {
            return self.meets_in_plane(c, plane);
        }
        self.meets(c, at, end)
    }

    /// Whether whole `c`'s row has a bit of `mask` in plane `j`: a window's segments that
    /// lie in one plane ([`Window::plane`]) asked at once. (A whole without covers has no
    /// bit set.)
    #[inline(always)]
    pub(super) fn meets_in_plane(&self, c: u32, (j, mask): (usize, u64)) -> bool {
        self.busy[j * self.count.len() + c as usize] & mask != 0
    }

    /// Plane `j` of the `busy` rows: word `j` of each whole's row, in order of wholes.
    #[inline]
    pub(super) fn busy_plane(&self, j: usize) -> &[u64] {
        let n = self.count.len();
        &self.busy[j * n..(j + 1) * n]
    }

    /// The plane and mask of `[at, end)`'s segments when they lie in one plane (nearly
    /// always), for [`WholeCovers::meets_in_plane`] asked of many wholes over one window.
    #[inline]
    pub(super) fn window_plane(&self, at: i64, end: i64) -> Option<(usize, u64)> {
        self.window(at, end).plane
    }

    /// Whether a cover of each whole meets `[at, end)` (`at < end`), into `busy`: a word
    /// per whole, nonzero when one does. [`WholeCovers::meets`] for every whole at once, in
    /// one pass over the planes holding the window's segments (the words of one segment for
    /// every whole lie side by side).
    pub(super) fn meeting_all(&self, at: i64, end: i64, busy: &mut Vec<u64>) {
        let n = self.count.len();
        busy.clear();
        let (lo, hi) = self.segments(at, end);
        // With `at < end`, no segment meets the window only when it lies before every
        // bound: before every cover.
        if lo >= hi {
            busy.resize(n, 0);
            return;
        }
        // The first plane's words are written, not added to zeros: no pass to clear them.
        let first = lo / 64;
        let m = bits::range_mask(first, lo, hi);
        busy.extend(self.busy[first * n..(first + 1) * n].iter().map(|&w| w & m));
        for j in first + 1..=(hi - 1) / 64 {
            let m = bits::range_mask(j, lo, hi);
            for (b, &w) in busy.iter_mut().zip(&self.busy[j * n..(j + 1) * n]) {
                *b |= w & m;
            }
        }
    }

    /// The instants after `t` where some cover starts or ends, in order.
    pub(super) fn bounds_after(&self, t: i64) -> &[i64] {
        &self.bounds[self.bounds.partition_point(|&b| b <= t)..]
    }

    /// Whole `c`'s covers from the first holding segment `seg` or a later one, in order.
    fn covers_from(&self, c: u32, seg: usize) -> impl Iterator<Item = WholeCover> + Clone + '_ {
        let (busy, starts) = self.rows(c);
        let n = self.bounds.len();
        // The first cover holding a segment from `seg` on may have started before it.
        let mut next = busy.next_set(seg).filter(|&i| i < n).map(|i| {
            if starts.get(i) {
                i
            } else {
                starts.prev_set(i).unwrap_or(i)
            }
        });
        std::iter::from_fn(move || {
            let s = next?;
            let e = bits::next_end(busy, starts, s + 1).min(n - 1);
            next = busy.next_set(e).filter(|&i| i < n);
            Some(WholeCover {
                start: self.bounds[s],
                end: self.bounds[e],
            })
        })
    }

    /// Whole `c`'s covers from the first that ends after `at`, in order.
    pub(super) fn ending_after(
        &self,
        c: u32,
        at: i64,
    ) -> impl Iterator<Item = WholeCover> + Clone + '_ {
        let seg = match self.count[c as usize] {
            0 => self.bounds.len(),
            _ => self.segment(at),
        };
        self.covers_from(c, seg).filter(move |w| w.end > at)
    }

    /// All of whole `c`'s covers, in order.
    pub(super) fn all(&self, c: u32) -> impl Iterator<Item = WholeCover> + Clone + '_ {
        self.ending_after(c, i64::MIN)
    }

    /// The overlapping parts of the covers of whole `c` during `[at, end)`, in order, each
    /// one job.
    pub(super) fn meeting(
        &self,
        c: u32,
        at: i64,
        end: i64,
    ) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ending_after(c, at)
            .take_while(move |w| w.start < end)
            .map(move |w| (w.start.max(at), w.end.min(end)))
    }

    /// How many covers of whole `c` meet `[at, end)` (jobs: each cover is one).
    pub(super) fn jobs_meeting(&self, c: u32, at: i64, end: i64) -> i64 {
        i64::try_from(self.meeting(c, at, end).count()).unwrap_or(i64::MAX)
    }
}

mod change;
#[cfg(test)]
mod tests;
