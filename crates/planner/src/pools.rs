//! Many tiny calendars in one slab: the per-vertex calendars of a large resource graph.
//!
//! A cluster has hundreds of thousands of leaf vertices (cores, gpus, memory pools), each
//! held by at most a few jobs at a time. A [`Planner`](crate::Planner) per leaf would cost
//! 40 bytes idle and two heap allocations on first use; [`Pools`] costs 4 bytes per pool
//! (the head of its hold list) and keeps every hold in one slab that is reused through a
//! free list, so steady-state matching allocates nothing.
//!
//! A *hold* takes `units` of the pool's units and counts `jobs` toward its job count
//! during `[start, end)`. Queries return the peak units and peak job count over a window;
//! with the handful of holds a leaf carries, a sweep over them is cheaper than any index.
//! The pool's total is not stored: the caller (who knows the vertex's size) compares.

use crate::PlannerError;

const NIL: u32 = u32::MAX;

/// Identifies a hold within its [`Pools`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HoldId(pub(crate) u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hold {
    start: i64,
    end: i64,
    units: i64,
    jobs: i64,
    /// Next hold of the same pool, or of the free list.
    next: u32,
    /// Previous hold of the same pool (NIL for the first), so that a removal unlinks a
    /// hold without walking its pool's list (a node's cover group carries a hold per
    /// reservation over it: dozens under conservative backfill).
    prev: u32,
    /// Owning pool, or NIL when free.
    pool: u32,
}

/// Peak use of one pool over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeakUse {
    pub units: i64,
    pub jobs: i64,
}

impl PeakUse {
    /// The peak of `holds`, each `(start, end, units, jobs)`, during `[at, end)`: the most
    /// units and the most jobs held at once. A sweep: the peak is reached at `at` or at the
    /// start of some hold that overlaps the window, and `holds` is walked again for each of
    /// those (a leaf carries a handful).
    pub fn of_holds<I>(holds: I, at: i64, end: i64) -> PeakUse
    where
        I: Iterator<Item = (i64, i64, i64, i64)> + Clone,
    {
        let mut peak = PeakUse::default();
        for (start, stop, _, _) in holds.clone() {
            if !(start < end && at < stop) {
                continue;
            }
            let t = start.max(at);
            let mut here = PeakUse::default();
            for (s, e, units, jobs) in holds.clone() {
                if s <= t && t < e {
                    here.units += units;
                    here.jobs += jobs;
                }
            }
            peak.units = peak.units.max(here.units);
            peak.jobs = peak.jobs.max(here.jobs);
        }
        peak
    }

    /// The peak of `holds` during `[at, at + duration)`, as [`PeakUse::of_holds`] gives it,
    /// with a fast path for zero or one overlapping hold (the common case: a leaf's holds,
    /// a cover group's, are mostly disjoint in time). What every hold store answers with.
    #[inline]
    pub(crate) fn during<I>(holds: I, at: i64, duration: u64) -> PeakUse
    where
        I: Iterator<Item = (i64, i64, i64, i64)> + Clone,
    {
        let end = at.saturating_add(i64::try_from(duration).unwrap_or(i64::MAX));
        let mut overlapping = 0usize;
        let mut single = PeakUse::default();
        for (start, stop, units, jobs) in holds.clone() {
            if start < end && at < stop {
                overlapping += 1;
                single = PeakUse { units, jobs };
            }
        }
        if overlapping <= 1 {
            return single;
        }
        PeakUse::of_holds(holds, at, end)
    }
}

/// The end of a hold of `duration` seconds from `start`: refuses an empty or overflowing
/// window (the checks of every hold store's `add`).
pub(crate) fn hold_end(start: i64, duration: u64) -> Result<i64, PlannerError> {
    if duration == 0 {
        return Err(PlannerError::ZeroDuration);
    }
    i64::try_from(duration)
        .ok()
        .and_then(|d| start.checked_add(d))
        .ok_or(PlannerError::TimeOverflow { start, duration })
}

