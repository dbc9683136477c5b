//! Queue policies on small hand-built workloads, driven through the real matcher.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_matcher_consistent, events, job, node, queue, started};
use shardsched_qmanager::{
    CycleKind, DenyReason, Event, JobView, Params, QueueError, QueueManager, QueuePolicy,
    WaitReason,
};

/// 4 nodes: job 1 holds 3 for 100 s; job 2 wants all 4; job 3 wants 1 for 50 s; job 4
/// wants 1 for 500 s.
fn head_blocked(policy: QueuePolicy) -> QueueManager {
    let mut qm = queue(4, policy);
    qm.submit(job(1, 3, 100, 0)).unwrap();
    qm.submit(job(2, 4, 100, 0)).unwrap();
    qm.submit(job(3, 1, 50, 0)).unwrap();
    qm.submit(job(4, 1, 500, 0)).unwrap();
    qm.schedule(0).unwrap();
    qm
}

#[test]
fn fcfs_blocks_behind_the_head() {
    let mut qm = head_blocked(QueuePolicy::Fcfs);
    assert_eq!(started(&events(&mut qm)), vec![1]);
    assert_eq!(qm.reservations().count(), 0);
    assert_eq!(
        qm.job(2),
        Some(JobView::Pending {
            reason: WaitReason::Resources
        })
    );
    // Job 3 would fit now, but fcfs does not pass the head.
    qm.schedule(10).unwrap();
    assert!(started(&events(&mut qm)).is_empty());
    qm.complete(1, 100).unwrap();
    qm.schedule(100).unwrap();
    assert_eq!(started(&events(&mut qm)), vec![2]);
    qm.complete(2, 150).unwrap();
    qm.schedule(150).unwrap();
    assert_eq!(started(&events(&mut qm)), vec![3, 4]);
    assert_matcher_consistent(&qm);
}

#[test]
fn easy_backfills_around_the_head_and_never_delays_it() {
    let mut qm = head_blocked(QueuePolicy::Easy);
    let ev = events(&mut qm);
    assert_eq!(started(&ev), vec![1, 3]);
    assert!(ev.contains(&Event::Reserved { id: 2, at: 100 }));
    // Job 4 would run past 100 on the node job 2 needs: it waits.
    assert_eq!(
        qm.job(4),
        Some(JobView::Pending {
            reason: WaitReason::Resources
        })
    );
    assert_matcher_consistent(&qm);
    // Job 3 ends early, but job 2 cannot use the time it freed (job 1 holds 3 nodes until
    // 100): the reservation stays without a re-plan, and job 4 still may not pass it.
    qm.complete(3, 20).unwrap();
    assert_eq!(qm.schedule(20).unwrap(), CycleKind::Retry);
    assert!(started(&events(&mut qm)).is_empty());
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(2, 100)]);
    // Job 1 ends on time: job 2 starts exactly at its reservation.
    qm.complete(1, 100).unwrap();
    qm.schedule(100).unwrap();
    let ev = events(&mut qm);
    assert_eq!(started(&ev), vec![2]);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Started { id: 2, at: 100, .. }))
    );
    assert_matcher_consistent(&qm);
}

#[test]
fn easy_reservation_moves_earlier_when_a_job_ends_early() {
    let mut qm = head_blocked(QueuePolicy::Easy);
    events(&mut qm);
    qm.complete(1, 40).unwrap();
    assert_eq!(qm.schedule(40).unwrap(), CycleKind::Replan);
    // Job 3 (1 node until 50) is still running: job 2 moves from 100 to 50.
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(2, 50)]);
    assert!(events(&mut qm).contains(&Event::Reserved { id: 2, at: 50 }));
}

