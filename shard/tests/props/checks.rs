//! What the property test checks after every step.

use std::collections::{BTreeSet, HashMap};

use shardsched_matcher::checker;
use shardsched_proto::msg::{JobId, JobState};
use shardsched_qmanager::JobView;

use crate::Op;
use crate::model::Model;

impl Model {
    /// Checks after `op`; liveness only after a tick (submits and cancels wait for the
    /// batch's scheduling pass, as in the driver).
    pub(crate) fn check(&mut self, op: &Op) {
        if !matches!(op, Op::Submit { .. } | Op::Cancel { .. }) {
            self.check_no_job_left_behind();
        }
        let qm = self.core.queue_manager();
        let mut pending = 0;
        let mut running = 0;
        let all: Vec<&shardsched_shard::JobRecord> = self.core.jobs().collect();
        let table: BTreeSet<JobId> = all.iter().map(|j| j.id).collect();
        assert_eq!(table.len(), all.len(), "each job once");
        for &id in &self.ids {
            let job = self.core.job(id).expect("every job is accounted for");
            let view = qm.job(id.0);
            match job.state {
                JobState::Pending => {
                    pending += 1;
                    assert!(
                        matches!(view, Some(JobView::Pending { .. })),
                        "{id}: {view:?}"
                    );
                    assert!(job.nodes.is_empty());
                }
                JobState::Running => {
                    running += 1;
                    assert!(
                        matches!(view, Some(JobView::Running { .. })),
                        "{id}: {view:?}"
                    );
                    assert!(!job.nodes.is_empty());
                    for node in &job.nodes {
                        assert!(
                            !self.core.down_nodes().contains_key(node),
                            "{id} runs on {node}, which is down"
                        );
                    }
                }
                _ => {
                    assert_eq!(view, None, "{id} ended but the queue manager holds it");
                    assert!(job.end_ms.is_some());
                }
            }
            if job.state == JobState::Running && self.started.get(&id) != Some(&job.nodes) {
                let owned = self.core.owned();
                for node in &job.nodes {
                    assert!(
                        owned.contains_key(node),
                        "{id} started on {node}, not owned"
                    );
                }
                self.started.insert(id, job.nodes.clone());
            }
        }
        assert_eq!(
            table.len(),
            self.ids.len(),
            "no job the test did not submit"
        );
        let mut per_node: HashMap<&str, u32> = HashMap::new();
        for job in all.iter().filter(|j| j.state == JobState::Running) {
            for node in &job.nodes {
                *per_node.entry(node.as_str()).or_default() += 1;
            }
        }
        for node in self.core.status(self.now).nodes {
            let expected = per_node.get(node.name.as_str()).copied().unwrap_or(0);
            assert_eq!(node.jobs_running, expected, "{}", node.name);
        }
        assert_eq!(pending, qm.pending_len() + qm.waiting_len() + qm.held_len());
        assert_eq!(running, qm.running_len());
        let m = qm.matcher();
        let allocs: Vec<(u64, &shardsched_matcher::Allocation)> =
            m.jobs().map(|(id, j)| (id, &j.alloc)).collect();
        let violations = checker::check(&m.graph, &allocs);
        assert!(violations.is_empty(), "{violations:?}");
        self.check_moves();
        if let Err(broken) = self.core.invariants() {
            panic!("after {op:?}: {broken}");
        }
    }

    /// The move invariants: allocations only on nodes up or outgoing (but those `Own` took
    /// away), and `Released` only for nodes no job holds.
    fn check_moves(&mut self) {
        use shardsched_shard::nodes::Holding;
        let mut held: BTreeSet<String> = BTreeSet::new();
        for job in self.core.jobs().filter(|j| j.state == JobState::Running) {
            held.extend(job.nodes.iter().cloned());
        }
        self.yanked.retain(|n| held.contains(n));
        for node in &held {
            if self.yanked.contains(node) {
                continue;
            }
            let holding = self.core.nodes().entry(node).holding;
            assert!(
                matches!(holding, Holding::Owned | Holding::Outgoing { .. }),
                "a running job holds {node}, which is {holding:?} here"
            );
        }
        for report in self.core.take_released() {
            for n in &report.nodes {
                assert!(
                    !held.contains(&n.node),
                    "{} released with a job on it",
                    n.node
                );
            }
        }
    }

    /// Liveness: while the queue is started, none of the jobs the policy looks at (the
    /// first queue-depth pending ones without a reservation) could start now on the
    /// matcher's calendars, reservations included.
    fn check_no_job_left_behind(&self) {
        if !self.core.config().started {
            return;
        }
        let qm = self.core.queue_manager();
        let reserved: BTreeSet<u64> = qm.reservations().map(|(id, _)| id).collect();
        let mut probe = qm.matcher().clone();
        let now_s = i64::try_from(self.now / 1000).expect("time");
        // fcfs stops at its first blocked job.
        let looked_at = match qm.params().policy {
            shardsched_qmanager::QueuePolicy::Fcfs => 1,
            _ => qm.params().queue_depth,
        };
        for id in qm.pending_order().take(looked_at) {
            if reserved.contains(&id) {
                continue;
            }
            let job = self.core.job(shardsched_proto::Fluid(id)).expect("job");
            let mut jobspec = shardsched_jobspec::parse_json(&job.jobspec_json).expect("jobspec");
            let asked = jobspec.attributes.duration;
            jobspec.attributes.duration = qm
                .params()
                .effective_duration(asked)
                .expect("accepted duration");
            let outcome = probe
                .run(shardsched_matcher::MatchOp::Allocate, &jobspec, id, now_s)
                .expect("probe");
            assert!(
                !matches!(outcome, shardsched_matcher::MatchOutcome::Allocated(_)),
                "job {} could start now but waits: {:?}",
                job.id,
                job.reason
            );
        }
    }
}
