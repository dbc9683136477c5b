//! Fencing, kills, leases, reports and recovery, one behaviour per test.

mod common;

use std::collections::BTreeMap;

use common::{TIMEOUT_MS, job, launch, owned, owner};
use shardsched_node_core::{Action, AgentCore, Recovered, Refused};
use shardsched_wire::limits::REASON_BYTES_MAX;
use shardsched_wire::msg::Generation;
use shardsched_wire::msg::agent::{EndCause, JobEnd, JobOnNode, OwnerChange};

fn completed() -> JobEnd {
    JobEnd {
        cause: EndCause::Completed,
        exit_code: Some(0),
        signal: None,
        note: String::new(),
    }
}

#[test]
fn only_the_owner_at_its_generation_launches() {
    let mut core = AgentCore::new("node3", TIMEOUT_MS);
    let refused = core.handle_launch(0, "alpha", launch("node3", job(1), 1));
    assert!(
        matches!(refused, Err(Refused::NoOwner { .. })),
        "{refused:?}"
    );
    core.handle_owner(0, owner("alpha", 2), OwnerChange::Registered)
        .expect("owner");
    let refused = core.handle_launch(0, "beta", launch("node3", job(1), 2));
    assert!(
        matches!(refused, Err(Refused::NotOwner { .. })),
        "{refused:?}"
    );
    let refused = core.handle_launch(0, "alpha", launch("node3", job(1), 1));
    assert!(
        matches!(refused, Err(Refused::WrongGeneration { .. })),
        "{refused:?}"
    );
    let refused = core.handle_launch(0, "alpha", launch("node4", job(1), 2));
    assert!(
        matches!(refused, Err(Refused::WrongNode { .. })),
        "{refused:?}"
    );
    assert!(only_leases(core.take_actions()), "nothing refused starts");

    core.handle_launch(0, "alpha", launch("node3", job(1), 2))
        .expect("launch");
    let actions = core.take_actions();
    assert!(
        matches!(&actions[..], [Action::Spawn { launch: l, .. }] if l.job == job(1)),
        "{actions:?}"
    );
    // A repeated launch of a live job starts nothing more.
    core.handle_launch(0, "alpha", launch("node3", job(1), 2))
        .expect("repeat");
    assert!(only_leases(core.take_actions()));
}

#[test]
fn owners_change_only_forward() {
    let mut core = owned("alpha", 5);
    let stale = core.handle_owner(0, owner("beta", 4), OwnerChange::Acquired);
    assert!(
        matches!(stale, Err(Refused::StaleOwner { .. })),
        "{stale:?}"
    );
    let conflict = core.handle_owner(0, owner("beta", 5), OwnerChange::Acquired);
    assert!(
        matches!(conflict, Err(Refused::ConflictingOwner { .. })),
        "{conflict:?}"
    );
    core.handle_owner(0, owner("alpha", 5), OwnerChange::Registered)
        .expect("the same owner again");
    core.handle_owner(0, owner("beta", 6), OwnerChange::Acquired)
        .expect("acquired");
    assert_eq!(core.owner(), Some(&owner("beta", 6)));
}