#[test]
fn hybrid_with_depth_two_reserves_exactly_two() {
    let mut qm = QueueManager::new(
        common::cluster(4),
        Params {
            reservation_depth: 2,
            ..Params::with_policy(QueuePolicy::Hybrid)
        },
    )
    .unwrap();
    qm.submit(job(1, 4, 100, 0)).unwrap();
    for id in 2..=5 {
        qm.submit(job(id, 4, 100, 0)).unwrap();
    }
    qm.submit(job(6, 1, 1000, 0)).unwrap();
    qm.schedule(0).unwrap();
    let ev = events(&mut qm);
    assert_eq!(started(&ev), vec![1]);
    assert_eq!(
        qm.reservations().collect::<Vec<_>>(),
        vec![(2, 100), (3, 200)]
    );
    for id in [4, 5, 6] {
        assert_eq!(
            qm.job(id),
            Some(JobView::Pending {
                reason: WaitReason::Resources
            }),
            "job {id}"
        );
    }
    // The same with easy: one; with conservative: all four big jobs.
    for (policy, n) in [(QueuePolicy::Easy, 1), (QueuePolicy::Conservative, 5)] {
        let mut qm = queue(4, policy);
        for id in 1..=5 {
            qm.submit(job(id, 4, 100, 0)).unwrap();
        }
        qm.submit(job(6, 1, 1000, 0)).unwrap();
        qm.schedule(0).unwrap();
        assert_eq!(qm.reservations().count(), n, "{policy}");
        assert_matcher_consistent(&qm);
    }
}

#[test]
fn conservative_backfills_only_what_delays_no_reservation() {
    let mut qm = queue(4, QueuePolicy::Conservative);
    qm.submit(job(1, 3, 100, 0)).unwrap();
    qm.submit(job(2, 4, 100, 0)).unwrap(); // reserved at 100
    qm.submit(job(3, 2, 100, 0)).unwrap(); // reserved at 200
    qm.submit(job(4, 1, 100, 0)).unwrap(); // fits now until 100: starts
    qm.submit(job(5, 1, 100, 0)).unwrap(); // no free node now: reserved at 200 beside 3
    qm.schedule(0).unwrap();
    let ev = events(&mut qm);
    assert_eq!(started(&ev), vec![1, 4]);
    assert_eq!(
        qm.reservations().collect::<Vec<_>>(),
        vec![(2, 100), (3, 200), (5, 200)]
    );
}

#[test]
fn higher_priority_goes_first_and_priority_changes_reorder() {
    let mut qm = queue(2, QueuePolicy::Fcfs);
    qm.submit(job(1, 2, 100, 0)).unwrap();
    qm.schedule(0).unwrap();
    let mut low = job(2, 2, 100, 1);
    low.priority = 1;
    let mut high = job(3, 2, 100, 2);
    high.priority = 5;
    qm.submit(low).unwrap();
    qm.submit(high).unwrap();
    qm.submit(job(4, 2, 100, 3)).unwrap();
    assert_eq!(qm.pending_order().collect::<Vec<_>>(), vec![3, 2, 4]);
    qm.set_priority(4, 9).unwrap();
    assert_eq!(qm.pending_order().collect::<Vec<_>>(), vec![4, 3, 2]);
    assert_eq!(qm.set_priority(1, 3), Err(QueueError::NotPending(1)));
    qm.complete(1, 100).unwrap();
    qm.schedule(100).unwrap();
    assert_eq!(started(&events(&mut qm)), vec![1, 4]);
}

#[test]
fn a_job_larger_than_the_queue_is_denied_at_submit() {
    let mut qm = queue(4, QueuePolicy::Easy);
    qm.submit(job(1, 5, 100, 0)).unwrap();
    qm.submit(job(2, 1, 100, 0)).unwrap();
    qm.schedule(0).unwrap();
    let ev = events(&mut qm);
    assert_eq!(
        ev[0],
        Event::Denied {
            id: 1,
            reason: DenyReason::Unsatisfiable
        }
    );
    assert_eq!(started(&ev), vec![2]);
    assert_eq!(qm.job(1), None);
}