/// Whether two stores hold the same holds in each of their `pools` pools, whatever their
/// ids and order (cancel then re-add may reuse slots in another order).
pub(crate) fn same_holds<I>(pools: usize, a: impl Fn(usize) -> I, b: impl Fn(usize) -> I) -> bool
where
    I: Iterator<Item = (i64, i64, i64, i64)>,
{
    (0..pools).all(|p| {
        let mut x: Vec<(i64, i64, i64, i64)> = a(p).collect();
        let mut y: Vec<(i64, i64, i64, i64)> = b(p).collect();
        x.sort_unstable();
        y.sort_unstable();
        x == y
    })
}

/// A slab of hold lists, one list per pool.
#[derive(Clone, Debug)]
pub struct Pools {
    /// Each pool's first hold, stored inverted (`!index`) so that no hold (`NIL`) is 0:
    /// the array starts as zeroed memory, whose pages the kernel maps only where a hold is
    /// added (a pool per vertex: most leaves of a graph are held by covers, not here).
    heads: Vec<u32>,
    holds: Vec<Hold>,
    free: u32,
    live: usize,
}

impl PartialEq for Pools {
    /// Two `Pools` are equal when every pool holds the same set of holds, whatever their
    /// slab positions (cancel then re-add may reuse slots in another order).
    fn eq(&self, other: &Self) -> bool {
        self.heads.len() == other.heads.len()
            && self.live == other.live
            && same_holds(self.heads.len(), |p| self.iter(p), |p| other.iter(p))
    }
}

impl Pools {
    /// `n` empty pools.
    pub fn new(n: usize) -> Pools {
        Pools {
            heads: vec![!NIL; n],
            holds: Vec::new(),
            free: NIL,
            live: 0,
        }
    }

    /// Number of pools.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether there are no pools.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// Number of holds in all pools.
    pub fn live_holds(&self) -> usize {
        self.live
    }

