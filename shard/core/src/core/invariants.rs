//! What must hold between the core's parts after every input, checked whole by
//! [`ShardCore::invariants`] — the property tests call it after every step, a simulator
//! after every event, in release builds too. Each transition also `debug_assert!`s the part
//! it touched (cheaply, so that every test checks it for free): a node's generation never
//! goes back (`NodeTable::update`), the queue manager's availability of a node is the node
//! table's (`refresh_node`; so no outgoing node is up), a job starts only on nodes up here
//! and unflagged (`started`), a job the table has pending, running or ended is so in the
//! queue manager (`admit`, `mark_running`, `requeue`, `ended`), the live counts agree after
//! every tick, and a restored core passes the whole check. The whole check also recounts
//! what the limits count (`core/admission.rs`: each user's pending jobs, what running and
//! admitted jobs use), which is kept as jobs move and never recounted otherwise.
//!
//! What is *not* an invariant: that every running job is on a node this shard holds. A
//! re-registration's assignment may take an owned node that still runs jobs (the
//! coordinator moved it while the shard was away; its `Release` follows, and the jobs are
//! never disturbed). What is checked instead is that no job *starts* on such a node.

use std::collections::{BTreeSet, HashMap};

use shardsched_qmanager::{JobView, WaitReason};
use shardsched_resource::Status;
use shardsched_wire::msg::{JobId, JobState};

use super::ShardCore;
use super::exec::CoreExecutor;
use crate::nodes::Holding;

/// An invariant that does not hold, in words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("shard core invariant broken: {0}")]
pub struct Violation(pub String);

impl ShardCore {
    /// Checks every invariant of the module documentation, in time linear in the nodes and
    /// jobs; the first one broken is returned.
    pub fn invariants(&self) -> Result<(), Violation> {
        self.nodes_invariants()?;
        self.jobs_invariants()?;
        self.limits_invariants()?;
        self.per_node_invariants()
    }

    /// The node table against the definition and the queue manager.
    fn nodes_invariants(&self) -> Result<(), Violation> {
        let broken = |what: String| Err(Violation(what));
        for (name, _) in self.up_nodes() {
            if !self.cluster.definition.contains(name) {
                return broken(format!("{name} is up but outside the queue's definition"));
            }
        }
        let graph = &self.qm.matcher().graph;
        for (name, &v) in &self.cluster.vertices {
            let available = graph.status(v) == Status::Up;
            let outgoing = self
                .nodes
                .get(name)
                .is_some_and(|e| matches!(e.holding, Holding::Outgoing { .. }));
            if outgoing && (available || self.nodes.is_up(name)) {
                return broken(format!("{name} is outgoing but up"));
            }
            if available != self.placed_up(name) {
                let entry = self.nodes.entry(name);
                return broken(format!(
                    "{name}: the queue manager has it {} but the node table says {entry:?} \
                     (confirmed: {})",
                    if available { "up" } else { "down" },
                    self.nodes.is_confirmed()
                ));
            }
            let held = self.qm.hold_end(v).is_some();
            let wanted = self.wanted_hold_ms(name).is_some();
            if held != wanted {
                return broken(format!(
                    "{name}: held in the queue manager: {held}, held for an incoming move: \
                     {wanted}"
                ));
            }
        }
        Ok(())
    }