#[test]
fn durations_default_and_maximum() {
    let params = Params {
        default_duration: 60,
        max_duration: 3600,
        ..Params::with_policy(QueuePolicy::Easy)
    };
    let mut qm = QueueManager::new(common::cluster(2), params).unwrap();
    qm.submit(job(1, 1, 0, 0)).unwrap();
    qm.submit(job(2, 1, 7200, 0)).unwrap();
    qm.schedule(0).unwrap();
    let ev = events(&mut qm);
    assert!(ev.contains(&Event::Denied {
        id: 2,
        reason: DenyReason::DurationAboveMax {
            asked: 7200,
            max: 3600
        }
    }));
    assert_eq!(qm.job(1), Some(JobView::Running { start: 0, end: 60 }));
}

#[test]
fn a_job_that_fits_the_definition_but_not_what_is_up_waits_aside() {
    let mut qm = QueueManager::new(
        common::cluster(4),
        Params {
            queue_depth: 1,
            ..Params::with_policy(QueuePolicy::Fcfs)
        },
    )
    .unwrap();
    let n3 = node(&qm, "node3");
    qm.set_availability(n3, false).unwrap();
    qm.submit(job(1, 4, 100, 0)).unwrap();
    qm.submit(job(2, 1, 100, 0)).unwrap();
    qm.schedule(0).unwrap();
    // Job 1 does not block fcfs nor use the depth of 1: job 2 starts.
    assert_eq!(started(&events(&mut qm)), vec![2]);
    assert_eq!(
        qm.job(1),
        Some(JobView::Pending {
            reason: WaitReason::Unavailable
        })
    );
    assert_eq!((qm.pending_len(), qm.waiting_len()), (0, 1));
    qm.set_availability(n3, true).unwrap();
    qm.schedule(1).unwrap();
    assert_eq!(qm.pending_len(), 1);
    qm.complete(2, 50).unwrap();
    qm.schedule(50).unwrap();
    assert_eq!(started(&events(&mut qm)), vec![1]);
    // A node going down moves a pending job that no longer fits aside, and a running job
    // keeps running.
    qm.submit(job(3, 4, 100, 60)).unwrap();
    qm.set_availability(n3, false).unwrap();
    qm.schedule(60).unwrap();
    assert_eq!(qm.waiting_len(), 1);
    assert!(matches!(qm.job(1), Some(JobView::Running { .. })));
}

#[test]
fn reservations_avoid_down_nodes() {
    let mut qm = queue(4, QueuePolicy::Easy);
    qm.submit(job(1, 2, 100, 0)).unwrap();
    qm.submit(job(2, 3, 100, 0)).unwrap();
    qm.schedule(0).unwrap();
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(2, 100)]);
    let held: Vec<_> = qm.matcher().job(2).unwrap().alloc.vertices().into_owned();
    let g = &qm.matcher().graph;
    let victim = held
        .iter()
        .map(|a| a.v)
        .find(|&v| g.kind_str(v) == "node")
        .unwrap();
    qm.set_availability(victim, false).unwrap();
    qm.schedule(1).unwrap();
    // Three nodes up, two of them busy until 100: still reservable at 100, elsewhere.
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(2, 100)]);
    let again = &qm.matcher().job(2).unwrap().alloc;
    assert!(again.iter().all(|a| a.v != victim));
    assert_matcher_consistent(&qm);
}

