//! Unit tests of holds and urgency (`core/holds.rs`): held jobs wait with their reason and
//! come back to their place, urgency orders the queue, only owners and admins change it,
//! and holds and urgencies survive a restart.

use shardsched_wire::msg::JobState;
use shardsched_wire::msg::client_shard::{Submit, UrgencyChange, UrgencyResult};
use shardsched_wire::{Fluid, Peer, Role};

use super::tests::{NOW, assignment, config, core_with, jobspec, owned, state, submit, user};
use super::{CoreOptions, ShardCore};
use crate::journal::MemJournal;

/// A core owning n0 and n1, journaling.
fn core() -> ShardCore {
    core_with(
        &["n0", "n1"],
        &["n0", "n1"],
        CoreOptions {
            journal: true,
            ..CoreOptions::default()
        },
    )
}

/// Submits a two-node job of 10 s for alice at `at` with `urgency`.
fn two_nodes(core: &mut ShardCore, key: u8, at: u64, urgency: Option<u8>) -> Fluid {
    let submit = Submit {
        urgency,
        ..submit(key, jobspec(Some(2), None, 10))
    };
    core.handle_submit(at, "alice", &submit)
        .expect("accepted")
        .id
}

fn reason(core: &ShardCore, id: Fluid) -> String {
    core.job(id).expect("job").summary("batch", true).reason
}

fn urgency(core: &mut ShardCore, peer: &Peer, id: Fluid, change: UrgencyChange) -> UrgencyResult {
    core.handle_urgency(NOW, peer, &[id], change)[0].result
}

#[test]
fn a_held_job_waits_with_its_reason_and_keeps_its_place_by_submit_time_when_released() {
    let mut core = core();
    let held = two_nodes(&mut core, 1, NOW, Some(0));
    let later = two_nodes(&mut core, 2, NOW + 1_000, None);
    let last = two_nodes(&mut core, 3, NOW + 2_000, None);
    core.tick(NOW + 2_000).expect("tick");
    assert_eq!(state(&core, held), JobState::Pending);
    assert_eq!(reason(&core, held), "held");
    assert_eq!(
        state(&core, later),
        JobState::Running,
        "held jobs are passed over"
    );
    assert_eq!(core.invariants(), Ok(()));
    let alice = user("alice");
    assert_eq!(
        urgency(&mut core, &alice, held, UrgencyChange::Release),
        UrgencyResult::Set(16)
    );
    assert_ne!(reason(&core, held), "held");
    core.tick(NOW + 12_000).expect("the first job ends");
    assert_eq!(
        (state(&core, held), state(&core, last)),
        (JobState::Running, JobState::Pending),
        "released, it runs before a job submitted after it"
    );
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn pending_jobs_run_by_urgency_then_submit_time() {
    let mut core = core();
    let blocker = two_nodes(&mut core, 1, NOW, None);
    core.tick(NOW).expect("tick");
    let low = two_nodes(&mut core, 2, NOW, Some(1));
    let default = two_nodes(&mut core, 3, NOW + 1_000, None);
    let expedited = two_nodes(&mut core, 4, NOW + 2_000, Some(31));
    let raised = two_nodes(&mut core, 5, NOW + 3_000, None);
    let admin = Peer::new(Role::Admin, "root").expect("peer");
    assert_eq!(
        urgency(&mut core, &admin, raised, UrgencyChange::Set(20)),
        UrgencyResult::Set(20)
    );
    let mut order = Vec::new();
    let mut now = NOW;
    while order.len() < 4 {
        now += 10_000;
        core.tick(now).expect("tick");
        order.extend(
            [low, default, expedited, raised]
                .into_iter()
                .filter(|&id| state(&core, id) == JobState::Running),
        );
    }
    assert_eq!(state(&core, blocker), JobState::Completed);
    assert_eq!(order, vec![expedited, raised, default, low]);
}

#[test]
fn only_owners_and_admins_change_urgency_and_only_of_pending_jobs() {
    let mut core = core();
    let running = two_nodes(&mut core, 1, NOW, None);
    let pending = two_nodes(&mut core, 2, NOW, None);
    core.tick(NOW).expect("tick");
    let bob = user("bob");
    assert_eq!(
        urgency(&mut core, &bob, pending, UrgencyChange::Hold),
        UrgencyResult::Forbidden
    );
    let alice = user("alice");
    assert_eq!(
        urgency(&mut core, &alice, running, UrgencyChange::Hold),
        UrgencyResult::NotPending
    );
    assert_eq!(
        urgency(&mut core, &alice, Fluid(7), UrgencyChange::Hold),
        UrgencyResult::NotFound
    );
    assert_eq!(
        urgency(&mut core, &alice, pending, UrgencyChange::Set(5)),
        UrgencyResult::Set(5)
    );
    // Releasing a job that is not held leaves its urgency.
    assert_eq!(
        urgency(&mut core, &alice, pending, UrgencyChange::Release),
        UrgencyResult::Set(5)
    );
    let events: Vec<&str> = core
        .job(pending)
        .expect("job")
        .events
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(events, ["submit", "urgency"]);
}

#[test]
fn holds_and_urgencies_survive_a_restart() {
    let mut core = core();
    let mut journal = MemJournal::default();
    let blocker = two_nodes(&mut core, 1, NOW, None);
    let held = two_nodes(&mut core, 2, NOW, None);
    let urgent = two_nodes(&mut core, 3, NOW + 1_000, None);
    core.tick(NOW).expect("tick");
    let alice = user("alice");
    core.handle_urgency(NOW, &alice, &[held], UrgencyChange::Hold);
    core.handle_urgency(NOW, &alice, &[urgent], UrgencyChange::Set(12));
    journal.commit(&core.take_journal());

    let restored = journal.restored().expect("no orphan");
    let again = assignment(config(&["n0", "n1"]), owned(&["n0", "n1"]), Vec::new());
    let options = CoreOptions {
        journal: true,
        ..CoreOptions::default()
    };
    let (mut core, _) =
        ShardCore::restored(&again, options, NOW + 1_000, &restored).expect("restored");
    assert_eq!(core.invariants(), Ok(()));
    assert_eq!(reason(&core, held), "held");
    assert_eq!(core.job(urgent).expect("job").urgency, 12);
    core.tick(NOW + 11_000)
        .expect("the blocker ends (it started at NOW + 1 s)");
    assert_eq!(state(&core, blocker), JobState::Completed);
    assert_eq!(state(&core, urgent), JobState::Running);
    assert_eq!(state(&core, held), JobState::Pending);
}
