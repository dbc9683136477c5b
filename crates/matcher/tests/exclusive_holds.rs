//! What an exclusive hold records, as Fluxion's update walk records it: every vertex of a
//! node taken whole holds the job, all its units, and nothing below it can be taken while
//! it is held; re-recording the jobs on fresh calendars gives the same calendars.
#![allow(clippy::unwrap_used)]

mod fixtures;

use fixtures::{matcher, socket_job, spec};
use shardsched_matcher::{MatchOp, Matcher, Placement, checker};
use shardsched_resource::{ResourceGraph, VertexId};

fn subtree(g: &ResourceGraph, v: VertexId) -> Vec<VertexId> {
    g.preorder(v).collect()
}

#[test]
fn a_whole_node_holds_every_vertex_and_blocks_everything_below() {
    let mut m = matcher(2, "first");
    // `-N1` without tasks: one whole exclusive node.
    let placed = m
        .place(MatchOp::Allocate, &spec(Some(1), None, 100), 1, 0)
        .unwrap();
    assert_eq!(placed, Placement::Allocated { at: 0 });
    let alloc = m.job(1).unwrap().alloc.clone();
    let g = &m.graph;
    let node = alloc
        .iter()
        .find(|av| g.kind_str(av.v) == "node")
        .unwrap()
        .v;
    let below = subtree(g, node);
    // The allocation lists the whole node, every vertex exclusively with all its units.
    for &d in &below {
        let av = alloc.iter().find(|av| av.v == d).unwrap();
        assert!(av.exclusive && av.needs == g.size(d), "{}", g.path(d));
    }
    // The calendars: the node and everything below it hold the job and all their units.
    for &d in &below {
        let usage = m.state.usage(d, g.size(d), 0, 100);
        assert_eq!(usage.units_free, 0, "{}", g.path(d));
        assert!(!m.state.untouched(d, 0, 100), "{}", g.path(d));
    }
    // Yet nothing below it can be taken while it is held: the other node's 44 cores fit,
    // one more does not, until the hold ends.
    let cores = |n| spec(None, Some(n), 50);
    assert!(matches!(
        m.place(MatchOp::Allocate, &cores(45), 2, 0).unwrap(),
        Placement::NoMatch { .. }
    ));
    assert!(matches!(
        m.place(MatchOp::Allocate, &cores(45), 2, 99).unwrap(),
        Placement::NoMatch { .. }
    ));
    assert_eq!(
        m.place(MatchOp::Allocate, &cores(44), 3, 0).unwrap(),
        Placement::Allocated { at: 0 }
    );
    assert_eq!(
        m.place(MatchOp::AllocateOrElseReserve, &cores(45), 4, 0)
            .unwrap(),
        Placement::Reserved { at: 100 }
    );
    let allocs: Vec<_> = m.jobs().map(|(id, j)| (id, &j.alloc)).collect();
    assert!(checker::check(&m.graph, &allocs).is_empty());
    // Cancelling gives the calendars back exactly.
    for id in [1, 3, 4] {
        m.cancel(id).unwrap();
    }
    assert_eq!(m.state, m.fresh_state());
}

#[test]
fn committing_expanded_allocations_matches_a_plain_commit() {
    for policy in ["first", "low", "hinodex"] {
        let mut m = matcher(8, policy);
        let jobs = [
            spec(Some(3), None, 100),    // whole nodes
            spec(None, Some(30), 80),    // cores spread over sockets
            spec(Some(2), Some(4), 60),  // two shared nodes, two cores each
            spec(Some(1), None, 40),     // one whole node
            spec(Some(4), None, 200),    // more than is free now: a reservation
            spec(None, Some(100), 10),   // cores, maybe later
            spec(Some(1), Some(1), 300), // one core on a shared node
        ];
        for (i, js) in jobs.iter().enumerate() {
            let id = i as u64 + 1;
            m.place(MatchOp::AllocateOrElseReserve, js, id, 0).unwrap();
        }
        let placed = m.jobs().count();
        assert!(placed >= 5, "{policy}: only {placed} jobs placed");
        let mut fresh = m.fresh_state();
        for (_, j) in m.jobs() {
            m.commit_into(&mut fresh, &j.alloc).unwrap();
        }
        assert!(fresh == m.state, "{policy}: calendars differ");
        // What each job takes from the root's aggregate, read from its records, is the sum
        // of its exclusive units of each tracked type.
        let root = m.graph.root();
        let types = m.state.aggregate(root).unwrap().types.clone();
        for (id, j) in m.jobs() {
            let summed: Vec<i64> = types
                .iter()
                .map(|&t| {
                    j.alloc
                        .iter()
                        .filter(|av| av.exclusive && av.v != root && m.graph.kind(av.v) == t)
                        .map(|av| m.graph.size(av.v))
                        .sum()
                })
                .collect();
            assert_eq!(
                m.aggregate_use(id, root).unwrap(),
                summed,
                "{policy} job {id}"
            );
        }
    }
}