#[test]
fn cancel_and_caller_errors() {
    let mut qm = head_blocked(QueuePolicy::Easy);
    events(&mut qm);
    assert_eq!(qm.submit(job(1, 1, 1, 0)), Err(QueueError::DuplicateJob(1)));
    assert_eq!(qm.complete(2, 5), Err(QueueError::NotRunning(2)));
    assert_eq!(qm.cancel(99), Err(QueueError::NoSuchJob(99)));
    assert_eq!(
        qm.schedule(-1),
        Err(QueueError::TimeWentBackwards { now: -1, last: 0 })
    );
    // Without job 2, job 4 is the head: reserved on job 3's node when it frees at 50 (where
    // it would have run past job 2's reservation).
    qm.cancel(2).unwrap();
    qm.schedule(1).unwrap();
    let ev = events(&mut qm);
    assert_eq!(
        ev,
        vec![
            Event::Cancelled { id: 2 },
            Event::Reserved { id: 4, at: 50 }
        ]
    );
    qm.complete(3, 50).unwrap();
    qm.schedule(50).unwrap();
    assert_eq!(started(&events(&mut qm)), vec![4]);
    // Cancelling a running job frees its resources.
    qm.cancel(1).unwrap();
    assert_eq!(qm.running_len(), 1);
    assert!(qm.matcher().job(1).is_none());
    assert_matcher_consistent(&qm);
}

#[test]
fn cycles_skip_work_that_cannot_change_an_answer() {
    let mut qm = head_blocked(QueuePolicy::Easy);
    events(&mut qm);
    let before = qm.stats().clone();
    // Nothing happened: no match at all.
    assert_eq!(qm.schedule(5).unwrap(), CycleKind::Idle);
    // An arrival behind the walk: only it is considered.
    qm.submit(job(5, 4, 100, 6)).unwrap();
    assert_eq!(qm.schedule(6).unwrap(), CycleKind::Continue);
    let after = qm.stats();
    assert!(after.considered <= before.considered + 1);
    assert_eq!(
        after.match_allocate + after.match_reserve,
        before.match_allocate + before.match_reserve,
        "the aggregates answer for job 5"
    );
    // Job 3 ends on time at 50: blocked jobs are retried, the reservation is kept.
    qm.complete(3, 50).unwrap();
    assert_eq!(qm.schedule(50).unwrap(), CycleKind::Retry);
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(2, 100)]);
    // The reservation's start comes: job 2 starts where it was reserved, without a re-plan.
    qm.complete(1, 100).unwrap();
    let before = qm.matcher().job(2).unwrap().alloc.vertices().into_owned();
    assert_eq!(qm.schedule(100).unwrap(), CycleKind::Retry);
    assert_eq!(
        qm.job(2),
        Some(JobView::Running {
            start: 100,
            end: 200
        })
    );
    assert_eq!(qm.matcher().job(2).unwrap().alloc.vertices(), before);
}

#[test]
fn queue_depth_counts_the_jobs_pending_not_the_ones_that_started() {
    for policy in QueuePolicy::ALL {
        let params = Params {
            queue_depth: 3,
            ..Params::with_policy(policy)
        };
        let mut qm = QueueManager::new(common::cluster(8), params).unwrap();
        qm.submit(job(1, 1, 100, 0)).unwrap();
        qm.submit(job(2, 1, 100, 0)).unwrap();
        qm.schedule(0).unwrap();
        assert_eq!(started(&events(&mut qm)), vec![1, 2], "{policy}");
        // Both started: the queue is empty, so a window of 3 holds both newcomers.
        qm.submit(job(3, 1, 100, 1)).unwrap();
        qm.submit(job(4, 1, 100, 1)).unwrap();
        qm.schedule(1).unwrap();
        assert_eq!(started(&events(&mut qm)), vec![3, 4], "{policy}");
    }
}

