//! Unit tests for [`planner`](super).

use super::*;

#[test]
fn struct_is_small() {
    assert!(std::mem::size_of::<Planner>() <= 48);
    assert_eq!(std::mem::size_of::<Planner>(), 40);
}

#[test]
fn fresh_planner_is_fully_available() {
    let p = Planner::new(100, 50, 8);
    assert_eq!(p.avail_at(100), 8);
    assert_eq!(p.avail_at(149), 8);
    assert_eq!(p.avail_at(150), 0);
    assert_eq!(p.avail_at(99), 0);
    assert_eq!(p.avail_during(100, 50), 8);
    assert_eq!(p.avail_during(100, 51), 0);
    assert_eq!(p.avail_during(100, 0), 0);
    assert_eq!(p.avail_time_first(0, 10, 8), Some(100));
    assert_eq!(p.avail_time_first(141, 10, 1), None);
    assert_eq!(p.avail_times(0, 10, 8).collect::<Vec<_>>(), vec![100]);
    assert_eq!(p.span_count(), 0);
    assert_eq!(p.point_count(), 0);
    assert!(p.cal.is_none());
}

#[test]
fn add_and_query() {
    let mut p = Planner::new(0, 100, 10);
    let a = p.add_span(10, 10, 4).unwrap();
    let b = p.add_span(15, 10, 6).unwrap();
    assert_eq!(p.avail_at(9), 10);
    assert_eq!(p.avail_at(10), 6);
    assert_eq!(p.avail_at(15), 0);
    assert_eq!(p.avail_at(20), 4);
    assert_eq!(p.avail_at(25), 10);
    assert_eq!(p.avail_during(0, 12), 6);
    assert_eq!(p.avail_during(20, 5), 4);
    assert_eq!(p.peak(), 10);
    assert_eq!(
        p.span(a),
        Some(Span {
            start: 10,
            duration: 10,
            planned: 4
        })
    );
    assert_eq!(p.span(b).unwrap().end(), 25);
    assert_eq!(p.spans().count(), 2);
    assert_eq!(p.avail_time_first(0, 10, 5), Some(0));
    assert_eq!(p.avail_time_first(1, 10, 5), Some(1));
    assert_eq!(p.avail_time_first(6, 10, 5), Some(25));
    assert_eq!(p.avail_time_first(11, 5, 4), Some(20));
    assert_eq!(
        p.avail_times(0, 5, 4).collect::<Vec<_>>(),
        vec![0, 10, 20, 25]
    );
    assert_eq!(p.avail_times(3, 5, 5).collect::<Vec<_>>(), vec![3, 10, 25]);
}

#[test]
fn add_span_errors() {
    let mut p = Planner::new(0, 100, 10);
    assert_eq!(p.add_span(0, 0, 1), Err(PlannerError::ZeroDuration));
    assert_eq!(
        p.add_span(0, 1, 0),
        Err(PlannerError::InvalidRequest {
            request: 0,
            total: 10
        })
    );
    assert_eq!(
        p.add_span(0, 1, 11),
        Err(PlannerError::InvalidRequest {
            request: 11,
            total: 10
        })
    );
    assert_eq!(
        p.add_span(i64::MAX, 1, 1),
        Err(PlannerError::TimeOverflow {
            start: i64::MAX,
            duration: 1
        })
    );
    assert_eq!(
        p.add_span(0, u64::MAX, 1),
        Err(PlannerError::TimeOverflow {
            start: 0,
            duration: u64::MAX
        })
    );
    assert_eq!(
        p.add_span(95, 10, 1),
        Err(PlannerError::OutOfHorizon {
            start: 95,
            end: 105,
            base_time: 0,
            horizon_end: 100
        })
    );
    assert!(matches!(
        p.add_span(-1, 2, 1),
        Err(PlannerError::OutOfHorizon { .. })
    ));
    p.add_span(0, 10, 7).unwrap();
    assert_eq!(
        p.add_span(5, 10, 4),
        Err(PlannerError::Insufficient {
            request: 4,
            available: 3,
            start: 5,
            end: 15
        })
    );
    let msg = p.add_span(5, 10, 4).unwrap_err().to_string();
    assert!(
        msg.contains('3') && msg.contains('4') && msg.contains("[5, 15)"),
        "{msg}"
    );
    assert_eq!(p.span_count(), 1);
}