#[test]
fn a_new_owner_waits_for_the_old_owners_processes() {
    let mut core = owned("alpha", 1);
    core.handle_launch(0, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    core.handle_spawned(1, job(1), 100);
    core.handle_owner(2, owner("beta", 2), OwnerChange::Acquired)
        .expect("acquired");
    let refused = core.handle_launch(3, "beta", launch("node3", job(2), 2));
    assert!(
        matches!(&refused, Err(Refused::OtherQueueRuns { queue, job: j, .. }) if queue == "alpha" && *j == job(1)),
        "{refused:?}"
    );
    assert!(!core.clean_of("alpha") && core.clean_of("beta"));
    // The old owner can no longer launch, but still kills what it launched.
    let refused = core.handle_launch(3, "alpha", launch("node3", job(3), 1));
    assert!(
        matches!(refused, Err(Refused::NotOwner { .. })),
        "{refused:?}"
    );
    core.handle_kill(4, "alpha", job(1), "move deadline")
        .expect("kill");
    assert!(!core.clean_of("alpha"), "stopping is not gone");
    core.handle_ended(5, job(1), completed());
    assert!(core.clean_of("alpha"));
    core.handle_launch(6, "beta", launch("node3", job(2), 2))
        .expect("the new owner launches once the node is clean");
}

#[test]
fn kills_come_only_from_the_launcher_and_are_sent_once() {
    let mut core = owned("alpha", 1);
    core.handle_launch(0, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    core.take_actions();
    let refused = core.handle_kill(1, "beta", job(1), "not yours");
    assert!(
        matches!(refused, Err(Refused::NotLauncher { .. })),
        "{refused:?}"
    );
    assert!(only_leases(core.take_actions()));
    core.handle_kill(1, "beta", job(9), "unknown")
        .expect("nothing to kill");
    core.handle_kill(2, "alpha", job(1), "cancelled by user alice")
        .expect("kill");
    core.handle_kill(3, "alpha", job(1), "again")
        .expect("repeat");
    let actions = core.take_actions();
    assert_eq!(
        actions,
        vec![Action::Kill {
            job: job(1),
            why: "cancelled by user alice".into()
        }]
    );
    assert_eq!(
        core.job(job(1)),
        Some(&JobOnNode::Stopping {
            why: "cancelled by user alice".into()
        })
    );
}

#[test]
fn a_silent_shard_loses_its_jobs_at_half_the_timeout() {
    let lease = TIMEOUT_MS / 2;
    let mut core = owned("alpha", 1);
    core.handle_launch(1_000, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    core.handle_spawned(1_000, job(1), 100);
    core.take_actions();
    assert_eq!(core.next_wake_ms(), Some(1_000 + lease));
    core.tick(1_000 + lease - 1);
    assert!(
        !core
            .take_actions()
            .iter()
            .any(|a| matches!(a, Action::Kill { .. })),
        "not yet"
    );
    // A renewal pushes the deadline on.
    core.handle_renew(5_000, "alpha", &[]);
    core.tick(1_000 + lease);
    assert!(
        !core
            .take_actions()
            .iter()
            .any(|a| matches!(a, Action::Kill { .. })),
        "renewed"
    );
    core.tick(5_000 + lease);
    let actions = core.take_actions();
    assert!(
        actions.iter().any(
            |a| matches!(a, Action::Kill { job: j, why } if *j == job(1) && why.contains("lease expired"))
        ),
        "{actions:?}"
    );
    core.tick(6_000 + lease);
    assert!(only_leases(core.take_actions()), "killed once");
    assert_eq!(core.next_wake_ms(), None);
}

#[test]
fn renewals_are_persisted_lazily_and_never_ahead() {
    let mut core = owned("alpha", 1);
    core.handle_launch(0, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    let first = core.take_actions();
    assert!(
        first.contains(&Action::PersistLease {
            queue: "alpha".into(),
            heard_ms: 0
        }),
        "a shard's first word is persisted at once (a restart must find its lease): {first:?}"
    );
    core.handle_renew(1_000, "alpha", &[]);
    core.tick(1_000);
    assert!(
        core.take_actions().is_empty(),
        "1 s is below a quarter lease"
    );
    core.handle_renew(4_000, "alpha", &[]);
    core.tick(4_000);
    assert_eq!(
        core.take_actions(),
        vec![Action::PersistLease {
            queue: "alpha".into(),
            heard_ms: 4_000
        }]
    );
}

#[test]
fn ended_jobs_are_reported_until_seen_and_removed_when_forgotten() {
    let mut core = owned("alpha", 1);
    core.handle_launch(0, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    core.handle_spawned(0, job(1), 7);
    core.handle_ended(1, job(1), completed());
    let report = core.handle_renew(2, "alpha", &[]);
    assert_eq!(report.jobs.len(), 1);
    assert_eq!(report.jobs[0].state, JobOnNode::Ended(completed()));
    assert!(report.clean_of("alpha"));
    // Another queue's word about it changes nothing.
    assert_eq!(core.handle_renew(3, "beta", &[job(1)]).jobs.len(), 1);
    assert!(core.handle_renew(4, "alpha", &[job(1)]).jobs.is_empty());
    core.take_actions();
    core.handle_forget(5, "alpha", &[job(1)]);
    assert_eq!(core.take_actions(), vec![Action::RemoveFiles(job(1))]);
    assert_eq!(core.job(job(1)), None);
}

#[test]
fn a_requeued_job_runs_again_once_it_ended_here() {
    let mut core = owned("alpha", 1);
    core.handle_launch(0, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    core.handle_ended(1, job(1), completed());
    core.take_actions();
    // The new run has its own R (its start).
    let mut again = launch("node3", job(1), 1);
    again.r_json = r#"{"execution":{"starttime":2}}"#.into();
    core.handle_launch(2, "alpha", again).expect("again");
    assert!(matches!(&core.take_actions()[..], [Action::Spawn { .. }]));
    assert_eq!(core.job(job(1)), Some(&JobOnNode::Launching));
}

/// The network delivers a launch again after its job was killed and its task ended (sim
/// seed 13662): the repeat is answered as taken, and starts nothing.
#[test]
fn a_launch_delivered_again_after_its_run_ended_starts_nothing() {
    let mut core = owned("alpha", 1);
    core.handle_launch(0, "alpha", launch("node3", job(1), 1))
        .expect("launch");
    core.handle_spawned(0, job(1), 7);
    core.handle_kill(1, "alpha", job(1), "cancelled by alice")
        .expect("kill");
    let stopped = JobEnd {
        cause: EndCause::Cancelled,
        exit_code: None,
        signal: Some(15),
        note: "cancelled by alice".into(),
    };
    core.handle_ended(2, job(1), stopped.clone());
    core.take_actions();
    core.handle_launch(3, "alpha", launch("node3", job(1), 1))
        .expect("a repeat is answered as taken");
    assert!(
        only_leases(core.take_actions()),
        "a killed job was started again"
    );
    assert_eq!(core.job(job(1)), Some(&JobOnNode::Ended(stopped)));
}

#[test]
fn a_restarted_agent_reports_what_it_found_and_keeps_the_lease_it_had() {
    let found = vec![
        Recovered {
            job: job(1),
            queue: "alpha".into(),
            generation: Generation(3),
            state: JobOnNode::Running { supervisor_pid: 42 },
        },
        Recovered {
            job: job(2),
            queue: "alpha".into(),
            generation: Generation(3),
            state: JobOnNode::Ended(completed()),
        },
    ];
    let leases = BTreeMap::from([("alpha".to_owned(), 10_000u64)]);
    let mut core = AgentCore::recover("node3", TIMEOUT_MS, 12_000, found.clone(), &leases);
    assert_eq!(core.report().jobs.len(), 2);
    assert_eq!(core.owner(), None, "the owner comes from the coordinator");
    assert_eq!(core.next_wake_ms(), Some(10_000 + TIMEOUT_MS / 2));
    core.tick(10_000 + TIMEOUT_MS / 2);
    assert!(matches!(&core.take_actions()[..], [Action::Kill { .. }]));

    // Without a persisted renewal the lease is taken as already spent.
    let mut core = AgentCore::recover("node3", TIMEOUT_MS, 40_000, found, &BTreeMap::new());
    core.tick(40_000);
    assert!(matches!(&core.take_actions()[..], [Action::Kill { .. }]));
}

/// Whether `actions` hold nothing but lease writes (a shard heard from for the first time
/// has its lease persisted at once, whatever it asked).
fn only_leases(actions: Vec<Action>) -> bool {
    actions
        .iter()
        .all(|a| matches!(a, Action::PersistLease { .. }))
}

#[test]
fn a_failed_prolog_or_health_check_makes_the_node_unhealthy_until_a_check_passes() {
    let mut core = owned("alpha", 3);
    assert_eq!(core.report().unhealthy, None);
    core.handle_launch(1, "alpha", launch("node3", job(1), 3))
        .expect("launch");
    let why = "prolog failed on node3 for job 1: no scratch space";
    core.handle_ended(2, job(1), JobEnd::without_status(EndCause::Prolog, why));
    assert_eq!(core.report().unhealthy.as_deref(), Some(why));
    // A reason is cut to its bound, at a character boundary.
    core.set_health(Some("é".repeat(REASON_BYTES_MAX)));
    let long = core.report().unhealthy.expect("unhealthy");
    assert!(
        long.len() <= REASON_BYTES_MAX && long.starts_with('é'),
        "{long}"
    );
    core.set_health(None);
    assert_eq!(core.report().unhealthy, None, "a passing check clears it");
}
