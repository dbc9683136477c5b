//! Rows of bits laid out in planes: word `j` of row `c` of `n` rows is word `j * n + c`.
//!
//! Why planes: a new bound of the whole covers puts a bit into every row at the same
//! place, and with the rows' words for one place side by side that is one pass over a
//! plane or two that the compiler turns into vector instructions, where row by row it was
//! a loop of its own per row (9 % of the 5,000-job replay's time).

/// Row `c` of planes of `n` rows, `len` words long: bit `i` is bit `i % 64` of its word
/// `i / 64`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Row<'a> {
    planes: &'a [u64],
    n: usize,
    c: usize,
    /// Words in the row.
    len: usize,
}

impl<'a> Row<'a> {
    #[cfg(test)]
    pub(super) fn new(planes: &'a [u64], n: usize, c: usize) -> Row<'a> {
        let len = planes.len().checked_div(n).unwrap_or(0);
        Row::with_len(planes, n, c, len)
    }

    /// Row `c` of planes `len` words long, as the caller knows them (without a division
    /// at every row read).
    #[inline]
    pub(super) fn with_len(planes: &'a [u64], n: usize, c: usize, len: usize) -> Row<'a> {
        debug_assert_eq!(planes.len().checked_div(n).unwrap_or(0), len);
        Row { planes, n, c, len }
    }

    #[inline]
    fn word(&self, j: usize) -> u64 {
        self.planes[j * self.n + self.c]
    }

    /// Bit `i`.
    #[inline]
    pub(super) fn get(&self, i: usize) -> bool {
        self.word(i / 64) >> (i % 64) & 1 != 0
    }

    /// Whether a bit of `[lo, hi)` is set (`lo < hi`, both within the row).
    #[inline]
    pub(super) fn any_in(&self, lo: usize, hi: usize) -> bool {
        let (first, last) = (lo / 64, (hi - 1) / 64);
        let low = u64::MAX << (lo % 64);
        let high = u64::MAX >> (63 - (hi - 1) % 64);
        if first == last {
            return self.word(first) & low & high != 0;
        }
        self.word(first) & low != 0
            || (first + 1..last).any(|j| self.word(j) != 0)
            || self.word(last) & high != 0
    }

    /// The first set bit at or after `from`, if any.
    pub(super) fn next_set(&self, from: usize) -> Option<usize> {
        let mut j = from / 64;
        if j >= self.len {
            return None;
        }
        let mut word = self.word(j) & (u64::MAX << (from % 64));
        loop {
            if word != 0 {
                return Some(j * 64 + word.trailing_zeros() as usize);
            }
            j += 1;
            if j >= self.len {
                return None;
            }
            word = self.word(j);
        }
    }

    /// The first clear bit at or after `from`; the row's length in bits when there is
    /// none.
    pub(super) fn next_clear(&self, from: usize) -> usize {
        let mut j = from / 64;
        let mut mask = u64::MAX << (from % 64);
        while j < self.len {
            let word = !self.word(j) & mask;
            if word != 0 {
                return j * 64 + word.trailing_zeros() as usize;
            }
            mask = u64::MAX;
            j += 1;
        }
        self.len * 64
    }

    /// The last set bit at or before `upto` (within the row), if any.
    pub(super) fn prev_set(&self, upto: usize) -> Option<usize> {
        let mut j = upto / 64;
        let mut word = self.word(j) & (u64::MAX >> (63 - upto % 64));
        loop {
            if word != 0 {
                return Some(j * 64 + 63 - word.leading_zeros() as usize);
            }
            j = j.checked_sub(1)?;
            word = self.word(j);
        }
    }
}

/// The first bit at or after `from` clear in `busy` or set in `starts` (a cover's end:
/// where it stops holding, or where the next one starts); the rows' length in bits when
/// there is none.
pub(super) fn next_end(busy: Row, starts: Row, from: usize) -> usize {
    let len = busy.len;
    let mut j = from / 64;
    let mut mask = u64::MAX << (from % 64);
    while j < len {
        let word = (!busy.word(j) | starts.word(j)) & mask;
        if word != 0 {
            return j * 64 + word.trailing_zeros() as usize;
        }
        mask = u64::MAX;
        j += 1;
    }
    len * 64
}

/// Whether [`next_end`] from `from` (capped at `last`) is `e` (`from <= e <= last`): every
/// segment of `[from, e)` held and none of them a start, and `e` the last bound, or free,
/// or a start.
pub(super) fn ends_at(busy: Row, starts: Row, from: usize, e: usize, last: usize) -> bool {
    if from < e {
        for j in from / 64..=(e - 1) / 64 {
            let m = range_mask(j, from, e);
            if (busy.word(j) & !starts.word(j)) & m != m {
                return false;
            }
        }
    }
    e == last || !busy.get(e) || starts.get(e)
}

/// The mask of bits `[lo, hi)` (`lo < hi`) within word `j` of a row, one of the words
/// `lo / 64 ..= (hi - 1) / 64` holding them.
#[inline]
pub(super) fn range_mask(j: usize, lo: usize, hi: usize) -> u64 {
    let mut m = u64::MAX;
    if j == lo / 64 {
        m &= u64::MAX << (lo % 64);
    }
    if j == (hi - 1) / 64 {
        m &= u64::MAX >> (63 - (hi - 1) % 64);
    }
    m
}

/// Sets (`to`) or clears bits `[lo, hi)` of row `c` of planes of `n` rows.
pub(super) fn set_range(planes: &mut [u64], n: usize, c: usize, lo: usize, hi: usize, to: bool) {
    if lo >= hi {
        return;
    }
    for j in lo / 64..=(hi - 1) / 64 {
        let m = range_mask(j, lo, hi);
        let word = &mut planes[j * n + c];
        if to {
            *word |= m;
        } else {
            *word &= !m;
        }
    }
}

/// Inserts a bit at `k` into every row of planes of `n` rows, moving bits `k..` one up
/// (each row's top bit is dropped: clear while the rows have room). The bit inserted is
/// a copy of the bit before it (`copy`; clear at `k == 0`), or clear.
pub(super) fn insert_all(planes: &mut [u64], n: usize, k: usize, copy: bool) {
    let (wk, bk) = (k / 64, k % 64);
    for j in (wk + 1..planes.len() / n).rev() {
        let (below, upper) = planes.split_at_mut(j * n);
        let below = &below[(j - 1) * n..];
        for (x, b) in upper[..n].iter_mut().zip(below) {
            *x = *x << 1 | b >> 63;
        }
    }
    let keep = !(u64::MAX << bk);
    let (before, rest) = planes.split_at_mut(wk * n);
    let plane = &mut rest[..n];
    match (copy, k, bk) {
        (false, ..) | (true, 0, _) => {
            for x in plane {
                *x = (*x & keep) | (*x & !keep) << 1;
            }
        }
        (true, _, 0) => {
            // The bit before is the previous word's top bit.
            for (x, p) in plane.iter_mut().zip(&before[(wk - 1) * n..]) {
                *x = *x << 1 | p >> 63;
            }
        }
        (true, ..) => {
            for x in plane {
                *x = (*x & keep) | (*x & !keep) << 1 | (*x >> (bk - 1) & 1) << bk;
            }
        }
    }
}

/// Removes bit `k` from every row of planes of `n` rows, moving bits `k + 1..` one down
/// (a clear bit comes in at the top).
pub(super) fn remove_all(planes: &mut [u64], n: usize, k: usize) {
    let (wk, bk) = (k / 64, k % 64);
    let keep = !(u64::MAX << bk);
    for x in &mut planes[wk * n..(wk + 1) * n] {
        *x = (*x & keep) | (*x >> 1 & !keep);
    }
    for j in wk + 1..planes.len() / n {
        let (below, upper) = planes.split_at_mut(j * n);
        for (b, x) in below[(j - 1) * n..].iter_mut().zip(&mut upper[..n]) {
            *b |= (*x & 1) << 63;
            *x >>= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Row;

    /// Row `c` of the planes as bits, for comparing with a list of them.
    fn bits(planes: &[u64], n: usize, c: usize) -> Vec<bool> {
        let row = Row::new(planes, n, c);
        (0..row.len * 64).map(|i| row.get(i)).collect()
    }

    /// Planes of `rows`, each of 192 bits.
    fn planes_of(rows: &[Vec<bool>]) -> Vec<u64> {
        let n = rows.len();
        let mut planes = vec![0; 3 * n];
        for (c, b) in rows.iter().enumerate() {
            for (i, &x) in b.iter().enumerate() {
                super::set_range(&mut planes, n, c, i, i + 1, x);
            }
        }
        planes
    }

    proptest! {
        /// Each operation does to each row what it says to a list of bits.
        #[test]
        fn as_lists_of_bits(
            mut rows in proptest::collection::vec(
                proptest::collection::vec(any::<bool>(), 192),
                1..4,
            ),
            k in 0..191usize,
            lo in 0..192usize,
            len in 1..100usize,
            copy in any::<bool>(),
        ) {
            for b in &mut rows {
                b[191] = false;
            }
            let n = rows.len();
            let planes = planes_of(&rows);
            let hi = (lo + len).min(192);
            prop_assume!(lo < hi);
            let mut inserted = planes.clone();
            super::insert_all(&mut inserted, n, k, copy);
            for (c, b) in rows.iter().enumerate() {
                let row = Row::new(&planes, n, c);
                prop_assert_eq!(row.any_in(lo, hi), b[lo..hi].iter().any(|&x| x));
                prop_assert_eq!(row.next_set(lo), (lo..192).find(|&i| b[i]));
                prop_assert_eq!(row.prev_set(lo), (0..=lo).rev().find(|&i| b[i]));
                let first_clear = (lo..192).find(|&i| !b[i]).unwrap_or(192);
                prop_assert_eq!(row.next_clear(lo), first_clear);
                let mut want = b.clone();
                want.insert(k, copy && k > 0 && b[k - 1]);
                want.truncate(192);
                prop_assert_eq!(bits(&inserted, n, c), want);
            }
            let mut removed = inserted.clone();
            super::remove_all(&mut removed, n, k);
            prop_assert_eq!(&removed, &planes);

            // `next_end` over a row and its complement.
            let complements: Vec<Vec<bool>> =
                rows.iter().map(|b| b.iter().map(|x| !x).collect()).collect();
            let others = planes_of(&complements);
            let zeros = vec![0u64; 3 * n];
            for (c, b) in rows.iter().enumerate() {
                let row = Row::new(&planes, n, c);
                let other = Row::new(&others, n, c);
                let zero = Row::new(&zeros, n, c);
                let first_clear = (lo..192).find(|&i| !b[i]).unwrap_or(192);
                let first_set = (lo..192).find(|&i| b[i]).unwrap_or(192);
                prop_assert_eq!(super::next_end(row, zero, lo), first_clear);
                prop_assert_eq!(super::next_end(other, row, lo), first_set);
            }
        }

        /// `ends_at` says whether `next_end`, capped, is the end asked about.
        #[test]
        fn ends_at_as_next_end(
            busy in proptest::collection::vec(any::<bool>(), 192),
            starts in proptest::collection::vec(any::<bool>(), 192),
            from in 0..150usize,
            last in 0..192usize,
        ) {
            prop_assume!(from <= last);
            let planes = planes_of(std::slice::from_ref(&busy));
            let starting = planes_of(std::slice::from_ref(&starts));
            let (b, s) = (Row::new(&planes, 1, 0), Row::new(&starting, 1, 0));
            let found = super::next_end(b, s, from).min(last);
            for e in from..=last {
                prop_assert_eq!(super::ends_at(b, s, from, e, last), found == e, "e {}", e);
            }
        }
    }
}
