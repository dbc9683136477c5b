//! The instants a reservation search tries, as Fluxion's planner offers them.
//!
//! Fluxion's `allocate_orelse_reserve` takes its candidate times from the root's aggregate,
//! from the planner of its *first* type only (`planner_multi_avail_time_first/next`): that
//! planner's time points, each a start or end of a span it holds — one span per job whose
//! match went through the root, of 0 units where the job asked none of that type. It finds
//! them through a min-time tree keyed on each point's free units (`mintime_resource_tree`):
//! the earliest point whose *key* covers the request, then checked against the point's free
//! units over the duration (`span_ok`).
//!
//! The key is a copy, taken when the point enters the tree: when a span is added, removed
//! or reduced over `[start, end)` the points there are taken out and put back, and each
//! point a search looks at is taken out and put back at the planner's next operation.
//! `planner_update_total` — `attach` and `remove` growing or shrinking the graph — changes
//! every point's free units and no key, so a point whose key fell behind is not offered
//! where its free units would fit, until something puts it back (flux-sched's t3028 test
//! 9: after `attach`, a reservation at 7200 where a node is free from 3600). [`Instants`]
//! keeps that: the points, and for each whose key differs from its free units, by how much.

use std::collections::BTreeMap;

/// The first-type planner's points and their keys (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Instants {
    /// Each instant a held job starts or ends at, with how many do.
    points: BTreeMap<i64, u32>,
    /// Free units minus key, for the points whose key is not their free units.
    behind: BTreeMap<i64, i64>,
    /// Points a search took out of the tree since the planner's last operation: the next
    /// one puts them back with their keys taken again, so a change of totals before then
    /// does not leave them behind.
    out: Vec<i64>,
}

impl Instants {
    /// A job holding `[at, end)` was recorded: its span re-keys the points it covers.
    pub(crate) fn add(&mut self, at: i64, end: i64) {
        for t in [at, end] {
            *self.points.entry(t).or_default() += 1;
        }
        self.rekeyed(at, end);
    }

    /// A job holding `[at, end)` was cancelled (its first-type span removed).
    pub(crate) fn remove(&mut self, at: i64, end: i64) {
        for t in [at, end] {
            if let Some(n) = self.points.get_mut(&t) {
                *n -= 1;
                if *n == 0 {
                    self.points.remove(&t);
                    self.behind.remove(&t);
                }
            }
        }
        self.rekeyed(at, end);
    }

    /// A span over `[at, end)` changed (added, removed or reduced): the planner put back
    /// what searches took out, and took the keys of the points in `[at, end)` again.
    pub(crate) fn rekeyed(&mut self, at: i64, end: i64) {
        self.out.clear();
        if !self.behind.is_empty() {
            self.behind.retain(|&t, _| t < at || t >= end);
        }
    }

    /// The points at or after `from`, in order.
    pub(crate) fn from(&self, from: i64) -> impl Iterator<Item = i64> + '_ {
        self.points.range(from..).map(|(&t, _)| t)
    }

    /// Whether the tree offers point `t`, whose free units are `free`, to a search for
    /// `need` units: its key covers the need. An offered point is taken out of the tree.
    pub(crate) fn offers(&mut self, t: i64, free: i64, need: i64) -> bool {
        let key = free - self.behind.get(&t).copied().unwrap_or(0);
        if key < need {
            return false;
        }
        self.behind.remove(&t);
        self.out.push(t);
        true
    }

    /// The totals changed (`planner_update_total`): `free_before` and `free_after` give
    /// each point's free units either side; the keys of the points in the tree stay.
    pub(crate) fn totals_changed(
        &mut self,
        free_before: &BTreeMap<i64, i64>,
        free_after: impl Fn(i64) -> i64,
    ) {
        for (&t, &before) in free_before {
            if self.out.contains(&t) {
                continue;
            }
            let d = self.behind.entry(t).or_default();
            *d += free_after(t) - before;
            if *d == 0 {
                self.behind.remove(&t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_left_behind_by_a_change_of_totals_hides_its_point_until_a_span_covers_it() {
        let mut i = Instants::default();
        i.add(0, 100);
        i.add(100, 200);
        // Free units at 0, 100, 200 before and after the totals grow by 4.
        let before = BTreeMap::from([(0, 0), (100, 0), (200, 4)]);
        i.totals_changed(&before, |t| before[&t] + 4);
        assert!(!i.offers(100, 4, 4), "its key is still 0");
        assert!(i.offers(100, 4, 0), "a need its old key covers");
        // The search took it out; the next operation keyed it again.
        assert!(i.offers(100, 4, 4));
        i.totals_changed(&BTreeMap::from([(0, 4)]), |_| 8);
        assert!(!i.offers(0, 8, 8));
        i.rekeyed(0, 50);
        assert!(i.offers(0, 8, 8), "a span over it takes its key again");
        i.totals_changed(&BTreeMap::from([(200, 8)]), |_| 12);
        i.remove(100, 200);
        assert_eq!(i.from(0).collect::<Vec<_>>(), [0, 100]);
        assert!(i.behind.is_empty(), "a point gone takes its key with it");
    }

    #[test]
    fn points_a_search_took_out_get_their_keys_again_whatever_the_totals_did() {
        let mut i = Instants::default();
        i.add(0, 100);
        assert!(i.offers(100, 4, 4));
        i.totals_changed(&BTreeMap::from([(0, 0), (100, 4)]), |t| {
            if t == 0 { 4 } else { 8 }
        });
        assert!(
            i.offers(100, 8, 8),
            "out of the tree when the totals changed"
        );
        assert!(!i.offers(0, 4, 4), "in the tree: its key stayed 0");
    }
}
