//! Carrying a job's records into the state of a changed graph (`attach`, `remove`: see
//! `regraph`). The new state is primed afresh on the new graph, with the same vertex ids;
//! each record moves to its vertex there, which may have turned from a leaf into an inner
//! vertex or back (a leaf's hold is a job count and units, an inner vertex's the same two
//! as separate records), and an aggregate record is re-added by type to the vertex's new
//! aggregate. Also a leaf's hold split in its two parts, for records that go separately
//! (a job id matched again: the matcher's `side.rs`).

use shardsched_resource::VertexId;

use super::{SchedState, SpanRef};
use crate::MatchError;

impl SchedState {
    /// Adds to `into` what record `s` of this state holds, pushing the new records to
    /// `out` (none for an aggregate record where the vertex has no aggregate any more).
    /// Covers must have been turned back into holds first.
    pub fn carry(
        &self,
        s: SpanRef,
        into: &mut SchedState,
        out: &mut Vec<SpanRef>,
    ) -> Result<(), MatchError> {
        let gone = || MatchError::Internal(format!("record {s:?} is not in the calendars"));
        let v = self.span_vertex(s);
        let (start, duration, units, jobs) = match s {
            SpanRef::Leaf(_, id) => {
                let (_, start, end, units, jobs) = self.leaves.hold(id).ok_or_else(gone)?;
                (start, u64::try_from(end - start).unwrap_or(0), units, jobs)
            }
            SpanRef::Plan(i, id) | SpanRef::Xcheck(i, id) => {
                let a = &self.inner[i as usize].agg;
                let span = a.cal.span(id).ok_or_else(gone)?;
                let (units, jobs) = a.own_amounts(span.planned);
                match s {
                    SpanRef::Plan(..) => (span.start, span.duration, units, 0),
                    _ => (span.start, span.duration, 0, jobs),
                }
            }
            SpanRef::Agg(i, id) => {
                let agg = self.inner[i as usize].aggregate().ok_or_else(gone)?;
                let span = agg.cal.span(id).ok_or_else(gone)?;
                let mut needs: Vec<(u32, i64)> = agg
                    .ranks
                    .iter()
                    .copied()
                    .zip(span.planned.iter().copied())
                    .collect();
                let (at, dur) = (span.start, span.duration);
                if into.hold_aggregate(v, at, dur, &needs, out).is_ok() {
                    return Ok(());
                }
                into.cut_to_free(v, at, dur, &mut needs);
                return into.hold_aggregate(v, at, dur, &needs, out);
            }
            SpanRef::Cover(..) | SpanRef::Whole(..) | SpanRef::Inner(..) => {
                return Err(MatchError::Internal(
                    "covers and inner records are taken apart before a graph changes".into(),
                ));
            }
        };
        into.record_on(v, start, duration, (units > 0).then_some(units), jobs, out)
    }

    /// The units and job count a leaf's hold `s` records (`None` for another record).
    pub fn leaf_parts(&self, s: SpanRef) -> Option<(i64, i64)> {
        let SpanRef::Leaf(_, id) = s else {
            return None;
        };
        self.leaves
            .hold(id)
            .map(|(_, _, _, units, jobs)| (units, jobs))
    }

    /// Splits a leaf's hold into a hold of its units alone and one of its job count alone,
    /// over the same window (either `None` when the hold has none): the calendars say the
    /// same, in two records that can go separately, as Fluxion's plan and exclusivity
    /// records of a leaf do.
    pub fn split_leaf(
        &mut self,
        s: SpanRef,
    ) -> Result<(Option<SpanRef>, Option<SpanRef>), MatchError> {
        let gone = || MatchError::Internal(format!("record {s:?} is not in the calendars"));
        let SpanRef::Leaf(v, id) = s else {
            return Err(MatchError::Internal(format!("{s:?} is not a leaf's hold")));
        };
        let (_, start, end, units, jobs) = self.leaves.hold(id).ok_or_else(gone)?;
        let dur = u64::try_from(end - start).unwrap_or(0);
        self.remove(s)?;
        let (v, mut out) = (VertexId(v), Vec::with_capacity(2));
        if units > 0 {
            self.record_on(v, start, dur, Some(units), 0, &mut out)?;
        }
        let units_part = out.pop();
        if jobs > 0 {
            self.record_on(v, start, dur, None, jobs, &mut out)?;
        }
        Ok((units_part, out.pop()))
    }

    /// Cuts each amount of `needs` to what `v`'s aggregate has free during the window:
    /// where the totals fell below what is recorded (a vertex below was removed while a job
    /// that is not gone held it), as Fluxion's planner cuts its remaining units at 0.
    fn cut_to_free(&self, v: VertexId, at: i64, dur: u64, needs: &mut [(u32, i64)]) {
        let Some(agg) = self.aggregate(v) else {
            return;
        };
        for (r, n) in needs.iter_mut() {
            if let Some(k) = agg.ranks.iter().position(|x| x == r) {
                *n = (*n).min(agg.cal.avail_during(at, dur, k)).max(0);
            }
        }
    }
}
