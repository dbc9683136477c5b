//! Property test of the core: random sequences of submits (with retried keys, some
//! requeueable), cancels by owners, strangers and admins, clock ticks, queue stops and
//! starts, ownership changes, nodes marked down and up, and restarts (the core is dropped
//! and a new one restored from the journal records the old one produced, kept in an
//! in-memory journal). Submits and cancels are batched until the next tick, as the driver
//! batches them.
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
//! - every `Released` report names nodes no running job holds;
//! - the core's own invariants hold (`ShardCore::invariants`: the node table, the job
//!   table, the queue manager and the per-node counts agree), and the journal's bytes read
//!   back exactly as the core's in-memory journal model (`MemJournal`) says.
//!
//! The model and its steps are in `model.rs`, the move commands in `moves.rs`, the checks
//! after every step in `checks.rs`, the journal's bytes in `disk.rs`.

mod checks;
mod disk;
mod model;
mod moves;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;

use disk::DiskImage;
use model::{Model, new_core};

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
            journal: DiskImage::default(),
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
