//! The shared engine behind [`Planner`](crate::Planner) and
//! [`MultiPlanner`](crate::MultiPlanner): a canonical list of change points
//! and a slab of spans, for `k` resource types at once.
//!
//! Change points are stored flat in one vector of `i64` with a stride of `k + 1`:
//! `[time, used_0, .., used_{k-1}]`, sorted by strictly increasing time. A row
//! says how many units of each type are in use from its time up to the next
//! row's time. Before the first row nothing is in use. The list is canonical:
//! a row exists only where the usage differs from the row before it (or from
//! all-zero for the first row), so the last row always returns to all-zero
//! and an empty calendar has no rows at all.

use smallvec::SmallVec;

use crate::{PlannerError, SpanId};

/// Types a calendar (and a multi-planner's totals) keeps inline. Under the default filters
/// (`ALL:core,ALL:node`) a socket's one calendar has four (its aggregate's core and node —
/// Fluxion tracks a filter's type below every vertex, a socket's node count with a total
/// of 0 — its own units, its job count) and a node's three. With room for three, each of
/// first-1024's 2,048 sockets grew two vectors on its first span and each node two more on
/// its second (~5,800 blocks, ~0.5 MB).
pub(crate) const INLINE_TYPES: usize = 4;
/// Spans kept inside the calendar itself: a node's two socket jobs, a socket's job and the
/// reservation after it.
const INLINE_SLOTS: usize = 2;
/// Change-point cells kept inside the calendar itself: the two rows (a time and a usage
/// per type each) of a first span.
const INLINE_POINT_CELLS: usize = 2 * (1 + INLINE_TYPES);
/// Planned amounts kept inside the calendar itself: those of the inline spans.
const INLINE_REQS: usize = INLINE_SLOTS * INLINE_TYPES;

/// Free-list terminator.
const NIL: u32 = u32::MAX;

/// One entry of the span slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Live {
        start: i64,
        duration: u64,
        serial: u32,
    },
    Free {
        next: u32,
    },
}

/// Read-only view of the change points. An idle planner uses an empty view.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Points<'a> {
    stride: usize,
    data: &'a [i64],
}

impl<'a> Points<'a> {
    /// A view with no change points for `k` resource types.
    pub(crate) fn empty(k: usize) -> Self {
        Points {
            stride: k + 1,
            data: &[],
        }
    }

    /// Number of change points.
    pub(crate) fn len(&self) -> usize {
        self.data.len() / self.stride
    }

    /// Time of point `i` (`i < len`).
    fn time(&self, i: usize) -> i64 {
        self.data[i * self.stride]
    }

