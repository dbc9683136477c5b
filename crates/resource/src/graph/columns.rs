//! The graph's per-vertex columns: one array per field, indexed by vertex, strings as the
//! graph's symbols. [`GraphBuilder`](super::GraphBuilder) fills them and
//! [`ResourceGraph`](super::ResourceGraph) keeps them as they are (moved, not copied), so
//! the fields, their reservation, shrinking and memory count are written here once.

use std::collections::{BTreeMap, HashMap};

use super::Status;
use rustc_hash::FxHashMap;

use crate::intern::Sym;

/// One array per vertex field.
#[derive(Clone, Debug, Default)]
pub(super) struct VertexColumns {
    pub(super) kind: Vec<Sym>,
    /// Runs: a sibling group shares its basename and unit, a node's subtree its rank.
    pub(super) basename: Runs<Sym>,
    pub(super) name: Vec<Sym>,
    pub(super) id: IntColumn,
    pub(super) rank: Runs<i64>,
    pub(super) size: IntColumn,
    pub(super) unit: Runs<Sym>,
    pub(super) exclusive: Vec<bool>,
    pub(super) status: Vec<Status>,
    /// Sparse: most vertices have no properties.
    pub(super) properties: HashMap<u32, BTreeMap<String, String>>,
}

impl VertexColumns {
    /// Room for `vertices` more vertices in every dense column.
    pub(super) fn reserve_exact(&mut self, vertices: usize) {
        self.kind.reserve_exact(vertices);
        self.name.reserve_exact(vertices);
        self.id.reserve_exact(vertices);
        self.size.reserve_exact(vertices);
        self.exclusive.reserve_exact(vertices);
        self.status.reserve_exact(vertices);
    }

    /// The columns without spare capacity (the builder's arrays become the graph's).
    pub(super) fn shrunk(self) -> VertexColumns {
        fn shrink<T>(mut v: Vec<T>) -> Vec<T> {
            v.shrink_to_fit();
            v
        }
        let mut properties = self.properties;
        properties.shrink_to_fit();
        VertexColumns {
            kind: shrink(self.kind),
            basename: self.basename.shrunk(),
            name: shrink(self.name),
            id: self.id.shrunk(),
            rank: self.rank.shrunk(),
            size: self.size.shrunk(),
            unit: self.unit.shrunk(),
            exclusive: shrink(self.exclusive),
            status: shrink(self.status),
            properties,
        }
    }

    /// Approximate heap bytes, by capacity (the properties' strings included).
    pub(super) fn heap_bytes(&self) -> usize {
        fn bytes<T>(v: &Vec<T>) -> usize {
            v.capacity() * size_of::<T>()
        }
        let properties: usize = self
            .properties
            .values()
            .map(|p| {
                p.iter()
                    .map(|(k, v)| k.capacity() + v.capacity() + 2 * size_of::<String>())
                    .sum::<usize>()
            })
            .sum::<usize>()
            + self.properties.capacity() * (size_of::<(u32, BTreeMap<String, String>)>() + 1);
        bytes(&self.kind)
            + self.basename.heap_bytes()
            + bytes(&self.name)
            + self.id.heap_bytes()
            + self.rank.heap_bytes()
            + self.size.heap_bytes()
            + self.unit.heap_bytes()
            + bytes(&self.exclusive)
            + bytes(&self.status)
            + properties
    }
}

/// An `i64` per vertex in 4 bytes where it fits, as ids, ranks and sizes nearly always do;
/// the others are kept aside by vertex.
#[derive(Clone, Debug, Default)]
pub(super) struct IntColumn {
    small: Vec<i32>,
    big: FxHashMap<u32, i64>,
}

/// The `small` value that sends a lookup to `big`.
const BIG: i32 = i32::MIN;

impl IntColumn {
    /// `x` as kept in `small`, when it fits there.
    #[inline]
    fn small_of(x: i64) -> Option<i32> {
        i32::try_from(x).ok().filter(|&s| s != BIG)
    }

    #[inline]
    pub(super) fn push(&mut self, x: i64) {
        match Self::small_of(x) {
            Some(small) => self.small.push(small),
            None => self.push_big(x),
        }
    }

