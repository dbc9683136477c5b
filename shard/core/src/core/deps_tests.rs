//! Unit tests of dependencies (`core/deps.rs`): same-queue conditions settled by the
//! tick, other queues' by facts (repeated facts change nothing), conditions never met
//! (pending with the reason, or cancelled), refusals at submit, `singleton`, and a restart
//! that asks again and releases once.

use shardsched_jobspec::{DependencyPolicy, parse_dependency_arg};
use shardsched_wire::msg::client_shard::Submit;
use shardsched_wire::msg::deps::{Fact, JobFact};
use shardsched_wire::msg::{JobState, RefusalCode};
use shardsched_wire::{Fluid, Peer, Role};

use super::tests::{NOW, assignment, config, core_with, jobspec, owned, state, submit, user};
use super::{CoreOptions, ShardCore};
use crate::journal::MemJournal;

fn options() -> CoreOptions {
    CoreOptions {
        journal: true,
        ..CoreOptions::default()
    }
}

/// A core owning n0 and n1, journaling (generator id 5).
fn core() -> ShardCore {
    core_with(&["n0", "n1"], &["n0", "n1"], options())
}

/// A one-node job of `seconds` for alice, with `deps` (`--dependency`'s text) and policy.
fn job_with(deps: &str, policy: DependencyPolicy, seconds: u64, key: u8) -> Submit {
    let mut spec =
        shardsched_jobspec::parse_json(&jobspec(Some(1), None, seconds)).expect("jobspec");
    if !deps.is_empty() {
        let deps = parse_dependency_arg(deps).expect("dependencies");
        spec.attributes.add_job_dependencies(&deps);
    }
    spec.attributes.set_dependency_policy(policy);
    submit(key, spec.to_json().to_string())
}

fn run(core: &mut ShardCore, deps: &str, policy: DependencyPolicy, key: u8) -> Fluid {
    core.handle_submit(NOW, "alice", &job_with(deps, policy, 10, key))
        .expect("accepted")
        .id
}

fn reason(core: &ShardCore, id: Fluid) -> String {
    core.job(id).expect("job").summary("batch", true).reason
}

fn events(core: &ShardCore, id: Fluid, name: &str) -> usize {
    let job = core.job(id).expect("job");
    job.events.iter().filter(|e| e.name == name).count()
}

/// A job id of another queue (generator id 6).
fn remote(sequence: u16) -> Fluid {
    Fluid::from_parts(1_000, 6, sequence).expect("fluid")
}

