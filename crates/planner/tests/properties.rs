//! Property tests: `Planner` and `MultiPlanner` against a naive model that
//! stores the usage of every time unit of a small window.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use shardsched_planner::{MultiPlanner, Planner, PlannerError, SpanId};

const H: u64 = 64;
const HI: i64 = H as i64;
/// Query durations checked after every step.
const DURATIONS: [u64; 8] = [0, 1, 2, 3, 5, 13, 64, 65];

/// Usage per time unit of `[base, base + H)`, per resource type.
#[derive(Debug, Clone)]
struct Model {
    base: i64,
    totals: Vec<i64>,
    usage: Vec<Vec<i64>>,
    spans: Vec<(SpanId, i64, u64, Vec<i64>)>,
}

impl Model {
    fn new(base: i64, totals: &[i64]) -> Self {
        Model {
            base,
            totals: totals.to_vec(),
            usage: vec![vec![0; totals.len()]; H as usize],
            spans: vec![],
        }
    }

    fn in_window(&self, at: i64, d: u64) -> bool {
        d > 0 && at >= self.base && i128::from(at) + i128::from(d) <= i128::from(self.base + HI)
    }

    fn used(&self, t: i64, ty: usize) -> i64 {
        if t < self.base || t >= self.base + HI {
            0
        } else {
            self.usage[(t - self.base) as usize][ty]
        }
    }

    fn avail_at(&self, t: i64, ty: usize) -> i64 {
        if t < self.base || t >= self.base + HI {
            0
        } else {
            self.totals[ty] - self.used(t, ty)
        }
    }

    fn avail_during(&self, at: i64, d: u64, ty: usize) -> i64 {
        if !self.in_window(at, d) {
            return 0;
        }
        (at..at + d as i64)
            .map(|t| self.avail_at(t, ty))
            .min()
            .unwrap()
    }

    fn fits(&self, at: i64, d: u64, reqs: &[i64]) -> bool {
        self.in_window(at, d)
            && reqs
                .iter()
                .zip(&self.totals)
                .all(|(r, t)| (0..=*t).contains(r))
            && reqs
                .iter()
                .enumerate()
                .all(|(ty, &r)| self.avail_during(at, d, ty) >= r)
    }

    /// Times in `[base, base + H]` at which some type's usage changes.
    fn change_points(&self) -> Vec<i64> {
        (self.base..=self.base + HI)
            .filter(|&t| (0..self.totals.len()).any(|ty| self.used(t, ty) != self.used(t - 1, ty)))
            .collect()
    }

    /// What `avail_times` must yield.
    fn avail_times(&self, at: i64, d: u64, reqs: &[i64]) -> Vec<i64> {
        let lb = at.max(self.base);
        std::iter::once(lb)
            .chain(self.change_points().into_iter().filter(|&t| t > lb))
            .filter(|&t| self.fits(t, d, reqs))
            .collect()
    }

    /// Expected outcome of an add; applies it when it succeeds.
    fn add(&mut self, start: i64, d: u64, reqs: &[i64], single: bool) -> Result<(), PlannerError> {
        if d == 0 {
            return Err(PlannerError::ZeroDuration);
        }
        for (ty, (&r, &total)) in reqs.iter().zip(&self.totals).enumerate() {
            let bad = if single {
                r <= 0 || r > total
            } else {
                r < 0 || r > total
            };
            if bad && single {
                return Err(PlannerError::InvalidRequest { request: r, total });
            }
            if bad {
                return Err(PlannerError::InvalidResourceRequest {
                    resource: ty,
                    request: r,
                    total,
                });
            }
        }
        let end = start + d as i64;
        if !self.in_window(start, d) {
            return Err(PlannerError::OutOfHorizon {
                start,
                end,
                base_time: self.base,
                horizon_end: self.base + HI,
            });
        }
        for (ty, &r) in reqs.iter().enumerate() {
            let available = self.avail_during(start, d, ty);
            if r > 0 && available < r {
                return Err(if single {
                    PlannerError::Insufficient {
                        request: r,
                        available,
                        start,
                        end,
                    }
                } else {
                    PlannerError::InsufficientResource {
                        resource: ty,
                        request: r,
                        available,
                        start,
                        end,
                    }
                });
            }
        }
        for t in start..end {
            for (ty, &r) in reqs.iter().enumerate() {
                self.usage[(t - self.base) as usize][ty] += r;
            }
        }
        Ok(())
    }

