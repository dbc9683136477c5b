//! An independent allocation checker, for tests.
//!
//! It knows nothing of traversals or calendars: given the graph and the allocations and
//! reservations a matcher claims to hold, it checks from the outside that
//! - every allocation is closed upwards (each vertex's parent is in the same allocation), so
//!   nobody can reach a vertex without passing through its ancestors;
//! - no vertex is over-committed at any instant: exclusive units taken never exceed its size;
//! - exclusivity holds: while a job holds a vertex exclusively, no other job touches it (and,
//!   by closure, nothing below it).

use std::collections::HashMap;

use shardsched_resource::ResourceGraph;

use crate::alloc::Allocation;

/// A violation found by [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

fn overlap(a: &Allocation, b: &Allocation) -> bool {
    let end = |x: &Allocation| {
        x.at.saturating_add(i64::try_from(x.duration).unwrap_or(i64::MAX))
    };
    a.at < end(b) && b.at < end(a)
}

/// Checks `allocs` (job id, allocation) against `g`; returns every violation found.
pub fn check(g: &ResourceGraph, allocs: &[(u64, &Allocation)]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut by_vertex: HashMap<u32, Vec<(usize, i64, bool)>> = HashMap::new();
    for (i, (job, a)) in allocs.iter().enumerate() {
        let mine: std::collections::HashSet<u32> = a.iter().map(|v| v.v.0).collect();
        for av in a.iter() {
            if let Some(p) = g.parent(av.v)
                && !mine.contains(&p.0)
            {
                out.push(Violation(format!(
                    "job {job}: {} allocated without its parent",
                    g.path(av.v)
                )));
            }
            if av.needs < 1 || av.needs > g.size(av.v) {
                out.push(Violation(format!(
                    "job {job}: {} takes {} of {}",
                    g.path(av.v),
                    av.needs,
                    g.size(av.v)
                )));
            }
            by_vertex
                .entry(av.v.0)
                .or_default()
                .push((i, av.needs, av.exclusive));
        }
    }
    for (v, uses) in by_vertex {
        let v = shardsched_resource::VertexId(v);
        for (x, &(i, needs_i, excl_i)) in uses.iter().enumerate() {
            for &(j, needs_j, excl_j) in &uses[x + 1..] {
                let (ji, ai) = allocs[i];
                let (jj, aj) = allocs[j];
                if !overlap(ai, aj) {
                    continue;
                }
                if excl_i || excl_j {
                    out.push(Violation(format!(
                        "{} held exclusively by one of jobs {ji} and {jj} while the other uses it",
                        g.path(v)
                    )));
                } else if needs_i + needs_j > g.size(v) && g.size(v) > 1 {
                    // Shared uses do not take units; only report when sizes say otherwise.
                    let _ = needs_i;
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::alloc::AllocVertex;
    use shardsched_resource::{CONTAINMENT, GraphBuilder, VertexId, VertexSpec};

    #[test]
    fn finds_double_exclusive_use_and_missing_parent() {
        let mut b = GraphBuilder::new();
        let c = b.add_vertex(VertexSpec::new("cluster", "c", 0));
        let n = b.add_vertex(VertexSpec::new("node", "node", 0));
        b.add_edge(c, n, CONTAINMENT);
        let g = b.finish().unwrap();
        let av = |v: VertexId, excl| AllocVertex {
            v,
            needs: 1,
            exclusive: excl,
            depth: 0,
        };
        let a = Allocation::new(vec![av(n, true), av(c, false)], 0, 10);
        let b2 = Allocation::new(vec![av(n, false), av(c, false)], 5, 10);
        let later = Allocation::new(vec![av(n, true), av(c, false)], 10, 10);
        assert_eq!(check(&g, &[(1, &a), (2, &b2)]).len(), 1);
        assert!(check(&g, &[(1, &a), (3, &later)]).is_empty());
        let orphan = Allocation::new(vec![av(n, true)], 0, 1);
        assert_eq!(check(&g, &[(4, &orphan)]).len(), 1);
    }
}
