//! The marks a select leaves on edges for the update walk.

/// The mark a select leaves on an edge (stored per child vertex: the tree has one edge into
/// each vertex) for the update walk: what to take there and whether exclusively.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    pub epoch: u32,
    pub needs: u64,
    pub excl: bool,
    /// The parent the marked edge comes from (in a graph where a vertex has several).
    pub from: u32,
}

/// A [`Mark`] as stored, in one word: the epoch and, above it, the exclusivity bit in the
/// low half, the needs in the high half (or [`NEEDS_ELSEWHERE`]). All zeros is no mark
/// (epochs start at 1), so the array is allocated zeroed and the kernel maps a page of it
/// only when a mark is first set there: one entry per vertex of the graph, every one of
/// which a long session marks once (it was 16 bytes a vertex, the needs and the parent
/// each in a word of their own: ~205 of first-1024's ~2,750 page faults).
type Stored = u64;

/// The exclusivity bit of a stored mark (the epoch is below it).
const EXCL_BIT: u64 = 1 << 31;

/// The needs of a stored mark when they do not fit 32 bits: then they are in `big`.
const NEEDS_ELSEWHERE: u32 = u32::MAX;

fn pack(epoch: u32, needs: u32, excl: bool) -> Stored {
    debug_assert!(epoch < 1 << 31, "an epoch past 31 bits");
    let excl = if excl { EXCL_BIT } else { 0 };
    u64::from(epoch) | excl | (u64::from(needs) << 32)
}

/// Epochs count to here and start over (31 bits: the word's next bit is exclusivity).
const EPOCH_MAX: u32 = (1 << 31) - 1;

/// Edge marks of the last select, by child vertex, plus the root's.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    pub epoch: u32,
    by_child: Vec<Stored>,
    /// This select's needs of 2^32 - 1 units or more, by child, the last set last.
    big: Vec<(u32, u64)>,
    /// The parent each marked edge comes from, by child: kept only where vertices share
    /// parents (the update walk asks it only there; elsewhere it is the tree parent).
    from: Vec<u32>,
    pub root: Mark,
    /// While `Some`: every mark set, in order, as `(child, mark)` (what a free node's visit
    /// marks, for `memo`).
    pub(super) log: Option<Vec<(u32, Mark)>>,
}

impl Marks {
    /// Starts a new select over `n` vertices: marks of earlier ones stop counting. With
    /// `shared_parents`, each mark keeps the parent its edge comes from.
    pub fn tick(&mut self, n: usize, shared_parents: bool) {
        if self.by_child.len() != n {
            self.by_child = vec![0; n];
            self.from = Vec::new();
            self.epoch = 0;
        }
        if shared_parents && self.from.len() != n {
            self.from = vec![0; n];
        }
        if self.epoch == EPOCH_MAX {
            self.by_child.fill(0);
            self.epoch = 0;
        }
        self.epoch += 1;
        self.big.clear();
    }

    pub fn set(&mut self, child: u32, needs: u64, excl: bool, from: u32) {
        let mark = Mark {
            epoch: self.epoch,
            needs,
            excl,
            from,
        };
        self.store(child, mark);
        if let Some(log) = &mut self.log {
            log.push((child, mark));
        }
    }

    /// [`Marks::set`] while no log is kept (a kept visit's replay: `memo`).
    #[inline]
    pub(super) fn set_unlogged(&mut self, child: u32, mark: Mark) {
        debug_assert!(self.log.is_none(), "a mark set past the log");
        self.store(child, mark);
    }

    /// Stores `mark` at this epoch.
    #[inline]
    fn store(&mut self, child: u32, mark: Mark) {
        let needs = match u32::try_from(mark.needs) {
            Ok(n) if n != NEEDS_ELSEWHERE => n,
            _ => {
                self.big.push((child, mark.needs));
                NEEDS_ELSEWHERE
            }
        };
        self.by_child[child as usize] = pack(self.epoch, needs, mark.excl);
        if let Some(f) = self.from.get_mut(child as usize) {
            *f = mark.from;
        }
    }

    /// The mark on the edge into `child`, if the last select set one (its `from` is 0
    /// where marks keep no parent: see [`Marks::tick`]).
    pub fn get(&self, child: u32) -> Option<Mark> {
        let s = self.by_child[child as usize];
        if (s & (EXCL_BIT - 1)) as u32 != self.epoch {
            return None;
        }
        let needs = match (s >> 32) as u32 {
            NEEDS_ELSEWHERE => self.big_needs(child),
            n => u64::from(n),
        };
        Some(Mark {
            epoch: self.epoch,
            needs,
            excl: s & EXCL_BIT != 0,
            from: self.from.get(child as usize).copied().unwrap_or(0),
        })
    }

    /// Whether each mark keeps the parent its edge comes from (see [`Marks::tick`]).
    pub fn keeps_parents(&self) -> bool {
        !self.from.is_empty() || self.by_child.is_empty()
    }

    #[cold]
    fn big_needs(&self, child: u32) -> u64 {
        let last = self.big.iter().rev().find(|e| e.0 == child);
        last.map_or(u64::from(NEEDS_ELSEWHERE), |e| e.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_as_set_until_the_next_select() {
        let mut marks = Marks::default();
        marks.tick(4, true);
        marks.set(2, u64::MAX, true, u32::MAX);
        marks.set(1, 0, false, 0);
        marks.set(3, u64::from(NEEDS_ELSEWHERE) - 1, false, 7);
        let m = marks.get(2).unwrap_or_default();
        assert_eq!(
            (m.needs, m.excl, m.from, m.epoch),
            (u64::MAX, true, u32::MAX, 1)
        );
        assert_eq!(marks.get(1).map(|m| (m.needs, m.excl)), Some((0, false)));
        let m = marks.get(3).unwrap_or_default();
        assert_eq!((m.needs, m.from), (u64::from(u32::MAX) - 1, 7));
        assert_eq!(marks.get(0), None);
        marks.tick(4, true);
        assert_eq!((marks.get(2), marks.get(3)), (None, None));
    }

    #[test]
    fn needs_past_32_bits_and_marks_set_again_read_back_as_last_set() {
        let mut marks = Marks::default();
        marks.tick(3, false);
        marks.set(0, 1 << 40, false, 9);
        marks.set(1, u64::from(u32::MAX), true, 9);
        marks.set(0, 3, true, 9);
        marks.set(1, 1 << 33, false, 9);
        let got = |c| marks.get(c).map(|m| (m.needs, m.excl, m.from));
        // Without shared parents no parent is kept.
        assert_eq!(got(0), Some((3, true, 0)));
        assert_eq!(got(1), Some((1 << 33, false, 0)));
        assert_eq!(got(2), None);
    }

    #[test]
    fn epochs_start_over_without_reviving_old_marks() {
        let mut marks = Marks::default();
        marks.tick(2, false);
        marks.set(0, 5, false, 0);
        marks.epoch = EPOCH_MAX - 1;
        marks.by_child[1] = pack(EPOCH_MAX, 1, true);
        marks.tick(2, false);
        assert_eq!(marks.epoch, EPOCH_MAX);
        assert!(marks.get(1).is_some());
        marks.tick(2, false);
        assert_eq!(marks.epoch, 1);
        assert_eq!((marks.get(0), marks.get(1)), (None, None));
    }
}
