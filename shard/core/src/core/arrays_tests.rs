//! Unit tests of job arrays (`core/arrays.rs`): elements accepted together, `%N` running
//! at most, cancels and holds by the array's id, a restart, and forgetting.

use std::sync::Arc;

use shardsched_wire::Fluid;
use shardsched_wire::array::{ArraySpec, element_id};
use shardsched_wire::msg::agent::JobSignature;
use shardsched_wire::msg::client_shard::{CancelResult, Submit, UrgencyChange, UrgencyResult};
use shardsched_wire::msg::{JobState, RefusalCode};

use super::tests::{NOW, assignment, config, core_with, jobspec, owned, state, submit, user};
use super::{CoreOptions, ShardCore};
use crate::journal::{JournalRecord, MemJournal};

fn options() -> CoreOptions {
    CoreOptions {
        journal: true,
        ..CoreOptions::default()
    }
}

/// A core owning n0..n3 (4 cores each), journaling.
fn core() -> ShardCore {
    let nodes = ["n0", "n1", "n2", "n3"];
    core_with(&nodes, &nodes, options())
}

/// Submits an array of one-core jobs of 10 s for alice.
fn array(
    core: &mut ShardCore,
    key: u8,
    spec: &str,
) -> Result<Fluid, shardsched_wire::msg::Refusal> {
    let submit = Submit {
        array: Some(spec.parse::<ArraySpec>().expect("spec")),
        ..submit(key, jobspec(None, Some(1), 10))
    };
    core.handle_submit(NOW, "alice", &submit).map(|s| s.id)
}

fn elements(id: Fluid, indices: impl IntoIterator<Item = u32>) -> Vec<Fluid> {
    indices
        .into_iter()
        .map(|i| element_id(id, i).expect("element"))
        .collect()
}

fn running(core: &ShardCore, ids: &[Fluid]) -> usize {
    ids.iter()
        .filter(|&&id| state(core, id) == JobState::Running)
        .count()
}

#[test]
fn an_array_is_one_submit_and_one_commit_and_its_limit_holds() {
    let mut core = core();
    core.take_journal();
    let id = array(&mut core, 1, "1-40%5").expect("accepted");
    let records = core.take_journal();
    let kinds: Vec<bool> = records
        .iter()
        .map(|r| matches!(r, JournalRecord::Accepted(_) | JournalRecord::Array(_)))
        .collect();
    assert_eq!(
        kinds.iter().filter(|&&k| k).count(),
        2,
        "one jobs and one arrays record, whatever its size: {records:?}"
    );
    let ids = elements(id, 1..=40);
    let first = core.job(ids[0]).expect("element 1");
    assert_eq!(first.array.map(|e| (e.array, e.index)), Some((id, 1)));
    assert!(core.job(id).is_none(), "the array itself is not a job");
    let mut now = NOW;
    let mut seen_max = 0;
    while ids.iter().any(|&e| state(&core, e).is_active()) {
        core.tick(now).expect("tick");
        assert_eq!(core.invariants(), Ok(()));
        seen_max = seen_max.max(running(&core, &ids));
        now += 1_000;
        assert!(now < NOW + 1_000_000, "the array never finished");
    }
    assert_eq!(seen_max, 5, "at most %5 run at once, and 5 do");
    let reason = core.job(ids[39]).expect("job").summary("batch", true);
    assert_eq!(reason.state, JobState::Completed);

    // A retry of the submit finds the array.
    let again = array(&mut core, 1, "1-40%5").expect("retry");
    assert_eq!(again, id);
}