/// Started events carry a copy of what the matcher holds; with allocations turned off
/// (replay) the same events come out, with the window and no vertices.
#[test]
fn started_events_with_and_without_allocations() {
    let scenario = |with_vertices: bool| {
        let mut qm = queue(4, QueuePolicy::Easy);
        qm.set_started_allocations(with_vertices);
        qm.submit(job(1, 3, 100, 0)).unwrap();
        qm.submit(job(2, 4, 100, 0)).unwrap();
        qm.submit(job(3, 1, 50, 0)).unwrap();
        qm.schedule(0).unwrap();
        let mut out = events(&mut qm);
        for e in &out {
            if let Event::Started { id, alloc, .. } = e {
                let held = &qm.matcher().job(*id).unwrap().alloc;
                if with_vertices {
                    assert_eq!(alloc, held);
                } else {
                    assert!(alloc.is_empty());
                    assert_eq!((alloc.at, alloc.duration), (held.at, held.duration));
                }
            }
        }
        qm.complete(1, 100).unwrap();
        qm.complete(3, 100).unwrap();
        qm.schedule(100).unwrap();
        out.extend(events(&mut qm));
        out
    };
    let full = scenario(true);
    let bare = scenario(false);
    assert_eq!(started(&full), vec![1, 3, 2]);
    assert_eq!(full.len(), bare.len());
    for (f, b) in full.iter().zip(&bare) {
        match (f, b) {
            (
                Event::Started { id, at, alloc },
                Event::Started {
                    id: id2,
                    at: at2,
                    alloc: alloc2,
                },
            ) => {
                assert_eq!((id, at), (id2, at2));
                assert!(!alloc.is_empty());
                assert_eq!((alloc.at, alloc.duration), (alloc2.at, alloc2.duration));
            }
            _ => assert_eq!(f, b),
        }
    }
}

/// 8 nodes, conservative: job 1 holds 4 until 100, job 5 the other 4 until 300; job 2 (4
/// nodes) is reserved at 100, job 3 (all 8) at 300.
fn two_lanes() -> QueueManager {
    let params = Params {
        queue_depth: 0,
        ..Params::with_policy(QueuePolicy::Conservative)
    };
    let mut qm = QueueManager::new(common::cluster(8), params).unwrap();
    qm.submit(job(1, 4, 100, 0)).unwrap();
    qm.submit(job(5, 4, 300, 0)).unwrap();
    qm.submit(job(2, 4, 50, 0)).unwrap();
    qm.submit(job(3, 8, 10, 0)).unwrap();
    qm.schedule(0).unwrap();
    assert_eq!(
        qm.reservations().collect::<Vec<_>>(),
        vec![(2, 100), (3, 300)]
    );
    events(&mut qm);
    qm
}

#[test]
fn a_reservation_the_changes_cannot_reach_stays_in_place() {
    let mut qm = two_lanes();
    let before = qm.matcher().job(3).unwrap().alloc.clone();
    let stats = qm.stats().clone();
    // Job 1 ends early: job 2 starts in the time it freed. Job 3 still needs job 5's nodes,
    // held until 300: the re-plan leaves it where it is, untouched.
    qm.complete(1, 20).unwrap();
    assert_eq!(qm.schedule(20).unwrap(), CycleKind::Replan);
    assert_eq!(started(&events(&mut qm)), vec![2]);
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(3, 300)]);
    assert_eq!(qm.matcher().job(3).unwrap().alloc, before);
    let after = qm.stats();
    assert_eq!(
        after.reservations_replanned - stats.reservations_replanned,
        1
    );
    assert_eq!(after.reservations_kept - stats.reservations_kept, 1);
    assert_matcher_consistent(&qm);
}

#[test]
fn cancelling_a_reservation_keeps_the_ones_it_did_not_hold_back() {
    let mut qm = two_lanes();
    let stats = qm.stats().clone();
    // Job 2's window is freed; job 3 could not use it (job 5 holds half the nodes until
    // 300): no reservation is placed again.
    qm.cancel(2).unwrap();
    assert_eq!(qm.schedule(1).unwrap(), CycleKind::Retry);
    assert_eq!(qm.reservations().collect::<Vec<_>>(), vec![(3, 300)]);
    assert_eq!(
        qm.stats().reservations_replanned,
        stats.reservations_replanned
    );
    // Job 5 ends early instead: job 3 moves to job 1's end.
    qm.complete(5, 50).unwrap();
    assert_eq!(qm.schedule(50).unwrap(), CycleKind::Replan);
    assert!(events(&mut qm).contains(&Event::Reserved { id: 3, at: 100 }));
    assert_matcher_consistent(&qm);
}
