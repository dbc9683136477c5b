//! Each whole's covers, and the probes that answer most questions about them without
//! reading them.

use std::cell::Cell;

/// One whole cover: `[start, end)`. Its start names it among its whole's covers (they
/// never overlap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WholeCover {
    pub(super) start: i64,
    pub(super) end: i64,
}

/// Each whole's covers, in order of start. They never overlap (a cover is recorded only
/// where none meets its window: `SchedState::hold_whole`), so they are in order of end
/// too, and the covers meeting a window are found by one binary search — which the walks
/// ask of every node they visit, under dozens of reservations.
#[derive(Clone, Debug)]
pub(super) struct WholeCovers {
    pub(super) of: Vec<Vec<WholeCover>>,
    /// Per whole, what the last search of its covers found ([`WholeCovers::probe`]).
    probes: Vec<Cell<Probe>>,
    /// Covers of all wholes.
    pub(super) live: usize,
}

/// Equal when every whole has the same covers, whatever the probes say.
impl PartialEq for WholeCovers {
    fn eq(&self, other: &Self) -> bool {
        self.of == other.of
    }
}

/// What a search of one whole's covers found: for every instant in `[after, until)`, the
/// first cover ending after it is cover `first`, which starts at `start` (`until` and
/// `start` are `i64::MAX` when no cover ends after).
///
/// Why: a conservative re-plan asks of every node, at each instant it tries, whether a
/// cover meets a window; under dozens of reservations a node has dozens of covers, in a
/// list of its own, and reading it was a cache miss or several per node and question (23 %
/// of the 5,000-job replay's time, `perf`, half of it the first load of the list). The
/// instants asked one after another mostly fall where the last search did, and one probe
/// per whole, all of them in one array, then answers without reading the list. A hint: each
/// change to a whole's covers resets its probe ([`Probe::NONE`]).
#[derive(Clone, Copy, Debug)]
struct Probe {
    after: i64,
    until: i64,
    start: i64,
    first: u32,
}

impl Probe {
    /// Holds for no instant.
    const NONE: Probe = Probe {
        after: i64::MAX,
        until: i64::MIN,
        start: i64::MAX,
        first: 0,
    };
}

impl WholeCovers {
    /// No covers, for `n` wholes.
    pub(super) fn new(n: usize) -> WholeCovers {
        WholeCovers {
            of: vec![Vec::new(); n],
            probes: vec![Cell::new(Probe::NONE); n],
            live: 0,
        }
    }

    /// Whole `c`'s covers from the first that ends after `at`, in order.
    pub(super) fn ending_after(&self, c: u32, at: i64) -> &[WholeCover] {
        let first = self.probe(c as usize, at).first as usize;
        &self.of[c as usize][first..]
    }

