//! Percentiles, one way for the whole project: the nearest-rank method (the value at rank
//! `ceil(q · n)` of `n` sorted samples), on kept samples ([`nearest_rank`]) or on a histogram
//! of them ([`LatencyHistogram`], [`quantile_of_buckets`]).
//!
//! [`LatencyHistogram`] is a small log-linear histogram (HDR-style: 8 sub-buckets per power
//! of two, so a quantile is within 12.5 % of the true value), in microseconds. Fixed size,
//! no allocation per sample: the journal's commit thread records every fsync in it, and a
//! shard writes its buckets out so that a benchmark can take quantiles of the commits
//! between two readings. Benchmarks that keep every sample use [`nearest_rank`].
//!
//! ```
//! use std::time::Duration;
//! use shardsched_histogram::{LatencyHistogram, nearest_rank};
//!
//! let sorted: Vec<u64> = (1..=100).collect();
//! assert_eq!(nearest_rank(&sorted, 0.99), 99);
//!
//! let mut h = LatencyHistogram::default();
//! h.record(Duration::from_micros(7));
//! assert_eq!(h.quantile(0.5), Duration::from_micros(7));
//! ```

use std::time::Duration;

/// Values below this many microseconds get a bucket each.
const LINEAR_MAX_US: u64 = 16;
/// Sub-buckets per power of two above [`LINEAR_MAX_US`].
const SUB_BUCKETS: u64 = 8;
/// Buckets: 16 linear + 8 for each power of two from 2^4 to 2^63.
const BUCKETS: usize = (LINEAR_MAX_US + (64 - 4) * SUB_BUCKETS) as usize;

/// See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    count: u64,
    sum_us: u64,
    max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum_us: 0,
            max_us: 0,
        }
    }
}

impl LatencyHistogram {
    /// Records one sample.
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(us)] += 1;
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.max_us = self.max_us.max(us);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest sample.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// The mean sample (zero when empty).
    pub fn mean(&self) -> Duration {
        Duration::from_micros(self.sum_us.checked_div(self.count).unwrap_or(0))
    }

    /// The `q`-quantile (0.0 ..= 1.0): the upper bound of the bucket holding it, capped by
    /// the largest sample. Zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = rank_of(q, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_micros(upper_bound(i).min(self.max_us));
            }
        }
        Duration::from_micros(self.max_us)
    }

    /// The non-empty buckets as (largest value in the bucket, µs; samples), in order: what
    /// a process writes out so that another can compute quantiles of a difference of two
    /// readings (see [`quantile_of_buckets`]).
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| (upper_bound(i), c))
            .collect()
    }

    /// Adds another histogram's samples to this one.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.max_us = self.max_us.max(other.max_us);
    }
}

/// The `q`-quantile of buckets as [`LatencyHistogram::buckets`] gives them (sorted by
/// bound), in µs: the bound of the bucket holding it; 0 when empty.
pub fn quantile_of_buckets(buckets: &[(u64, u64)], q: f64) -> u64 {
    let total: u64 = buckets.iter().map(|&(_, c)| c).sum();
    if total == 0 {
        return 0;
    }
    let rank = rank_of(q, total);
    let mut seen = 0;
    for &(bound, c) in buckets {
        seen += c;
        if seen >= rank {
            return bound;
        }
    }
    buckets.last().map_or(0, |&(b, _)| b)
}

/// The value at quantile `q` (0.0 ..= 1.0) of sorted samples, nearest-rank method; the
/// default (0) when there are none.
pub fn nearest_rank<T: Copy + Default>(sorted: &[T], q: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = rank_of(q, sorted.len() as u64);
    sorted[usize::try_from(rank).unwrap_or(sorted.len()) - 1]
}

/// The 1-based rank of the `q`-quantile among `count` (> 0) samples: `ceil(q · count)`,
/// at least 1.
fn rank_of(q: f64, count: u64) -> u64 {
    ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).clamp(1, count)
}

fn bucket_of(us: u64) -> usize {
    if us < LINEAR_MAX_US {
        return us as usize;
    }
    let exp = 63 - u64::from(us.leading_zeros()); // >= 4
    let sub = (us >> (exp - 3)) & (SUB_BUCKETS - 1);
    (LINEAR_MAX_US + (exp - 4) * SUB_BUCKETS + sub) as usize
}

/// The largest value that falls in bucket `i`.
fn upper_bound(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR_MAX_US {
        return i;
    }
    let exp = (i - LINEAR_MAX_US) / SUB_BUCKETS + 4;
    let sub = (i - LINEAR_MAX_US) % SUB_BUCKETS;
    let low = (1u64 << exp) + (sub << (exp - 3));
    low.saturating_add((1u64 << (exp - 3)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 0.5), 50);
        assert_eq!(nearest_rank(&v, 0.99), 99);
        assert_eq!(nearest_rank(&v, 1.0), 100);
        assert_eq!(nearest_rank(&v, 0.0), 1);
        assert_eq!(nearest_rank(&[7u64], 0.99), 7);
        assert_eq!(nearest_rank::<u64>(&[], 0.5), 0);
        assert_eq!(nearest_rank(&[1.5f64, 2.5], 0.5), 1.5);
    }

    #[test]
    fn buckets_cover_their_values() {
        for us in [0, 1, 15, 16, 17, 100, 1000, 12_345, 1 << 40, u64::MAX] {
            let b = bucket_of(us);
            assert!(b < BUCKETS, "{us}");
            assert!(upper_bound(b) >= us, "{us} above its bucket's bound");
            if b > 0 {
                assert!(upper_bound(b - 1) < us, "{us} below its bucket");
            }
        }
    }

    #[test]
    fn quantiles_are_within_an_eighth() {
        let mut h = LatencyHistogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let median = h.quantile(0.5).as_micros() as f64;
        assert!((500.0..=500.0 * 1.125).contains(&median), "{median}");
        let p99 = h.quantile(0.99).as_micros() as f64;
        assert!((990.0..=1000.0).contains(&p99), "{p99}");
        assert_eq!(h.max(), Duration::from_micros(1000));
        assert_eq!(h.count(), 1000);
        let buckets = h.buckets();
        assert_eq!(buckets.iter().map(|&(_, c)| c).sum::<u64>(), 1000);
        assert_eq!(
            quantile_of_buckets(&buckets, 0.5),
            upper_bound(bucket_of(500))
        );
        assert_eq!(quantile_of_buckets(&[], 0.5), 0);
        let mut twice = h.clone();
        twice.merge(&h);
        assert_eq!(twice.count(), 2000);
        assert_eq!(LatencyHistogram::default().quantile(0.5), Duration::ZERO);
    }
}
