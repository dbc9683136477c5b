//! Records beside the jobs' books: a job's records under its other state, and records no
//! cancel reaches any more.
//!
//! A job id matched again under its other state: only resource-query sessions do it, when
//! they hand a job id out again after a match's writer failed (the match stays recorded).
//! Fluxion keeps a vertex's plan records in two maps by job id, allocations and
//! reservations (`traversers/dfu_impl_update.cpp:187-193`), and its exclusivity and
//! pruning-filter records in maps by job id alone. So a match under an id already held
//! replaces, where it holds, the records of its own state and the job-keyed ones (those
//! replaced stay taken for good: see `Matcher::record_as`), and leaves the other state's
//! plan records where they are: the job is then allocated and reserved at once, and `find`
//! sees both (its twin). A cancel takes, at each vertex, the allocation's plan record if
//! there is one, else the reservation's (`dfu_impl_update.cpp:544-563`): a reservation
//! under an allocation of the same id stays taken for good, and `find` still sees it
//! reserved, though no longer tagged with the job.

use std::collections::HashSet;

use super::{Allocation, JobRecord, JobState, MatchError, Matcher, SpanRef};

/// A record beside the jobs' books.
#[derive(Clone, Debug)]
pub(crate) struct SideRecord {
    pub jobid: u64,
    pub kind: Side,
    pub record: JobRecord,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// The job's records under its other state: cancelled with it.
    Twin,
    /// Beyond any cancel, taken for good: what a partial cancel left where Fluxion's walk
    /// no longer reaches (still tagged with the job), or a reservation a cancel left under
    /// the same job's allocation (`tagged: false`).
    Orphan { tagged: bool },
}

impl SideRecord {
    /// Whether `find` sees its vertices tagged with the job (`jobid-tag`).
    pub fn tagged(&self) -> bool {
        self.kind != Side::Orphan { tagged: false }
    }
}

/// A vertex's own plan record (the maps by state), as against the job-keyed ones.
fn is_plan(s: SpanRef) -> bool {
    matches!(s, SpanRef::Leaf(..) | SpanRef::Plan(..))
}

impl Matcher {
    /// Job `jobid`'s records under its other state.
    pub(crate) fn twins_of(&self, jobid: u64) -> impl Iterator<Item = &JobRecord> {
        self.side
            .iter()
            .filter(move |s| s.jobid == jobid && s.kind == Side::Twin)
            .map(|s| &s.record)
    }

    /// Keeps `record`, beyond any cancel.
    pub(crate) fn orphan(&mut self, jobid: u64, record: JobRecord, tagged: bool) {
        self.side.push(SideRecord {
            jobid,
            kind: Side::Orphan { tagged },
            record,
        });
    }

    /// Job `jobid`'s twins go beyond any cancel with its record (a partial cancel).
    pub(crate) fn orphan_twins(&mut self, jobid: u64) {
        for s in self.side.iter_mut() {
            if s.jobid == jobid && s.kind == Side::Twin {
                s.kind = Side::Orphan { tagged: true };
            }
        }
    }

    /// Before job `jobid` is recorded again as `state` holding `held`: its twins' records
    /// there that the new match replaces leave their books (they stay taken).
    pub(crate) fn twins_give_way(&mut self, jobid: u64, state: JobState, held: &HashSet<u32>) {
        let st = &self.state;
        for s in self.side.iter_mut() {
            if s.jobid != jobid || s.kind != Side::Twin {
                continue;
            }
            let twin = &mut s.record;
            let other_state = twin.state != state;
            twin.spans
                .retain(|&s| !held.contains(&st.span_vertex(s).0) || (other_state && is_plan(s)));
            if !other_state {
                twin.alloc
                    .vertices_mut()
                    .retain(|av| !held.contains(&av.v.0));
            }
        }
        self.side
            .retain(|s| s.kind != Side::Twin || !s.record.alloc.is_empty());
    }

    /// Keeps `old`, job `jobid`'s record so far (its covers taken apart), beside a new
    /// match of the other state holding `held`: its job-keyed records there give way.
    pub(crate) fn keep_twin(&mut self, jobid: u64, mut old: JobRecord, held: &HashSet<u32>) {
        let st = &self.state;
        old.spans
            .retain(|&s| is_plan(s) || !held.contains(&st.span_vertex(s).0));
        self.side.push(SideRecord {
            jobid,
            kind: Side::Twin,
            record: old,
        });
    }

    /// Cancels job `jobid`, whose record `job` left the books already, and its twins: at
    /// each vertex both hold, the reservation's plan record stays (an orphan). Returns the
    /// job's allocation.
    pub(crate) fn take_with_twins(
        &mut self,
        jobid: u64,
        mut job: JobRecord,
    ) -> Result<Allocation, MatchError> {
        let tree = crate::tree_of(&self.graph, &self.subtree);
        self.state.uncover(&self.graph, tree, &mut job.spans)?;
        let mut records = vec![job];
        let mut i = 0;
        while i < self.side.len() {
            if self.side[i].jobid == jobid && self.side[i].kind == Side::Twin {
                records.push(self.side.swap_remove(i).record);
            } else {
                i += 1;
            }
        }
        let allocated_at: HashSet<u32> = records
            .iter()
            .filter(|r| r.state == JobState::Allocated)
            .flat_map(|r| r.alloc.iter().map(|av| av.v.0))
            .collect();
        for r in &records {
            let mut left = Vec::new();
            for &s in &r.spans {
                let v = self.state.span_vertex(s).0;
                if r.state == JobState::Reserved && is_plan(s) && allocated_at.contains(&v) {
                    left.push(s);
                } else {
                    self.state.remove(s)?;
                }
            }
            if !left.is_empty() {
                let st = &self.state;
                let at: HashSet<u32> = left.iter().map(|&s| st.span_vertex(s).0).collect();
                let mut alloc = r.alloc.clone();
                alloc.vertices_mut().retain(|av| at.contains(&av.v.0));
                let record = JobRecord {
                    state: JobState::Reserved,
                    alloc,
                    spans: left,
                    partial: true,
                };
                self.orphan(jobid, record, false);
            }
        }
        Ok(records.swap_remove(0).alloc)
    }

    /// The vertices job `jobid` holds, its twins' included (Fluxion's job tags).
    pub(crate) fn tagged(&self, job: &JobRecord, jobid: u64) -> HashSet<u32> {
        job.alloc
            .iter()
            .chain(self.twins_of(jobid).flat_map(|t| t.alloc.iter()))
            .map(|av| av.v.0)
            .collect()
    }

    /// Whether job `jobid` holds records under its other state too.
    pub(crate) fn has_twins(&self, jobid: u64) -> bool {
        self.twins_of(jobid).next().is_some()
    }
}
