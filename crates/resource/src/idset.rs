//! Flux idsets: sets of non-negative integers written as ranges, e.g. `0-3,5,7-8`.
//!
//! R (RFC 20) names ranks and per-rank resources (`"core": "0-35"`) this way, and so do job
//! constraints (`{ranks: ["0-3"]}`). An [`IdSet`] keeps the ranges rather than the ids, so
//! `0-99999999999` costs 16 bytes until someone iterates it; readers check [`IdSet::len`]
//! against their bounds first.
//!
//! [`IdSet::parse`] reads comma-separated ids and `lo-hi` ranges, optionally inside one pair
//! of brackets (`[0-3]`), more leniently than flux-core's `idset_decode`: overlaps and any
//! order are accepted (it is a set); `hi < lo` is an error; the empty string is the empty
//! set. [`IdSet::parse_rfc22`] is `idset_decode` itself, for where Fluxion's readers are
//! matched. [`IdSet`]'s `Display` is flux-core's encoding: sorted, maximal ranges joined by
//! commas, single ids alone.

use std::fmt;

/// Why an idset string could not be parsed; `offset` is the byte where the problem starts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("idset {text:?}: {message} at byte {offset}")]
pub struct IdsetError {
    pub text: String,
    pub offset: usize,
    pub message: String,
}

/// A set of `u64` ids stored as sorted, disjoint, non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    ranges: Vec<(u64, u64)>,
}

impl IdSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `0-3,5,7-8` (or `[0-3,5]`).
    pub fn parse(text: &str) -> Result<IdSet, IdsetError> {
        let err = |offset: usize, message: &str| IdsetError {
            text: text.to_string(),
            offset,
            message: message.to_string(),
        };
        let (body, base) = match text.strip_prefix('[') {
            Some(rest) => match rest.strip_suffix(']') {
                Some(body) => (body, 1),
                None => return Err(err(text.len(), "missing ']'")),
            },
            None => (text, 0),
        };
        let mut ranges = Vec::new();
        if body.is_empty() {
            return Ok(IdSet { ranges });
        }
        let mut offset = base;
        for item in body.split(',') {
            let (lo_s, hi_s) = match item.split_once('-') {
                Some((lo, hi)) => (lo, Some(hi)),
                None => (item, None),
            };
            let lo = parse_id(lo_s).ok_or_else(|| err(offset, "expected an id"))?;
            let hi = match hi_s {
                None => lo,
                Some(hi_s) => parse_id(hi_s)
                    .ok_or_else(|| err(offset + lo_s.len() + 1, "expected an id after '-'"))?,
            };
            if hi < lo {
                return Err(err(offset, "range ends before it starts"));
            }
            ranges.push((lo, hi));
            offset += item.len() + 1;
        }
        Ok(IdSet::from_ranges(ranges))
    }

    /// Parses an idset as flux-core's `idset_decode` does (RFC 22), more strictly than
    /// [`IdSet::parse`]: ids and `lo-hi` ranges (`hi > lo`) in strictly ascending order,
    /// no leading zero, ids below 2^31; empty items between commas are skipped. What
    /// Fluxion's readers of an R accept, e.g. the ranks of a partial cancel's rv1exec R.
    pub fn parse_rfc22(text: &str) -> Result<IdSet, IdsetError> {
        let err = |message: &str| IdsetError {
            text: text.to_string(),
            offset: 0,
            message: message.to_string(),
        };
        let body = match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(body) => body,
            None => text,
        };
        if body.contains(['[', ']']) {
            return Err(err("mismatched or nested brackets"));
        }
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for item in body.split(',').filter(|i| !i.is_empty()) {
            let range = match item.split_once('-') {
                Some((lo, hi)) => rfc22_id(lo).zip(rfc22_id(hi)).filter(|(lo, hi)| hi > lo),
                None => rfc22_id(item).map(|id| (id, id)),
            };
            let Some((lo, hi)) = range else {
                return Err(err("error parsing range"));
            };
            if ranges.last().is_some_and(|&(_, last)| lo <= last) {
                return Err(err("range is out of order"));
            }
            ranges.push((lo, hi));
        }
        Ok(IdSet::from_ranges(ranges))
    }

    /// The set of the given ids (any order, duplicates allowed).
    pub fn from_ids(ids: impl IntoIterator<Item = u64>) -> IdSet {
        IdSet::from_ranges(ids.into_iter().map(|id| (id, id)).collect())
    }

    fn from_ranges(mut ranges: Vec<(u64, u64)>) -> IdSet {
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        IdSet { ranges: merged }
    }

    /// The ids in either set.
    pub fn union(&self, other: &IdSet) -> IdSet {
        IdSet::from_ranges(self.ranges.iter().chain(&other.ranges).copied().collect())
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &IdSet) -> bool {
        // `other`'s ranges are maximal, so a range of `self` must fit inside one of them.
        self.ranges.iter().all(|&(lo, hi)| {
            let i = other.ranges.partition_point(|&(_, h)| h < lo);
            other
                .ranges
                .get(i)
                .is_some_and(|&(l, h)| l <= lo && hi <= h)
        })
    }

    /// Number of ids (a `u128` because `0-18446744073709551615` has 2^64 of them).
    pub fn len(&self) -> u128 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u128::from(hi - lo) + 1)
            .sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| hi < id);
        self.ranges.get(i).is_some_and(|&(lo, _)| lo <= id)
    }

    /// The ids in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }

    /// The sorted, maximal ranges.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }
}

impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for IdSet {
    type Err = IdsetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IdSet::parse(s)
    }
}

/// Parses an idset into its ids, ascending. Refuses sets of more than `max` ids.
pub fn parse_idset(text: &str, max: usize) -> Result<Vec<u64>, IdsetError> {
    let set = IdSet::parse(text)?;
    if set.len() > max as u128 {
        return Err(IdsetError {
            text: text.to_string(),
            offset: 0,
            message: format!("{} ids exceed the limit of {max}", set.len()),
        });
    }
    Ok(set.iter().collect())
}

/// Encodes ids (any order, duplicates allowed) as `0-3,5,7-8`.
pub fn format_idset(ids: impl IntoIterator<Item = u64>) -> String {
    IdSet::from_ids(ids).to_string()
}

/// An id as RFC 22 writes it: decimal digits, no leading zero, below 2^31 (flux-core's
/// `IDSET_MAX_UNIVERSE`).
fn rfc22_id(s: &str) -> Option<u64> {
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    parse_id(s).filter(|&id| id < 1 << 31)
}

fn parse_id(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc22_accepts_what_flux_core_does_and_nothing_else() {
        // Each as Fluxion's partial cancel read it (its rv1exec reader, flux-core's
        // `idset_decode_add`), checked with its binary.
        for ok in ["0-3,5", "[0-1]", "", "0,2-3", ",1,,3,", "2147483647"] {
            assert!(IdSet::parse_rfc22(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "1,1",
            "0-2,1",
            "2-1",
            "1-1",
            "01",
            "0-1,1-2",
            "1,0-1",
            "-1",
            "1-2-3",
            "[1",
            "1]",
            "[[1]]",
            " 1",
            "2147483648",
            "a",
        ] {
            assert!(IdSet::parse_rfc22(bad).is_err(), "{bad:?}");
        }
        assert_eq!(IdSet::parse_rfc22(",1,,3-4,").unwrap().to_string(), "1,3-4");
    }

    #[test]
    fn parses_and_formats_ranges() {
        let s = IdSet::parse("7-8,0-3,5,2").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(s.to_string(), "0-3,5,7-8");
        assert_eq!(s.len(), 7);
        assert!(s.contains(5) && !s.contains(4) && !s.contains(9));
        assert_eq!(IdSet::parse("[0-1]").unwrap().to_string(), "0-1");
        assert!(IdSet::parse("").unwrap().is_empty());
        assert_eq!(format_idset([3, 1, 2, 2, 9]), "1-3,9");
        assert_eq!(
            IdSet::parse("0-18446744073709551615").unwrap().len(),
            1u128 << 64
        );
        let a = IdSet::parse("0-3,8").unwrap();
        let b = IdSet::parse("4-5,8").unwrap();
        assert_eq!(a.union(&b).to_string(), "0-5,8");
        assert!(IdSet::parse("1-2,8").unwrap().is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(IdSet::new().is_subset(&a));
    }

    #[test]
    fn errors_carry_offsets() {
        let e = IdSet::parse("0-3,x").unwrap_err();
        assert_eq!(e.offset, 4);
        assert_eq!(IdSet::parse("0-3,5-").unwrap_err().offset, 6);
        assert_eq!(
            IdSet::parse("1,3-2").unwrap_err().message,
            "range ends before it starts"
        );
        assert!(IdSet::parse("[0-3").is_err());
        assert!(IdSet::parse("1,,2").is_err());
        assert!(IdSet::parse("-1").is_err());
        assert!(IdSet::parse("99999999999999999999").is_err());
        assert!(parse_idset("0-100", 10).is_err());
        assert_eq!(parse_idset("0-2", 10).unwrap(), vec![0, 1, 2]);
    }

    proptest! {
        #[test]
        fn round_trips(ids in proptest::collection::vec(0u64..200, 0..60)) {
            let text = format_idset(ids.iter().copied());
            let back = parse_idset(&text, 1000).unwrap();
            let mut want = ids.clone();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(&back, &want);
            prop_assert_eq!(format_idset(back), text);
        }

        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = IdSet::parse(&s);
        }
    }
}
