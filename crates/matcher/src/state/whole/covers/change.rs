//! Covers added and taken out, and the bounds they need made and dropped.

use smallvec::SmallVec;

use super::super::bits;
use super::{WholeCovers, Window};

/// Where the last cover added starts and ends among the bounds.
///
/// Why: a commit adds one cover per node it takes whole, all over the job's window (~290
/// nodes a reservation in the 5,000-job replay), and finding the window's bounds for each
/// was most of an add.
#[derive(Clone, Copy, Debug)]
pub(super) struct AddAt {
    start: i64,
    end: i64,
    epoch: u64,
    s: usize,
    e: usize,
    /// When bounds `[s, e)` lie in one word of a row (nearly always): its plane, the bits
    /// a cover holds there and its start's bit, so that an add is two words or'ed.
    one_word: Option<(usize, u64, u64)>,
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
    /// Whether a cover whose row holds `busy` and `starts` in this word ends at `e`, as
    /// `bits::ends_at` answers.
    #[inline]
    fn ends(&self, busy: u64, starts: u64) -> bool {
        (busy & !starts) & self.inside == self.inside
            && (self.last || busy & self.end == 0 || starts & self.end != 0)
    }

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

/// Dead bounds (`WholeCovers::dead`) left in place before they are taken out together.
/// Why this many: a dead bound costs a bit in every row (a window is more often two words
/// than one), and taking them out costs what taking each out at once did; most come back
/// within the re-plan that left them (the same window placed again).
pub(super) const DEAD_BOUNDS_MAX: usize = 16;

impl WholeCovers {
    /// The index of bound `t` (`hint`, when it is), made when there is none: every row gets
    /// a bit there, the two parts of the segment it cuts holding what the segment held. A
    /// bound made is dead until a cover refers to it.
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
        self.dead += 1;
        self.window.set(Window::NONE);
        self.epoch += 1;
        // Only the planes holding a bound move (the rows keep the room of the most bounds
        // there ever were, all clear past the last).
        let used = self.bounds.len().div_ceil(64) * n;
        bits::insert_all(&mut self.busy[..used], n, k, true);
        bits::insert_all(&mut self.starts[..used], n, k, false);
        k
    }

    /// `by` cover starts or ends fewer at bound `k`; the bound left dead when none is left.
    fn unref(&mut self, k: usize, by: u32) {
        self.refs[k] -= by;
        if self.refs[k] == 0 {
            self.dead += 1;
            // The next add finds its bounds again, counting those it brings back.
            self.last_add = None;
        }
    }

    /// Takes the dead bounds out (every row loses their bits), when there are more than
    /// [`DEAD_BOUNDS_MAX`], or any when a new bound would need a plane more (`room_for`
    /// bounds more).
    fn drop_dead(&mut self, room_for: usize) {
        let full = self.bounds.len() + room_for > self.words * 64;
        if self.dead == 0 || !(self.dead > DEAD_BOUNDS_MAX || full) {
            return;
        }
        let n = self.count.len();
        for k in (0..self.bounds.len()).rev() {
            if self.refs[k] > 0 {
                continue;
            }
            debug_assert!(self.is_redundant(k), "bound {k} dead but not redundant");
            // The planes holding a bound before this one goes: clear past them already.
            let used = self.bounds.len().div_ceil(64) * n;
            self.bounds.remove(k);
            self.refs.remove(k);
            bits::remove_all(&mut self.busy[..used], n, k);
            bits::remove_all(&mut self.starts[..used], n, k);
        }
        self.dead = 0;
        self.window.set(Window::NONE);
        self.epoch += 1;
        self.last_add = None;
    }

    /// Whether bound `k` parts nothing: no cover starts there, and each whole's segments
    /// on both sides hold the same.
    fn is_redundant(&self, k: usize) -> bool {
        (0..self.count.len() as u32).all(|c| {
            let (busy, starts) = self.rows(c);
            !starts.get(k) && (k == 0 || busy.get(k - 1) == busy.get(k))
        })
    }

    /// Adds a cover of whole `c` over `[start, end)` (a window of at least one second),
    /// unless another cover of it meets the window (the tests' way in; a commit knows).
    #[cfg(test)]
    pub(in crate::state::whole) fn add(&mut self, c: usize, start: i64, end: i64) -> bool {
        if start >= end || self.meets(c as u32, start, end) {
            return false;
        }
        self.add_free(c, start, end);
        true
    }

    /// Adds a cover of whole `c` over a window no cover of it meets (the tests' way in).
    #[cfg(test)]
    pub(in crate::state::whole) fn add_free(&mut self, c: usize, start: i64, end: i64) {
        assert_eq!(
            self.add_each(&[c as u32], start, end),
            1,
            "a cover over another"
        );
    }

