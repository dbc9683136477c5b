//! Property tests: the queue manager as a state machine under random submit / cancel /
//! complete / availability / priority sequences.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use shardsched_qmanager::{Event, JobId, JobView, Params, QueueManager, QueuePolicy, WaitReason};

#[derive(Clone, Debug)]
enum Op {
    Submit {
        nodes: u64,
        duration: u64,
        priority: i64,
    },
    Cancel(usize),
    Complete(usize),
    Availability {
        node: usize,
        up: bool,
    },
    Priority(usize, i64),
    Schedule(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..=5, prop_oneof![Just(0u64), 1u64..200], 0i64..3)
            .prop_map(|(nodes, duration, priority)| Op::Submit { nodes, duration, priority }),
        1 => any::<usize>().prop_map(Op::Cancel),
        3 => any::<usize>().prop_map(Op::Complete),
        1 => (0usize..4, any::<bool>()).prop_map(|(node, up)| Op::Availability { node, up }),
        1 => (any::<usize>(), 0i64..3).prop_map(|(i, p)| Op::Priority(i, p)),
        4 => (0i64..60).prop_map(Op::Schedule),
    ]
}

fn policy() -> impl Strategy<Value = Params> {
    (
        prop::sample::select(QueuePolicy::ALL.to_vec()),
        0usize..4,
        0usize..3,
    )
        .prop_map(|(policy, queue_depth, reservation_depth)| Params {
            queue_depth,
            reservation_depth,
            default_duration: 50,
            max_duration: 150,
            ..Params::with_policy(policy)
        })
}

/// What the queue manager and its matcher hold must agree, and pass the matcher's checker.
fn check_consistent(qm: &QueueManager, live: &BTreeSet<JobId>) -> Result<(), TestCaseError> {
    common::assert_matcher_consistent(qm);
    let reserved: BTreeMap<JobId, i64> = qm.reservations().collect();
    let mut held = 0;
    for (id, rec) in qm.matcher().jobs() {
        held += 1;
        match qm.job(id) {
            Some(JobView::Running { start, .. }) => {
                prop_assert_eq!(rec.state, shardsched_matcher::JobState::Allocated);
                prop_assert_eq!(rec.alloc.at, start);
            }
            Some(JobView::Pending {
                reason: WaitReason::Reserved { at },
            }) => {
                // The matcher may record a reservation searched from a later instant as an
                // allocation at that instant: what counts is where it is in time.
                prop_assert_eq!(rec.alloc.at, at);
                prop_assert_eq!(reserved.get(&id), Some(&at));
            }
            other => prop_assert!(false, "matcher holds job {} in state {:?}", id, other),
        }
    }
    prop_assert_eq!(held, qm.running_len() + reserved.len());
    if qm.params().policy == QueuePolicy::Fcfs {
        prop_assert!(reserved.is_empty());
    }
    for id in live {
        prop_assert!(qm.job(*id).is_some(), "live job {} unknown", id);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_job_is_accounted_for_exactly_once(
        params in policy(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut qm = QueueManager::new(common::cluster(4), params).unwrap();
        let nodes: Vec<_> = (0..4).map(|i| common::node(&qm, &format!("node{i}"))).collect();
        let mut now = 0i64;
        let mut next_id: JobId = 1;
        let mut live = BTreeSet::new();
        let mut history: BTreeMap<JobId, Vec<Event>> = BTreeMap::new();
        let mut drain = |qm: &mut QueueManager, live: &mut BTreeSet<JobId>| {
            while let Some(e) = qm.poll_event() {
                if matches!(e, Event::Denied { .. } | Event::Completed { .. } | Event::Cancelled { .. }) {
                    live.remove(&e.id());
                }
                history.entry(e.id()).or_default().push(e);
            }
        };
        for op in ops {
            let running: Vec<JobId> = live
                .iter()
                .copied()
                .filter(|id| matches!(qm.job(*id), Some(JobView::Running { .. })))
                .collect();
            let pick = |v: &[JobId], i: usize| (!v.is_empty()).then(|| v[i % v.len()]);
            let all: Vec<JobId> = live.iter().copied().collect();
            match op {
                Op::Submit { nodes, duration, priority } => {
                    let mut j = common::job(next_id, nodes, duration, now);
                    j.priority = priority;
                    qm.submit(j).unwrap();
                    live.insert(next_id);
                    next_id += 1;
                }
                Op::Cancel(i) => {
                    if let Some(id) = pick(&all, i) {
                        qm.cancel(id).unwrap();
                    }
                }
                Op::Complete(i) => {
                    if let Some(id) = pick(&running, i) {
                        qm.complete(id, now).unwrap();
                    }
                }
                Op::Availability { node, up } => qm.set_availability(nodes[node], up).unwrap(),
                Op::Priority(i, p) => {
                    if let Some(id) = pick(&all, i) {
                        let r = qm.set_priority(id, p);
                        prop_assert_eq!(r.is_ok(), !running.contains(&id));
                    }
                }
                Op::Schedule(dt) => {
                    now += dt;
                    qm.schedule(now).unwrap();
                }
            }
            drain(&mut qm, &mut live);
            check_consistent(&qm, &live)?;
        }
        for id in live.clone() {
            qm.cancel(id).unwrap();
        }
        drain(&mut qm, &mut live);
        prop_assert!(live.is_empty());
        prop_assert_eq!(qm.matcher().jobs().count(), 0);
        for id in 1..next_id {
            let h = history.get(&id).cloned().unwrap_or_default();
            let terminal = h
                .iter()
                .filter(|e| matches!(e, Event::Denied { .. } | Event::Completed { .. } | Event::Cancelled { .. }))
                .count();
            prop_assert_eq!(terminal, 1, "job {} history {:?}", id, h);
            prop_assert!(
                matches!(h.last(), Some(Event::Denied { .. } | Event::Completed { .. } | Event::Cancelled { .. })),
                "job {} ends with {:?}", id, h.last()
            );
            let starts = h.iter().filter(|e| matches!(e, Event::Started { .. })).count();
            prop_assert!(starts <= 1);
            if matches!(h.last(), Some(Event::Completed { .. })) {
                prop_assert_eq!(starts, 1);
            }
            if matches!(h.first(), Some(Event::Denied { .. })) {
                prop_assert_eq!(h.len(), 1);
            }
        }
    }
}