    fn remove(&mut self, pos: usize) -> SpanId {
        let (id, start, d, reqs) = self.spans.swap_remove(pos);
        for t in start..start + d as i64 {
            for (ty, &r) in reqs.iter().enumerate() {
                self.usage[(t - self.base) as usize][ty] -= r;
            }
        }
        id
    }
}

#[derive(Debug, Clone)]
enum Op {
    Add {
        start: i64,
        dur: u64,
        reqs: Vec<i64>,
    },
    Remove {
        pick: usize,
    },
}

fn op_strategy(k: usize, max_total: i64) -> impl Strategy<Value = Op> {
    let add = (
        -4..HI + 4,
        prop_oneof![3 => 0..10u64, 1 => 0..H + 4],
        prop::collection::vec(-1..=max_total + 1, k),
    )
        .prop_map(|(start, dur, reqs)| Op::Add { start, dur, reqs });
    prop_oneof![3 => add, 2 => any::<usize>().prop_map(|pick| Op::Remove { pick })]
}

/// A small set of request vectors to query: every type from 0 to total + 1
/// on the diagonal, plus one mixed vector.
fn query_requests(totals: &[i64]) -> Vec<Vec<i64>> {
    let max = totals.iter().copied().max().unwrap_or(0);
    let mut out: Vec<Vec<i64>> = (0..=max + 1)
        .map(|r| totals.iter().map(|&t| r.min(t + 1)).collect())
        .collect();
    out.push(
        totals
            .iter()
            .enumerate()
            .map(|(i, &t)| if i % 2 == 0 { t } else { 0 })
            .collect(),
    );
    out
}

fn check_single(p: &Planner, m: &Model) {
    let b = m.base;
    for t in b - 2..b + HI + 2 {
        assert_eq!(p.avail_at(t), m.avail_at(t, 0), "avail_at({t})");
    }
    for d in DURATIONS {
        for at in b - 2..b + HI + 2 {
            assert_eq!(
                p.avail_during(at, d),
                m.avail_during(at, d, 0),
                "avail_during({at}, {d})"
            );
        }
        for r in -1..=m.totals[0] + 1 {
            let times = m.avail_times(b - 1, d, &[r]);
            assert_eq!(
                p.avail_times(b - 1, d, r).collect::<Vec<_>>(),
                times,
                "avail_times({d}, {r})"
            );
            for at in b - 2..b + HI + 2 {
                let want = (at.max(b)..=b + HI).find(|&t| m.fits(t, d, &[r]));
                assert_eq!(
                    p.avail_time_first(at, d, r),
                    want,
                    "avail_time_first({at}, {d}, {r})"
                );
                if at % 7 == 0 {
                    assert_eq!(
                        p.fits_during(at, d, r),
                        m.fits(at, d, &[r]),
                        "fits_during({at}, {d}, {r})"
                    );
                }
            }
        }
    }
    assert_eq!(p.span_count(), m.spans.len());
    for (id, start, d, reqs) in &m.spans {
        let s = p.span(*id).unwrap();
        assert_eq!((s.start, s.duration, s.planned), (*start, *d, reqs[0]));
    }
    assert_eq!(p.point_count(), m.change_points().len());
}

/// `used_steps` against the model: the usage at every time unit of the window is its
/// step's, the steps start at the window's start and in order, and none is given where
/// `avail_during` answers 0 whatever is planned.
fn check_steps(p: &MultiPlanner, m: &Model, at: i64, d: u64, ty: usize) {
    let mut steps = Vec::new();
    let given = p.used_steps(at, d, ty, &mut steps);
    assert_eq!(given, m.in_window(at, d), "used_steps({at}, {d}, {ty})");
    if !given {
        assert!(steps.is_empty());
        return;
    }
    assert_eq!(steps.first().map(|s| s.0), Some(at));
    assert!(steps.windows(2).all(|w| w[0].0 < w[1].0));
    for t in at..at + d as i64 {
        let step = steps.iter().rev().find(|s| s.0 <= t).unwrap();
        assert_eq!(step.1, m.used(t, ty), "used_steps({at}, {d}, {ty}) at {t}");
    }
}

