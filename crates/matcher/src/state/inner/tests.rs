use crate::{MatchOp, MatchPolicy, Matcher, PruneFilters, SpanRef};

/// A matcher (policy first) over two generated nodes holding job 1: one core over
/// `[0, 100)`.
fn one_core_placed() -> Matcher {
    let g = shardsched_resource::generated_cluster(2).build().unwrap();
    let mut m = Matcher::new(
        g,
        MatchPolicy::parse("first").unwrap(),
        &PruneFilters::default_filters(),
    );
    let js = crate::alloc::tests::one_core();
    m.place(MatchOp::Allocate, &js, 1, 0).unwrap();
    m
}

/// A match records one span per inner vertex; split into parts, the calendars say the
/// same (units, job count, every aggregate type, the job's aggregate records), and the
/// parts go one by one, leaving the calendars as fresh ones.
#[test]
fn an_inner_record_split_into_parts_says_the_same() {
    let m = one_core_placed();
    let spans = m.job(1).unwrap().spans.clone();
    let whole = spans
        .iter()
        .filter(|s| matches!(s, SpanRef::Inner(..)))
        .count();
    assert!(whole >= 3, "cluster, node, socket: {spans:?}");
    let mut st = m.state.clone();
    let mut parts = spans.clone();
    st.uncover(&m.graph, &m.graph, &mut parts).unwrap();
    assert!(!parts.iter().any(|s| matches!(s, SpanRef::Inner(..))));
    assert!(parts.len() > spans.len(), "{parts:?}");
    let g = &m.graph;
    for v in g.vertices() {
        let used = |st: &crate::SchedState, spans: &[SpanRef]| {
            spans
                .iter()
                .find_map(|&s| st.aggregate_span(v, s).map(<[i64]>::to_vec))
        };
        assert_eq!(used(&m.state, &spans), used(&st, &parts), "{}", g.path(v));
        for t in [0, 50, 99, 100] {
            let size = g.size(v);
            assert_eq!(m.state.usage(v, size, t, 1), st.usage(v, size, t, 1));
            assert_eq!(m.state.untouched(v, t, 1), st.untouched(v, t, 1));
            let types = m.state.aggregate(v).map(|a| a.types.to_vec());
            for ty in types.into_iter().flatten() {
                assert_eq!(m.state.agg_avail(v, ty, t, 1), st.agg_avail(v, ty, t, 1));
            }
        }
        assert_eq!(
            m.state.last_type_free_at(v, 0),
            st.last_type_free_at(v, 0),
            "{}",
            g.path(v)
        );
    }
    st.remove_each(&parts).unwrap();
    assert_eq!(st, m.fresh_state());
    let mut whole_gone = m.state.clone();
    whole_gone.remove_each(&spans).unwrap();
    assert_eq!(whole_gone, m.fresh_state());
}
