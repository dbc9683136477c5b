//! The shortcuts of a cycle against the definition: two queue managers, one with
//! `Params::exhaustive`, are driven by the same random inputs, and after every cycle they
//! must hold the same jobs running on the same vertices, the same reservations on the same
//! vertices, and have announced the same starts. Early completions, on-time completions,
//! cancellations of running, pending and reserved jobs, arrivals, priority and availability
//! changes, every policy, several queue and reservation depths.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use shardsched_matcher::Allocation;
use shardsched_qmanager::{Event, JobId, JobView, Params, QueueManager, QueuePolicy};

const NODES: usize = 8;

#[derive(Clone, Debug)]
enum Op {
    Submit {
        nodes: u64,
        duration: u64,
        priority: i64,
    },
    /// Completes the i-th running job now: early unless its planned end has come.
    Complete(usize),
    /// Completes every running job whose planned end has come (what a real run does).
    CompleteDue,
    Cancel(usize),
    Availability {
        node: usize,
        up: bool,
    },
    Priority(usize, i64),
    Schedule(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u64..=6, 1u64..300, prop_oneof![8 => Just(0i64), 1 => 1i64..3])
            .prop_map(|(nodes, duration, priority)| Op::Submit { nodes, duration, priority }),
        4 => any::<usize>().prop_map(Op::Complete),
        3 => Just(Op::CompleteDue),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => (0..NODES, prop::bool::weighted(0.7)).prop_map(|(node, up)| Op::Availability { node, up }),
        1 => (any::<usize>(), 0i64..3).prop_map(|(i, p)| Op::Priority(i, p)),
        6 => (0i64..80).prop_map(Op::Schedule),
    ]
}

fn params() -> impl Strategy<Value = Params> {
    (
        prop::sample::select(QueuePolicy::ALL.to_vec()),
        prop::sample::select(vec![0usize, 2, 5]),
        prop::sample::select(vec![0usize, 1, 3]),
    )
        .prop_map(|(policy, queue_depth, reservation_depth)| Params {
            queue_depth,
            reservation_depth,
            ..Params::with_policy(policy)
        })
}

/// Everything a later decision can depend on: where each running job and each reservation
/// is, vertices included.
fn placements(qm: &QueueManager) -> BTreeMap<JobId, (Option<JobView>, Allocation)> {
    qm.matcher()
        .jobs()
        .map(|(id, rec)| (id, (qm.job(id), rec.alloc.clone())))
        .collect()
}

/// The placements, short enough to read: the nodes each job holds.
fn summary(qm: &QueueManager) -> String {
    let g = &qm.matcher().graph;
    let node = g.sym("node");
    placements(qm)
        .into_iter()
        .map(|(id, (view, a))| {
            let nodes: Vec<&str> = a
                .iter()
                .filter(|v| Some(g.kind(v.v)) == node)
                .map(|v| g.name(v.v))
                .collect();
            format!("{id}: {view:?} [{}, +{}) {nodes:?}\n", a.at, a.duration)
        })
        .collect()
}