fn check_multi(p: &MultiPlanner, m: &Model) {
    let b = m.base;
    let k = m.totals.len();
    for t in b - 2..b + HI + 2 {
        for ty in 0..k {
            assert_eq!(p.avail_at(t, ty), m.avail_at(t, ty), "avail_at({t}, {ty})");
        }
    }
    for d in DURATIONS {
        for at in b - 2..b + HI + 2 {
            let want: Vec<i64> = (0..k).map(|ty| m.avail_during(at, d, ty)).collect();
            assert_eq!(
                p.avail_resources_during(at, d),
                want,
                "avail_resources_during({at}, {d})"
            );
            for ty in 0..k {
                check_steps(p, m, at, d, ty);
            }
        }
        for reqs in query_requests(&m.totals) {
            let times = m.avail_times(b - 1, d, &reqs);
            assert_eq!(
                p.avail_times(b - 1, d, &reqs).collect::<Vec<_>>(),
                times,
                "avail_times({d}, {reqs:?})"
            );
            for at in b - 2..b + HI + 2 {
                let want = (at.max(b)..=b + HI).find(|&t| m.fits(t, d, &reqs));
                assert_eq!(
                    p.avail_time_first(at, d, &reqs),
                    want,
                    "avail_time_first({at}, {d}, {reqs:?})"
                );
            }
        }
    }
    assert_eq!(p.span_count(), m.spans.len());
    for (id, start, d, reqs) in &m.spans {
        let s = p.span(*id).unwrap();
        assert_eq!(
            (s.start, s.duration, s.planned),
            (*start, *d, reqs.as_slice())
        );
    }
    assert_eq!(p.point_count(), m.change_points().len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// (1) Random add/remove sequences agree with the model after every step.
    #[test]
    fn planner_matches_model(
        base in -50i64..50,
        total in 1i64..8,
        ops in prop::collection::vec(op_strategy(1, 8), 1..24),
    ) {
        let mut p = Planner::new(base, H, total);
        let mut m = Model::new(base, &[total]);
        let mut removed = vec![];
        for op in ops {
            match op {
                Op::Add { start, dur, reqs } => {
                    let start = start + base;
                    let want = m.add(start, dur, &reqs, true);
                    let got = p.add_span(start, dur, reqs[0]);
                    prop_assert_eq!(got.clone().map(|_| ()), want);
                    if let Ok(id) = got {
                        m.spans.push((id, start, dur, reqs));
                    }
                }
                Op::Remove { pick } if m.spans.is_empty() => {
                    if let Some(&id) = removed.get(pick % removed.len().max(1)) {
                        prop_assert_eq!(p.rem_span(id), Err(PlannerError::UnknownSpan(id)));
                    }
                }
                Op::Remove { pick } => {
                    let id = m.remove(pick % m.spans.len());
                    prop_assert_eq!(p.rem_span(id), Ok(()));
                    prop_assert_eq!(p.rem_span(id), Err(PlannerError::UnknownSpan(id)));
                    removed.push(id);
                }
            }
            check_single(&p, &m);
        }
    }

    /// (1) for the multi-type planner, with 1 to 6 types: on both sides of what a calendar
    /// and the totals keep inline (`INLINE_TOTALS`).
    #[test]
    fn multi_matches_model(
        base in -50i64..50,
        totals in prop::collection::vec(0i64..5, 1..=6),
        ops in prop::collection::vec(op_strategy(6, 5), 1..20),
    ) {
        let k = totals.len();
        let mut p = MultiPlanner::new(base, H, &totals);
        let mut m = Model::new(base, &totals);
        for op in ops {
            match op {
                Op::Add { start, dur, reqs } => {
                    let start = start + base;
                    let reqs = reqs[..k].to_vec();
                    let want = m.add(start, dur, &reqs, false);
                    let before = p.clone();
                    let got = p.add_span(start, dur, &reqs);
                    prop_assert_eq!(got.clone().map(|_| ()), want);
                    match got {
                        Ok(id) => m.spans.push((id, start, dur, reqs)),
                        Err(_) => prop_assert_eq!(&p, &before),
                    }
                }
                Op::Remove { .. } if m.spans.is_empty() => {}
                Op::Remove { pick } => {
                    let id = m.remove(pick % m.spans.len());
                    prop_assert_eq!(p.rem_span(id), Ok(()));
                }
            }
            check_multi(&p, &m);
        }
    }

    /// (2) Adding spans and removing them all, in any order, gives back a
    /// planner equal to a fresh one.
    #[test]
    fn remove_all_restores_fresh(
        base in -1000i64..1000,
        horizon in 1u64..500,
        total in 1i64..20,
        spans in prop::collection::vec((0u64..500, 1u64..100, 1i64..20, any::<u32>()), 0..40),
    ) {
        let fresh = Planner::new(base, horizon, total);
        let mut p = fresh.clone();
        let mut ids = vec![];
        for (off, dur, req, key) in spans {
            if let Ok(id) = p.add_span(base + off as i64, dur, req) {
                ids.push((key, id));
            }
        }
        prop_assert_eq!(p.span_count(), ids.len());
        ids.sort_unstable();
        for (_, id) in ids {
            prop_assert!(p.rem_span(id).is_ok());
        }
        prop_assert_eq!(&p, &fresh);
        prop_assert_eq!(p.point_count(), 0);
    }

    /// (2) for the multi-type planner.
    #[test]
    fn multi_remove_all_restores_fresh(
        totals in prop::collection::vec(0i64..10, 0..7),
        spans in prop::collection::vec((0u64..200, 1u64..50, prop::collection::vec(0i64..10, 6), any::<u32>()), 0..30),
    ) {
        let fresh = MultiPlanner::new(0, 200, &totals);
        let mut p = fresh.clone();
        let mut ids = vec![];
        for (start, dur, reqs, key) in spans {
            if let Ok(id) = p.add_span(start as i64, dur, &reqs[..totals.len()]) {
                ids.push((key, id));
            }
        }
        ids.sort_unstable();
        for (_, id) in ids {
            prop_assert!(p.rem_span(id).is_ok());
        }
        prop_assert_eq!(&p, &fresh);
    }

    /// (3) `avail_times` is strictly increasing, every item fits, the first
    /// is `avail_time_first`, and every fitting change point is yielded.
    #[test]
    fn avail_times_are_sound(
        total in 1i64..10,
        spans in prop::collection::vec((0i64..300, 1u64..60, 1i64..10), 0..30),
        at in -20i64..320,
        dur in 1u64..80,
        req in 0i64..10,
    ) {
        let mut p = Planner::new(0, 300, total);
        let mut bounds = vec![];
        for (start, d, r) in spans {
            if p.add_span(start, d, r).is_ok() {
                bounds.push(start);
                bounds.push(start + d as i64);
            }
        }
        let times: Vec<i64> = p.avail_times(at, dur, req).collect();
        prop_assert_eq!(times.first().copied(), p.avail_time_first(at, dur, req));
        prop_assert!(times.windows(2).all(|w| w[0] < w[1]));
        for &t in &times {
            prop_assert!(t >= at && p.fits_during(t, dur, req));
            prop_assert!(p.avail_during(t, dur) >= req);
        }
        // Every fitting span boundary after the first item is yielded.
        if let Some(&first) = times.first() {
            for &b in bounds.iter().filter(|&&b| b > first) {
                let is_point = p.avail_at(b) != p.avail_at(b - 1);
                if is_point && p.fits_during(b, dur, req) {
                    prop_assert!(times.contains(&b), "missing {}", b);
                }
            }
        }
    }
}

#[test]
fn multi_with_one_type_behaves_like_planner() {
    let mut p = Planner::new(0, 100, 5);
    let mut m = MultiPlanner::new(0, 100, &[5]);
    for (s, d, r) in [(0, 10, 3), (5, 10, 2), (12, 30, 3), (50, 5, 5), (40, 20, 1)] {
        assert_eq!(p.add_span(s, d, r).is_ok(), m.add_span(s, d, &[r]).is_ok());
    }
    for at in -5..105 {
        for d in [1, 4, 9, 30] {
            for r in 0..=6 {
                assert_eq!(
                    p.avail_time_first(at, d, r),
                    m.avail_time_first(at, d, &[r])
                );
                assert_eq!(p.avail_during(at, d), m.avail_during(at, d, 0));
            }
        }
    }
}
