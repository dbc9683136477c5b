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

/// Edge marks of the last select, by child vertex, plus the root's.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    pub epoch: u32,
    pub by_child: Vec<Mark>,
    pub root: Mark,
    /// While `Some`: every mark set, in order, as `(child, mark)` (what a free node's visit
    /// marks, for `memo`).
    pub(super) log: Option<Vec<(u32, Mark)>>,
}

impl Marks {
    /// Starts a new select: marks of earlier ones stop counting.
    pub fn tick(&mut self, n: usize) {
        if self.by_child.len() != n {
            self.by_child = vec![Mark::default(); n];
            self.epoch = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.by_child.fill(Mark::default());
            self.epoch = 1;
        }
    }

    pub fn set(&mut self, child: u32, needs: u64, excl: bool, from: u32) {
        let mark = Mark {
            epoch: self.epoch,
            needs,
            excl,
            from,
        };
        self.by_child[child as usize] = mark;
        if let Some(log) = &mut self.log {
            log.push((child, mark));
        }
    }

    /// The mark on the edge into `child`, if the last select set one.
    pub fn get(&self, child: u32) -> Option<Mark> {
        let m = self.by_child[child as usize];
        (m.epoch == self.epoch).then_some(m)
    }
}
