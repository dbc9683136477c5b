//! Property test of the core: random sequences of submits (with retried keys, some
//! requeueable), cancels by owners, strangers and admins, clock ticks, queue stops and
//! starts, ownership changes, nodes marked down and up, and restarts (the core is dropped and a new one restored from the journal records the old
//! one produced, kept in an in-memory journal).
//! Submits and cancels are batched until the next tick, as the driver batches them.
//! After every step:
//! - every job id handed out is in the table exactly once, and the table agrees with the
//!   queue manager on which jobs are pending and which are running;
//! - a retried key got the first job back;
//! - the matcher's independent checker finds no over-allocation;
//! - no job the policy looks at could start now yet waits (the cluster is used when it
//!   has room);
//! - a job that started did so only on nodes the shard owned at that moment;
//! - no job runs on a node marked down (it failed, or went back to pending if it allowed
//!   requeue), and a down node stays down across ownership changes and restarts;
//! - a restart loses and duplicates nothing: every job comes back in the same state, with
//!   the same times, nodes and owner, pending jobs in the same order, and retried keys and
//!   new ids keep working after it.
//!
//! Node moves interleave with all of this: `Release`, `Incoming`, `Acquire`, `Reclaim`,
//! `Withdraw` and `CancelJobs` with current, repeated and stale generations, and restarts
//! rebuild the core with `ShardCore::restored` from an assignment made of what the move
//! machine owns and receives (as the coordinator's intent would be). Additionally:
//! - no running job holds a node a move command left not owned or incoming (released,
//!   withdrawn): allocations exist only on nodes up or outgoing;
//! - every `Released` report names nodes no running job holds.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use shardsched_jobspec::Shorthand;
use shardsched_journal::{Batch, Write};
use shardsched_matcher::checker;
use shardsched_proto::msg::client_shard::{CancelResult, IdempotencyKey, Submit};
use shardsched_proto::msg::{Generation, JobId, JobState, NodeGen, QueueConfig};
use shardsched_proto::{Peer, Role};
use shardsched_qmanager::JobView;
use shardsched_shard::journal::{self, JournalRecord, Tables};
use shardsched_shard::{CoreOptions, ShardCore};

const NOW: u64 = 1_800_000_000_000;
const NODES: [&str; 4] = ["n0", "n1", "n2", "n3"];
const USERS: [&str; 3] = ["u0", "u1", "u2"];

#[derive(Clone, Debug)]
enum Op {
    Submit {
        user: usize,
        key: u8,
        nodes: Option<u64>,
        tasks: u64,
        duration: u64,
        requeue: bool,
    },
    Cancel {
        /// `USERS.len()` is the admin.
        who: usize,
        pick: usize,
    },
    Tick {
        advance_ms: u64,
    },
    QueueState {
        started: bool,
    },
    Own {
        mask: u8,
    },
    NodeState {
        node: usize,
        down: bool,
    },
    Restart,
    Move(MoveOp),
}

#[derive(Clone, Debug)]
enum MoveOp {
    Release {
        mask: u8,
        delta: i8,
    },
    Incoming {
        node: usize,
        delta: i8,
        in_ms: Option<u64>,
    },
    Acquire {
        node: usize,
        delta: i8,
    },
    Reclaim {
        node: usize,
        delta: i8,
    },
    Withdraw {
        node: usize,
        delta: i8,
    },
    CancelJobs {
        node: usize,
    },
}

fn move_op() -> impl Strategy<Value = MoveOp> {
    let delta = prop_oneof![1 => Just(-1i8), 2 => Just(0i8), 4 => Just(1i8)];
    prop_oneof![
        (1u8..16, delta.clone()).prop_map(|(mask, delta)| MoveOp::Release { mask, delta }),
        (0..NODES.len(), delta.clone(), prop::option::of(0u64..8_000))
            .prop_map(|(node, delta, in_ms)| MoveOp::Incoming { node, delta, in_ms }),
        (0..NODES.len(), delta.clone()).prop_map(|(node, delta)| MoveOp::Acquire { node, delta }),
        (0..NODES.len(), delta.clone()).prop_map(|(node, delta)| MoveOp::Reclaim { node, delta }),
        (0..NODES.len(), delta).prop_map(|(node, delta)| MoveOp::Withdraw { node, delta }),
        (0..NODES.len()).prop_map(|node| MoveOp::CancelJobs { node }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..USERS.len(), 0u8..6, prop::option::of(1u64..=3), 1u64..=6, 0u64..=8, any::<bool>()).prop_map(
            |(user, key, nodes, tasks, duration, requeue)| {
                // Tasks must spread evenly over the nodes.
                let tasks = nodes.map_or(tasks, |n| n * tasks.div_ceil(n).min(2));
                Op::Submit { user, key, nodes, tasks, duration, requeue }
            }
        ),
        2 => (0..=USERS.len(), any::<usize>()).prop_map(|(who, pick)| Op::Cancel { who, pick }),
        2 => (0u64..3_000).prop_map(|advance_ms| Op::Tick { advance_ms }),
        2 => Just(Op::Tick { advance_ms: 0 }),
        1 => any::<bool>().prop_map(|started| Op::QueueState { started }),
        1 => (0u8..16).prop_map(|mask| Op::Own { mask }),
        1 => (0..NODES.len(), any::<bool>()).prop_map(|(node, down)| Op::NodeState { node, down }),
        1 => Just(Op::Restart),
        3 => move_op().prop_map(Op::Move),
    ]
}