#[test]
fn leaves_of_whole_nodes_are_covered_and_answer_as_their_own_holds_would() {
    for policy in ["first", "low", "hinodex"] {
        let mut m = matcher(6, policy);
        let jobs = [
            spec(Some(2), None, 100),   // whole nodes: their leaves covered
            spec(None, Some(5), 50),    // a few cores: held one by one
            spec(Some(1), Some(2), 80), // a shared node, two cores
            spec(Some(4), None, 30),    // more than is free now: a reservation
            // Every core of a socket and one of its gpus: the cores covered (one cover of
            // the socket's cores), the gpu held by itself.
            socket_job(22),
        ];
        for (i, js) in jobs.iter().enumerate() {
            m.place(MatchOp::AllocateOrElseReserve, js, i as u64 + 1, 0)
                .unwrap();
        }
        let g = &m.graph;
        // Leaf holds only where a job holds some, not all, of a vertex's leaves.
        let leaves_held: usize = m
            .jobs()
            .flat_map(|(_, j)| &j.alloc)
            .filter(|av| g.children(av.v).is_empty())
            .count();
        assert!(
            m.state.leaves.live_holds() < leaves_held / 2,
            "{policy}: {} leaf holds for {leaves_held} leaves",
            m.state.leaves.live_holds()
        );
        // The same calendars with every cover turned back into records answer alike.
        let plain = answers_alike(&m, policy);
        assert!(plain.leaves.live_holds() >= leaves_held, "{policy}");
        let socket_record = m.job(5).expect("the socket job is placed");
        let covers = socket_record
            .spans
            .iter()
            .filter(|s| matches!(s, shardsched_matcher::SpanRef::Cover(..)))
            .count();
        let leaf_holds = socket_record
            .spans
            .iter()
            .filter(|s| matches!(s, shardsched_matcher::SpanRef::Leaf(..)))
            .count();
        let wholes = socket_record
            .spans
            .iter()
            .filter(|s| matches!(s, shardsched_matcher::SpanRef::Whole(..)))
            .count();
        // (Under a `*nodex` policy its node is taken whole: one whole cover for the node,
        // its sockets and all their leaves.)
        let want = if policy.ends_with("nodex") {
            (0, 0, 1)
        } else {
            (1, 1, 0)
        };
        assert_eq!(
            (covers, leaf_holds, wholes),
            want,
            "{policy}: {:?}",
            socket_record.spans
        );
        for id in 1..=jobs.len() as u64 {
            let _ = m.cancel(id);
        }
        assert_eq!(m.state, m.fresh_state(), "{policy}");
    }
}

/// The calendars of `m` with every cover of every job turned back into the records it
/// stands for: every vertex answers alike in both, over windows across the covers' edges,
/// and so does each job's use of each aggregate. Returns them.
fn answers_alike(m: &Matcher, policy: &str) -> shardsched_matcher::SchedState {
    let g = &m.graph;
    let mut plain = m.state.clone();
    for (_, j) in m.jobs() {
        let mut spans = j.spans.clone();
        plain.uncover(g, m.tree(), &mut spans).unwrap();
        assert!(spans.iter().all(|s| !matches!(
            s,
            shardsched_matcher::SpanRef::Cover(..) | shardsched_matcher::SpanRef::Whole(..)
        )));
    }
    for v in g.vertices() {
        for (at, dur) in [(0, 1), (0, 100), (20, 20), (49, 2), (99, 1), (100, 40)] {
            let here = format!("{policy} {} [{at}, +{dur})", g.path(v));
            let alike = |what: &str, f: &dyn Fn(&shardsched_matcher::SchedState) -> String| {
                assert_eq!(f(&m.state), f(&plain), "{what} at {here}");
            };
            alike("usage", &|st| {
                format!("{:?}", st.usage(v, g.size(v), at, dur))
            });
            alike("untouched", &|st| format!("{:?}", st.untouched(v, at, dur)));
            alike("untouched from", &|st| {
                format!("{:?}", st.untouched_from(v, at, dur))
            });
            alike("last type free", &|st| {
                format!("{:?}", st.last_type_free_at(v, at))
            });
            let Some(agg) = plain.aggregate(v) else {
                continue;
            };
            for (i, &t) in agg.types.iter().enumerate() {
                let need = [(agg.ranks[i], 1)];
                alike(&format!("type {i}"), &|st| {
                    format!(
                        "{:?} {:?} {:?}",
                        st.agg_avail(v, t, at, dur),
                        st.agg_free_at(v, i, at),
                        st.agg_shortfall(v, &need, at, dur, false).is_none()
                    )
                });
            }
        }
    }
    // What each job took from each aggregate reads the same from its covers.
    for (id, j) in m.jobs() {
        let mut spans = j.spans.clone();
        let mut again = m.state.clone();
        again.uncover(g, m.tree(), &mut spans).unwrap();
        for v in g.vertices() {
            let used = |st: &shardsched_matcher::SchedState,
                        spans: &[shardsched_matcher::SpanRef]| {
                spans
                    .iter()
                    .find_map(|&s| st.aggregate_span(v, s).map(<[i64]>::to_vec))
            };
            assert_eq!(
                used(&m.state, &j.spans),
                used(&again, &spans),
                "{policy} job {id} at {}",
                g.path(v)
            );
        }
    }
    plain
}

