//! Unit tests of durable kill requests (`core/exec.rs`): a cancel of a running exec or
//! agents job is journaled with the batch that answers it, so a shard restarted before the
//! job's processes are gone kills them again and records the job cancelled, with the
//! original reason; a requeue's request goes with the requeue; a cancel replaces a requeue.

use std::path::PathBuf;

use shardsched_wire::msg::client_shard::CancelResult;
use shardsched_wire::msg::{JobId, JobState};
use shardsched_wire::{Peer, Role};

use super::exec_tests::{core_with, exited, killed, reason, restarted, state, submit};
use super::tests::NOW;
use super::{CoreExecutor, CoreOptions, ExecAction, ShardCore};
use crate::exec::EndCause;
use crate::journal::{JournalRecord, KillPlan, MemJournal};
use crate::nodes::Flag;

/// A journaling core of `executor`.
fn options(executor: CoreExecutor) -> CoreOptions {
    CoreOptions {
        journal: true,
        executor,
        ..CoreOptions::default()
    }
}

fn exec() -> CoreExecutor {
    CoreExecutor::Exec {
        jobs_dir: PathBuf::from("/state/jobs"),
    }
}

/// The kills among `actions`, as (job, why).
fn kills(actions: &[ExecAction]) -> Vec<(JobId, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            ExecAction::Kill { id, why } => Some((*id, why.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_cancel_survives_a_restart_before_the_processes_are_gone() {
    for executor in [exec(), CoreExecutor::Agents] {
        let options = options(executor.clone());
        let mut core = core_with(options.clone());
        let mut journal = MemJournal::default();
        let job = submit(&mut core, 1, 600, false);
        core.tick(NOW).expect("tick");
        journal.commit(&core.take_journal());
        core.take_exec_actions();

        let admin = Peer::new(Role::Admin, "root").expect("peer");
        let outcome = core.handle_cancel(NOW + 1_000, &admin, &[job]);
        assert_eq!(outcome[0].result, CancelResult::Cancelled, "{executor:?}");
        // The batch that answers the cancel journals it.
        let records = core.take_journal();
        assert!(
            records.iter().any(|r| matches!(
                r,
                JournalRecord::KillRequested(k) if k.id == job.0
                    && k.plan == KillPlan::Cancel { reason: "cancelled by admin root".into() }
            )),
            "{executor:?}: {records:?}"
        );
        journal.commit(&records);

        // The shard dies before the processes are gone (the kill may never have left).
        let mut again = restarted(options.clone(), &journal, NOW + 2_000, &[]);
        assert_eq!(state(&again, job), JobState::Running, "{executor:?}");
        assert_eq!(
            kills(&again.take_exec_actions()),
            [(job, "cancelled by admin root".to_owned())],
            "{executor:?}: the restart asks for the kill again"
        );
        assert!(
            reason(&again, job).ends_with("stopping its processes"),
            "{executor:?}"
        );
        again.tick(NOW + 2_000).expect("tick");
        let again_records = again.take_journal();
        assert!(
            !again_records
                .iter()
                .any(|r| matches!(r, JournalRecord::KillRequested(_))),
            "{executor:?}: the kill is not journaled again: {again_records:?}"
        );
        // However the processes end (here: on their own, with success), the job is
        // cancelled, with the original reason.
        again.handle_job_ended(NOW + 3_000, job, &exited(0));
        again.tick(NOW + 3_000).expect("tick");
        assert_eq!(state(&again, job), JobState::Cancelled, "{executor:?}");
        assert_eq!(reason(&again, job), "cancelled by admin root");
        journal.commit(&again.take_journal());
        assert_eq!(again.invariants(), Ok(()));

        // Ended, the job's kill record is gone: a later restart asks for nothing.
        let restored = journal.restored().expect("no orphan");
        let record = restored.jobs.iter().find(|j| j.id == job.0).expect("job");
        assert_eq!(record.kill, None, "{executor:?}");
        let mut third = restarted(options, &journal, NOW + 4_000, &[]);
        assert!(kills(&third.take_exec_actions()).is_empty(), "{executor:?}");
        assert_eq!(state(&third, job), JobState::Cancelled);
        assert_eq!(reason(&third, job), "cancelled by admin root");
    }
}

#[test]
fn a_cancel_replaces_a_requeue_and_a_requeue_ends_its_kill_request() {
    let options = options(exec());
    let mut core = core_with(options.clone());
    let mut journal = MemJournal::default();
    let requeued = submit(&mut core, 1, 600, true);
    let cancelled = submit(&mut core, 2, 600, true);
    core.tick(NOW).expect("tick");
    journal.commit(&core.take_journal());
    core.take_exec_actions();
    let on = |core: &ShardCore, id| core.job(id).expect("job").nodes[0].clone();
    let (first_node, second_node) = (on(&core, requeued), on(&core, cancelled));

    // Both nodes go down: both jobs are to be requeued once their processes are gone.
    for node in [&first_node, &second_node] {
        core.set_node_flag(
            NOW + 1_000,
            std::slice::from_ref(node),
            Flag::Down,
            Some("psu"),
        )
        .expect("down");
    }
    // A cancel of the second afterwards: it is cancelled, and must not run again.
    let user = Peer::new(Role::User, "alice").expect("peer");
    let outcome = core.handle_cancel(NOW + 1_500, &user, &[cancelled]);
    assert_eq!(outcome[0].result, CancelResult::Cancelled);
    journal.commit(&core.take_journal());
    core.take_exec_actions();

    let down = [first_node.as_str(), second_node.as_str()];
    let mut again = restarted(options.clone(), &journal, NOW + 2_000, &down);
    let asked = kills(&again.take_exec_actions());
    assert!(
        asked.contains(&(cancelled, "cancelled by user alice".to_owned())),
        "{asked:?}"
    );
    assert!(
        asked.contains(&(requeued, format!("node {first_node} went down: psu"))),
        "{asked:?}"
    );
    again.handle_job_ended(NOW + 3_000, requeued, &killed(EndCause::Cancelled, "psu"));
    again.handle_job_ended(NOW + 3_000, cancelled, &killed(EndCause::Cancelled, "psu"));
    again.tick(NOW + 3_000).expect("tick");
    assert_eq!(state(&again, cancelled), JobState::Cancelled);
    assert_eq!(reason(&again, cancelled), "cancelled by user alice");
    assert_eq!(state(&again, requeued), JobState::Pending, "requeued");
    journal.commit(&again.take_journal());

    // The requeued job's kill request went with its run: once it runs again (its node
    // up), a restart leaves it running.
    again
        .set_node_flag(
            NOW + 4_000,
            std::slice::from_ref(&first_node),
            Flag::Down,
            None,
        )
        .expect("up");
    again.tick(NOW + 4_000).expect("tick");
    assert_eq!(state(&again, requeued), JobState::Running);
    journal.commit(&again.take_journal());
    let mut third = restarted(options, &journal, NOW + 5_000, &[second_node.as_str()]);
    assert!(kills(&third.take_exec_actions()).is_empty());
    assert_eq!(state(&third, requeued), JobState::Running);
    assert_eq!(third.invariants(), Ok(()));
}
