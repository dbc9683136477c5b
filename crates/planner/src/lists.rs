//! Hold lists stored contiguously, one vector per pool: for pools that carry many holds
//! each and are read far more often than changed.
//!
//! Why: [`Pools`](crate::Pools) keeps every pool's holds as a linked list threaded through
//! one slab, 4 bytes per idle pool, which suits the hundreds of thousands of leaves that
//! carry a hold or two. A cover group (the matcher's record of a whole node's cores, gpus or
//! memory taken by one job) carries a hold per job over its node: under conservative
//! backfill with 64 reservations, dozens. Walking such a list is one cache miss per hold,
//! scattered over the slab, and a reservation search reads a group's holds for every node
//! it considers (`perf` on the 20k conservative replay: half of all samples in that walk).
//! Here a pool's holds sit side by side in one vector, so a read is one sequential scan.
//! The answers are those of [`Pools`] for the same holds (the peaks do not depend on the
//! order of holds); the tests compare the two.

use crate::PlannerError;
use crate::pools::{HoldId, PeakUse, hold_end, same_holds};

const NIL: u32 = u32::MAX;

/// One hold, stored in its pool's vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    start: i64,
    end: i64,
    units: i64,
    jobs: i64,
    /// Its id (an index into `HoldLists::slots`).
    id: u32,
}

/// Where a hold id points: its pool and position, or (free) the next free id.
#[derive(Clone, Copy, Debug)]
struct Slot {
    pool: u32,
    /// Position in the pool's vector; the next free slot when `pool` is NIL.
    pos: u32,
}

/// Hold lists, one contiguous vector per pool; the interface of [`Pools`](crate::Pools).
#[derive(Clone, Debug, Default)]
pub struct HoldLists {
    lists: Vec<Vec<Entry>>,
    slots: Vec<Slot>,
    free: u32,
    live: usize,
}

impl PartialEq for HoldLists {
    /// Equal when every pool holds the same set of holds, whatever their ids and order.
    fn eq(&self, other: &Self) -> bool {
        self.lists.len() == other.lists.len()
            && self.live == other.live
            && same_holds(self.lists.len(), |p| self.iter(p), |p| other.iter(p))
    }
}

impl HoldLists {
    /// `n` empty pools.
    pub fn new(n: usize) -> HoldLists {
        HoldLists {
            lists: vec![Vec::new(); n],
            slots: Vec::new(),
            free: NIL,
            live: 0,
        }
    }

    /// Number of pools.
    pub fn len(&self) -> usize {
        self.lists.len()
    }

    /// Whether there are no pools.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// Number of holds in all pools.
    pub fn live_holds(&self) -> usize {
        self.live
    }

