use std::collections::BTreeSet;

use shardsched_resource::parse_jgf;

use crate::test_support::{nodes, two_node_matcher};
use crate::{MatchError, MatchOp, MatchOutcome, Matcher};

/// A JGF of the cluster `/c0` with one more node, `node2` (rank 2), of two cores.
const NODE2: &str = r#"{"graph": {
  "nodes": [
    {"id": "0", "metadata": {"type": "cluster", "name": "c0", "paths": {"containment": "/c0"}}},
    {"id": "10", "metadata": {"type": "node", "name": "node2", "id": 2, "rank": 2,
      "paths": {"containment": "/c0/node2"}}},
    {"id": "11", "metadata": {"type": "core", "name": "core0", "id": 0, "rank": 2,
      "paths": {"containment": "/c0/node2/core0"}}},
    {"id": "12", "metadata": {"type": "core", "name": "core1", "id": 1, "rank": 2,
      "paths": {"containment": "/c0/node2/core1"}}}],
  "edges": [{"source": "0", "target": "10"}, {"source": "10", "target": "11"},
    {"source": "10", "target": "12"}]}}"#;

fn node2() -> shardsched_resource::JgfDocument {
    parse_jgf(NODE2).expect("jgf")
}

fn allocate(m: &mut Matcher, n: u64, jobid: u64) -> Option<crate::Allocation> {
    match m
        .run(MatchOp::Allocate, &nodes(n), jobid, 0)
        .expect("match")
    {
        MatchOutcome::Allocated(a) => Some(a),
        _ => None,
    }
}

fn node_names(m: &Matcher, a: &crate::Allocation) -> Vec<String> {
    let node = m.graph.sym("node").expect("node type");
    a.iter()
        .filter(|av| m.graph.kind(av.v) == node)
        .map(|av| m.graph.name(av.v).to_string())
        .collect()
}

#[test]
fn attach_grows_a_full_graph_and_keeps_what_jobs_hold() {
    let mut m = two_node_matcher();
    assert!(allocate(&mut m, 2, 1).is_some());
    assert!(allocate(&mut m, 1, 2).is_none(), "the graph is full");
    let before = m.graph.len();
    assert_eq!(m.attach(&node2()).expect("attach"), 3);
    assert_eq!(m.graph.len(), before + 3);
    let a = allocate(&mut m, 1, 3).expect("the new node is free");
    assert_eq!(node_names(&m, &a), ["node2"]);
    // Attaching the same vertices again changes nothing.
    assert_eq!(m.attach(&node2()).expect("attach again"), 0);
    assert!(allocate(&mut m, 1, 4).is_none(), "all three nodes are held");
    // Every record was carried: cancelling every job leaves the state of a fresh graph.
    m.cancel(1).expect("cancel 1");
    m.cancel(3).expect("cancel 3");
    assert_eq!(m.state, m.fresh_state());
    assert!(allocate(&mut m, 3, 5).is_some(), "three nodes now");
}

#[test]
fn attach_refuses_a_second_root_and_changes_nothing() {
    let mut m = two_node_matcher();
    let doc = parse_jgf(
        r#"{"graph": {"nodes": [{"id": "0", "metadata": {"type": "cluster", "name": "other0", "paths": {"containment": "/other0"}}}], "edges": []}}"#,
    )
    .expect("jgf");
    let before = m.graph.len();
    let err = m.attach(&doc).expect_err("a second containment root");
    assert!(matches!(err, MatchError::Attach(_)), "{err:?}");
    assert!(err.to_string().contains("Possible duplicate root"), "{err}");
    assert_eq!(m.graph.len(), before);
    assert_eq!(m.state, m.fresh_state());
}

#[test]
fn removing_a_held_node_gives_it_back_and_shrinks_the_totals() {
    let mut m = two_node_matcher();
    let a = allocate(&mut m, 1, 1).expect("node0");
    assert_eq!(node_names(&m, &a), ["node0"]);
    let node0 = m.vertex("/c0/node0").expect("node0");
    m.remove_path("/c0/node0").expect("remove");
    assert!(m.graph.is_removed(node0));
    assert!(m.vertex("/c0/node0").is_err(), "no path leads to it");
    assert!(m.job(1).is_none(), "job 1 held nothing else exclusively");
    assert!(allocate(&mut m, 2, 2).is_none(), "one node is left");
    let a = allocate(&mut m, 1, 3).expect("node1");
    assert_eq!(node_names(&m, &a), ["node1"]);
    m.cancel(3).expect("cancel 3");
    assert_eq!(m.state, m.fresh_state());
    assert!(m.remove_path("/c0/node0").is_err(), "already removed");
}

#[test]
fn removing_ranks_refuses_an_unknown_rank_before_anything_changes() {
    let mut m = crate::Matcher::new(
        {
            let mut g = crate::test_support::two_node_graph();
            g.attach(&node2()).expect("attach");
            g
        },
        crate::MatchPolicy::parse("low").expect("policy"),
        &crate::PruneFilters::default_filters(),
    );
    let len = m.graph.len();
    let err = m
        .remove_ranks(&BTreeSet::from([2, 7]))
        .expect_err("no rank 7");
    assert!(err.to_string().contains("7 not found"), "{err}");
    assert!((0..len as u32).all(|v| !m.graph.is_removed(shardsched_resource::VertexId(v))));
    // Rank 2 is node2 and its cores; what is left is the two ranked -1 nodes.
    assert!(allocate(&mut m, 3, 1).is_some());
    m.cancel(1).expect("cancel");
    m.remove_ranks(&BTreeSet::from([2])).expect("remove rank 2");
    assert!(allocate(&mut m, 3, 2).is_none());
    assert!(allocate(&mut m, 2, 3).is_some());
}

#[test]
fn the_books_list_jobs_by_id_whatever_order_they_came_in() {
    let mut m = two_node_matcher();
    // Two run now, three are reserved behind them, in an order that is not the ids'.
    for id in [9, 2, 7, 1000, 5] {
        let outcome = m
            .run(MatchOp::AllocateOrElseReserve, &nodes(1), id, 0)
            .expect("match");
        assert!(
            matches!(
                outcome,
                MatchOutcome::Allocated(_) | MatchOutcome::Reserved(_)
            ),
            "job {id}: {outcome:?}"
        );
    }
    let ids = |m: &Matcher| m.jobs().map(|(id, _)| id).collect::<Vec<u64>>();
    assert_eq!(ids(&m), [2, 5, 7, 9, 1000]);
    // A regrow carries every record (in id order) and lists them so still.
    assert_eq!(m.attach(&node2()).expect("attach"), 3);
    assert_eq!(ids(&m), [2, 5, 7, 9, 1000]);
    for id in [1000, 2, 9, 5, 7] {
        m.cancel(id).expect("cancel");
    }
    assert!(ids(&m).is_empty());
    assert_eq!(m.state, m.fresh_state());
}