    /// Adds a cover of each whole of `cs` over `[start, end)`, in order, until one meets a
    /// cover (another, or one just added: `cs` naming a whole twice); returns how many it
    /// added. The caller found each free (`SchedState::whole_free`, asked of every node a
    /// commit takes whole): the check here is a test of the word being written.
    ///
    /// Why together: a commit adds one for every node it takes whole, all over one window,
    /// and a call per node finding the window's bounds (from the last add) and counting
    /// their references was most of an add.
    pub(in crate::state::whole) fn add_each(&mut self, cs: &[u32], start: i64, end: i64) -> usize {
        if cs.is_empty() {
            return 0;
        }
        let a = match self.last_add {
            Some(a) if a.start == start && a.end == end && a.epoch == self.epoch => a,
            _ => self.add_bounds(start, end),
        };
        let (s, e) = (a.s, a.e);
        let n = self.count.len();
        let mut added = 0;
        for &c in cs {
            let c = c as usize;
            let free = match a.one_word {
                Some((j, held, start_bit)) => {
                    let free = self.busy[j * n + c] & held == 0;
                    if free {
                        self.busy[j * n + c] |= held;
                        self.starts[j * n + c] |= start_bit;
                    }
                    free
                }
                None => {
                    let free = !self.rows(c as u32).0.any_in(s, e);
                    if free {
                        bits::set_range(&mut self.busy, n, c, s, e, true);
                        bits::set_range(&mut self.starts, n, c, s, s + 1, true);
                    }
                    free
                }
            };
            if !free {
                break;
            }
            self.count[c] += 1;
            added += 1;
        }
        if added > 0 {
            // Dead bounds (and new ones) it refers to come alive.
            self.dead -= usize::from(self.refs[s] == 0) + usize::from(self.refs[e] == 0);
            self.refs[s] += added as u32;
            self.refs[e] += added as u32;
            self.live += added;
        }
        added
    }

    /// The bounds of a cover over `[start, end)`, made where there are none, kept for the
    /// covers added next over the same window.
    #[inline(never)]
    fn add_bounds(&mut self, start: i64, end: i64) -> AddAt {
        self.drop_dead(2);
        // The segments the window meets start at the start's bound and end before the
        // end's, when there are such bounds (the covers a commit adds share them).
        let (lo, hi) = self.segments(start, end);
        let s = self.bound(start, lo);
        // The end's bound comes after the start's: making that moved it by one.
        let e = self.bound(end, hi + usize::from(s != lo));
        let j = s / 64;
        let add = AddAt {
            start,
            end,
            epoch: self.epoch,
            s,
            e,
            one_word: (s < e && (e - 1) / 64 == j)
                .then(|| (j, bits::range_mask(j, s, e), 1 << (s % 64))),
        };
        self.last_add = Some(add);
        add
    }

    /// The cover of whole `c` that starts at `start`, taken out: its window.
    pub(in crate::state::whole) fn remove(&mut self, c: usize, start: i64) -> Option<(i64, i64)> {
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
    pub(in crate::state::whole) fn remove_each(&mut self, cs: &[u32], start: i64) -> bool {
        if cs.is_empty() {
            return true;
        }
        let s = self.segment(start);
        let (last, n) = (self.bounds.len().saturating_sub(1), self.count.len());
        // A start's bit is set only where a cover starts: each whole's word of plane `s`
        // says whether it has one there.
        let (js, start_bit) = (s / 64, 1u64 << (s % 64));
        if self.bounds.get(s) != Some(&start)
            || !cs
                .iter()
                .all(|&c| (c as usize) < n && self.starts[js * n + c as usize] & start_bit != 0)
        {
            return false;
        }
        // Each end's bound and how many covers end there (no bound goes before the end).
        let mut ends_by: SmallVec<[(usize, u32); 4]> = SmallVec::new();
        let mut removed = 0;
        // A job's covers share their window: the end found for one is, for each next, a
        // check of its row instead of a search.
        let mut common = None;
        // The shared end's word, when the covers start and end in one: each next cover is
        // then checked and cleared with two words and masks made once.
        let mut one_word: Option<OneWord> = None;
        // Covers taken out by `one_word`, their end counted once after the loop.
        let mut by_one_word = 0;
        for &c in cs {
            if let Some(w) = one_word {
                let i = w.j * n + c as usize;
                let (b, st) = (self.busy[i], self.starts[i]);
                if st & w.start == 0 {
                    // Taken out already: `cs` names it twice.
                    break;
                }
                let ends = w.ends(b, st);
                debug_assert_eq!(ends, {
                    let (busy, starts) = self.rows(c);
                    bits::ends_at(busy, starts, s + 1, w.e, last)
                });
                if ends {
                    self.busy[i] = b & !w.held;
                    self.starts[i] = st & !w.start;
                    self.count[c as usize] -= 1;
                    by_one_word += 1;
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
                    if let Some(w) = one_word.filter(|_| by_one_word > 0) {
                        count_end(&mut ends_by, w.e, by_one_word);
                        removed += by_one_word;
                        by_one_word = 0;
                    }
                    one_word = OneWord::of(s, e, last);
                    e
                }
            };
            let c = c as usize;
            bits::set_range(&mut self.busy, n, c, s, e, false);
            bits::set_range(&mut self.starts, n, c, s, s + 1, false);
            self.count[c] -= 1;
            count_end(&mut ends_by, e, 1);
            removed += 1;
        }
        if let Some(w) = one_word.filter(|_| by_one_word > 0) {
            count_end(&mut ends_by, w.e, by_one_word);
        }
        removed += by_one_word;
        self.live -= removed as usize;
        for (e, by) in ends_by {
            self.unref(e, by);
        }
        if removed > 0 {
            self.unref(s, removed);
        }
        self.drop_dead(0);
        removed as usize == cs.len()
    }
}

/// Counts `by` more covers ending at bound `e` in `ends_by`.
#[inline]
fn count_end(ends_by: &mut SmallVec<[(usize, u32); 4]>, e: usize, by: u32) {
    match ends_by.iter_mut().find(|x| x.0 == e) {
        Some(x) => x.1 += by,
        None => ends_by.push((e, by)),
    }
}