    /// The overlapping parts of the covers of whole `c` during `[at, end)`, in order, each
    /// one job.
    pub(super) fn meeting(
        &self,
        c: u32,
        at: i64,
        end: i64,
    ) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ending_after(c, at)
            .iter()
            .take_while(move |w| w.start < end)
            .map(move |w| (w.start.max(at), w.end.min(end)))
    }

    /// Whether a cover of whole `c` meets `[at, end)`: whether the first cover ending
    /// after `at` starts before `end`.
    #[inline]
    pub(super) fn meets(&self, c: u32, at: i64, end: i64) -> bool {
        self.probe(c as usize, at).start < end
    }

    /// How many covers of whole `c` meet `[at, end)` (jobs: each cover is one).
    pub(super) fn jobs_meeting(&self, c: u32, at: i64, end: i64) -> i64 {
        i64::try_from(self.meeting(c, at, end).count()).unwrap_or(i64::MAX)
    }

    /// The probe of whole `c`'s covers that holds at `at`: the last one when it does, else
    /// a search's, kept for the next question.
    #[inline]
    fn probe(&self, c: usize, at: i64) -> Probe {
        let kept = &self.probes[c];
        let p = kept.get();
        if p.after <= at && at < p.until {
            return p;
        }
        let covers = &self.of[c];
        let first = covers.partition_point(|w| w.end <= at);
        let (start, until) = covers
            .get(first)
            .map_or((i64::MAX, i64::MAX), |w| (w.start, w.end));
        let p = Probe {
            after: first.checked_sub(1).map_or(i64::MIN, |i| covers[i].end),
            until,
            start,
            first: u32::try_from(first).unwrap_or(u32::MAX),
        };
        kept.set(p);
        p
    }

    /// Adds a cover of whole `c` over `[start, end)` (a window of at least one second),
    /// unless another cover of it meets the window.
    pub(super) fn add(&mut self, c: usize, start: i64, end: i64) -> bool {
        // The commit asked whether the window was free just before: the probe holds.
        let at = self.probe(c, start).first as usize;
        let list = &mut self.of[c];
        if start >= end || list.get(at).is_some_and(|w| w.start < end) {
            return false;
        }
        list.insert(at, WholeCover { start, end });
        self.live += 1;
        self.probes[c].set(Probe::NONE);
        true
    }

    /// The cover of whole `c` that starts at `start`, taken out: its window. Found as the
    /// first cover ending after its start, without a scan.
    pub(super) fn remove(&mut self, c: usize, start: i64) -> Option<(i64, i64)> {
        if c >= self.of.len() {
            return None;
        }
        let k = self.probe(c, start).first as usize;
        let list = &mut self.of[c];
        list.get(k).filter(|w| w.start == start)?;
        let w = list.remove(k);
        self.live -= 1;
        self.probes[c].set(Probe::NONE);
        Some((w.start, w.end))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::WholeCovers;

    /// One step: add a cover `[start, start + len)` to a whole, remove one of its covers,
    /// or ask whether a window meets one.
    #[derive(Clone, Debug)]
    enum Step {
        Add(u32, i64, i64),
        Remove(u32, usize),
        Ask(u32, i64, i64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..3u32, 0..60i64, 1..12i64).prop_map(|(c, s, l)| Step::Add(c, s, l)),
            (0..3u32, 0..8usize).prop_map(|(c, k)| Step::Remove(c, k)),
            (0..3u32, -5..70i64, 1..20i64).prop_map(|(c, s, l)| Step::Ask(c, s, l)),
        ]
    }

    /// A cover is removed by its start, and only a start some cover has removes one.
    #[test]
    fn removed_by_start() {
        let mut w = WholeCovers::new(1);
        assert!(w.add(0, 0, 10));
        assert!(w.add(0, 10, 20));
        assert!(!w.add(0, 5, 12), "over two others");
        assert!(!w.add(0, 30, 30), "an empty window");
        assert_eq!(w.remove(0, 5), None, "no cover starts at 5");
        assert_eq!(w.remove(0, 10), Some((10, 20)));
        assert_eq!(w.remove(0, 10), None, "removed already");
        assert_eq!(w.remove(0, 0), Some((0, 10)));
        assert_eq!(w.live, 0);
        assert_eq!(w.remove(1, 0), None, "no such whole");
    }

    proptest! {
        /// The covers' probes (one search kept per whole) answer as a search of the list
        /// would, whatever was added and removed between two questions.
        #[test]
        fn probes_answer_as_the_list(steps in proptest::collection::vec(step(), 1..200)) {
            let mut w = WholeCovers::new(3);
            for s in steps {
                match s {
                    Step::Add(c, start, len) => {
                        let _ = w.add(c as usize, start, start + len);
                    }
                    Step::Remove(c, k) => {
                        if let Some(x) = w.of[c as usize].get(k).copied() {
                            prop_assert_eq!(w.remove(c as usize, x.start), Some((x.start, x.end)));
                        }
                    }
                    Step::Ask(c, at, len) => {
                        let end = at + len;
                        let list = &w.of[c as usize];
                        let meets = list.iter().any(|x| x.start < end && x.end > at);
                        let jobs = list.iter().filter(|x| x.start < end && x.end > at).count();
                        prop_assert_eq!(w.meets(c, at, end), meets);
                        prop_assert_eq!(w.jobs_meeting(c, at, end), jobs as i64);
                    }
                }
            }
        }
    }
}
