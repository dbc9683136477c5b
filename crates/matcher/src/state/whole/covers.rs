//! Each whole's covers, as one row of bits per whole over instants all wholes share.

use std::cell::Cell;

use smallvec::SmallVec;

use super::bits::{self, Row};

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
/// `SchedState::hold_whole`), so those bits say which covers it has.
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
    /// How many cover starts and ends lie at each bound: a bound none is left at is taken
    /// out (then both segments it parted hold the same covers).
    refs: Vec<u32>,
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

/// Where the last cover added starts and ends among the bounds.
///
/// Why: a commit adds one cover per node it takes whole, all over the job's window (~290
/// nodes a reservation in the 5,000-job replay), and finding the window's bounds for each
/// was most of an add.
#[derive(Clone, Copy, Debug)]
struct AddAt {
    start: i64,
    end: i64,
    epoch: u64,
    s: usize,
    e: usize,
}

/// A job's covers taken out together when they start at bound `s` and end at `e` in one
/// word of their rows (`WholeCovers::remove_each`): that word's index and masks.
#[derive(Clone, Copy, Debug)]
struct OneWord {
    j: usize,
    e: usize,
    /// Bit `s`: where each starts.
    start: u64,
    /// Bits `[s, e)`: where each holds.
    held: u64,
    /// Bits `[s + 1, e)`: held by the same cover (held, none a start).
    inside: u64,
    /// Bit `e`: free or a start unless `e` is the last bound (`last`).
    end: u64,
    last: bool,
}

impl OneWord {
    fn of(s: usize, e: usize, last: usize) -> Option<OneWord> {
        let j = s / 64;
        (s < e && e / 64 == j).then(|| OneWord {
            j,
            e,
            start: 1 << (s % 64),
            held: bits::range_mask(j, s, e),
            inside: if s + 1 < e {
                bits::range_mask(j, s + 1, e)
            } else {
                0
            },
            end: 1 << (e % 64),
            last: e == last,
        })
    }
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

/// Equal when every whole has the same covers, whatever the room in their rows.
impl PartialEq for WholeCovers {
    fn eq(&self, other: &Self) -> bool {
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
        if let Some((j, mask)) = plane {
            return self.busy[j * self.count.len() + c as usize] & mask != 0;
        }
        if lo < hi {
            return self.rows(c).0.any_in(lo, hi);
        }
        // An empty window (`end <= at`): the cover holding `at`, if it starts before `end`.
        self.covers_from(c, lo)
            .next()
            .is_some_and(|w| w.start < end && w.end > at)
    }

