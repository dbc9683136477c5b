//! Records beside the jobs' books: the records of a job's earlier matches under the same
//! id, and records no cancel reaches any more.
//!
//! A job id matched again: only resource-query sessions do it, when they hand a job id out
//! again after a match's writer failed (the match stays recorded). Fluxion keeps a vertex's
//! records by job id: its plan record in one of two maps, allocations or reservations
//! (`traversers/dfu_impl_update.cpp:187-193`), written only where the match takes the
//! vertex exclusively; its exclusivity and pruning-filter records in maps by job id alone.
//! So a new match under an id already held replaces, at each vertex it holds, the earlier
//! records of the same map it writes (they stay in the calendars for good), and leaves the
//! others where they are: a plan record of the other state, or of the same state where the
//! new match does not take the vertex exclusively. The earlier match stays beside the new
//! one as a twin with what is left of its records; `find` sees both. A cancel takes, at
//! each vertex, the allocation's plan record if there is one, else the reservation's
//! (`dfu_impl_update.cpp:544-563`): a reservation under an allocation of the same id stays
//! taken for good, and `find` still sees it reserved, though no longer tagged with the
//! job. A leaf's hold is both its plan and its exclusivity record: it is split in two
//! where one part goes and the other stays.

use std::collections::{HashMap, HashSet};

use super::{Allocation, JobRecord, JobState, MatchError, Matcher, SpanRef};

/// A record beside the jobs' books.
#[derive(Clone, Debug)]
pub(crate) struct SideRecord {
    pub jobid: u64,
    pub kind: Side,
    pub record: JobRecord,
}

/// What a side record is to its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// An earlier match of the job under the same id: cancelled with it.
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

/// Which of Fluxion's per-vertex records a match wrote at a vertex.
#[derive(Clone, Copy, Default)]
struct Written {
    /// The plan record (the vertex taken exclusively).
    plan: bool,
    /// The exclusivity record (`x_spans`).
    count: bool,
    /// The pruning-filter record (`job2span`).
    aggregate: bool,
}

impl Matcher {
    /// Job `jobid`'s earlier matches under its id.
    pub(crate) fn twins_of(&self, jobid: u64) -> impl Iterator<Item = &JobRecord> {
        self.side
            .iter()
            .filter(move |s| s.jobid == jobid && s.kind == Side::Twin)
            .map(|s| &s.record)
    }

    /// Every record beside the books under job `jobid`'s id: its twins and its orphans.
    pub(crate) fn beside(&self, jobid: u64) -> impl Iterator<Item = &JobRecord> {
        self.side
            .iter()
            .filter(move |s| s.jobid == jobid)
            .map(|s| &s.record)
    }

    /// Whether job `jobid` holds records of an earlier match under its id.
    pub(crate) fn has_twins(&self, jobid: u64) -> bool {
        self.twins_of(jobid).next().is_some()
    }

    /// Keeps `record`, beyond any cancel.
    pub(crate) fn orphan(&mut self, jobid: u64, record: JobRecord, tagged: bool) {
        self.side.push(SideRecord {
            jobid,
            kind: Side::Orphan { tagged },
            record,
        });
    }

    /// Keeps the records `left` of a job that no cancel reaches any more, beyond any cancel:
    /// with the vertices of `alloc` they are on, in `state`. Nothing when none is left.
    pub(crate) fn orphan_left(
        &mut self,
        jobid: u64,
        state: JobState,
        alloc: &Allocation,
        left: Vec<SpanRef>,
        tagged: bool,
    ) {
        if left.is_empty() {
            return;
        }
        let at: HashSet<u32> = left.iter().map(|&s| self.state.span_vertex(s).0).collect();
        let mut alloc = alloc.clone();
        alloc.vertices_mut().retain(|av| at.contains(&av.v.0));
        let record = JobRecord {
            state,
            alloc,
            spans: left,
            partial: true,
            // (Its job's instants went with the record it was cut from.)
            in_times: false,
        };
        self.orphan(jobid, record, tagged);
    }

    /// Job `jobid`'s twins go beyond any cancel with its record (a partial cancel).
    pub(crate) fn orphan_twins(&mut self, jobid: u64) {
        for s in self.side.iter_mut() {
            if s.jobid == jobid && s.kind == Side::Twin {
                s.kind = Side::Orphan { tagged: true };
            }
        }
    }

