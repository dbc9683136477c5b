//! The order in which libstdc++'s `std::unordered_set` / `std::unordered_map` of integer
//! keys iterate: where Fluxion walks such a container and stops at the first key that
//! fails, which key it names depends on it (a partial cancel's ranks, `partial.rs`).
//!
//! Modelled on GCC 12's `_Hashtable` with unique keys and `std::hash<int64_t>` (the key's
//! bits as the hash): one list of nodes in iteration order; a key goes in right before the
//! first node of its bucket (key mod bucket count), or at the front of the list when its
//! bucket is empty; a rehash re-inserts the nodes in list order by the same rule. The bucket
//! counts follow `_Prime_rehash_policy` (max load factor 1): 13 at the first insert, then
//! at least twice as many from libstdc++'s prime list whenever the size would pass the
//! count. Checked against the C++ library (`tests` below give its orders).

use std::collections::{HashMap, HashSet};

/// libstdc++'s `__prime_list` (64-bit), its entries up to 2^26: bucket counts for up to
/// 2^25 keys. Beyond it the last entry is used (a set that large iterates in another
/// order than modelled).
const PRIME_LIST: [u64; 202] = [
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97,
    103, 109, 113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313,
    337, 359, 383, 409, 439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109,
    1193, 1289, 1381, 1493, 1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739,
    4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273, 11113, 12011,
    12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411, 30727, 33223,
    35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229, 92203,
    99733, 107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897,
    256279, 277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903,
    658753, 712697, 771049, 834181, 902483, 976369, 1056323, 1142821, 1236397, 1337629, 1447153,
    1565659, 1693859, 1832561, 1982627, 2144977, 2320627, 2510653, 2716249, 2938679, 3179303,
    3439651, 3721303, 4026031, 4355707, 4712381, 5098259, 5515729, 5967347, 6456007, 6984629,
    7556579, 8175383, 8844859, 9569143, 10352717, 11200489, 12117689, 13109983, 14183539, 15345007,
    16601593, 17961079, 19431899, 21023161, 22744717, 24607243, 26622317, 28802401, 31160981,
    33712729, 36473443, 39460231, 42691603, 46187573, 49969847, 54061849, 58488943, 63278561,
];

/// Small bucket counts: `_M_next_bkt`'s `__fast_bkt`.
const FAST_BKT: [u64; 14] = [2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13];

/// The iteration order of an unordered container after inserting `keys` in this order
/// (a key already in it is not inserted again). Linear in the keys, as the container is.
pub fn iteration_order(keys: impl IntoIterator<Item = i64>) -> Vec<i64> {
    let mut table = Table {
        keys: Vec::new(),
        next: Vec::new(),
        first: None,
        before: HashMap::new(),
        buckets: 1,
        next_resize: 0,
    };
    let mut seen = HashSet::new();
    for k in keys {
        if !seen.insert(k) {
            continue;
        }
        if let Some(n) = table.need_rehash(table.keys.len() as u64 + 1) {
            table.rehash(n);
        }
        table.keys.push(k);
        table.next.push(None);
        table.link(table.keys.len() - 1);
    }
    let mut out = Vec::with_capacity(table.keys.len());
    let mut at = table.first;
    while let Some(i) = at {
        out.push(table.keys[i]);
        at = table.next[i];
    }
    out
}

/// Where a bucket's nodes start: after the list's head, or after a node.
#[derive(Clone, Copy)]
enum Before {
    Head,
    Node(usize),
}

/// The hashtable's list: nodes by index, each with the next in iteration order.
struct Table {
    keys: Vec<i64>,
    next: Vec<Option<usize>>,
    first: Option<usize>,
    /// For each non-empty bucket, the node before its first (`_M_buckets`).
    before: HashMap<u64, Before>,
    buckets: u64,
    next_resize: u64,
}

impl Table {
    fn bucket(&self, i: usize) -> u64 {
        (self.keys[i] as u64) % self.buckets
    }