fn started(events: &[Event]) -> Vec<(JobId, i64)> {
    let mut s: Vec<(JobId, i64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Started { id, at, .. } => Some((*id, *at)),
            _ => None,
        })
        .collect();
    s.sort_unstable();
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn every_cycle_ends_where_the_definition_does(
        params in params(),
        ops in prop::collection::vec(op(), 1..90),
    ) {
        let exhaustive = Params { exhaustive: true, ..params.clone() };
        let mut fast = QueueManager::new(common::cluster(NODES), params).unwrap();
        let mut full = QueueManager::new(common::cluster(NODES), exhaustive).unwrap();
        let nodes: Vec<_> = (0..NODES).map(|i| common::node(&fast, &format!("node{i}"))).collect();
        let mut now = 0i64;
        let mut next_id: JobId = 1;
        for (step, op) in ops.into_iter().enumerate() {
            let running: Vec<(JobId, i64)> = fast
                .matcher()
                .jobs()
                .filter_map(|(id, _)| match fast.job(id) {
                    Some(JobView::Running { end, .. }) => Some((id, end)),
                    _ => None,
                })
                .collect();
            let live: Vec<JobId> = (1..next_id).filter(|&id| fast.job(id).is_some()).collect();
            match op {
                Op::Submit { nodes, duration, priority } => {
                    let mut j = common::job(next_id, nodes, duration, now);
                    j.priority = priority;
                    fast.submit(j.clone()).unwrap();
                    full.submit(j).unwrap();
                    next_id += 1;
                }
                Op::Complete(i) => {
                    if !running.is_empty() {
                        let (id, _) = running[i % running.len()];
                        fast.complete(id, now).unwrap();
                        full.complete(id, now).unwrap();
                    }
                }
                Op::CompleteDue => {
                    for &(id, end) in &running {
                        if end <= now {
                            fast.complete(id, now).unwrap();
                            full.complete(id, now).unwrap();
                        }
                    }
                }
                Op::Cancel(i) => {
                    if !live.is_empty() {
                        let id = live[i % live.len()];
                        fast.cancel(id).unwrap();
                        full.cancel(id).unwrap();
                    }
                }
                Op::Availability { node, up } => {
                    fast.set_availability(nodes[node], up).unwrap();
                    full.set_availability(nodes[node], up).unwrap();
                }
                Op::Priority(i, p) => {
                    if !live.is_empty() {
                        let id = live[i % live.len()];
                        prop_assert_eq!(fast.set_priority(id, p).is_ok(), full.set_priority(id, p).is_ok());
                    }
                }
                Op::Schedule(dt) => {
                    now += dt;
                    fast.schedule(now).unwrap();
                    full.schedule(now).unwrap();
                }
            }
            let a: Vec<Event> = std::iter::from_fn(|| fast.poll_event()).collect();
            let b: Vec<Event> = std::iter::from_fn(|| full.poll_event()).collect();
            prop_assert_eq!(started(&a), started(&b), "step {}", step);
            prop_assert!(
                placements(&fast) == placements(&full),
                "step {}: fast\n{}exhaustive\n{}", step, summary(&fast), summary(&full)
            );
        }
    }
}

/// Job 4's reservation starts at 61, when nothing happens: at the next cycle (83) the
/// definition places it from 83, over a window its reservation does not cover, where the
/// node job 1 frees at 83 and job 6's reservation (after it in walk order, so not in its
/// view) change which nodes it gets. Starting it on its old nodes would differ.
#[test]
fn a_reservation_whose_start_passed_unseen_is_placed_from_now() {
    let params = Params {
        queue_depth: 5,
        reservation_depth: 3,
        ..Params::with_policy(QueuePolicy::Hybrid)
    };
    let exhaustive = Params {
        exhaustive: true,
        ..params.clone()
    };
    let mut fast = QueueManager::new(common::cluster(NODES), params).unwrap();
    let mut full = QueueManager::new(common::cluster(NODES), exhaustive).unwrap();
    // (nodes, duration) submitted at the time, or a cycle at the time.
    let steps: [(i64, Option<(u64, u64)>); 11] = [
        (0, Some((5, 83))),
        (0, None),
        (0, Some((4, 32))),
        (0, Some((2, 56))),
        (0, Some((2, 24))),
        (5, None),
        (29, Some((1, 54))),
        (29, None),
        (49, Some((1, 1))),
        (52, None),
        (83, None),
    ];
    let mut id = 1;
    for (now, submit) in steps {
        match submit {
            Some((nodes, duration)) => {
                fast.submit(common::job(id, nodes, duration, now)).unwrap();
                full.submit(common::job(id, nodes, duration, now)).unwrap();
                id += 1;
            }
            None => {
                fast.schedule(now).unwrap();
                full.schedule(now).unwrap();
            }
        }
        assert!(
            placements(&fast) == placements(&full),
            "at {now}: fast\n{}exhaustive\n{}",
            summary(&fast),
            summary(&full)
        );
    }
    assert_eq!(fast.running_len(), 6);
}
