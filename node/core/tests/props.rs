//! Random sequences of owners, launches, kills, renewals, ends, ticks and restarts: after
//! every step the core's invariants hold, every accepted launch came from the owner at its
//! generation on a node free of other queues' processes, no job launches or runs past its
//! shard's lease, and a restarted agent never holds a lease longer than the one it had.

mod common;

use std::collections::BTreeMap;

use common::{TIMEOUT_MS, job, launch, owner};
use proptest::prelude::*;
use shardsched_node_core::{Action, AgentCore, Recovered};
use shardsched_wire::msg::agent::{EndCause, JobEnd, JobOnNode, OwnerChange};

const QUEUES: [&str; 3] = ["alpha", "beta", "gamma"];

#[derive(Clone, Debug)]
enum Step {
    /// The coordinator names an owner at the current generation plus `bump` (0: same).
    Owner {
        queue: usize,
        bump: u64,
    },
    /// A launch from a queue at the generation it believes (current minus `behind`).
    Launch {
        queue: usize,
        job: u64,
        behind: u64,
    },
    Kill {
        queue: usize,
        job: u64,
    },
    Renew {
        queue: usize,
        seen: Vec<u64>,
    },
    Forget {
        queue: usize,
        job: u64,
    },
    Spawned {
        job: u64,
    },
    Ended {
        job: u64,
    },
    Advance {
        ms: u64,
    },
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    let queue = 0..QUEUES.len();
    let jobs = 0..6u64;
    prop_oneof![
        1 => (queue.clone(), 0..2u64).prop_map(|(queue, bump)| Step::Owner { queue, bump }),
        4 => (queue.clone(), jobs.clone(), 0..2u64)
            .prop_map(|(queue, job, behind)| Step::Launch { queue, job, behind }),
        1 => (queue.clone(), jobs.clone()).prop_map(|(queue, job)| Step::Kill { queue, job }),
        2 => (queue.clone(), prop::collection::vec(jobs.clone(), 0..3))
            .prop_map(|(queue, seen)| Step::Renew { queue, seen }),
        1 => (queue, jobs.clone()).prop_map(|(queue, job)| Step::Forget { queue, job }),
        2 => jobs.clone().prop_map(|job| Step::Spawned { job }),
        2 => jobs.prop_map(|job| Step::Ended { job }),
        2 => (0..TIMEOUT_MS).prop_map(|ms| Step::Advance { ms }),
        1 => Just(Step::Restart),
    ]
}

/// What the driver would hold across a restart: the supervisors and the persisted leases.
#[derive(Default)]
struct Disk {
    leases: BTreeMap<String, u64>,
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut core = AgentCore::new("node3", TIMEOUT_MS);
    let mut disk = Disk::default();
    let mut now = 0u64;
    let mut generation = 1u64;
    // The coordinator's word, which a restarted agent hears again at registration.
    let mut coordinator = owner(QUEUES[0], generation);
    core.handle_owner(now, coordinator.clone(), OwnerChange::Registered)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    for step in steps {
        match step {
            Step::Owner { queue, bump } => {
                generation += bump;
                let named = owner(QUEUES[queue], generation);
                if core
                    .handle_owner(now, named.clone(), OwnerChange::Acquired)
                    .is_ok()
                {
                    coordinator = named;
                }
            }
            Step::Launch {
                queue,
                job: n,
                behind,
            } => {
                let from = QUEUES[queue];
                let before = core.clone();
                let at = generation.saturating_sub(behind);
                if core
                    .handle_launch(now, from, launch("node3", job(n), at))
                    .is_ok()
                {
                    let owner = before.owner().expect("accepted with an owner");
                    prop_assert_eq!(&owner.queue, from);
                    prop_assert_eq!(owner.generation.0, at);
                    for other in QUEUES.iter().filter(|q| **q != from) {
                        prop_assert!(before.clean_of(other), "{} ran beside {}", other, from);
                    }
                }
            }
            Step::Kill { queue, job: n } => {
                let launcher = core.launcher(job(n)).map(str::to_owned);
                let result = core.handle_kill(now, QUEUES[queue], job(n), "kill");
                if let Some(launcher) = launcher {
                    prop_assert_eq!(result.is_ok(), launcher == QUEUES[queue]);
                }
            }
            Step::Renew { queue, seen } => {
                let seen: Vec<_> = seen.into_iter().map(job).collect();
                let report = core.handle_renew(now, QUEUES[queue], &seen);
                prop_assert_eq!(report, core.report());
            }
            Step::Forget { queue, job: n } => core.handle_forget(now, QUEUES[queue], &[job(n)]),
            Step::Spawned { job: n } => core.handle_spawned(now, job(n), 1000 + n as u32),
            Step::Ended { job: n } => core.handle_ended(
                now,
                job(n),
                JobEnd::without_status(EndCause::Cancelled, "gone"),
            ),
            Step::Advance { ms } => now += ms,
            Step::Restart => {
                let found: Vec<Recovered> = core
                    .report()
                    .jobs
                    .into_iter()
                    .map(|j| Recovered {
                        job: j.job,
                        queue: j.queue,
                        generation: j.generation,
                        state: match j.state {
                            JobOnNode::Launching => JobOnNode::Running { supervisor_pid: 1 },
                            other => other,
                        },
                    })
                    .collect();
                let deadline_before = core.next_wake_ms();
                core = AgentCore::recover("node3", TIMEOUT_MS, now, found, &disk.leases);
                if let (Some(before), Some(after)) = (deadline_before, core.next_wake_ms()) {
                    prop_assert!(
                        after <= before,
                        "restart extended the lease: {} > {}",
                        after,
                        before
                    );
                }
                core.handle_owner(now, coordinator.clone(), OwnerChange::Registered)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
        core.tick(now);
        for action in core.take_actions() {
            if let Action::PersistLease { queue, heard_ms } = action {
                let kept = disk.leases.entry(queue).or_insert(heard_ms);
                *kept = (*kept).max(heard_ms);
            }
        }
        core.invariants().map_err(TestCaseError::fail)?;
        if let Some(wake) = core.next_wake_ms() {
            prop_assert!(
                wake > now,
                "a lease past due at {} survived the tick at {}",
                wake,
                now
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fencing_and_leases_hold(steps in prop::collection::vec(step(), 1..120)) {
        run(steps)?;
    }
}