#[test]
fn an_afterok_chain_in_one_queue_runs_in_order() {
    let mut core = core();
    let first = run(&mut core, "", DependencyPolicy::Pend, 1);
    let second = run(
        &mut core,
        &format!("afterok:{first}"),
        DependencyPolicy::Pend,
        2,
    );
    let third = run(
        &mut core,
        &format!("afterok:{second}"),
        DependencyPolicy::Pend,
        3,
    );
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, first), JobState::Running);
    assert_eq!(
        state(&core, second),
        JobState::Pending,
        "a free node is not enough"
    );
    assert_eq!(
        reason(&core, second),
        format!("dependency: waiting on {first}")
    );
    assert_eq!(
        core.dependency_questions(),
        [],
        "nothing to ask for one's own jobs"
    );
    assert_eq!(core.invariants(), Ok(()));
    core.tick(NOW + 10_000).expect("the first ends");
    assert_eq!(state(&core, first), JobState::Completed);
    core.tick(NOW + 10_000)
        .expect("the second is let in and starts");
    assert_eq!(state(&core, second), JobState::Running);
    assert_eq!(state(&core, third), JobState::Pending);
    core.tick(NOW + 20_000).expect("the second ends");
    core.tick(NOW + 20_000).expect("the third starts");
    assert_eq!(state(&core, third), JobState::Running);
    assert_eq!(events(&core, third, "dependency-satisfied"), 1);
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn a_dependency_never_met_says_why_or_cancels_under_the_cancel_policy() {
    let mut core = core();
    let first = run(&mut core, "", DependencyPolicy::Pend, 1);
    let pends = run(
        &mut core,
        &format!("afterok:{first}"),
        DependencyPolicy::Pend,
        2,
    );
    let cancels = run(
        &mut core,
        &format!("afterok:{first}"),
        DependencyPolicy::Cancel,
        3,
    );
    let runs = run(
        &mut core,
        &format!("afternotok:{first}"),
        DependencyPolicy::Pend,
        4,
    );
    core.tick(NOW).expect("tick");
    core.handle_cancel(NOW + 1_000, &user("alice"), &[first]);
    core.tick(NOW + 1_000).expect("tick");
    assert_eq!(state(&core, pends), JobState::Pending);
    assert_eq!(
        reason(&core, pends),
        format!("dependency never satisfied: {first} was cancelled")
    );
    assert_eq!(state(&core, cancels), JobState::Cancelled);
    assert_eq!(
        reason(&core, cancels),
        format!("dependency never satisfied: {first} was cancelled")
    );
    core.tick(NOW + 1_000).expect("tick");
    assert_eq!(state(&core, runs), JobState::Running, "afternotok is met");
    core.tick(NOW + 60_000).expect("much later");
    assert_eq!(state(&core, pends), JobState::Pending, "never released");
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn another_queues_job_is_asked_about_and_repeated_facts_release_once() {
    let mut core = core();
    let target = remote(1);
    let waits = run(
        &mut core,
        &format!("afterok:{target}"),
        DependencyPolicy::Pend,
        1,
    );
    core.tick(NOW).expect("tick");
    assert_eq!(core.dependency_questions(), [target]);
    let fact = |fact| [JobFact { id: target, fact }];
    core.handle_job_facts(NOW, &fact(Fact::Unknown));
    core.handle_job_facts(NOW, &fact(Fact::Running));
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, waits), JobState::Pending);
    let completed = Fact::Ended {
        state: JobState::Completed,
        started: true,
    };
    for _ in 0..3 {
        core.handle_job_facts(NOW + 1_000, &fact(completed));
    }
    assert_eq!(
        core.dependency_questions(),
        [],
        "settled: nothing left to ask"
    );
    core.tick(NOW + 1_000).expect("tick");
    assert_eq!(state(&core, waits), JobState::Running);
    core.handle_job_facts(NOW + 2_000, &fact(completed));
    assert_eq!(events(&core, waits, "dependency-satisfied"), 1);
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn an_id_that_names_no_queue_is_never_met() {
    let mut core = core();
    let target = remote(2);
    let waits = run(
        &mut core,
        &format!("after:{target}"),
        DependencyPolicy::Pend,
        1,
    );
    core.handle_job_facts(
        NOW,
        &[JobFact {
            id: target,
            fact: Fact::NoQueue,
        }],
    );
    assert_eq!(
        reason(&core, waits),
        format!("dependency never satisfied: {target} names no queue")
    );
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn a_submit_naming_a_job_this_queue_never_issued_or_no_job_id_is_refused() {
    let mut core = core();
    let first = run(&mut core, "", DependencyPolicy::Pend, 1);
    let unissued = Fluid::from_parts(NOW - shardsched_wire::fluid::FLUID_EPOCH_MS + 60_000, 5, 0)
        .expect("fluid");
    let refused = core
        .handle_submit(
            NOW,
            "alice",
            &job_with(
                &format!("afterok:{unissued}"),
                DependencyPolicy::Pend,
                10,
                2,
            ),
        )
        .expect_err("refused");
    assert_eq!(refused.code, RefusalCode::NotFound);
    assert!(
        refused.message.contains(&format!("no job {unissued}")),
        "{refused:?}"
    );
    let refused = core
        .handle_submit(
            NOW,
            "alice",
            &job_with("afterok:nonsense", DependencyPolicy::Pend, 10, 3),
        )
        .expect_err("refused");
    assert_eq!(refused.code, RefusalCode::Invalid);
    assert_eq!(core.jobs().count(), 1, "nothing kept but {first}");
}

#[test]
fn singletons_of_one_owner_and_name_run_one_at_a_time() {
    let mut core = core();
    let a = run(&mut core, "singleton", DependencyPolicy::Pend, 1);
    let b = run(&mut core, "singleton", DependencyPolicy::Pend, 2);
    core.tick(NOW).expect("tick");
    core.tick(NOW).expect("tick");
    let running = [a, b]
        .iter()
        .filter(|&&id| state(&core, id) == JobState::Running)
        .count();
    assert_eq!(running, 1, "two free nodes, one singleton running");
    assert_eq!(reason(&core, b), "dependency: singleton");
    core.tick(NOW + 10_000).expect("a ends");
    core.tick(NOW + 10_000).expect("b starts");
    assert_eq!(state(&core, b), JobState::Running);
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn a_restart_keeps_the_wait_asks_again_and_releases_once() {
    let mut core = core();
    let mut journal = MemJournal::default();
    let target = remote(3);
    let waits = run(
        &mut core,
        &format!("afterany:{target}"),
        DependencyPolicy::Pend,
        1,
    );
    core.tick(NOW).expect("tick");
    journal.commit(&core.take_journal());

    let restored = journal.restored().expect("no orphan");
    let again = assignment(config(&["n0", "n1"]), owned(&["n0", "n1"]), Vec::new());
    let (mut core, _) =
        ShardCore::restored(&again, options(), NOW + 1_000, &restored).expect("restored");
    assert_eq!(core.invariants(), Ok(()));
    assert_eq!(
        reason(&core, waits),
        format!("dependency: waiting on {target}")
    );
    assert_eq!(core.dependency_questions(), [target], "asked again");
    let ended = [JobFact {
        id: target,
        fact: Fact::Ended {
            state: JobState::Failed,
            started: true,
        },
    }];
    core.handle_job_facts(NOW + 2_000, &ended);
    core.tick(NOW + 2_000).expect("tick");
    assert_eq!(state(&core, waits), JobState::Running);
    core.handle_job_facts(NOW + 3_000, &ended);
    assert_eq!(events(&core, waits, "dependency-satisfied"), 1);
    let admin = Peer::new(Role::Admin, "root").expect("peer");
    core.handle_cancel(NOW + 3_000, &admin, &[waits]);
    assert_eq!(core.invariants(), Ok(()));
}