fn owned(mask: u8, gens: &[u64; 4]) -> Vec<NodeGen> {
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

const CLUSTER: &str = "name = \"c\"\n[[nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 4\n";

fn queue_config(policy: &str) -> QueueConfig {
    QueueConfig {
        name: "batch".into(),
        queue_policy: policy.into(),
        match_policy: "lonode".into(),
        // Shallow, so that bursts exceed it.
        queue_depth: 3,
        reservation_depth: 4,
        default_duration_ms: 2_000,
        max_duration_ms: 6_000,
        definition: vec!["n0".into(), "n1".into(), "n2".into()],
        enabled: true,
        started: true,
    }
}

fn core_options() -> CoreOptions {
    CoreOptions {
        time_scale: 1.0,
        finished_retained: 10_000,
        retention_ms: u64::MAX,
        journal: true,
        ..CoreOptions::default()
    }
}

fn new_core(policy: &str, mask: u8) -> ShardCore {
    let graph = shardsched_resource::read_cluster_spec(CLUSTER).expect("cluster");
    let graph = shardsched_resource::keep_types(&graph, shardsched_resource::SCHEDULER_TYPES)
        .expect("graph");
    let queue = queue_config(policy);
    ShardCore::with_graph(graph, &queue, 3, &owned(mask, &[1; 4]), core_options()).expect("core")
}

/// The journal as the committer would leave it, in memory: table → key → value.
#[derive(Default)]
struct MemJournal {
    tables: BTreeMap<String, BTreeMap<u64, Vec<u8>>>,
    metas: BTreeMap<String, Vec<u8>>,
}

impl MemJournal {
    fn commit(&mut self, records: &[JournalRecord]) {
        let batch: Batch = journal::to_batch(records).expect("encode");
        for w in batch.writes() {
            match w {
                Write::Put { table, key, value } => {
                    self.tables
                        .entry(table.clone())
                        .or_default()
                        .insert(*key, value.clone());
                }
                Write::Delete { table, key } => {
                    self.tables.entry(table.clone()).or_default().remove(key);
                }
                Write::DeleteBelow { table, below } => {
                    self.tables
                        .entry(table.clone())
                        .or_default()
                        .retain(|k, _| k >= below);
                }
                Write::PutMeta { name, value } => {
                    self.metas.insert(name.clone(), value.clone());
                }
                Write::DeleteMeta { name } => {
                    self.metas.remove(name);
                }
            }
        }
    }

    fn restored(&self) -> journal::Restored {
        let rows = |t: &str| -> Vec<(u64, Vec<u8>)> {
            self.tables
                .get(t)
                .map(|m| m.iter().map(|(k, v)| (*k, v.clone())).collect())
                .unwrap_or_default()
        };
        let tables = Tables {
            jobs: rows(journal::JOBS_TABLE),
            runs: rows(journal::RUNS_TABLE),
            ends: rows(journal::ENDS_TABLE),
            metas: self.metas.clone(),
        };
        journal::restored(std::path::Path::new("mem.redb"), tables).expect("decode")
    }
}

struct Model {
    core: ShardCore,
    policy: &'static str,
    mask: u8,
    journal: MemJournal,
    now: u64,
    /// Every id handed out (first submits only).
    ids: Vec<JobId>,
    /// (user, key) → the id its first submit got.
    keys: HashMap<(usize, u8), JobId>,
    /// Jobs seen running, with the nodes they started on.
    started: BTreeMap<JobId, Vec<String>>,
    /// The newest generation handed out per node (the coordinator's).
    gens: [u64; 4],
    /// Nodes `Own` took away while a job ran on them (a coordinator never does that
    /// without a `Release`): exempt from the move check until their jobs are gone.
    yanked: BTreeSet<String>,
}

impl Model {
    fn step(&mut self, op: &Op) {
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
                    .set_node_state(self.now, &[NODES[node].to_owned()], down, "test")
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
    fn restart(&mut self) {
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
                (old.state, &old.owner, old.key, old.priority, old.submit_ms),
                (new.state, &new.owner, new.key, new.priority, new.submit_ms),
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

    fn submit(
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
            priority: Some(u32::from(key % 3)),
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

    fn cancel(&mut self, who: usize, pick: usize) {
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

    /// Checks after `op`; liveness only after a tick (submits and cancels wait for the
    /// batch's scheduling pass, as in the driver).
    fn check(&mut self, op: &Op) {
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
        assert_eq!(pending, qm.pending_len() + qm.waiting_len());
        assert_eq!(running, qm.running_len());
        let m = qm.matcher();
        let allocs: Vec<(u64, &shardsched_matcher::Allocation)> =
            m.jobs().map(|(id, j)| (id, &j.alloc)).collect();
        let violations = checker::check(&m.graph, &allocs);
        assert!(violations.is_empty(), "{violations:?}");
        self.check_moves();
    }
}

impl Model {
    /// A generation for a command about node `i`: the current one moved by `delta` (a
    /// positive delta is a new generation, as the coordinator would hand out).
    fn generation(&mut self, i: usize, delta: i8) -> Generation {
        let g = match delta {
            d if d > 0 => {
                self.gens[i] += 1;
                self.gens[i]
            }
            0 => self.gens[i],
            _ => self.gens[i].saturating_sub(1),
        };
        Generation(g)
    }

    fn move_step(&mut self, m: &MoveOp) {
        use shardsched_proto::msg::MoveId;
        use shardsched_proto::msg::coord_shard::{
            Acquire, CancelJobs, Incoming, IncomingNode, Reclaim, Release, Withdraw,
        };
        let ng = |node: usize, generation: Generation| NodeGen {
            node: NODES[node].to_owned(),
            generation,
        };
        let now = self.now;
        // Each command goes where the coordinator would send it: Release to the owner,
        // Incoming/Withdraw to a shard that does not own the node, Acquire to the
        // recipient, Reclaim to the donor.
        use shardsched_shard::moves::Holding as H;
        let holding = |core: &ShardCore, i: usize| core.moves().entry(NODES[i]).holding;
        let fits = match *m {
            MoveOp::Release { .. } | MoveOp::CancelJobs { .. } => true,
            MoveOp::Incoming { node, .. } | MoveOp::Withdraw { node, .. } => {
                matches!(holding(&self.core, node), H::NotOwned | H::Incoming { .. })
            }
            MoveOp::Acquire { node, .. } => {
                !matches!(holding(&self.core, node), H::Outgoing { .. })
            }
            MoveOp::Reclaim { node, .. } => {
                !matches!(holding(&self.core, node), H::Incoming { .. })
            }
        };
        if !fits {
            return;
        }
        match *m {
            MoveOp::Release { mask, delta } => {
                let owners: Vec<usize> = (0..NODES.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .filter(|&i| matches!(holding(&self.core, i), H::Owned | H::Outgoing { .. }))
                    .collect();
                let nodes: Vec<NodeGen> = owners
                    .into_iter()
                    .map(|i| {
                        let g = self.generation(i, delta);
                        ng(i, g)
                    })
                    .collect();
                let move_id = MoveId(nodes.iter().map(|n| n.generation.0).max().unwrap_or(0));
                self.core.handle_release(now, &Release { move_id, nodes });
            }
            MoveOp::Incoming { node, delta, in_ms } => {
                let g = self.generation(node, delta);
                self.core.handle_incoming(
                    now,
                    &Incoming {
                        move_id: MoveId(g.0),
                        nodes: vec![IncomingNode {
                            node: ng(node, g),
                            expected_free_ms: in_ms.map(|d| now + d),
                        }],
                    },
                );
            }
            MoveOp::Acquire { node, delta } => {
                let g = self.generation(node, delta);
                self.core.handle_acquire(
                    now,
                    &Acquire {
                        move_id: MoveId(g.0),
                        nodes: vec![ng(node, g)],
                        flags: BTreeMap::new(),
                    },
                );
            }
            MoveOp::Reclaim { node, delta } => {
                let g = self.generation(node, delta);
                self.core.handle_reclaim(
                    now,
                    &Reclaim {
                        move_id: MoveId(g.0),
                        nodes: vec![ng(node, g)],
                    },
                );
            }
            MoveOp::Withdraw { node, delta } => {
                let g = self.generation(node, delta);
                self.core.handle_withdraw(
                    now,
                    &Withdraw {
                        move_id: MoveId(g.0),
                        nodes: vec![ng(node, g)],
                    },
                );
            }
            MoveOp::CancelJobs { node } => {
                let entry = self.core.moves().entry(NODES[node]);
                let move_id = match entry.holding {
                    shardsched_shard::moves::Holding::Outgoing { move_id } => move_id,
                    _ => MoveId(entry.generation.0),
                };
                self.core.handle_cancel_jobs(
                    now,
                    &CancelJobs {
                        move_id,
                        nodes: vec![ng(node, entry.generation)],
                    },
                );
            }
        }
    }

    /// The core a restarted shard builds: the coordinator's assignment lists what the move
    /// machine owned and received (at their generations), and the journal brings back the
    /// rest.
    fn restored_core(&self, restored: &journal::Restored) -> ShardCore {
        use shardsched_proto::msg::coord_shard::IncomingNode;
        use shardsched_proto::msg::shard_coord::Assignment;
        use shardsched_proto::msg::{ClusterDescription, ClusterFormat};
        use shardsched_shard::moves::Holding;
        let mut owned = Vec::new();
        let mut incoming = Vec::new();
        for (name, e) in self.core.moves().entries() {
            let node = NodeGen {
                node: name.to_owned(),
                generation: e.generation,
            };
            match e.holding {
                Holding::Owned => owned.push(node),
                Holding::Incoming {
                    move_id,
                    expected_free_ms,
                } => incoming.push((
                    move_id,
                    IncomingNode {
                        node,
                        expected_free_ms,
                    },
                )),
                _ => {}
            }
        }
        // The coordinator knows the admin flags and hands them back.
        let mut flags: BTreeMap<String, shardsched_proto::msg::NodeFlags> = BTreeMap::new();
        for (name, reason) in self.core.down_nodes() {
            flags.entry(name.clone()).or_default().down = Some(reason.clone());
        }
        for (name, reason) in self.core.drained_nodes() {
            flags.entry(name.clone()).or_default().drained = Some(reason.clone());
        }
        let assignment = Assignment {
            generator_id: 3,
            cluster: ClusterDescription {
                format: ClusterFormat::Spec,
                text: CLUSTER.into(),
                load_allowlist: Vec::new(),
            },
            queue: queue_config(self.policy),
            owned,
            incoming,
            flags,
        };
        let (core, _) =
            ShardCore::restored(&assignment, core_options(), self.now, restored).expect("restore");
        core
    }

    /// The move invariants: allocations only on nodes up or outgoing (but those `Own` took
    /// away), and `Released` only for nodes no job holds.
    fn check_moves(&mut self) {
        use shardsched_shard::moves::Holding;
        let mut held: BTreeSet<String> = BTreeSet::new();
        for job in self.core.jobs().filter(|j| j.state == JobState::Running) {
            held.extend(job.nodes.iter().cloned());
        }
        self.yanked.retain(|n| held.contains(n));
        for node in &held {
            if self.yanked.contains(node) {
                continue;
            }
            let holding = self.core.moves().entry(node).holding;
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_job_is_accounted_for_and_nothing_is_over_allocated(
        policy in prop::sample::select(vec!["fcfs", "easy", "hybrid", "conservative"]),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut model = Model {
            core: new_core(policy, 0b0011),
            policy,
            mask: 0b0011,
            journal: MemJournal::default(),
            now: NOW,
            ids: Vec::new(),
            keys: HashMap::new(),
            started: BTreeMap::new(),
            gens: [1; 4],
            yanked: BTreeSet::new(),
        };
        for op in &ops {
            model.step(op);
            model.check(op);
        }
        // Run the clock out: with every defined node owned and up, everything ends.
        model.step(&Op::Own { mask: 0b0111 });
        for node in 0..NODES.len() {
            let op = Op::NodeState { node, down: false };
            model.step(&op);
            model.check(&op);
        }
        model.step(&Op::QueueState { started: true });
        for _ in 0..200 {
            match model.core.next_wakeup_ms() {
                Some(at) => {
                    model.now = model.now.max(at);
                    model.core.tick(model.now).expect("tick");
                    model.check(&Op::Tick { advance_ms: 0 });
                }
                None => break,
            }
        }
        for &id in &model.ids {
            let state = model.core.job(id).expect("job").state;
            prop_assert!(!state.is_active(), "{} still {}", id, state);
        }
    }
}