/// A whole node comes back as one whole cover when its job is restored from its allocation
/// alone (a listing the commit checks vertex by vertex), and the calendars answer as the
/// records it stands for after a partial cancel (which turns the job's covers back into
/// records first). (A job id matched again, resource-query's, is in the conformance cases.)
#[test]
fn whole_covers_survive_restores_and_partial_cancels() {
    let wholes = |m: &Matcher, id: u64| {
        m.job(id).map_or(0, |j| {
            j.spans
                .iter()
                .filter(|s| matches!(s, shardsched_matcher::SpanRef::Whole(..)))
                .count()
        })
    };
    for policy in ["first", "low", "hinodex"] {
        let mut m = matcher(4, policy);
        m.place(MatchOp::Allocate, &spec(Some(2), None, 100), 1, 0)
            .unwrap();
        // All four nodes: reserved from 100, two of them with job 1's cover before.
        m.place(
            MatchOp::AllocateOrElseReserve,
            &spec(Some(4), None, 50),
            2,
            0,
        )
        .unwrap();
        assert_eq!((wholes(&m, 1), wholes(&m, 2)), (2, 4), "{policy}");
        answers_alike(&m, policy);

        let alloc = m.take(1).unwrap();
        m.restore(1, alloc).unwrap();
        assert_eq!(wholes(&m, 1), 2, "{policy}: restored whole");
        answers_alike(&m, policy);

        // Job 2 gives one node back: its covers are records from then on.
        let node = m
            .job(2)
            .unwrap()
            .alloc
            .iter()
            .find(|av| m.graph.kind_str(av.v) == "node")
            .unwrap()
            .v;
        let rank = m.graph.rank(node);
        m.partial_cancel_ranks(2, &[rank].into()).unwrap();
        assert_eq!(wholes(&m, 2), 0, "{policy}");
        answers_alike(&m, policy);

        let held = m.state.clone();
        let job_ids: Vec<u64> = m.jobs().map(|(id, _)| id).collect();
        for id in job_ids {
            m.cancel(id).unwrap();
        }
        assert!(m.state != held, "{policy}: cancels took records out");
    }
}

/// A node taken whole again is listed as the walk listed it the first time (the update walk
/// copies a whole's first listing: `state::listing`), under each policy, after cancels and
/// beside a matcher that never listed it.
#[test]
fn nodes_taken_whole_again_are_listed_as_the_first_time() {
    for policy in ["first", "low", "high", "hinodex"] {
        let mut m = matcher(4, policy);
        let mut first = None;
        for id in 1..=3 {
            m.place(MatchOp::Allocate, &spec(Some(4), None, 100), id, 0)
                .unwrap();
            let listed = m.job(id).unwrap().alloc.vertices().into_owned();
            let first = first.get_or_insert_with(|| listed.clone());
            assert_eq!(&listed, first, "{policy}: job {id}");
            m.cancel(id).unwrap();
        }
        // A matcher that walks every node: the same listing.
        let mut fresh = matcher(4, policy);
        fresh
            .place(MatchOp::Allocate, &spec(Some(4), None, 100), 9, 0)
            .unwrap();
        assert_eq!(
            Some(&fresh.job(9).unwrap().alloc.vertices().into_owned()),
            first.as_ref(),
            "{policy}"
        );
        // Half the nodes, then the other half beside them: each listed as the walk lists it.
        m.place(MatchOp::Allocate, &spec(Some(2), None, 100), 10, 0)
            .unwrap();
        m.place(MatchOp::Allocate, &spec(Some(2), None, 100), 11, 0)
            .unwrap();
        fresh.cancel(9).unwrap();
        fresh
            .place(MatchOp::Allocate, &spec(Some(2), None, 100), 10, 0)
            .unwrap();
        fresh
            .place(MatchOp::Allocate, &spec(Some(2), None, 100), 11, 0)
            .unwrap();
        for id in [10, 11] {
            assert_eq!(
                m.job(id).unwrap().alloc.vertices(),
                fresh.job(id).unwrap().alloc.vertices(),
                "{policy}: job {id}"
            );
        }
    }
}
