use shardsched_resource::{ResourceGraph, VertexId, keep_subtrees};

use crate::test_support::job;
use crate::{DenyReason, Event, Params, QueueManager, QueuePolicy};

/// The generated 8-node cluster cut to `names`' nodes.
fn cut(names: &[&str]) -> ResourceGraph {
    let full = shardsched_resource::generated_cluster(8)
        .build()
        .expect("graph");
    keep_subtrees(&full, &["cluster", "rack", "node", "core"], &|n| {
        names.contains(&n)
    })
    .expect("cut")
}

fn queue(names: &[&str], policy: QueuePolicy) -> QueueManager {
    QueueManager::new(cut(names), Params::with_policy(policy)).expect("queue")
}

fn node(qm: &QueueManager, name: &str) -> VertexId {
    let g = &qm.matcher().graph;
    g.vertices()
        .find(|&v| g.name(v) == name && !g.is_removed(v))
        .expect("node")
}

fn events(qm: &mut QueueManager) -> Vec<Event> {
    std::iter::from_fn(|| qm.poll_event()).collect()
}

fn started(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Started { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

#[test]
fn a_grown_queue_runs_a_job_that_needs_the_new_nodes_and_keeps_its_running_one() {
    let mut qm = queue(&["node0", "node1"], QueuePolicy::Easy);
    qm.submit(job(1, 2, 100)).expect("submit");
    qm.schedule(0).expect("schedule");
    assert_eq!(started(&events(&mut qm)), vec![1]);
    // Three nodes could never fit two: denied.
    qm.submit(job(2, 3, 100)).expect("submit");
    assert!(matches!(events(&mut qm)[..], [Event::Denied { id: 2, .. }]));

    let added = qm.grow(&cut(&["node2", "node3"])).expect("grow");
    assert!(added > 0);
    // Adding the same nodes again adds nothing.
    let again = qm.grow(&cut(&["node3"]));
    assert_eq!(again.expect("grow again"), 0);
    qm.submit(job(3, 2, 100)).expect("submit");
    qm.submit(job(4, 3, 100)).expect("submit");
    qm.schedule(1).expect("schedule");
    let evs = events(&mut qm);
    // Job 3 takes the two new nodes; job 4 (three) waits for job 1's.
    assert_eq!(started(&evs), vec![3]);
    assert!(!evs.iter().any(|e| matches!(e, Event::Denied { .. })));
    qm.complete(1, 50).expect("job 1 still runs, and ends");
    qm.schedule(50).expect("schedule");
    let evs = events(&mut qm);
    assert!(evs.contains(&Event::Completed { id: 1, at: 50 }));
    assert_eq!(
        started(&evs),
        Vec::<u64>::new(),
        "job 4 needs three of four nodes"
    );
    qm.complete(3, 60).expect("job 3 ends");
    qm.schedule(60).expect("schedule");
    assert_eq!(started(&events(&mut qm)), vec![4]);
}

#[test]
fn new_nodes_marked_down_take_no_job_until_they_come_up() {
    let mut qm = queue(&["node0"], QueuePolicy::Conservative);
    qm.grow(&cut(&["node1"])).expect("grow");
    let n1 = node(&qm, "node1");
    qm.set_availability(n1, false).expect("down");
    qm.submit(job(1, 2, 100)).expect("fits the definition");
    qm.schedule(0).expect("schedule");
    assert_eq!(started(&events(&mut qm)), Vec::<u64>::new());
    qm.set_availability(n1, true).expect("up");
    qm.schedule(1).expect("schedule");
    assert_eq!(started(&events(&mut qm)), vec![1]);
}

#[test]
fn a_shrink_denies_what_can_no_longer_fit_and_never_takes_a_running_jobs_nodes() {
    let mut qm = queue(&["node0", "node1", "node2"], QueuePolicy::Conservative);
    qm.submit(job(1, 1, 100)).expect("submit");
    qm.schedule(0).expect("schedule");
    assert_eq!(started(&events(&mut qm)), vec![1]);
    let g = &qm.matcher().graph;
    let mut held = qm
        .matcher()
        .job(1)
        .and_then(|j| j.alloc.iter().next())
        .map(|a| a.v)
        .expect("job 1's vertices");
    while g.kind_str(held) != "node" {
        held = g.parent(held).expect("a node above");
    }
    let held_name = g.name(held).to_owned();
    // Refused while job 1 holds it: nothing changes.
    let refused = qm.shrink(&[held]);
    assert!(
        matches!(refused, Err(crate::QueueError::InUse(1))),
        "{refused:?}"
    );
    assert!(!qm.matcher().graph.is_removed(held));

    // Three nodes fit, then wait behind job 1 (a reservation at 100).
    qm.submit(job(2, 3, 100)).expect("submit");
    qm.submit(job(3, 2, 100)).expect("submit");
    qm.schedule(1).expect("schedule");
    let evs = events(&mut qm);
    assert!(evs.contains(&Event::Reserved { id: 2, at: 100 }), "{evs:?}");

    let other = ["node0", "node1", "node2"]
        .into_iter()
        .find(|n| *n != held_name)
        .expect("a node job 1 does not hold");
    let v = node(&qm, other);
    qm.shrink(&[v]).expect("shrink");
    assert!(qm.matcher().graph.is_removed(v));
    let evs = events(&mut qm);
    assert!(evs.contains(&Event::Unreserved { id: 2 }), "{evs:?}");
    assert!(
        evs.contains(&Event::Denied {
            id: 2,
            reason: DenyReason::Unsatisfiable
        }),
        "{evs:?}"
    );
    assert!(
        !evs.iter().any(|e| matches!(e, Event::Denied { id: 3, .. })),
        "job 3 still fits two nodes: {evs:?}"
    );
    qm.complete(1, 100).expect("job 1 ends");
    qm.schedule(100).expect("schedule");
    assert_eq!(started(&events(&mut qm)), vec![3]);
}

/// The node each started job got, in start order.
fn placements(qm: &mut QueueManager) -> Vec<String> {
    let evs = events(qm);
    let g = &qm.matcher().graph;
    evs.iter()
        .filter_map(|e| match e {
            Event::Started { alloc, .. } => alloc
                .iter()
                .find(|a| g.kind_str(a.v) == "node")
                .map(|a| g.name(a.v).to_owned()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_grown_queue_places_jobs_as_a_queue_built_whole_does() {
    for policy in ["first", "low", "high", "lonode", "hinode"] {
        let params = || Params {
            match_policy: shardsched_matcher::MatchPolicy::parse(policy).expect("policy"),
            ..Params::with_policy(QueuePolicy::Easy)
        };
        let mut whole =
            QueueManager::new(cut(&["node0", "node1", "node2", "node3"]), params()).expect("queue");
        let mut grown = QueueManager::new(cut(&["node0", "node3"]), params()).expect("queue");
        grown.grow(&cut(&["node1", "node2"])).expect("grow");
        for qm in [&mut whole, &mut grown] {
            for id in 1..=4 {
                qm.submit(job(id, 1, 100)).expect("submit");
                qm.schedule(id as i64).expect("schedule");
            }
        }
        assert_eq!(placements(&mut grown), placements(&mut whole), "{policy}");
    }
}