#[test]
fn elements_wait_for_a_slot_with_their_reason_and_the_array_is_cancelled_or_held_whole() {
    let mut core = core();
    let id = array(&mut core, 1, "0-9%2").expect("accepted");
    let ids = elements(id, 0..10);
    core.tick(NOW).expect("tick");
    assert_eq!(running(&core, &ids), 2);
    let waiting = core.job(ids[5]).expect("job").summary("batch", true);
    assert_eq!(waiting.reason, "array limit");
    let alice = user("alice");
    // Holding the array holds every pending element; releasing one lets it take a slot.
    let held = core.handle_urgency(NOW, &alice, &[id], UrgencyChange::Hold);
    assert_eq!(held[0].result, UrgencyResult::Set(0));
    assert_eq!(
        core.job(ids[5]).expect("job").summary("batch", true).reason,
        "held"
    );
    assert_eq!(core.invariants(), Ok(()));
    core.handle_urgency(NOW, &alice, &[ids[9]], UrgencyChange::Release);
    core.tick(NOW + 10_000).expect("the first two end");
    assert_eq!(
        state(&core, ids[9]),
        JobState::Running,
        "released, it takes a slot"
    );
    assert_eq!(running(&core, &ids), 1, "the held ones stay held");
    let bob = user("bob");
    let outcome = core.handle_cancel(NOW + 10_000, &bob, &[id]);
    assert_eq!(outcome[0].result, CancelResult::Forbidden);
    let outcome = core.handle_cancel(NOW + 10_000, &alice, &[ids[3]]);
    assert_eq!(outcome[0].result, CancelResult::Cancelled);
    let outcome = core.handle_cancel(NOW + 10_000, &alice, &[id]);
    assert_eq!(outcome[0].result, CancelResult::Cancelled);
    assert!(ids.iter().all(|&e| !state(&core, e).is_active()));
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn an_array_past_its_bound_is_refused_naming_it() {
    let queue = shardsched_wire::msg::QueueConfig {
        array_elements_max: 10,
        ..config(&["n0"])
    };
    let mut core = super::tests::core_for(&queue, &["n0"], options());
    let refusal = array(&mut core, 1, "0-10").expect_err("11 elements");
    assert_eq!(refusal.code, RefusalCode::Invalid);
    assert!(
        refusal.message.contains("array_elements_max"),
        "{refusal:?}"
    );
    let refusal = array(&mut core, 2, "12").expect_err("index 12");
    assert!(refusal.message.contains("index 12"), "{refusal:?}");
    array(&mut core, 3, "0-9").expect("10 elements");
}

#[test]
fn an_array_survives_a_restart_with_its_limit_and_is_forgotten_whole() {
    let mut core = core_with(
        &["n0"],
        &["n0"],
        CoreOptions {
            journal: true,
            retention_ms: 60_000,
            ..CoreOptions::default()
        },
    );
    let mut journal = MemJournal::default();
    let id = array(&mut core, 1, "1-6%2").expect("accepted");
    let ids = elements(id, 1..=6);
    core.tick(NOW).expect("tick");
    core.tick(NOW + 10_000).expect("two end, two start");
    journal.commit(&core.take_journal());

    let restart = |journal: &MemJournal, at: u64| {
        let restored = journal.restored().expect("no orphan");
        let again = assignment(config(&["n0"]), owned(&["n0"]), Vec::new());
        let options = CoreOptions {
            journal: true,
            retention_ms: 60_000,
            ..CoreOptions::default()
        };
        ShardCore::restored(&again, options, at, &restored)
            .expect("restored")
            .0
    };
    let mut core = restart(&journal, NOW + 10_000);
    assert_eq!(core.invariants(), Ok(()));
    assert_eq!(
        ids.iter().map(|&e| state(&core, e)).collect::<Vec<_>>(),
        [
            JobState::Completed,
            JobState::Completed,
            JobState::Running,
            JobState::Running,
            JobState::Pending,
            JobState::Pending
        ]
    );
    core.tick(NOW + 20_000).expect("tick");
    assert_eq!(
        running(&core, &ids),
        2,
        "the limit came back with the array"
    );
    core.tick(NOW + 30_000).expect("tick");
    journal.commit(&core.take_journal());
    // The first two are past their retention and forgotten, the others not yet: a restart
    // does not bring the forgotten ones back pending.
    core.tick(NOW + 75_000).expect("tick");
    journal.commit(&core.take_journal());
    let core = restart(&journal, NOW + 75_000);
    assert!(
        ids.iter()
            .all(|&e| core.job(e).is_none_or(|j| !j.state.is_active()))
    );
    // All forgotten: the journal has nothing of it left.
    let mut core = core;
    core.tick(NOW + 200_000).expect("tick");
    journal.commit(&core.take_journal());
    assert!(journal.restored().expect("no orphan").jobs.is_empty());
}

#[test]
fn a_signed_array_journals_one_signature_its_elements_share_and_forget_with_it() {
    let options = || CoreOptions {
        journal: true,
        retention_ms: 60_000,
        ..CoreOptions::default()
    };
    let mut core = core_with(&["n0"], &["n0"], options());
    let signature = JobSignature {
        cert_pem: "-----BEGIN CERTIFICATE-----".into(),
        signature: vec![7; 70],
    };
    let submit = Submit {
        array: Some("1-3".parse::<ArraySpec>().expect("spec")),
        signature: Some(signature.clone()),
        ..submit(1, jobspec(None, Some(1), 10))
    };
    let id = core
        .handle_submit(NOW, "alice", &submit)
        .expect("signed")
        .id;
    let ids = elements(id, 1..=3);
    let records = core.take_journal();
    let signed: Vec<u64> = records
        .iter()
        .filter_map(|r| match r {
            JournalRecord::Signed(s) => Some(s.id),
            _ => None,
        })
        .collect();
    assert_eq!(signed, [id.0], "one signature, keyed by the array's id");
    let mut journal = MemJournal::default();
    journal.commit(&records);

    let restart = |journal: &MemJournal, at: u64| {
        let restored = journal.restored().expect("no orphan");
        let again = assignment(config(&["n0"]), owned(&["n0"]), Vec::new());
        ShardCore::restored(&again, options(), at, &restored)
            .expect("restored")
            .0
    };
    for core in [&core, &restart(&journal, NOW)] {
        let shared: Vec<_> = ids
            .iter()
            .map(|&e| {
                core.job(e)
                    .and_then(|j| j.signature.clone())
                    .expect("signed")
            })
            .collect();
        assert_eq!(*shared[0], signature);
        assert!(
            shared.iter().all(|s| Arc::ptr_eq(s, &shared[0])),
            "the elements share one copy"
        );
    }
    core.tick(NOW).expect("tick");
    core.tick(NOW + 10_000).expect("tick");
    core.tick(NOW + 20_000).expect("tick");
    core.tick(NOW + 30_000).expect("all ended");
    core.tick(NOW + 200_000).expect("all forgotten");
    journal.commit(&core.take_journal());
    assert!(
        journal
            .restored()
            .expect("no orphan signature")
            .jobs
            .is_empty(),
        "the signature went with the array"
    );
}