    /// Usage row of point `i` (`i < len`).
    fn used(&self, i: usize) -> &'a [i64] {
        &self.data[i * self.stride + 1..(i + 1) * self.stride]
    }

    /// Number of points whose time is `<= t`; the point `upper(t) - 1`, if
    /// any, is the one whose segment contains `t`. Binary search.
    fn upper(&self, t: i64) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.time(mid) <= t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Units of type `ty` in use at time `t`.
    pub(crate) fn used_at(&self, t: i64, ty: usize) -> i64 {
        match self.upper(t) {
            0 => 0,
            i => self.used(i - 1)[ty],
        }
    }

    /// Highest usage of type `ty` during `[at, end)` (`at < end`).
    pub(crate) fn max_used(&self, at: i64, end: i64, ty: usize) -> i64 {
        let mut i = self.upper(at);
        let mut max = if i == 0 { 0 } else { self.used(i - 1)[ty] };
        while i < self.len() && self.time(i) < end {
            max = max.max(self.used(i)[ty]);
            i += 1;
        }
        max
    }

    /// The usage of type `ty` during `[at, end)` (`at < end`) as steps into `out`: `(start,
    /// used)` in order, the first starting at `at`, each holding until the next (the last
    /// until `end`). The steps [`Points::max_used`] reads, one by one.
    pub(crate) fn steps(&self, at: i64, end: i64, ty: usize, out: &mut Vec<(i64, i64)>) {
        let mut i = self.upper(at);
        out.push((at, if i == 0 { 0 } else { self.used(i - 1)[ty] }));
        while i < self.len() && self.time(i) < end {
            out.push((self.time(i), self.used(i)[ty]));
            i += 1;
        }
    }

    /// Highest usage of type `ty` over all time.
    pub(crate) fn peak(&self, ty: usize) -> i64 {
        (0..self.len()).map(|i| self.used(i)[ty]).max().unwrap_or(0)
    }

    /// Whether at point `i` some type `ty` has fewer than `need[ty]` units
    /// free out of `totals[ty]`. Callers ensure `0 <= need[ty] <= totals[ty]`.
    fn blocks(&self, i: usize, totals: &[i64], need: &[i64]) -> bool {
        self.used(i)
            .iter()
            .zip(totals)
            .zip(need)
            .any(|((&u, &total), &n)| u > total - n)
    }

    /// Whether `need` fits for every type during `[at, end)`.
    pub(crate) fn fits(&self, at: i64, end: i64, totals: &[i64], need: &[i64]) -> bool {
        let mut i = self.upper(at);
        if i > 0 && self.blocks(i - 1, totals, need) {
            return false;
        }
        while i < self.len() && self.time(i) < end {
            if self.blocks(i, totals, need) {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Time of the first change point strictly after `t`.
    pub(crate) fn next_time_after(&self, t: i64) -> Option<i64> {
        let i = self.upper(t);
        (i < self.len()).then(|| self.time(i))
    }

    /// Earliest `t >= lb` such that `need` fits for every type during
    /// `[t, t + duration)` and `t + duration <= horizon_end`.
    ///
    /// Only `lb` and change points after it need to be tried: moving a start
    /// forward inside a segment never removes a segment from the window. The
    /// scan jumps past the last blocking point in the window and never looks
    /// at a point twice, so it is linear in the points it passes.
    /// `duration` must be at least 1.
    pub(crate) fn search(
        &self,
        lb: i64,
        duration: u64,
        horizon_end: i64,
        totals: &[i64],
        need: &[i64],
    ) -> Option<i64> {
        let n = self.len();
        let mut t = lb;
        // Points before `i` start at or before `t`; points in `i..j` are known
        // not to block.
        let mut i = self.upper(t);
        let mut j = i;
        loop {
            let end = i128::from(t) + i128::from(duration);
            if end > i128::from(horizon_end) {
                return None;
            }
            // In range of i64 because horizon_end is.
            let end = end as i64;
            if i > 0 && self.blocks(i - 1, totals, need) {
                if i >= n {
                    return None;
                }
                t = self.time(i);
                i += 1;
                continue;
            }
            j = j.max(i);
            let mut blocked = None;
            while j < n && self.time(j) < end {
                if self.blocks(j, totals, need) {
                    blocked = Some(j);
                }
                j += 1;
            }
            match blocked {
                None => return Some(t),
                Some(b) if b + 1 < n => {
                    t = self.time(b + 1);
                    i = b + 2;
                }
                Some(_) => return None,
            }
        }
    }
}

/// Change points plus span slab for `k` resource types.
///
/// Most calendars of a scheduler's graph only ever hold one span at a time (the vertices of
/// a node taken whole, one job after another), and one is made for every vertex a match
/// takes first: so its first spans are stored inline (the `INLINE_*` sizes above), and
/// making a calendar is one allocation (its box) instead of four, with no growth on the
/// first insert.
#[derive(Debug, Clone)]
pub(crate) struct Calendar {
    k: usize,
    points: SmallVec<[i64; INLINE_POINT_CELLS]>,
    slots: SmallVec<[Slot; INLINE_SLOTS]>,
    /// `k` planned amounts per slot, valid for live slots only.
    reqs: SmallVec<[i64; INLINE_REQS]>,
    free: u32,
    live: u32,
}

/// A live span as stored: start, duration and the planned amounts.
pub(crate) type SpanRef<'a> = (i64, u64, &'a [i64]);

impl Calendar {
    pub(crate) fn new(k: usize) -> Self {
        // Made for a first span, which takes two change points: room for them up front,
        // so the first insert does not grow the vectors again (inline for few types).
        Calendar {
            k,
            points: SmallVec::with_capacity(2 * (k + 1)),
            slots: SmallVec::new(),
            reqs: SmallVec::with_capacity(k),
            free: NIL,
            live: 0,
        }
    }

    pub(crate) fn view(&self) -> Points<'_> {
        Points {
            stride: self.k + 1,
            data: &self.points[..],
        }
    }

    /// Number of live spans.
    pub(crate) fn live(&self) -> usize {
        self.live as usize
    }

    /// Records a span and plans `reqs` during `[start, end)`. The caller has
    /// checked that the amounts fit. `serial` distinguishes this span from
    /// earlier ones that used the same slot.
    pub(crate) fn insert(
        &mut self,
        start: i64,
        duration: u64,
        end: i64,
        reqs: &[i64],
        serial: u32,
    ) -> Result<SpanId, PlannerError> {
        let slot = if self.free != NIL {
            let slot = self.free;
            if let Some(Slot::Free { next }) = self.slots.get(slot as usize) {
                self.free = *next;
            }
            slot
        } else {
            let slot = u32::try_from(self.slots.len()).map_err(|_| PlannerError::TooManySpans)?;
            if slot == NIL {
                return Err(PlannerError::TooManySpans);
            }
            self.slots.push(Slot::Free { next: NIL });
            push_zeros(&mut self.reqs, self.k);
            slot
        };
        let idx = slot as usize;
        self.slots[idx] = Slot::Live {
            start,
            duration,
            serial,
        };
        self.reqs[idx * self.k..(idx + 1) * self.k].copy_from_slice(reqs);
        self.live += 1;
        self.apply(start, end, idx, false);
        Ok(SpanId::new(slot, serial))
    }

    /// Removes a live span and gives its units back.
    pub(crate) fn remove(&mut self, id: SpanId) -> Result<(), PlannerError> {
        let (start, duration, _) = self.get(id).ok_or(PlannerError::UnknownSpan(id))?;
        // The span was inside the window when added, so this cannot overflow.
        let end = start.saturating_add_unsigned(duration);
        let idx = id.slot() as usize;
        if self.live == 1 {
            // The last span: nothing stays in use, and no change point either.
            self.points.clear();
        } else {
            self.apply(start, end, idx, true);
        }
        self.slots[idx] = Slot::Free { next: self.free };
        self.free = id.slot();
        self.live -= 1;
        Ok(())
    }

    /// Looks up a live span.
    pub(crate) fn get(&self, id: SpanId) -> Option<SpanRef<'_>> {
        let idx = id.slot() as usize;
        match self.slots.get(idx)? {
            Slot::Live {
                start,
                duration,
                serial,
            } if *serial == id.serial() => Some((
                *start,
                *duration,
                &self.reqs[idx * self.k..(idx + 1) * self.k],
            )),
            _ => None,
        }
    }

    /// All live spans in slot order.
    pub(crate) fn spans(&self) -> impl Iterator<Item = (SpanId, SpanRef<'_>)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(idx, slot)| match *slot {
                Slot::Live {
                    start,
                    duration,
                    serial,
                } => {
                    // Slot indices are below u32::MAX by construction.
                    let id = SpanId::new(idx as u32, serial);
                    Some((
                        id,
                        (
                            start,
                            duration,
                            &self.reqs[idx * self.k..(idx + 1) * self.k],
                        ),
                    ))
                }
                Slot::Free { .. } => None,
            })
    }

    /// Adds (or, with `negate`, subtracts) the amounts of slot `idx` to every
    /// type during `[start, end)` and restores canonical form.
    fn apply(&mut self, start: i64, end: i64, idx: usize, negate: bool) {
        let k = self.k;
        if self.reqs[idx * k..(idx + 1) * k].iter().all(|&r| r == 0) {
            return;
        }
        if !negate && self.points.is_empty() {
            // An idle calendar: the span's two change points are the whole list (its
            // amounts are not all 0, so the first row differs from nothing in use).
            self.points.push(start);
            self.points
                .extend_from_slice(&self.reqs[idx * k..(idx + 1) * k]);
            self.points.push(end);
            push_zeros(&mut self.points, k);
            return;
        }
        let stride = k + 1;
        let s = self.ensure_point(start);
        let e = self.ensure_point(end);
        for row in s..e {
            for ty in 0..k {
                let delta = self.reqs[idx * k + ty];
                let cell = &mut self.points[row * stride + 1 + ty];
                if negate {
                    *cell -= delta;
                } else {
                    *cell += delta;
                }
            }
        }
        // Higher index first so that `s` stays valid.
        self.drop_if_redundant(e);
        self.drop_if_redundant(s);
    }

    /// Index of the point at time `t`, inserting a copy of the usage in
    /// force at `t` if there is none.
    fn ensure_point(&mut self, t: i64) -> usize {
        let stride = self.k + 1;
        let i = self.view().upper(t);
        if i > 0 && self.points[(i - 1) * stride] == t {
            return i - 1;
        }
        let at = i * stride;
        self.points.insert_many(at, std::iter::repeat_n(0, stride));
        self.points[at] = t;
        if i > 0 {
            self.points.copy_within((i - 1) * stride + 1..at, at + 1);
        }
        i
    }

    /// Removes point `i` if its usage equals the usage in force before it.
    fn drop_if_redundant(&mut self, i: usize) {
        let stride = self.k + 1;
        let row = &self.points[i * stride + 1..(i + 1) * stride];
        let redundant = if i == 0 {
            row.iter().all(|&u| u == 0)
        } else {
            row == &self.points[(i - 1) * stride + 1..i * stride]
        };
        if redundant {
            self.points.drain(i * stride..(i + 1) * stride);
        }
    }
}