    /// The job table, the live sets and the queue manager agree on every job.
    fn jobs_invariants(&self) -> Result<(), Violation> {
        let broken = |what: String| Err(Violation(what));
        let (mut pending, mut running) = (0, 0);
        for job in self.jobs.table.iter() {
            let id = job.id;
            let view = self.qm.job(id.0);
            let ok = match job.state {
                JobState::Pending => {
                    pending += 1;
                    let held = matches!(
                        view,
                        Some(JobView::Pending {
                            reason: WaitReason::Held
                        })
                    );
                    if held != self.hold_of(job).is_some() {
                        return broken(format!(
                            "{id}: held in the queue manager: {held}, held by the shard: {:?}",
                            self.hold_of(job)
                        ));
                    }
                    self.jobs.pending.contains(&id) && matches!(view, Some(JobView::Pending { .. }))
                }
                JobState::Running => {
                    running += 1;
                    self.jobs.running.contains_key(&id)
                        && matches!(view, Some(JobView::Running { .. }))
                }
                _ => {
                    view.is_none()
                        && !self.jobs.pending.contains(&id)
                        && !self.jobs.running.contains_key(&id)
                }
            };
            if !ok {
                return broken(format!(
                    "{id} is {} in the job table, {view:?} in the queue manager",
                    job.state
                ));
            }
        }
        let qm_live = (
            self.qm.pending_len() + self.qm.waiting_len() + self.qm.held_len(),
            self.qm.running_len(),
        );
        let sets = (self.jobs.pending.len(), self.jobs.running.len());
        if (pending, running) != sets || sets != qm_live {
            return broken(format!(
                "live jobs (pending, running): table {:?}, live sets {sets:?}, queue manager \
                 {qm_live:?}",
                (pending, running)
            ));
        }
        let sim = matches!(self.options.executor, CoreExecutor::Sim);
        let ends: BTreeSet<(u64, JobId)> = if sim {
            self.jobs
                .running
                .iter()
                .map(|(&id, &end)| (end, id))
                .collect()
        } else {
            BTreeSet::new()
        };
        if ends != self.jobs.sim_ends {
            return broken("the sim ends are not the running jobs' ends".to_owned());
        }
        if let Some(id) = self
            .jobs
            .kill_requested
            .keys()
            .find(|id| !self.jobs.running.contains_key(*id))
        {
            return broken(format!("a kill is planned for {id}, which is not running"));
        }
        match self.ids.last {
            Some(last) if self.jobs.table.iter().any(|j| j.id > last) => {
                broken(format!("a job id above the last issued, {last}"))
            }
            _ => Ok(()),
        }
    }

    /// The running-jobs-per-node counts are the running jobs' nodes.
    fn per_node_invariants(&self) -> Result<(), Violation> {
        let mut counted: HashMap<&str, u32> = HashMap::new();
        for id in self.jobs.running.keys() {
            let Some(job) = self.jobs.table.get(*id) else {
                return Err(Violation(format!("{id} runs but the table lacks it")));
            };
            for node in &job.nodes {
                *counted.entry(node.as_str()).or_default() += 1;
            }
        }
        let kept: HashMap<&str, u32> = self
            .jobs
            .per_node
            .iter()
            .map(|(n, &c)| (n.as_str(), c))
            .collect();
        if counted != kept {
            return Err(Violation(format!(
                "running jobs per node {kept:?}, but the running jobs hold {counted:?}"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use shardsched_wire::msg::coord_shard::Release;
    use shardsched_wire::msg::{Generation, MoveId, NodeGen};

    use super::super::CoreOptions;
    use super::super::tests::{NOW, core_with, jobspec, submit};

    /// The check is only worth its calls if it sees a broken core: each part it compares,
    /// put out of step by hand, is reported.
    #[test]
    fn a_core_put_out_of_step_by_hand_is_reported() {
        let mut core = core_with(&["n0", "n1"], &["n0", "n1"], CoreOptions::default());
        let job = |core: &mut super::ShardCore, key| {
            core.handle_submit(NOW, "alice", &submit(key, jobspec(Some(1), None, 60)))
                .expect("accepted")
                .id
        };
        job(&mut core, 1);
        job(&mut core, 2);
        core.tick(NOW).expect("tick");
        // n1 still runs a job: it stays outgoing.
        let release = Release {
            move_id: MoveId(1),
            nodes: vec![NodeGen {
                node: "n1".into(),
                generation: Generation(2),
            }],
        };
        core.handle_release(NOW, &release);
        let id = job(&mut core, 3);
        core.tick(NOW).expect("tick");
        assert_eq!(core.invariants(), Ok(()));

        let n1 = core.cluster.vertices["n1"];
        core.qm.set_availability(n1, true).expect("availability");
        let broken = core.invariants().expect_err("outgoing but available");
        assert!(broken.0.contains("n1 is outgoing but up"), "{broken}");
        core.qm.set_availability(n1, false).expect("availability");
        assert_eq!(core.invariants(), Ok(()));

        core.jobs.pending.remove(&id);
        let broken = core
            .invariants()
            .expect_err("a pending job the live set lacks");
        assert!(broken.0.contains(&id.to_string()), "{broken}");
        core.jobs.pending.insert(id);

        *core.jobs.per_node.entry("n0".into()).or_default() += 1;
        let broken = core
            .invariants()
            .expect_err("a count with no job behind it");
        assert!(broken.0.contains("running jobs per node"), "{broken}");
    }
}