#[test]
fn rem_span_restores_fresh_state() {
    let mut p = Planner::new(0, 100, 10);
    let ids: Vec<_> = (0..5).map(|i| p.add_span(i * 7, 20, 2).unwrap()).collect();
    assert_ne!(p, Planner::new(0, 100, 10));
    for id in ids.iter().rev() {
        p.rem_span(*id).unwrap();
    }
    assert_eq!(p, Planner::new(0, 100, 10));
    assert_eq!(Planner::new(0, 100, 10), p);
    // The emptied calendar is kept for the next span, and holds nothing.
    assert!(p.cal.as_ref().is_some_and(|c| c.live() == 0));
    assert_eq!((p.span_count(), p.point_count()), (0, 0));
    assert_eq!(p.avail_during(0, 100), 10);
    assert_eq!(p.rem_span(ids[0]), Err(PlannerError::UnknownSpan(ids[0])));
    let again = p.add_span(10, 5, 10).unwrap();
    assert_ne!(p, Planner::new(0, 100, 10));
    p.rem_span(again).unwrap();
    assert_eq!(p, Planner::new(0, 100, 10));
}

#[test]
fn stale_ids_stay_stale_after_planner_empties() {
    let mut p = Planner::new(0, 100, 10);
    let a = p.add_span(0, 10, 1).unwrap();
    p.rem_span(a).unwrap();
    let b = p.add_span(0, 10, 1).unwrap();
    assert_ne!(a, b);
    assert_eq!(p.rem_span(a), Err(PlannerError::UnknownSpan(a)));
    assert!(p.span(b).is_some());
}

#[test]
fn set_total_checks_peak() {
    let mut p = Planner::new(0, 100, 10);
    p.add_span(0, 10, 6).unwrap();
    assert_eq!(
        p.set_total(5),
        Err(PlannerError::TotalBelowPeak {
            new_total: 5,
            peak: 6
        })
    );
    assert_eq!(
        p.set_total(-1),
        Err(PlannerError::NegativeTotal { total: -1 })
    );
    p.set_total(6).unwrap();
    assert_eq!(p.avail_at(0), 0);
    assert_eq!(p.avail_at(10), 6);
    p.set_total(20).unwrap();
    assert_eq!(p.avail_at(0), 14);
}

#[test]
fn extreme_windows_do_not_panic() {
    let mut p = Planner::new(i64::MAX - 10, u64::MAX, 3);
    assert_eq!(p.horizon(), 10);
    assert_eq!(p.horizon_end(), i64::MAX);
    let id = p.add_span(i64::MAX - 5, 5, 3).unwrap();
    assert_eq!(p.avail_at(i64::MAX - 1), 0);
    assert_eq!(p.avail_time_first(i64::MIN, 5, 1), Some(i64::MAX - 10));
    assert_eq!(p.avail_time_first(i64::MIN, 6, 1), None);
    assert_eq!(p.avail_during(i64::MAX, u64::MAX), 0);
    p.rem_span(id).unwrap();
    let q = Planner::new(i64::MIN, u64::MAX, -5);
    assert_eq!(q.total(), 0);
    assert_eq!(q.horizon_end(), i64::MAX);
    assert_eq!(q.avail_time_first(0, 1, 0), Some(0));
    assert_eq!(q.avail_time_first(0, 1, 1), None);
}

#[test]
fn negative_or_oversized_queries() {
    let p = Planner::new(0, 10, 4);
    assert_eq!(p.avail_time_first(0, 1, -1), None);
    assert_eq!(p.avail_time_first(0, 1, 5), None);
    assert_eq!(p.avail_time_first(0, 0, 1), None);
    assert!(!p.fits_during(0, 1, -1));
    assert!(p.fits_during(0, 1, 0));
    assert_eq!(p.avail_times(0, 1, 5).next(), None);
}
