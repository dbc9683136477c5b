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

/// A [`Mark`] as stored, in two words: the needs, then the epoch, the exclusivity bit and
/// the parent. All zeros is no mark (epochs start at 1), so the array is allocated zeroed
/// and the kernel maps a page of it only when a mark is first set there: one entry per
/// vertex of the graph, most of which a short session never marks (it was 24 bytes a
/// vertex, every page written at once: ~350 page faults of first-1024's ~4,000).
type Stored = [u64; 2];

/// The exclusivity bit of a stored mark's second word (the epoch is below it).
const EXCL_BIT: u64 = 1 << 31;

fn pack(m: Mark) -> Stored {
    debug_assert!(m.epoch < 1 << 31, "an epoch past 31 bits");
    let excl = if m.excl { EXCL_BIT } else { 0 };
    [
        m.needs,
        u64::from(m.epoch) | excl | (u64::from(m.from) << 32),
    ]
}

fn unpack(s: Stored) -> Mark {
    Mark {
        epoch: (s[1] & (EXCL_BIT - 1)) as u32,
        needs: s[0],
        excl: s[1] & EXCL_BIT != 0,
        from: (s[1] >> 32) as u32,
    }
}

/// Epochs count to here and start over (31 bits: the word's next bit is exclusivity).
const EPOCH_MAX: u32 = (1 << 31) - 1;

/// Edge marks of the last select, by child vertex, plus the root's.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    pub epoch: u32,
    by_child: Vec<Stored>,
    pub root: Mark,
    /// While `Some`: every mark set, in order, as `(child, mark)` (what a free node's visit
    /// marks, for `memo`).
    pub(super) log: Option<Vec<(u32, Mark)>>,
}

impl Marks {
    /// Starts a new select: marks of earlier ones stop counting.
    pub fn tick(&mut self, n: usize) {
        if self.by_child.len() != n {
            self.by_child = vec![[0; 2]; n];
            self.epoch = 0;
        }
        if self.epoch == EPOCH_MAX {
            self.by_child.fill([0; 2]);
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    pub fn set(&mut self, child: u32, needs: u64, excl: bool, from: u32) {
        let mark = Mark {
            epoch: self.epoch,
            needs,
            excl,
            from,
        };
        self.by_child[child as usize] = pack(mark);
        if let Some(log) = &mut self.log {
            log.push((child, mark));
        }
    }

    /// [`Marks::set`] while no log is kept (a kept visit's replay: `memo`).
    #[inline]
    pub(super) fn set_unlogged(&mut self, child: u32, mark: Mark) {
        debug_assert!(self.log.is_none(), "a mark set past the log");
        self.by_child[child as usize] = pack(Mark {
            epoch: self.epoch,
            ..mark
        });
    }

    /// The mark on the edge into `child`, if the last select set one.
    pub fn get(&self, child: u32) -> Option<Mark> {
        let m = unpack(self.by_child[child as usize]);
        (m.epoch == self.epoch).then_some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_as_set_until_the_next_select() {
        let mut marks = Marks::default();
        marks.tick(4);
        marks.set(2, u64::MAX, true, u32::MAX);
        marks.set(1, 0, false, 0);
        let m = marks.get(2).unwrap_or_default();
        assert_eq!(
            (m.needs, m.excl, m.from, m.epoch),
            (u64::MAX, true, u32::MAX, 1)
        );
        assert_eq!(marks.get(1).map(|m| (m.needs, m.excl)), Some((0, false)));
        assert_eq!(marks.get(3), None);
        marks.tick(4);
        assert_eq!(marks.get(2), None);
    }

    #[test]
    fn epochs_start_over_without_reviving_old_marks() {
        let mut marks = Marks::default();
        marks.tick(2);
        marks.set(0, 5, false, 0);
        marks.epoch = EPOCH_MAX - 1;
        marks.by_child[1] = pack(Mark {
            epoch: EPOCH_MAX,
            needs: 1,
            excl: true,
            from: 0,
        });
        marks.tick(2);
        assert_eq!(marks.epoch, EPOCH_MAX);
        assert!(marks.get(1).is_some());
        marks.tick(2);
        assert_eq!(marks.epoch, 1);
        assert_eq!((marks.get(0), marks.get(1)), (None, None));
    }
}