    /// Whether a cover of each whole meets `[at, end)` (`at < end`), into `busy`: a word
    /// per whole, nonzero when one does. [`WholeCovers::meets`] for every whole at once, in
    /// one pass over the planes holding the window's segments (the words of one segment for
    /// every whole lie side by side).
    pub(super) fn meeting_all(&self, at: i64, end: i64, busy: &mut Vec<u64>) {
        let n = self.count.len();
        busy.clear();
        busy.resize(n, 0);
        let (lo, hi) = self.segments(at, end);
        // With `at < end`, no segment meets the window only when it lies before every
        // bound: before every cover.
        if lo >= hi {
            return;
        }
        for j in lo / 64..=(hi - 1) / 64 {
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

    /// The index of bound `t` (`hint`, when it is), made when there is none: every row gets
    /// a bit there, the two parts of the segment it cuts holding what the segment held.
    fn bound(&mut self, t: i64, hint: usize) -> usize {
        if self.bounds.get(hint) == Some(&t) {
            return hint;
        }
        let k = self.bounds.partition_point(|&b| b < t);
        if self.bounds.get(k) == Some(&t) {
            return k;
        }
        let n = self.count.len();
        if self.bounds.len() + 1 > self.words * 64 {
            // Room for 64 more: a plane more in each.
            self.busy.resize(self.busy.len() + n, 0);
            self.starts.resize(self.starts.len() + n, 0);
            self.words += 1;
        }
        self.bounds.insert(k, t);
        self.refs.insert(k, 0);
        self.window.set(Window::NONE);
        self.epoch += 1;
        // Only the planes holding a bound move (the rows keep the room of the most bounds
        // there ever were, all clear past the last).
        let used = self.bounds.len().div_ceil(64) * n;
        bits::insert_all(&mut self.busy[..used], n, k, true);
        bits::insert_all(&mut self.starts[..used], n, k, false);
        k
    }

    /// `by` cover starts or ends fewer at bound `k`; the bound taken out when none is left.
    fn unref(&mut self, k: usize, by: u32) {
        self.refs[k] -= by;
        if self.refs[k] > 0 {
            return;
        }
        let n = self.count.len();
        // The planes holding a bound before this one goes: clear past them already.
        let used = self.bounds.len().div_ceil(64) * n;
        self.bounds.remove(k);
        self.refs.remove(k);
        self.window.set(Window::NONE);
        self.epoch += 1;
        bits::remove_all(&mut self.busy[..used], n, k);
        bits::remove_all(&mut self.starts[..used], n, k);
    }

    /// Adds a cover of whole `c` over `[start, end)` (a window of at least one second),
    /// unless another cover of it meets the window (the tests' way in; a commit knows).
    #[cfg(test)]
    pub(super) fn add(&mut self, c: usize, start: i64, end: i64) -> bool {
        if start >= end || self.meets(c as u32, start, end) {
            return false;
        }
        self.add_free(c, start, end);
        true
    }

    /// Adds a cover of whole `c` over a window no cover of it meets, as the
    /// caller found (`SchedState::whole_free`, asked of every node a commit takes whole,
    /// just before): the second look at its row was 1.6 % of the 5,000-job conservative
    /// replay. Checked again in debug builds.
    pub(super) fn add_free(&mut self, c: usize, start: i64, end: i64) {
        debug_assert!(
            start < end && !self.meets(c as u32, start, end),
            "a whole cover of {c} over [{start}, {end}), which another meets"
        );
        let (s, e) = match self.last_add {
            Some(a) if a.start == start && a.end == end && a.epoch == self.epoch => (a.s, a.e),
            _ => {
                // The segments the window meets start at the start's bound and end before
                // the end's, when there are such bounds (the covers a commit adds share them).
                let (lo, hi) = self.segments(start, end);
                let s = self.bound(start, lo);
                // The end's bound comes after the start's: making that moved it by one.
                let e = self.bound(end, hi + usize::from(s != lo));
                self.last_add = Some(AddAt {
                    start,
                    end,
                    epoch: self.epoch,
                    s,
                    e,
                });
                (s, e)
            }
        };
        self.refs[s] += 1;
        self.refs[e] += 1;
        let n = self.count.len();
        bits::set_range(&mut self.busy, n, c, s, e, true);
        bits::set_range(&mut self.starts, n, c, s, s + 1, true);
        self.count[c] += 1;
        self.live += 1;
    }

    /// The cover of whole `c` that starts at `start`, taken out: its window.
    pub(super) fn remove(&mut self, c: usize, start: i64) -> Option<(i64, i64)> {
        let c = u32::try_from(c)
            .ok()
            .filter(|&c| (c as usize) < self.count.len())?;
        let cover = self.ending_after(c, start).next()?;
        (cover.start == start && self.remove_each(&[c], start)).then_some((start, cover.end))
    }

    /// Takes out the cover of each whole of `cs` that starts at `start` (a job's: its
    /// covers share their window), each bound's references counted down once: one start,
    /// and the ends (one, unless the covers were cut short differently).
    /// `false` when one of them has no such cover: then none is taken out, unless `cs`
    /// names a whole twice (never: a job holds one cover of a whole at an instant).
    ///
    /// Why: a re-plan takes out each reservation it places again, ~320 covers in the
    /// 5,000-job replay, and finding the start's segment and counting the references down
    /// cover by cover was 3 % of its instructions.
    pub(super) fn remove_each(&mut self, cs: &[u32], start: i64) -> bool {
        if cs.is_empty() {
            return true;
        }
        let s = self.segment(start);
        if self.bounds.get(s) != Some(&start)
            || !cs.iter().all(|&c| {
                self.count.get(c as usize).is_some_and(|&n| n > 0) && self.rows(c).1.get(s)
            })
        {
            return false;
        }
        let (last, n) = (self.bounds.len() - 1, self.count.len());
        // Each end's bound and how many covers end there (no bound goes before the end).
        let mut ends_by: SmallVec<[(usize, u32); 4]> = SmallVec::new();
        let mut removed = 0;
        // A job's covers share their window: the end found for one is, for each next, a
        // check of its row instead of a search.
        let mut common = None;
        // The shared end's word, when the covers start and end in one: each next cover is
        // then checked and cleared with two words and masks made once.
        let mut one_word: Option<OneWord> = None;
        for &c in cs {
            if let Some(w) = one_word {
                let i = w.j * n + c as usize;
                let (b, st) = (self.busy[i], self.starts[i]);
                if st & w.start == 0 {
                    break;
                }
                let ends = (b & !st) & w.inside == w.inside
                    && (w.last || b & w.end == 0 || st & w.end != 0);
                debug_assert_eq!(
                    ends,
                    bits::ends_at(self.rows(c).0, self.rows(c).1, s + 1, w.e, last)
                );
                if ends {
                    self.busy[i] = b & !w.held;
                    self.starts[i] = st & !w.start;
                    self.count[c as usize] -= 1;
                    match ends_by.iter_mut().find(|x| x.0 == w.e) {
                        Some(x) => x.1 += 1,
                        None => ends_by.push((w.e, 1)),
                    }
                    removed += 1;
                    continue;
                }
            }
            let (busy, starts) = self.rows(c);
            if !starts.get(s) {
                break;
            }
            let e = match common {
                Some(e) if bits::ends_at(busy, starts, s + 1, e, last) => e,
                _ => {
                    let e = bits::next_end(busy, starts, s + 1).min(last);
                    common = Some(e);
                    one_word = OneWord::of(s, e, last);
                    e
                }
            };
            let c = c as usize;
            bits::set_range(&mut self.busy, n, c, s, e, false);
            bits::set_range(&mut self.starts, n, c, s, s + 1, false);
            self.count[c] -= 1;
            match ends_by.iter_mut().find(|x| x.0 == e) {
                Some(x) => x.1 += 1,
                None => ends_by.push((e, 1)),
            }
            removed += 1;
        }
        self.live -= removed as usize;
        // Later bounds first: taking out an earlier one would move them.
        ends_by.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
        for (e, by) in ends_by {
            self.unref(e, by);
        }
        if removed > 0 {
            self.unref(s, removed);
        }
        removed as usize == cs.len()
    }
}

#[cfg(test)]
mod tests;
