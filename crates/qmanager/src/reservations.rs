//! The reservations a queue holds in its matcher, in one place: by start (the next one due),
//! by job (its window and what it takes from the root's aggregates, for the proofs of module
//! `keep`), and their ends (instants at which a later job may start to fit).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use crate::event::{JobId, JobMap};
use crate::queue::Key;

/// One reservation as the queue manager sees it; the matcher holds its vertices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reserved {
    pub(crate) at: i64,
    /// End of the window the matcher planned it over.
    pub(crate) end: i64,
    /// Units of each root-tracked type it takes (see `RootAgg::held`).
    pub(crate) held: Vec<i64>,
    /// Its job's place in the pending order, to tell the reservations behind a job in walk
    /// order without looking the jobs up.
    pub(crate) key: Key,
}

/// Every reservation held, indexed three ways that are kept in step here only.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reservations {
    by_start: BTreeSet<(i64, JobId)>,
    by_job: JobMap<Reserved>,
    /// End instant → how many reservations end then.
    ends: BTreeMap<i64, u32>,
}

impl Reservations {
    pub(crate) fn insert(&mut self, id: JobId, r: Reserved) {
        self.by_start.insert((r.at, id));
        *self.ends.entry(r.end).or_default() += 1;
        if let Some(old) = self.by_job.insert(id, r) {
            // Never happens (a job is unreserved before it is reserved again); keep the
            // indexes true if it did.
            self.by_start.remove(&(old.at, id));
            self.drop_end(old.end);
        }
    }

    pub(crate) fn remove(&mut self, id: JobId) -> Option<Reserved> {
        let r = self.by_job.remove(&id)?;
        self.by_start.remove(&(r.at, id));
        self.drop_end(r.end);
        Some(r)
    }

    fn drop_end(&mut self, end: i64) {
        if let Some(n) = self.ends.get_mut(&end) {
            *n -= 1;
            if *n == 0 {
                self.ends.remove(&end);
            }
        }
    }

    pub(crate) fn get(&self, id: JobId) -> Option<&Reserved> {
        self.by_job.get(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_job.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_job.is_empty()
    }

    /// The reservations of jobs after `key` in walk order, in no particular order.
    pub(crate) fn behind(&self, key: Key) -> impl Iterator<Item = &Reserved> + '_ {
        self.by_job.values().filter(move |r| r.key > key)
    }

    /// The earliest reservation: (start, job).
    pub(crate) fn first(&self) -> Option<(i64, JobId)> {
        self.by_start.first().copied()
    }

    /// (start, job), earliest first.
    pub(crate) fn by_start(&self) -> impl Iterator<Item = (i64, JobId)> + '_ {
        self.by_start.iter().copied()
    }

    /// Reservations starting before `before`: (start, job), earliest first.
    pub(crate) fn starting_before(&self, before: i64) -> impl Iterator<Item = (i64, JobId)> + '_ {
        self.by_start.range(..(before, JobId::MIN)).copied()
    }

    /// Reservation ends in `(after, before)`, each once.
    pub(crate) fn ends_between(&self, after: i64, before: i64) -> impl Iterator<Item = i64> + '_ {
        self.ends
            .range((Bound::Excluded(after), Bound::Excluded(before)))
            .map(|(&t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(at: i64, end: i64) -> Reserved {
        Reserved {
            at,
            end,
            held: vec![1],
            key: Key {
                priority: std::cmp::Reverse(0),
                submit: at,
                seq: 0,
            },
        }
    }

    #[test]
    fn the_indexes_stay_in_step() {
        let mut rs = Reservations::default();
        rs.insert(1, r(10, 20));
        rs.insert(2, r(5, 20));
        rs.insert(3, r(30, 40));
        assert_eq!(rs.first(), Some((5, 2)));
        assert_eq!(
            rs.starting_before(30).collect::<Vec<_>>(),
            [(5, 2), (10, 1)]
        );
        assert_eq!(rs.ends_between(0, 50).collect::<Vec<_>>(), [20, 40]);
        assert_eq!(rs.remove(2), Some(r(5, 20)));
        assert_eq!(rs.ends_between(0, 50).collect::<Vec<_>>(), [20, 40]);
        rs.remove(1);
        assert_eq!(rs.ends_between(0, 50).collect::<Vec<_>>(), [40]);
        assert_eq!(rs.remove(1), None);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs.by_start().collect::<Vec<_>>(), [(30, 3)]);
    }
}