    /// Holds of `pool` as (start, end, units, jobs).
    pub fn iter(&self, pool: usize) -> impl Iterator<Item = (i64, i64, i64, i64)> + Clone + '_ {
        let mut cur = self.heads.get(pool).map_or(NIL, |&h| !h);
        std::iter::from_fn(move || {
            let h = self.holds.get(cur as usize)?;
            cur = h.next;
            Some((h.start, h.end, h.units, h.jobs))
        })
    }

    /// The hold `id` as (pool, start, end, units, jobs), if it is live.
    pub fn hold(&self, id: HoldId) -> Option<(usize, i64, i64, i64, i64)> {
        let h = self.holds.get(id.0 as usize)?;
        (h.pool != NIL).then_some((h.pool as usize, h.start, h.end, h.units, h.jobs))
    }

    /// Whether `pool` has no hold at all.
    #[inline]
    pub fn is_idle(&self, pool: usize) -> bool {
        self.heads.get(pool).is_none_or(|&h| !h == NIL)
    }

    /// Peak units and peak jobs of `pool` during `[at, at + duration)`.
    pub fn peak_during(&self, pool: usize, at: i64, duration: u64) -> PeakUse {
        PeakUse::during(self.iter(pool), at, duration)
    }

    /// Adds a hold of `units` and `jobs` to `pool` during `[start, start + duration)`.
    /// Capacity is the caller's to check (it knows the pool's size).
    pub fn add(
        &mut self,
        pool: usize,
        start: i64,
        duration: u64,
        units: i64,
        jobs: i64,
    ) -> Result<HoldId, PlannerError> {
        let end = hold_end(start, duration)?;
        let Some(head) = self.heads.get(pool).map(|&h| !h) else {
            return Err(PlannerError::UnknownResource {
                resource: pool,
                count: self.heads.len(),
            });
        };
        let hold = Hold {
            start,
            end,
            units,
            jobs,
            next: head,
            prev: NIL,
            pool: pool as u32,
        };
        let idx = if self.free != NIL {
            let idx = self.free;
            self.free = self.holds[idx as usize].next;
            self.holds[idx as usize] = hold;
            idx
        } else {
            let idx = u32::try_from(self.holds.len()).map_err(|_| PlannerError::TooManySpans)?;
            self.holds.push(hold);
            idx
        };
        if let Some(h) = self.holds.get_mut(head as usize) {
            h.prev = idx;
        }
        self.heads[pool] = !idx;
        self.live += 1;
        Ok(HoldId(idx))
    }

    /// Removes a hold, in constant time; an unknown or already removed id is an error.
    pub fn remove(&mut self, id: HoldId) -> Result<(), PlannerError> {
        let unknown = || PlannerError::UnknownSpan(crate::SpanId::from_raw(u64::from(id.0)));
        let h = *self.holds.get(id.0 as usize).ok_or_else(unknown)?;
        if h.pool == NIL {
            return Err(unknown());
        }
        let pool = h.pool as usize;
        if h.prev == NIL {
            debug_assert_eq!(!self.heads[pool], id.0);
            self.heads[pool] = !h.next;
        } else if let Some(p) = self.holds.get_mut(h.prev as usize) {
            p.next = h.next;
        }
        if let Some(n) = self.holds.get_mut(h.next as usize) {
            n.prev = h.prev;
        }
        self.holds[id.0 as usize] = Hold {
            pool: NIL,
            prev: NIL,
            next: self.free,
            ..h
        };
        self.free = id.0;
        self.live -= 1;
        Ok(())
    }

    /// Heap bytes held (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        self.heads.capacity() * 4 + self.holds.capacity() * std::mem::size_of::<Hold>()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn peaks_sum_only_what_overlaps() {
        let mut p = Pools::new(2);
        let a = p.add(0, 0, 10, 1, 1).unwrap();
        let b = p.add(0, 5, 10, 2, 1).unwrap();
        p.add(0, 20, 5, 4, 1).unwrap();
        assert_eq!(p.peak_during(0, 0, 5), PeakUse { units: 1, jobs: 1 });
        assert_eq!(p.peak_during(0, 0, 10), PeakUse { units: 3, jobs: 2 });
        assert_eq!(p.peak_during(0, 10, 10), PeakUse { units: 2, jobs: 1 });
        assert_eq!(p.peak_during(0, 0, 100), PeakUse { units: 4, jobs: 2 });
        assert_eq!(p.peak_during(1, 0, 100), PeakUse::default());
        p.remove(a).unwrap();
        assert!(p.remove(a).is_err());
        p.remove(b).unwrap();
        assert_eq!(p.live_holds(), 1);
        assert!(p.add(5, 0, 1, 1, 1).is_err());
        assert!(p.add(0, 0, 0, 1, 1).is_err());
    }

    proptest! {
        #[test]
        fn agrees_with_a_per_instant_model(ops in proptest::collection::vec((0usize..3, 0i64..40, 1u64..20, 0i64..4, any::<bool>()), 1..40)) {
            let mut p = Pools::new(3);
            let fresh = Pools::new(3);
            let mut model = vec![vec![(0i64, 0i64); 64]; 3];
            let mut ids = Vec::new();
            for (pool, start, dur, units, remove) in ops {
                if remove && !ids.is_empty() {
                    let (id, pool, start, dur, units): (HoldId, usize, i64, u64, i64) = ids.remove(0);
                    p.remove(id).unwrap();
                    for t in start..start + dur as i64 { model[pool][t as usize].0 -= units; model[pool][t as usize].1 -= 1; }
                } else {
                    let id = p.add(pool, start, dur, units, 1).unwrap();
                    ids.push((id, pool, start, dur, units));
                    for t in start..start + dur as i64 { model[pool][t as usize].0 += units; model[pool][t as usize].1 += 1; }
                }
                for (pool, usage) in model.iter().enumerate() {
                    for at in [0i64, 7, 19, 33] {
                        for dur in [1u64, 5, 17] {
                            let want = (at..at + dur as i64).fold(PeakUse::default(), |m, t| PeakUse {
                                units: m.units.max(usage[t as usize].0),
                                jobs: m.jobs.max(usage[t as usize].1),
                            });
                            prop_assert_eq!(p.peak_during(pool, at, dur), want);
                        }
                    }
                }
            }
            for (id, ..) in ids { p.remove(id).unwrap(); }
            prop_assert_eq!(p, fresh);
        }
    }
}
