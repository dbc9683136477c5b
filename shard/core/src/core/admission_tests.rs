//! Unit tests of admission under limits and of the shard's allowances: the counts follow
//! the jobs (and `invariants()` catches them out of step), a job waiting for allowance asks
//! at once and once per grant, allowance is kept ahead of need while the user submits and
//! given back once they stop or when the coordinator caps it.

use shardsched_wire::msg::quota::{
    AllowanceGrant, AllowanceReport, LimitKind, LimitScope, LimitTable, Usage,
};
use shardsched_wire::msg::{JobId, JobState};

use super::tests::{NOW, assignment, config, core_with, jobspec, owned, submit, user};
use super::{CoreOptions, ShardCore};
use crate::journal::MemJournal;
use crate::limits::ALLOWANCE_AHEAD_WINDOW_MS;

fn jobs(n: u64) -> Usage {
    Usage {
        jobs: n,
        nodes: n,
        cores: n,
    }
}

/// Queue batch over n0..n3 (4 cores each), `max_running 10` for every user.
fn core() -> ShardCore {
    let mut core = core_with(
        &["n0", "n1", "n2", "n3"],
        &["n0", "n1", "n2", "n3"],
        CoreOptions::default(),
    );
    let mut limits = LimitTable::default();
    limits
        .set(LimitKind::MaxRunning, LimitScope::EachUser, Some(10))
        .expect("limit");
    core.set_limits(limits);
    core
}

/// `n` one-core jobs of alice's, submitted at `now_ms` with keys from `first`.
fn submit_jobs(core: &mut ShardCore, now_ms: u64, first: u8, n: u8) -> Vec<JobId> {
    (first..first + n)
        .map(|key| {
            let spec = jobspec(None, Some(1), 60);
            core.handle_submit(now_ms, "alice", &submit(key, spec))
                .expect("accepted")
                .id
        })
        .collect()
}

fn grant(seq: u64, n: u64, cap: Usage) -> AllowanceGrant {
    AllowanceGrant {
        user: "alice".into(),
        seq,
        grant: jobs(n),
        cap,
    }
}

fn alice(core: &ShardCore, now_ms: u64) -> AllowanceReport {
    let mut reports = core.status(now_ms).allowances;
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.remove(0)
}