/// Appends `n` zeros (the usual one or two: `SmallVec`'s `extend` from an iterator cost
/// ~130 instructions a call where these pushes cost ~10 each; a span recorded at every
/// vertex a match takes adds its row this way, 11,740 times in first-1024).
fn push_zeros<A: smallvec::Array<Item = i64>>(v: &mut SmallVec<A>, n: usize) {
    for _ in 0..n {
        v.push(0);
    }
}

impl PartialEq for Calendar {
    /// Logical equality: same change points and the same live spans under
    /// the same ids. Free slots and free-list order do not matter.
    fn eq(&self, other: &Self) -> bool {
        self.k == other.k
            && self.live == other.live
            && self.points == other.points
            && self.spans().eq(other.spans())
    }
}

impl Eq for Calendar {}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rows(c: &Calendar) -> Vec<Vec<i64>> {
        c.points.chunks(c.k + 1).map(<[i64]>::to_vec).collect()
    }

    #[test]
    fn insert_creates_two_points_and_remove_clears_them() {
        let mut c = Calendar::new(1);
        let id = c.insert(10, 5, 15, &[3], 0).unwrap();
        assert_eq!(rows(&c), vec![vec![10, 3], vec![15, 0]]);
        c.remove(id).unwrap();
        assert!(c.points.is_empty());
        assert_eq!(c.live(), 0);
    }

    #[test]
    fn adjacent_equal_spans_merge_points() {
        let mut c = Calendar::new(1);
        c.insert(0, 5, 5, &[2], 0).unwrap();
        c.insert(5, 5, 10, &[2], 1).unwrap();
        assert_eq!(rows(&c), vec![vec![0, 2], vec![10, 0]]);
    }

    #[test]
    fn multi_type_rows_and_zero_request() {
        let mut c = Calendar::new(2);
        let a = c.insert(0, 4, 4, &[1, 0], 0).unwrap();
        let b = c.insert(2, 4, 6, &[0, 0], 1).unwrap();
        assert_eq!(rows(&c), vec![vec![0, 1, 0], vec![4, 0, 0]]);
        c.insert(2, 4, 6, &[0, 3], 2).unwrap();
        assert_eq!(
            rows(&c),
            vec![vec![0, 1, 0], vec![2, 1, 3], vec![4, 0, 3], vec![6, 0, 0]]
        );
        c.remove(a).unwrap();
        c.remove(b).unwrap();
        assert_eq!(rows(&c), vec![vec![2, 0, 3], vec![6, 0, 0]]);
    }

    #[test]
    fn slots_are_reused_with_new_serials() {
        let mut c = Calendar::new(1);
        let a = c.insert(0, 1, 1, &[1], 0).unwrap();
        c.remove(a).unwrap();
        let b = c.insert(0, 1, 1, &[1], 1).unwrap();
        assert_eq!(a.slot(), b.slot());
        assert_ne!(a, b);
        assert!(c.get(a).is_none());
        assert_eq!(c.remove(a), Err(PlannerError::UnknownSpan(a)));
        assert!(c.get(b).is_some());
    }

    #[test]
    fn search_jumps_past_blocking_points() {
        let mut c = Calendar::new(1);
        c.insert(2, 3, 5, &[4], 0).unwrap();
        c.insert(7, 2, 9, &[4], 1).unwrap();
        let v = c.view();
        let t = &[6];
        assert_eq!(v.search(0, 3, 100, t, &[4]), Some(9));
        assert_eq!(v.search(0, 2, 100, t, &[4]), Some(0));
        assert_eq!(v.search(1, 2, 100, t, &[4]), Some(5));
        assert_eq!(v.search(0, 2, 6, t, &[4]), Some(0));
        assert_eq!(v.search(1, 2, 6, t, &[4]), None);
        assert_eq!(v.search(0, 3, 100, t, &[2]), Some(0));
    }
}
