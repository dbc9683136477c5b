//! Rule 1's part 2 (`keep.rs`) for every candidate instant at once.
//!
//! A proof asks, at each instant a job might start (a handful to dozens), whether the root's
//! aggregates could hold the job over its window with the reservations behind it counted
//! free: for each piece of the window between their starts and ends, the units in use
//! there less those the reservations covering the piece hold must leave room for the job.
//! Asked instant by instant, every window read the calendar again and every piece looked
//! through all the reservations (a tenth of the 20,000-job conservative replay's time).
//! Here the usage less the reservations' units is laid out once over the span of all the
//! windows — one value per stretch between two changes of either — and each window takes
//! the highest value it meets.

use shardsched_matcher::Matcher;
use smallvec::SmallVec;

use crate::keep::{Held, held};
use crate::shapes::{RootAgg, planning_window};

impl RootAgg {
    /// Whether job needs `needs` (per tracked type) fit at none of `instants` (in order)
    /// for `duration` seconds, with the units of `holds` counted free: what
    /// `may_fit_without` answers at each instant, all false. `None` where the calendars
    /// cannot be read as steps (then ask instant by instant).
    pub(crate) fn fits_at_none(
        &self,
        m: &Matcher,
        needs: &[i64],
        instants: &[i64],
        duration: u64,
        holds: &[Held],
    ) -> Option<bool> {
        // Each instant's window, those of no length fitting nowhere.
        let mut windows: SmallVec<[(i64, i64); 16]> = SmallVec::new();
        for &t in instants {
            let len = i64::try_from(planning_window(t, duration)).ok()?;
            if len > 0 {
                windows.push((t, t.checked_add(len)?));
            }
        }
        let (Some(&(lo, _)), Some(hi)) = (windows.first(), windows.iter().map(|w| w.1).max())
        else {
            return Some(true);
        };
        let wanted: SmallVec<[(usize, i64); 4]> = needs
            .iter()
            .enumerate()
            .filter(|&(i, &n)| n > 0 && i < self.types.len())
            .map(|(i, &n)| (i, n))
            .collect();
        if wanted.is_empty() {
            return None;
        }
        let mut fits: SmallVec<[bool; 16]> = SmallVec::from_elem(true, windows.len());
        let mut steps = Vec::with_capacity(64);
        for (i, need) in wanted {
            steps.clear();
            let span = u64::try_from(hi - lo).ok()?;
            let total = m
                .state
                .agg_used_steps(self.root, self.types[i], lo, span, &mut steps)?;
            let stretches = Stretches::new(&steps, holds, i, (lo, hi));
            for (w, fit) in windows.iter().zip(fits.iter_mut()) {
                *fit = *fit && stretches.highest(w.0, w.1) <= total - need;
            }
            // Fitting nowhere for one type is fitting nowhere: the other types need not be
            // read (most proofs end so, at the first type).
            if !fits.contains(&true) {
                return Some(true);
            }
        }
        Some(false)
    }
}

/// The span `[lo, hi)` cut where the usage of one type changes or a reservation starts or
/// ends: each stretch's usage less the units the reservations covering it hold.
struct Stretches {
    starts: SmallVec<[i64; 64]>,
    net: SmallVec<[i64; 64]>,
}

impl Stretches {
    fn new(steps: &[(i64, i64)], holds: &[Held], ty: usize, (lo, hi): (i64, i64)) -> Stretches {
        // Where the reservations' units start and stop counting, in order.
        let mut events: SmallVec<[(i64, i64); 64]> = SmallVec::new();
        for h in holds {
            let units = held(h, ty);
            if units != 0 && h.at < hi && h.end > lo {
                events.push((h.at.max(lo), units));
                if h.end < hi {
                    events.push((h.end, -units));
                }
            }
        }
        events.sort_unstable_by_key(|e| e.0);
        let (mut starts, mut net) = (SmallVec::new(), SmallVec::new());
        let (mut s, mut e, mut used, mut back) = (0, 0, 0, 0);
        // Both lists walked together: each instant where either changes starts a stretch.
        loop {
            let next = match (steps.get(s), events.get(e)) {
                (Some(a), Some(b)) => a.0.min(b.0),
                (Some(a), None) => a.0,
                (None, Some(b)) => b.0,
                (None, None) => break,
            };
            while let Some(&(_, u)) = steps.get(s).filter(|x| x.0 == next) {
                used = u;
                s += 1;
            }
            while let Some(&(_, d)) = events.get(e).filter(|x| x.0 == next) {
                back += d;
                e += 1;
            }
            starts.push(next);
            net.push(used - back);
        }
        Stretches { starts, net }
    }

    /// The highest net usage of the stretches meeting `[at, end)` (inside the span).
    fn highest(&self, at: i64, end: i64) -> i64 {
        let first = self.starts.partition_point(|&c| c <= at).saturating_sub(1);
        let last = self.starts.partition_point(|&c| c < end);
        self.net[first..last]
            .iter()
            .copied()
            .max()
            .unwrap_or(i64::MIN)
    }
}
