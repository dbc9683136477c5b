//! Best-first early stop (`dfu::budget`): where the graph's order says which candidates
//! are best, a walk stops once it has them, and takes what the walk Fluxion makes takes.
#![allow(clippy::unwrap_used)]

mod fixtures;

use fixtures::{matcher, spec};
use shardsched_matcher::{AllocVertex, MatchOp, Matcher, Placement};

fn taken(m: &Matcher, id: u64) -> Vec<AllocVertex> {
    m.job(id).unwrap().alloc.iter().collect()
}

/// A whole node whose request holds a slot of one core (`-N 1`), on nodes of two sockets
/// (22 cores, 2 gpus, 4 memory each): the node chooses among the slots its sockets form,
/// and stops at the first socket (best-first: the second under `high`) that forms one. The
/// walk enters the cluster, the rack, one node, one socket and one core of it — not the
/// other socket (7 under `low` without the stop) — and takes what Fluxion's walk, which
/// enters everything, takes. Under `high` the socket's children are walked from the last:
/// its memory and gpus are entered (and turned away) before its last core.
#[test]
fn a_node_stops_at_the_first_socket_that_forms_its_slot() {
    for (policy, entered) in [("low", 5), ("high", 5 + 6)] {
        let mut fast = matcher(2, policy);
        let mut exact = matcher(2, policy);
        exact.count_visits(true);
        let js = spec(Some(1), None, 100);
        for m in [&mut fast, &mut exact] {
            let placed = m.place(MatchOp::Allocate, &js, 1, 0).unwrap();
            assert_eq!(placed, Placement::Allocated { at: 0 }, "{policy}");
        }
        assert_eq!(taken(&fast, 1), taken(&exact, 1), "{policy}");
        assert_eq!(fast.visit_totals().0, entered, "{policy}: vertices entered");
        assert!(exact.visit_totals().0 > entered, "{policy}: Fluxion's walk");
    }
}
