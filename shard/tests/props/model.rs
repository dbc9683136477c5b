//! The model the property test drives: a core, its journal on "disk", and what the test
//! handed out (ids, keys, generations); its steps, restarts, submits and cancels.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_shard::{CancelResult, IdempotencyKey, Submit};
use shardsched_proto::msg::{Generation, JobId, JobState, NodeGen, QueueConfig};
use shardsched_proto::{Peer, Role};
use shardsched_shard::nodes::Flag;
use shardsched_shard::{CoreOptions, ShardCore};

use crate::disk::DiskImage;
use crate::{NODES, Op, USERS};

pub(crate) fn owned(mask: u8, gens: &[u64; 4]) -> Vec<NodeGen> {
    NODES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(i, n)| NodeGen {
            node: n.to_string(),
            generation: Generation(gens[i]),
        })
        .collect()
}

pub(crate) const CLUSTER: &str =
    "name = \"c\"\n[[nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 4\n";

pub(crate) fn queue_config(policy: &str) -> QueueConfig {
    QueueConfig {
        name: "batch".into(),
        queue_policy: shardsched_proto::msg::QueuePolicy::parse(policy).expect("a queue policy"),
        match_policy: shardsched_proto::msg::MatchPolicy::LoNode,
        // Shallow, so that bursts exceed it.
        queue_depth: 3,
        reservation_depth: 4,
        default_duration_ms: 2_000,
        max_duration_ms: 6_000,
        // Every node the steps hand out: a shard's graph holds its definition only, and
        // the coordinator hands a queue only nodes of its definition.
        definition: NODES.iter().map(|n| n.to_string()).collect(),
        enabled: true,
        started: true,
        array_elements_max: shardsched_proto::limits::ARRAY_ELEMENTS_DEFAULT,
    }
}

pub(crate) fn core_options() -> CoreOptions {
    CoreOptions {
        time_scale: 1.0,
        finished_retained: 10_000,
        retention_ms: u64::MAX,
        journal: true,
        ..CoreOptions::default()
    }
}

pub(crate) fn new_core(policy: &str, mask: u8) -> ShardCore {
    let graph = shardsched_resource::read_cluster_spec(CLUSTER).expect("cluster");
    let graph = shardsched_resource::keep_types(&graph, shardsched_resource::SCHEDULER_TYPES)
        .expect("graph");
    let queue = queue_config(policy);
    ShardCore::with_graph(graph, &queue, 3, &owned(mask, &[1; 4]), core_options()).expect("core")
}

pub(crate) struct Model {
    pub(crate) core: ShardCore,
    pub(crate) policy: &'static str,
    pub(crate) mask: u8,
    pub(crate) journal: DiskImage,
    pub(crate) now: u64,
    /// Every id handed out (first submits only).
    pub(crate) ids: Vec<JobId>,
    /// (user, key) → the id its first submit got.
    pub(crate) keys: HashMap<(usize, u8), JobId>,
    /// Jobs seen running, with the nodes they started on.
    pub(crate) started: BTreeMap<JobId, Vec<String>>,
    /// The newest generation handed out per node (the coordinator's).
    pub(crate) gens: [u64; 4],
    /// Nodes `Own` took away while a job ran on them (a coordinator never does that
    /// without a `Release`): exempt from the move check until their jobs are gone.
    pub(crate) yanked: BTreeSet<String>,
}

impl Model {
    pub(crate) fn step(&mut self, op: &Op) {
        match *op {
            Op::Submit {
                user,
                key,
                nodes,
                tasks,
                duration,
                requeue,
            } => self.submit(user, key, nodes, tasks, duration, requeue),
            Op::Cancel { who, pick } => self.cancel(who, pick),
            Op::Tick { advance_ms } => {
                self.now += advance_ms;
                self.core.tick(self.now).expect("tick");
            }
            Op::QueueState { started } => {
                self.core.set_queue_state(true, started);
                self.core.tick(self.now).expect("tick");
            }
            Op::Own { mask } => {
                self.mask = mask;
                self.core
                    .set_owned(&owned(mask, &self.gens))
                    .expect("owned");
                for job in self.core.jobs().filter(|j| j.state == JobState::Running) {
                    for node in &job.nodes {
                        if !self.core.owned().contains_key(node) {
                            self.yanked.insert(node.clone());
                        }
                    }
                }
                self.core.tick(self.now).expect("tick");
            }
            Op::Move(ref m) => {
                self.move_step(m);
                self.core.tick(self.now).expect("tick");
            }
            Op::NodeState { node, down } => {
                self.core
                    .set_node_flag(
                        self.now,
                        &[NODES[node].to_owned()],
                        Flag::Down,
                        down.then_some("test"),
                    )
                    .expect("node state");
                self.core.tick(self.now).expect("tick");
            }
            Op::Restart => self.restart(),
        }
        // The driver commits after every batch; a crash loses only what was not committed,
        // which was never acknowledged.
        let records = self.core.take_journal();
        self.journal.commit(&records);
    }