fn tick(core: &mut ShardCore, now_ms: u64) {
    core.tick(now_ms).expect("tick");
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn the_counts_follow_the_jobs_and_a_job_waiting_for_allowance_asks_once_per_grant() {
    let mut core = core();
    let ids = submit_jobs(&mut core, NOW, 1, 3);
    let urgent = core.urgent_reports();
    tick(&mut core, NOW);
    assert!(
        ids.iter()
            .all(|&id| core.job(id).expect("job").state == JobState::Pending)
    );
    assert_eq!(core.urgent_reports(), urgent + 1, "asked at once");
    let report = alice(&core, NOW);
    assert_eq!((report.wanted.jobs, report.held.jobs), (3, 0));
    tick(&mut core, NOW + 1);
    assert_eq!(
        core.urgent_reports(),
        urgent + 1,
        "not again before an answer"
    );

    core.handle_allowances(NOW + 2, &[grant(1, 3, Usage::UNLIMITED)]);
    tick(&mut core, NOW + 2);
    assert!(
        ids.iter()
            .all(|&id| core.job(id).expect("job").state == JobState::Running)
    );
    assert_eq!(core.limit_in_use("alice").jobs, 3);
    let report = alice(&core, NOW + 2);
    assert_eq!(report.ahead.jobs, 3, "what it admitted lately");

    core.handle_cancel(NOW + 3, &user("alice"), &ids[..1]);
    tick(&mut core, NOW + 3);
    assert_eq!(core.limit_in_use("alice").jobs, 2);
}

#[test]
fn allowance_ahead_is_kept_while_the_user_submits_and_given_back_once_they_stop() {
    let mut core = core();
    let ids = submit_jobs(&mut core, NOW, 1, 3);
    core.handle_allowances(NOW, &[grant(1, 6, Usage::UNLIMITED)]);
    tick(&mut core, NOW);
    core.handle_cancel(NOW, &user("alice"), &ids[..1]);
    tick(&mut core, NOW);
    // Two running, three admitted lately: six held is within twice that ahead.
    assert_eq!(alice(&core, NOW).held.jobs, 6);
    // Idle, it looks again when its window ends, and gives back after two windows.
    let window_end = NOW + ALLOWANCE_AHEAD_WINDOW_MS;
    assert_eq!(core.next_wakeup_ms(), Some(window_end));
    tick(&mut core, window_end);
    assert_eq!(alice(&core, window_end).held.jobs, 6);
    let later = core.next_wakeup_ms().expect("a wakeup");
    assert_eq!(later, window_end + ALLOWANCE_AHEAD_WINDOW_MS);
    let urgent = core.urgent_reports();
    tick(&mut core, later);
    assert_eq!(alice(&core, later).held.jobs, 2, "down to what runs");
    assert_eq!(core.urgent_reports(), urgent + 1, "said at once");
    assert!(core.next_wakeup_ms() != Some(later + ALLOWANCE_AHEAD_WINDOW_MS));
}

#[test]
fn under_a_cap_allowance_ahead_of_need_goes_back_at_once() {
    let mut core = core();
    submit_jobs(&mut core, NOW, 1, 2);
    core.handle_allowances(NOW, &[grant(1, 6, Usage::UNLIMITED)]);
    tick(&mut core, NOW);
    assert_eq!(
        alice(&core, NOW).held.jobs,
        6,
        "ahead: 2 admitted, kept up to twice"
    );
    // Another shard wants some: the coordinator caps this one (same seq, no new grant).
    core.handle_allowances(NOW + 1, &[grant(1, 6, jobs(5))]);
    tick(&mut core, NOW + 1);
    let report = alice(&core, NOW + 1);
    assert_eq!((report.held.jobs, report.ahead), (2, Usage::default()));
}

#[test]
fn counts_put_out_of_step_by_hand_are_reported() {
    let mut core = core();
    submit_jobs(&mut core, NOW, 1, 1);
    core.handle_allowances(NOW, &[grant(1, 1, Usage::UNLIMITED)]);
    tick(&mut core, NOW);
    core.quota.counts = Default::default();
    let broken = core.invariants().expect_err("counts out of step");
    assert!(broken.0.contains("limits' counts"), "{broken}");
}

#[test]
fn a_restarted_shard_holds_the_allowance_its_registration_grants_not_what_its_journal_kept() {
    let options = || CoreOptions {
        journal: true,
        ..CoreOptions::default()
    };
    let mut limits = LimitTable::default();
    limits
        .set(LimitKind::MaxRunning, LimitScope::EachUser, Some(10))
        .expect("limit");
    let nodes = ["n0", "n1", "n2", "n3"];
    let mut first = core_with(&nodes, &nodes, options());
    first.set_limits(limits.clone());
    first.handle_allowances(NOW, &[grant(4, 6, Usage::UNLIMITED)]);
    let mut journal = MemJournal::default();
    journal.commit(&first.take_journal());
    let restart = |journal: &MemJournal, grants: Vec<AllowanceGrant>| {
        let mut again = assignment(config(&nodes), owned(&nodes), Vec::new());
        again.limits = limits.clone();
        again.allowances = grants;
        let restored = journal.restored().expect("no orphan");
        let mut core = ShardCore::restored(&again, options(), NOW + 1_000, &restored)
            .expect("restored")
            .0;
        let batch = core.take_journal();
        (core, batch)
    };

    // The coordinator's ledger still grants this queue what its journal kept: kept, and
    // nothing to write.
    let (core, batch) = restart(&journal, vec![grant(4, 6, Usage::UNLIMITED)]);
    assert_eq!(core.quota.held("alice"), jobs(6));
    assert!(batch.is_empty(), "{batch:?}");

    // The queue was removed (the coordinator freed its grants and lent them elsewhere)
    // and added again with its old journal: the registration grants nothing, and the
    // journal says so before anything is admitted.
    let (mut core, batch) = restart(&journal, Vec::new());
    assert_eq!(core.quota.held("alice"), Usage::default());
    assert!(!batch.is_empty(), "the allowance given up is journaled");
    journal.commit(&batch);
    submit_jobs(&mut core, NOW + 1_000, 1, 3);
    tick(&mut core, NOW + 1_000);
    assert_eq!(
        core.limit_in_use("alice"),
        Usage::default(),
        "nothing runs on it"
    );
    assert_eq!(alice(&core, NOW + 1_000).held, Usage::default());
    // ... and a restart after that finds nothing either, whatever the coordinator says.
    let (core, _) = restart(&journal, Vec::new());
    assert_eq!(core.quota.held("alice"), Usage::default());
}