    /// `_M_insert_bucket_begin`: node `i` goes before the first node of its bucket, or
    /// first in the list when the bucket is empty.
    fn link(&mut self, i: usize) {
        let b = self.bucket(i);
        match self.before.get(&b).copied() {
            Some(Before::Head) => {
                self.next[i] = self.first;
                // `i` is now `b`'s first node and the list's: `b` still starts at the head.
                self.first = Some(i);
            }
            Some(Before::Node(p)) => {
                self.next[i] = self.next[p];
                self.next[p] = Some(i);
            }
            None => {
                self.next[i] = self.first;
                self.first = Some(i);
                if let Some(n) = self.next[i] {
                    let nb = self.bucket(n);
                    self.before.insert(nb, Before::Node(i));
                }
                self.before.insert(b, Before::Head);
            }
        }
    }

    /// `_M_rehash`: the nodes, in list order, linked again into `n` buckets.
    fn rehash(&mut self, n: u64) {
        self.buckets = n;
        self.before.clear();
        let mut at = self.first.take();
        while let Some(i) = at {
            at = self.next[i];
            self.link(i);
        }
    }

    /// `_M_need_rehash` for a table about to hold `wanted` keys: the new bucket count.
    fn need_rehash(&mut self, wanted: u64) -> Option<u64> {
        if wanted <= self.next_resize {
            return None;
        }
        let min = wanted.max(if self.next_resize == 0 { 11 } else { 0 });
        if min < self.buckets {
            self.next_resize = self.buckets;
            return None;
        }
        Some(self.next_bucket_count((min + 1).max(self.buckets * 2)))
    }

    /// `_M_next_bkt`.
    fn next_bucket_count(&mut self, n: u64) -> u64 {
        if let Some(&b) = FAST_BKT.get(n as usize) {
            self.next_resize = b;
            return b;
        }
        let from = &PRIME_LIST[6..PRIME_LIST.len() - 1];
        let i = from.partition_point(|&p| p < n);
        let b = from
            .get(i)
            .copied()
            .unwrap_or(PRIME_LIST[PRIME_LIST.len() - 1]);
        self.next_resize = b;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_libstdcxx_does() {
        // Each expected order printed by a C++ program inserting the same keys into a
        // `std::unordered_set<int64_t>` (GCC 12, Debian 12) and iterating it.
        let cases: [(&[i64], &[i64]); 5] = [
            (&[4, 5], &[5, 4]),
            (&[0, 2, 3], &[3, 2, 0]),
            (
                &[0, 2, 3, 13, 26, 5, 1, 40, 7, 8, 9, 10, 11, 12, 14, 15],
                &[15, 14, 12, 0, 13, 26, 2, 3, 5, 1, 7, 8, 9, 10, 40, 11],
            ),
            (&[], &[]),
            (&[7, 7, 7], &[7]),
        ];
        for (keys, order) in cases {
            assert_eq!(iteration_order(keys.iter().copied()), order, "{keys:?}");
        }
        let ascending: Vec<i64> = (0..30).collect();
        let order = [
            29, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
            23, 24, 25, 26, 27, 28,
        ];
        assert_eq!(iteration_order(ascending), order);
        let keys = [
            100, 3, 57, 12, 99, 1000, 4, 26, 39, 52, 65, 78, 91, 104, 117, 130, 7, 8, 2047, 13, 0,
            1, 2, 5, 6, 9, 10, 11, 14, 15, 16, 17, 18, 19, 20,
        ];
        let order = [
            20, 18, 17, 16, 15, 91, 4, 19, 78, 7, 52, 39, 10, 26, 99, 1000, 12, 130, 14, 57, 3, 13,
            104, 100, 2047, 117, 1, 8, 0, 2, 5, 65, 6, 9, 11,
        ];
        assert_eq!(iteration_order(keys), order);
    }

    #[test]
    fn a_large_set_is_ordered_in_linear_time() {
        // 2^20 keys: quadratic work would not finish.
        let order = iteration_order(0..1 << 20);
        assert_eq!(order.len(), 1 << 20);
    }
}
