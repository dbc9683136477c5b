//! Free nodes' visits kept between walks (`dfu::memo`): a node met free again is answered
//! from its kept visit, so what the visit read and a later change of it must make the
//! walk look again. (Debug builds also walk every replayed node and compare: a stale
//! replay fails there with "a kept visit of a free node differs".)
#![allow(clippy::unwrap_used)]

mod fixtures;

use fixtures::{matcher, spec};
use shardsched_jobspec::{Jobspec, Shorthand};
use shardsched_matcher::{MatchOp, Matcher, Placement};
use shardsched_resource::{Status, VertexId};

fn one_node(duration: u64) -> Jobspec {
    spec(Some(1), None, duration)
}

/// The node job `id` took.
fn node_of(m: &Matcher, id: u64) -> VertexId {
    let alloc = &m.job(id).unwrap().alloc;
    alloc
        .iter()
        .find(|av| m.graph.kind_str(av.v) == "node")
        .unwrap()
        .v
}

/// Takes and gives back the same free node until its visit is kept (the second free
/// visit keeps it; a learned order that changes below it forgets it), then returns it.
fn node_with_kept_visit(m: &mut Matcher) -> VertexId {
    let mut node = None;
    for id in 1..=5 {
        let placed = m.place(MatchOp::Allocate, &one_node(100), id, 0).unwrap();
        assert_eq!(placed, Placement::Allocated { at: 0 });
        let took = node_of(m, id);
        assert!(
            node.is_none_or(|n| n == took),
            "a free node's place changed"
        );
        node = Some(took);
        m.cancel(id).unwrap();
    }
    node.unwrap()
}

#[test]
fn a_node_set_down_after_its_visit_was_kept_is_not_taken() {
    for policy in ["first", "low", "high", "lonodex"] {
        let mut m = matcher(3, policy);
        let kept = node_with_kept_visit(&mut m);
        let path = m.graph.path(kept);
        m.set_status(&path, Status::Down).unwrap();
        m.place(MatchOp::Allocate, &one_node(100), 10, 0).unwrap();
        assert_ne!(node_of(&m, 10), kept, "{policy}: took a node that is down");
        // Up again, it is taken as before once the others are.
        m.set_status(&path, Status::Up).unwrap();
        for id in 11..13 {
            m.place(MatchOp::Allocate, &one_node(100), id, 0).unwrap();
        }
        let taken: Vec<VertexId> = (10..13).map(|id| node_of(&m, id)).collect();
        assert!(
            taken.contains(&kept),
            "{policy}: a node back up was never taken"
        );
    }
}

#[test]
fn a_node_with_a_reservation_over_the_window_is_not_answered_free() {
    let mut m = matcher(2, "first");
    let kept = node_with_kept_visit(&mut m);
    // The kept node is held from t=0; the next whole-node job at t=0 takes the other one,
    // and a third waits for the first to end.
    m.place(MatchOp::Allocate, &one_node(100), 20, 0).unwrap();
    assert_eq!(node_of(&m, 20), kept);
    m.place(MatchOp::Allocate, &one_node(100), 21, 0).unwrap();
    assert_ne!(node_of(&m, 21), kept);
    let placed = m
        .place(MatchOp::AllocateOrElseReserve, &one_node(100), 22, 0)
        .unwrap();
    assert_eq!(placed, Placement::Reserved { at: 100 });
}

#[test]
fn more_job_shapes_than_are_numbered_at_once_still_place_as_a_walk_would() {
    // 66 shapes (one whole node, a task of 1–22 cores and 0–2 gpus): past the 64 numbered at once the
    // numbering starts over. Each shape is placed, cancelled and placed again so that the
    // free nodes met keep visits; in debug builds every replay is also walked and compared.
    let mut m = matcher(3, "first");
    let mut id = 100;
    for shape in 0..66u64 {
        let spec = Shorthand {
            nodes: Some(1),
            cores_per_task: 1 + shape / 3,
            gpus_per_task: shape % 3,
            duration: 100,
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec");
        let mut taken = Vec::new();
        for _ in 0..3 {
            id += 1;
            let placed = m.place(MatchOp::Allocate, &spec, id, 0).unwrap();
            assert_eq!(placed, Placement::Allocated { at: 0 }, "shape {shape}");
            taken.push(node_of(&m, id));
            m.cancel(id).unwrap();
        }
        assert!(
            taken.windows(2).all(|w| w[0] == w[1]),
            "shape {shape}: {taken:?}"
        );
    }
}