    /// Holds of `pool` as (start, end, units, jobs), in no particular order.
    pub fn iter(&self, pool: usize) -> impl Iterator<Item = (i64, i64, i64, i64)> + Clone + '_ {
        self.lists
            .get(pool)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|e| (e.start, e.end, e.units, e.jobs))
    }

    /// The hold `id` as (pool, start, end, units, jobs), if it is live.
    pub fn hold(&self, id: HoldId) -> Option<(usize, i64, i64, i64, i64)> {
        let s = self.slots.get(id.0 as usize)?;
        if s.pool == NIL {
            return None;
        }
        let e = self.lists[s.pool as usize].get(s.pos as usize)?;
        Some((s.pool as usize, e.start, e.end, e.units, e.jobs))
    }

    /// Whether `pool` has no hold at all.
    #[inline]
    pub fn is_idle(&self, pool: usize) -> bool {
        self.lists.get(pool).is_none_or(Vec::is_empty)
    }

    /// Peak units and peak jobs of `pool` during `[at, at + duration)`.
    #[inline]
    pub fn peak_during(&self, pool: usize, at: i64, duration: u64) -> PeakUse {
        PeakUse::during(self.iter(pool), at, duration)
    }

    /// Adds a hold of `units` and `jobs` to `pool` during `[start, start + duration)`.
    /// Capacity is the caller's to check.
    pub fn add(
        &mut self,
        pool: usize,
        start: i64,
        duration: u64,
        units: i64,
        jobs: i64,
    ) -> Result<HoldId, PlannerError> {
        let end = hold_end(start, duration)?;
        let count = self.lists.len();
        let Some(list) = self.lists.get_mut(pool) else {
            return Err(PlannerError::UnknownResource {
                resource: pool,
                count,
            });
        };
        let pos = u32::try_from(list.len()).map_err(|_| PlannerError::TooManySpans)?;
        let slot = Slot {
            pool: pool as u32,
            pos,
        };
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.slots[id as usize].pos;
            self.slots[id as usize] = slot;
            id
        } else {
            let id = u32::try_from(self.slots.len())
                .ok()
                .filter(|&i| i != NIL)
                .ok_or(PlannerError::TooManySpans)?;
            self.slots.push(slot);
            id
        };
        if list.capacity() == 0 {
            // Room for one: most pools (a socket's cores under socket jobs) only ever hold
            // one at a time, and a first push would make room for four (120 bytes more a
            // pool, 2,048 such pools in first-1024).
            list.reserve_exact(1);
        }
        list.push(Entry {
            start,
            end,
            units,
            jobs,
            id,
        });
        self.live += 1;
        Ok(HoldId(id))
    }

    /// Removes a hold, in constant time (the pool's last hold takes its place); an unknown
    /// or already removed id is an error.
    pub fn remove(&mut self, id: HoldId) -> Result<(), PlannerError> {
        let unknown = || PlannerError::UnknownSpan(crate::SpanId::from_raw(u64::from(id.0)));
        let s = *self.slots.get(id.0 as usize).ok_or_else(unknown)?;
        if s.pool == NIL {
            return Err(unknown());
        }
        let list = &mut self.lists[s.pool as usize];
        list.swap_remove(s.pos as usize);
        if let Some(moved) = list.get(s.pos as usize) {
            self.slots[moved.id as usize].pos = s.pos;
        }
        self.slots[id.0 as usize] = Slot {
            pool: NIL,
            pos: self.free,
        };
        self.free = id.0;
        self.live -= 1;
        Ok(())
    }

    /// Heap bytes held (for memory reports).
    pub fn heap_bytes(&self) -> usize {
        self.lists.capacity() * std::mem::size_of::<Vec<Entry>>()
            + self
                .lists
                .iter()
                .map(|l| l.capacity() * std::mem::size_of::<Entry>())
                .sum::<usize>()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Pools;
    use proptest::prelude::*;

    #[test]
    fn removal_moves_the_last_hold_and_keeps_its_id() {
        let mut l = HoldLists::new(2);
        let a = l.add(0, 0, 10, 1, 1).unwrap();
        let b = l.add(0, 20, 10, 1, 1).unwrap();
        let c = l.add(0, 40, 10, 1, 1).unwrap();
        l.remove(a).unwrap();
        assert!(l.remove(a).is_err());
        assert_eq!(l.hold(c), Some((0, 40, 50, 1, 1)));
        assert_eq!(l.hold(b), Some((0, 20, 30, 1, 1)));
        l.remove(c).unwrap();
        assert_eq!(l.peak_during(0, 0, 100), PeakUse { units: 1, jobs: 1 });
        let d = l.add(1, 5, 5, 2, 1).unwrap();
        assert_eq!(l.hold(d), Some((1, 5, 10, 2, 1)));
        assert!(!l.is_idle(0) && l.live_holds() == 2);
        assert!(l.add(5, 0, 1, 1, 1).is_err());
        assert!(l.add(0, 0, 0, 1, 1).is_err());
    }

    proptest! {
        /// The same adds and removes give `Pools`' answers to every query.
        #[test]
        fn answers_as_pools_do(ops in proptest::collection::vec((0usize..3, 0i64..40, 1u64..20, 0i64..4, 0usize..6), 1..60)) {
            let mut lists = HoldLists::new(3);
            let mut pools = Pools::new(3);
            let mut ids: Vec<(HoldId, HoldId)> = Vec::new();
            for (pool, start, dur, units, remove) in ops {
                if remove < 2 && !ids.is_empty() {
                    let (a, b) = ids.remove(remove % ids.len());
                    prop_assert_eq!(lists.hold(a), pools.hold(b));
                    lists.remove(a).unwrap();
                    pools.remove(b).unwrap();
                } else {
                    let a = lists.add(pool, start, dur, units, 1).unwrap();
                    let b = pools.add(pool, start, dur, units, 1).unwrap();
                    ids.push((a, b));
                }
                prop_assert_eq!(lists.live_holds(), pools.live_holds());
                for p in 0..3 {
                    prop_assert_eq!(lists.is_idle(p), pools.is_idle(p));
                    for at in [0i64, 7, 19, 33] {
                        for dur in [1u64, 5, 17] {
                            prop_assert_eq!(lists.peak_during(p, at, dur), pools.peak_during(p, at, dur));
                        }
                    }
                }
                for &(a, b) in &ids {
                    prop_assert_eq!(lists.hold(a), pools.hold(b));
                }
            }
        }
    }
}
