//! The order in which GCC's `std::sort` leaves equal elements.
//!
//! Fluxion sorts its candidate lists with libstdc++'s `std::sort`, an introsort that is not
//! stable: among candidates with equal scores (cores of two nodes under a non-node-centric
//! policy, say) the one it puts first is the one Fluxion takes. Agreeing with Fluxion byte for
//! byte therefore needs the same algorithm, step for step: median-of-three quicksort down to
//! runs of 16, a heapsort fallback past twice the binary log of the length in depth, and a
//! final insertion sort. Ranges of up to 16 elements are insertion-sorted, which is stable.
//!
//! Only `less` is ever called, so the result depends on nothing but the comparisons — the
//! same permutation GCC 12 gives for the same comparison results.

/// Elements a run must exceed to be partitioned rather than left to insertion sort.
const THRESHOLD: usize = 16;

/// Sorts `v` so that no element is `less` than one before it, permuting equal elements
/// exactly as libstdc++'s `std::sort(first, last, comp)` does with `comp = less`.
pub fn sort_by<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let n = v.len();
    if n == 0 {
        return;
    }
    // Already strictly in order (each element `less` than the next): no two are equal, so
    // this is the only order `std::sort` can give; most candidate lists arrive so (visited
    // in score order), and their sort was 7 % of a replay's walks.
    if v.windows(2).all(|w| less(&w[0], &w[1])) {
        return;
    }
    // Where no two elements are equal the sorted order is the only one: any sort finds it.
    // The standard library's stable sort merges the runs a walk's candidates arrive in (a
    // rack's nodes after another's) with fewer comparisons than the introsort below (the
    // sort of a reservation's few hundred nodes was 4 % of a conservative replay's time);
    // the introsort runs from the original order only when that sort leaves two equal.
    // Up to 16 elements `std::sort` is an insertion sort, which is stable: the stable
    // sort's order is its order, equal elements or not.
    let original = (n > THRESHOLD).then(|| v.to_vec());
    v.sort_by(|a, b| {
        if less(a, b) {
            std::cmp::Ordering::Less
        } else if less(b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    let Some(original) = original else {
        return;
    };
    if v.windows(2).all(|w| less(&w[0], &w[1])) {
        return;
    }
    v.copy_from_slice(&original);
    // std::__lg(n) * 2
    let depth = 2 * (usize::BITS - 1 - n.leading_zeros()) as usize;
    introsort_loop(v, 0, n, depth, less);
    final_insertion_sort(v, less);
}

fn introsort_loop<T: Copy>(
    v: &mut [T],
    first: usize,
    mut last: usize,
    mut depth: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    while last - first > THRESHOLD {
        if depth == 0 {
            heap_sort(&mut v[first..last], less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, first, last, less);
        introsort_loop(v, cut, last, depth, less);
        last = cut;
    }
}

fn partition_pivot<T: Copy>(
    v: &mut [T],
    first: usize,
    last: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> usize {
    let mid = first + (last - first) / 2;
    move_median_to_first(v, first, first + 1, mid, last - 1, less);
    unguarded_partition(v, first + 1, last, first, less)
}

fn move_median_to_first<T: Copy>(
    v: &mut [T],
    result: usize,
    a: usize,
    b: usize,
    c: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(result, pick);
}

fn unguarded_partition<T: Copy>(
    v: &mut [T],
    mut first: usize,
    mut last: usize,
    pivot: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) -> usize {
    loop {
        while less(&v[first], &v[pivot]) {
            first += 1;
        }
        last -= 1;
        while less(&v[pivot], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn final_insertion_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let val = v[i];
            v.copy_within(0..i, 1);
            v[0] = val;
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

fn unguarded_linear_insert<T: Copy>(
    v: &mut [T],
    mut last: usize,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    let val = v[last];
    let mut next = last - 1;
    while less(&val, &v[next]) {
        v[last] = v[next];
        last = next;
        next = next.wrapping_sub(1);
    }
    v[last] = val;
}

fn heap_sort<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    make_heap(v, less);
    let mut last = v.len();
    while last > 1 {
        last -= 1;
        // __pop_heap(first, last, last)
        let value = v[last];
        v[last] = v[0];
        adjust_heap(&mut v[..last], 0, value, less);
    }
}

fn make_heap<T: Copy>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let value = v[parent];
        adjust_heap(v, parent, value, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

fn adjust_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    value: T,
    less: &mut impl FnMut(&T, &T) -> bool,
) {
    let len = v.len();
    let top = hole;
    let mut second = hole;
    while len >= 1 && second < (len - 1) / 2 {
        second = 2 * (second + 1);
        if less(&v[second], &v[second - 1]) {
            second -= 1;
        }
        v[hole] = v[second];
        hole = second;
    }
    if len.is_multiple_of(2) && len >= 2 && second == (len - 2) / 2 {
        second = 2 * (second + 1);
        v[hole] = v[second - 1];
        hole = second - 1;
    }
    // __push_heap(first, hole, top, value)
    let mut parent = hole.wrapping_sub(1) / 2;
    while hole > top && less(&v[parent], &value) {
        v[hole] = v[parent];
        hole = parent;
        parent = hole.wrapping_sub(1) / 2;
    }
    v[hole] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorts `(key, tag)` pairs by key, descending, as Fluxion's `fold::greater` does.
    fn sorted_tags(keys: &[i64]) -> Vec<usize> {
        let mut v: Vec<(i64, usize)> = keys.iter().copied().zip(0..).collect();
        sort_by(&mut v, &mut |a, b| a.0 > b.0);
        v.into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn short_ranges_are_stable() {
        let keys = [3, 1, 3, 2, 1, 3];
        assert_eq!(sorted_tags(&keys), vec![0, 2, 5, 3, 1, 4]);
    }

    /// Permutations recorded from g++ 12's `std::sort` with a `>` comparator on the same keys
    /// (tag = position before sorting).
    #[test]
    fn long_ranges_permute_ties_as_libstdcxx_does() {
        // 72 candidates: ids 0..35 twice (two nodes' cores under policy high).
        let keys: Vec<i64> = (0..36).chain(0..36).collect();
        let once = sorted_tags(&keys);
        assert_eq!(&once[..4], &[71, 35, 34, 70]);
        // Sorting the sorted list again moves ties once more (Fluxion re-sorts a type's list
        // for each request entry naming it).
        let mut twice: Vec<(i64, usize)> = keys.iter().copied().zip(0..).collect();
        sort_by(&mut twice, &mut |a, b| a.0 > b.0);
        sort_by(&mut twice, &mut |a, b| a.0 > b.0);
        let twice: Vec<usize> = twice.iter().map(|e| e.1).collect();
        assert_eq!(&twice[..4], &[35, 71, 70, 34]);
        // 40 equal keys: the pivot steps shuffle them.
        let flat = sorted_tags(&[7; 40]);
        assert_eq!(&flat[..6], &[30, 21, 22, 23, 24, 25]);
    }

    /// Where no two keys are equal, the stable sort that goes first gives what the port
    /// gives: the one sorted order.
    #[test]
    fn distinct_keys_sort_as_the_port_does() {
        let mut x: u64 = 7;
        for n in [17usize, 40, 64, 200, 1000] {
            // Runs of ascending keys, as a walk's racks hand their nodes up, shuffled apart.
            let mut keys: Vec<i64> = (0..n as i64).collect();
            for i in (1..n).rev() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                if (x >> 60) < 4 {
                    keys.swap(i, (x >> 33) as usize % (i + 1));
                }
            }
            let mut ported = keys.clone();
            let depth = 2 * (usize::BITS - 1 - n.leading_zeros()) as usize;
            introsort_loop(&mut ported, 0, n, depth, &mut |a, b| a < b);
            final_insertion_sort(&mut ported, &mut |a, b| a < b);
            let mut sorted = keys.clone();
            sort_by(&mut sorted, &mut |a, b| a < b);
            assert_eq!(sorted, ported);
            assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn sorts_like_a_sort() {
        let mut x: u64 = 1;
        for n in [0usize, 1, 2, 17, 33, 100, 1000] {
            let mut v: Vec<i64> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (x >> 33) as i64 % 50
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable();
            sort_by(&mut v, &mut |a, b| a < b);
            assert_eq!(v, want);
        }
    }
}