    /// Job `jobid` is matched again as `state` with records `spans` (covers taken apart):
    /// `old`, its record so far (covers taken apart), and its earlier twins give way where
    /// the new match writes the same records, and stay beside it as twins.
    pub(crate) fn matched_again(
        &mut self,
        jobid: u64,
        old: JobRecord,
        state: JobState,
        spans: &[SpanRef],
    ) -> Result<(), MatchError> {
        let mut written: HashMap<u32, Written> = HashMap::new();
        for &s in spans {
            let w = written.entry(self.state.span_vertex(s).0).or_default();
            match s {
                SpanRef::Plan(..) => w.plan = true,
                SpanRef::Xcheck(..) => w.count = true,
                SpanRef::Agg(..) => w.aggregate = true,
                _ => {
                    let (units, jobs) = self.state.leaf_parts(s).unwrap_or((0, 0));
                    w.plan |= units > 0;
                    w.count |= jobs > 0;
                }
            }
        }
        let mut twins = self.take_twins(jobid);
        twins.push(old);
        for twin in &mut twins {
            let spans = std::mem::take(&mut twin.spans);
            twin.spans = self.give_way(spans, twin.state == state, &written)?;
        }
        let left = twins.into_iter().filter(|t| !t.spans.is_empty());
        self.side.extend(left.map(|record| SideRecord {
            jobid,
            kind: Side::Twin,
            record,
        }));
        Ok(())
    }

    /// Takes job `jobid`'s twins out of the side records.
    fn take_twins(&mut self, jobid: u64) -> Vec<JobRecord> {
        self.side
            .extract_if(.., |s| s.jobid == jobid && s.kind == Side::Twin)
            .map(|s| s.record)
            .collect()
    }

    /// What is left of an earlier match's records `spans` where a new one wrote `written`
    /// (`same_state`: in the same map of plan records).
    fn give_way(
        &mut self,
        spans: Vec<SpanRef>,
        same_state: bool,
        written: &HashMap<u32, Written>,
    ) -> Result<Vec<SpanRef>, MatchError> {
        let mut kept = Vec::with_capacity(spans.len());
        for s in spans {
            let w = written
                .get(&self.state.span_vertex(s).0)
                .copied()
                .unwrap_or_default();
            let plan_goes = same_state && w.plan;
            match s {
                SpanRef::Plan(..) if plan_goes => {}
                SpanRef::Xcheck(..) if w.count => {}
                SpanRef::Agg(..) if w.aggregate => {}
                SpanRef::Leaf(..) if plan_goes || w.count => {
                    let (units, jobs) = self.state.leaf_parts(s).unwrap_or((0, 0));
                    let units_stay = units > 0 && !plan_goes;
                    let count_stays = jobs > 0 && !w.count;
                    if units_stay || count_stays {
                        // One part stays in the books, the other in the calendars only.
                        let (units, count) = self.state.split_leaf(s)?;
                        kept.extend(if units_stay { units } else { count });
                    }
                }
                _ => kept.push(s),
            }
        }
        Ok(kept)
    }

    /// Cancels job `jobid`, whose record `job` left the books already, and its twins: at
    /// each vertex where one holds a plan record in allocations and another in
    /// reservations, the reservation's stays (an orphan). Returns the job's allocation.
    pub(crate) fn take_with_twins(
        &mut self,
        jobid: u64,
        mut job: JobRecord,
    ) -> Result<Allocation, MatchError> {
        let tree = crate::tree_of(&self.graph, &self.subtree);
        self.state.uncover(&self.graph, tree, &mut job.spans)?;
        let mut records = vec![job];
        records.extend(self.take_twins(jobid));
        let has_units = |m: &Matcher, s: SpanRef| match s {
            SpanRef::Plan(..) => true,
            _ => m.state.leaf_parts(s).is_some_and(|(units, _)| units > 0),
        };
        let allocated_at: HashSet<u32> = records
            .iter()
            .filter(|r| r.state == JobState::Allocated)
            .flat_map(|r| &r.spans)
            .filter(|&&s| has_units(self, s))
            .map(|&s| self.state.span_vertex(s).0)
            .collect();
        for r in &records {
            let mut left = Vec::new();
            for &s in &r.spans {
                let v = self.state.span_vertex(s).0;
                if r.state != JobState::Reserved
                    || !has_units(self, s)
                    || !allocated_at.contains(&v)
                {
                    self.state.remove(s)?;
                } else if let SpanRef::Leaf(..) = s {
                    // Its plan part stays; its exclusivity part goes with the job.
                    let (units, count) = self.state.split_leaf(s)?;
                    left.extend(units);
                    if let Some(count) = count {
                        self.state.remove(count)?;
                    }
                } else {
                    left.push(s);
                }
            }
            self.orphan_left(jobid, JobState::Reserved, &r.alloc, left, false);
        }
        Ok(records.swap_remove(0).alloc)
    }

    /// The vertices job `jobid` holds, its twins' included (Fluxion's job tags).
    pub(crate) fn tagged_vertices(&self, job: &JobRecord, jobid: u64) -> HashSet<u32> {
        job.alloc
            .iter()
            .chain(self.twins_of(jobid).flat_map(|t| t.alloc.iter()))
            .map(|av| av.v.0)
            .collect()
    }
}