    /// Ends the batch in progress (the driver commits a batch only after its tick), drops
    /// the core and restores a new one from the journal, as a restarted shard does with
    /// the coordinator's assignment (same nodes, same queue state).
    pub(crate) fn restart(&mut self) {
        self.core.tick(self.now).expect("tick");
        let records = self.core.take_journal();
        self.journal.commit(&records);
        let before: BTreeMap<JobId, shardsched_shard::JobRecord> =
            self.core.jobs().map(|j| (j.id, j.clone())).collect();
        let order_before: Vec<u64> = self.core.queue_manager().pending_order().collect();
        let started = self.core.config().started;

        let restored = self.journal.restored();
        let mut core = self.restored_core(&restored);
        core.set_queue_state(true, started);
        assert_eq!(
            core.down_nodes(),
            self.core.down_nodes(),
            "down nodes after a restart"
        );
        let after: BTreeMap<JobId, shardsched_shard::JobRecord> =
            core.jobs().map(|j| (j.id, j.clone())).collect();
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "the same jobs after a restart"
        );
        for (id, old) in &before {
            let new = &after[id];
            assert_eq!(
                (old.state, &old.owner, old.key, old.urgency, old.submit_ms),
                (new.state, &new.owner, new.key, new.urgency, new.submit_ms),
                "{id}"
            );
            assert_eq!(
                (
                    old.start_ms,
                    old.end_ms,
                    &old.nodes,
                    old.duration_ms,
                    &old.r_json
                ),
                (
                    new.start_ms,
                    new.end_ms,
                    &new.nodes,
                    new.duration_ms,
                    &new.r_json
                ),
                "{id}"
            );
            // (The journal keeps a job's last run: the events of runs before a requeue are
            // not brought back.)
            let requeued = old.events.iter().any(|e| e.name == "requeue");
            if !old.state.is_active() && !requeued {
                assert_eq!(old.reason, new.reason, "{id}");
                assert_eq!(old.events.len(), new.events.len(), "{id}: {:?}", new.events);
            }
        }
        let order_after: Vec<u64> = core.queue_manager().pending_order().collect();
        // A requeued job went back behind the jobs of its priority submitted in the same
        // second (the queue manager orders those by arrival); a restart puts it back in
        // submission order. Every other job keeps its place exactly.
        let requeued: BTreeSet<u64> = before
            .values()
            .filter(|j| j.events.iter().any(|e| e.name == "requeue"))
            .map(|j| j.id.0)
            .collect();
        let others = |order: &[u64]| -> Vec<u64> {
            order
                .iter()
                .copied()
                .filter(|id| !requeued.contains(id))
                .collect()
        };
        assert_eq!(
            others(&order_before),
            others(&order_after),
            "pending order after a restart"
        );
        let sorted = |order: &[u64]| -> BTreeSet<u64> { order.iter().copied().collect() };
        assert_eq!(sorted(&order_before), sorted(&order_after));
        assert_eq!(core.last_job_id(), self.core.last_job_id());
        self.core = core;
        self.core.tick(self.now).expect("tick");
    }

    pub(crate) fn submit(
        &mut self,
        user: usize,
        key: u8,
        nodes: Option<u64>,
        tasks: u64,
        duration: u64,
        requeue: bool,
    ) {
        let mut jobspec = Shorthand {
            nodes,
            tasks: Some(tasks),
            duration,
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("jobspec");
        if requeue {
            jobspec
                .attributes
                .system_other
                .insert("requeue".into(), serde_json::Value::Bool(true));
        }
        let submit = Submit {
            idempotency_key: IdempotencyKey([key; 16]),
            jobspec_json: jobspec.to_json().to_string(),
            urgency: Some(14 + key % 3),
            array: None,
            signature: None,
        };
        let known = self.keys.get(&(user, key)).copied();
        match self.core.handle_submit(self.now, USERS[user], &submit) {
            Ok(s) if s.duplicate => assert_eq!(Some(s.id), known, "a retry gets its first job"),
            Ok(s) => {
                assert_eq!(known, None, "a known key must come back as a duplicate");
                assert!(!self.ids.contains(&s.id), "ids are unique");
                self.ids.push(s.id);
                self.keys.insert((user, key), s.id);
            }
            Err(refusal) => assert_eq!(known, None, "refused a known key: {refusal}"),
        }
    }

    pub(crate) fn cancel(&mut self, who: usize, pick: usize) {
        if self.ids.is_empty() {
            return;
        }
        let id = self.ids[pick % self.ids.len()];
        let peer = match USERS.get(who) {
            Some(name) => Peer::new(Role::User, name).expect("peer"),
            None => Peer::new(Role::Admin, "root").expect("peer"),
        };
        let before = self.core.job(id).expect("job").clone();
        let outcome = self.core.handle_cancel(self.now, &peer, &[id]);
        let after = self.core.job(id).expect("job");
        let expected = if !peer.may_cancel(&before.owner) {
            CancelResult::Forbidden
        } else if before.state.is_active() {
            CancelResult::Cancelled
        } else {
            CancelResult::AlreadyInactive
        };
        assert_eq!(outcome[0].result, expected);
        if expected == CancelResult::Cancelled {
            assert_eq!(after.state, JobState::Cancelled);
        } else {
            assert_eq!(after.state, before.state);
        }
    }
}