    /// [`push`](Self::push) of each of `xs`, which gives exactly its `len` (the
    /// reservation is made once, not checked per value).
    pub(super) fn extend_exact(&mut self, xs: impl ExactSizeIterator<Item = i64>) {
        let (small, big) = (&mut self.small, &mut self.big);
        let at = small.len();
        small.extend(xs.enumerate().map(|(k, x)| {
            Self::small_of(x).unwrap_or_else(|| {
                big.insert((at + k) as u32, x);
                BIG
            })
        }));
    }

    /// [`push`](Self::push) of `x`, `count` times.
    pub(super) fn extend_repeated(&mut self, x: i64, count: usize) {
        match Self::small_of(x) {
            Some(small) => self.small.extend(std::iter::repeat_n(small, count)),
            None => (0..count).for_each(|_| self.push_big(x)),
        }
    }

    #[cold]
    #[inline(never)]
    fn push_big(&mut self, x: i64) {
        self.big.insert(self.small.len() as u32, x);
        self.small.push(BIG);
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> i64 {
        match self.small[i] {
            BIG => self.get_big(i),
            small => i64::from(small),
        }
    }

    #[cold]
    #[inline(never)]
    fn get_big(&self, i: usize) -> i64 {
        self.big.get(&(i as u32)).copied().unwrap_or(i64::from(BIG))
    }

    pub(super) fn reserve_exact(&mut self, additional: usize) {
        self.small.reserve_exact(additional);
    }

    pub(super) fn shrunk(mut self) -> Self {
        self.small.shrink_to_fit();
        self.big.shrink_to_fit();
        self
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.small.capacity() * size_of::<i32>()
            + self.big.capacity() * (size_of::<(u32, i64)>() + 1)
    }
}

/// A per-vertex column kept as runs of one value: each run its end (exclusive) and its
/// value, ends increasing. For the cold fields whose values come in long runs (a generated
/// graph's 60,000 vertices have thousands of basename runs and one rank run): a few
/// kilobytes where an array was written whole at start (~240 KB each on the 1,024-node
/// bench graph). A lookup is a binary search over the runs.
#[derive(Clone, Debug)]
pub(super) struct Runs<T> {
    runs: Vec<(u32, T)>,
}

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Runs { runs: Vec::new() }
    }
}

impl<T: Copy + PartialEq> Runs<T> {
    fn len(&self) -> usize {
        self.runs.last().map_or(0, |r| r.0 as usize)
    }

    #[inline]
    pub(super) fn push(&mut self, x: T) {
        self.extend_repeated(x, 1);
    }

    /// [`push`](Self::push) of `x`, `count` times. (Vertex counts are bounded by
    /// `GRAPH_VERTICES_MAX`, far below `u32::MAX`.)
    pub(super) fn extend_repeated(&mut self, x: T, count: usize) {
        if count == 0 {
            return;
        }
        let end = (self.len() + count) as u32;
        match self.runs.last_mut() {
            Some(last) if last.1 == x => last.0 = end,
            _ => self.runs.push((end, x)),
        }
    }

    /// The value of vertex `i` (`i` below the column's length).
    #[inline]
    pub(super) fn get(&self, i: usize) -> T {
        match self.runs.as_slice() {
            // One value for every vertex (ranks, mostly): no search.
            [(end, x)] if i < *end as usize => *x,
            runs => runs[runs.partition_point(|r| r.0 as usize <= i)].1,
        }
    }

    fn shrunk(mut self) -> Self {
        self.runs.shrink_to_fit();
        self
    }

    fn heap_bytes(&self) -> usize {
        self.runs.capacity() * size_of::<(u32, T)>()
    }
}

#[cfg(test)]
mod tests {
    use super::Runs;

    #[test]
    fn runs_give_back_each_value_and_merge_equal_neighbours() {
        let mut r = Runs::default();
        r.extend_repeated(-1i64, 3);
        r.push(-1);
        r.extend_repeated(7, 0);
        r.push(5);
        r.extend_repeated(6, 2);
        r.push(-1);
        let got: Vec<i64> = (0..r.len()).map(|i| r.get(i)).collect();
        assert_eq!(got, [-1, -1, -1, -1, 5, 6, 6, -1]);
        // The first four are one run, not four.
        assert_eq!(r.runs.len(), 4);
    }
}
