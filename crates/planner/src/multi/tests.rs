//! Unit tests for [`multi`](super).

use super::*;

#[test]
fn struct_is_small() {
    // The window, up to four totals inline, the calendar's box and the serial.
    assert_eq!(std::mem::size_of::<MultiPlanner>(), 80);
}

#[test]
fn add_query_remove() {
    let mut m = MultiPlanner::new(0, 100, &[8, 2]);
    let a = m.add_span(0, 10, &[4, 0]).unwrap();
    let b = m.add_span(5, 10, &[4, 2]).unwrap();
    assert_eq!(m.avail_at(0, 0), 4);
    assert_eq!(m.avail_at(0, 1), 2);
    assert_eq!(m.avail_at(5, 0), 0);
    assert_eq!(m.avail_at(5, 1), 0);
    assert_eq!(m.avail_at(10, 0), 4);
    assert_eq!(m.avail_at(0, 2), 0);
    assert_eq!(m.avail_resources_during(0, 10), vec![0, 0]);
    assert_eq!(m.avail_resources_during(10, 5), vec![4, 0]);
    assert_eq!(m.avail_during(15, 5, 1), 2);
    assert!(m.fits_during(0, 5, &[4, 2]));
    assert!(!m.fits_during(0, 6, &[1, 0]));
    assert_eq!(m.avail_time_first(0, 5, &[4, 1]), Some(0));
    assert_eq!(m.avail_time_first(1, 5, &[4, 1]), Some(15));
    assert_eq!(m.avail_time_first(0, 5, &[0, 2]), Some(0));
    assert_eq!(
        m.avail_times(0, 5, &[4, 0]).collect::<Vec<_>>(),
        vec![0, 10, 15]
    );
    assert_eq!(m.span(a).unwrap().planned, &[4, 0]);
    assert_eq!(m.span(b).unwrap().end(), 15);
    assert_eq!(m.spans().count(), 2);
    m.rem_span(a).unwrap();
    m.rem_span(b).unwrap();
    assert_eq!(m, MultiPlanner::new(0, 100, &[8, 2]));
    assert_eq!(m.rem_span(a), Err(PlannerError::UnknownSpan(a)));
}

#[test]
fn add_span_is_all_or_nothing() {
    let mut m = MultiPlanner::new(0, 100, &[4, 4]);
    m.add_span(0, 10, &[0, 3]).unwrap();
    let before = m.clone();
    assert_eq!(
        m.add_span(5, 10, &[4, 2]),
        Err(PlannerError::InsufficientResource {
            resource: 1,
            request: 2,
            available: 1,
            start: 5,
            end: 15
        })
    );
    assert_eq!(
        m.add_span(5, 10, &[4]),
        Err(PlannerError::RequestLength {
            expected: 2,
            actual: 1
        })
    );
    assert_eq!(
        m.add_span(5, 10, &[5, 0]),
        Err(PlannerError::InvalidResourceRequest {
            resource: 0,
            request: 5,
            total: 4
        })
    );
    assert_eq!(
        m.add_span(5, 10, &[-1, 0]),
        Err(PlannerError::InvalidResourceRequest {
            resource: 0,
            request: -1,
            total: 4
        })
    );
    assert_eq!(m.add_span(5, 0, &[1, 0]), Err(PlannerError::ZeroDuration));
    assert!(matches!(
        m.add_span(95, 10, &[1, 0]),
        Err(PlannerError::OutOfHorizon { .. })
    ));
    assert_eq!(m, before);
}

#[test]
fn all_zero_request_is_a_span_without_points() {
    let mut m = MultiPlanner::new(0, 10, &[1, 1]);
    let id = m.add_span(0, 5, &[0, 0]).unwrap();
    assert_eq!(m.span_count(), 1);
    assert_eq!(m.point_count(), 0);
    m.rem_span(id).unwrap();
    assert_eq!(m, MultiPlanner::new(0, 10, &[1, 1]));
}

#[test]
fn zero_types() {
    let mut m = MultiPlanner::new(0, 10, &[]);
    assert_eq!(m.avail_time_first(3, 2, &[]), Some(3));
    let id = m.add_span(0, 10, &[]).unwrap();
    assert!(m.fits_during(0, 10, &[]));
    m.rem_span(id).unwrap();
    assert_eq!(m.avail_resources_during(0, 1), Vec::<i64>::new());
}

#[test]
fn set_total_and_into_errors() {
    let mut m = MultiPlanner::new(0, 10, &[4, 4]);
    m.add_span(0, 5, &[3, 1]).unwrap();
    assert_eq!(
        m.set_total(0, 2),
        Err(PlannerError::TotalBelowPeak {
            new_total: 2,
            peak: 3
        })
    );
    assert_eq!(
        m.set_total(2, 2),
        Err(PlannerError::UnknownResource {
            resource: 2,
            count: 2
        })
    );
    m.set_total(1, 1).unwrap();
    assert_eq!(m.totals(), &[4, 1]);
    let mut out = [0; 3];
    assert_eq!(
        m.avail_resources_during_into(0, 1, &mut out),
        Err(PlannerError::RequestLength {
            expected: 2,
            actual: 3
        })
    );
    let mut out = [9; 2];
    m.avail_resources_during_into(0, 20, &mut out).unwrap();
    assert_eq!(out, [0, 0]);
    assert_eq!(m.avail_time_first(0, 1, &[1]), None);
    assert_eq!(m.avail_time_first(0, 1, &[-1, 0]), None);
}
