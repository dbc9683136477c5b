//! Unit tests of the core's exec side: launches and kills asked of the driver, ends
//! reported back, cancels that wait for the processes, directories of forgotten jobs. Node
//! failure is in `flags_tests.rs`, which shares this file's cluster and helpers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use shardsched_jobspec::Shorthand;
use shardsched_wire::msg::client_shard::{CancelResult, IdempotencyKey, Submit};
use shardsched_wire::msg::shard_coord::Assignment;
use shardsched_wire::msg::{Generation, JobId, JobState, NodeFlags, NodeGen, QueueConfig};
use shardsched_wire::{Peer, Role};

use super::tests::{self, NOW};
use super::{CoreExecutor, CoreOptions, ExecAction, ShardCore};
use crate::exec::{EndCause, JobEnd};
use crate::journal::MemJournal;
use shardsched_wire::msg::agent::JobSignature;

pub(super) fn core(executor: CoreExecutor) -> ShardCore {
    core_with(CoreOptions {
        executor,
        ..CoreOptions::default()
    })
}

/// The queue: fcfs over n0 and n1.
pub(super) fn config() -> QueueConfig {
    QueueConfig {
        queue_policy: shardsched_wire::msg::QueuePolicy::Fcfs,
        ..tests::config(&["n0", "n1"])
    }
}

/// n0 and n1 at generation 1.
pub(super) fn owned() -> Vec<NodeGen> {
    tests::owned(&["n0", "n1"])
}

pub(super) fn core_with(options: CoreOptions) -> ShardCore {
    tests::core_for(&config(), &["n0", "n1"], options)
}

pub(super) fn exec_core() -> ShardCore {
    core(CoreExecutor::Exec {
        jobs_dir: PathBuf::from("/state/jobs"),
    })
}

/// Submits a one-node job of `duration` s (with `requeue` set if asked) and returns its id.
/// Signed, as a queue of the agents executor requires (the others keep the signature).
pub(super) fn submit(core: &mut ShardCore, key: u8, duration: u64, requeue: bool) -> JobId {
    let mut jobspec = Shorthand {
        nodes: Some(1),
        duration,
        command: vec!["/bin/app".into()],
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
        urgency: None,
        array: None,
        signature: Some(JobSignature {
            cert_pem: "-----BEGIN CERTIFICATE-----".into(),
            signature: vec![7; 70],
        }),
    };
    core.handle_submit(NOW, "alice", &submit)
        .expect("accepted")
        .id
}

/// The core a restarted shard builds from `journal` at `at`: n0 and n1 owned, `down`
/// marked down (the coordinator keeps the flags too).
pub(super) fn restarted(
    options: CoreOptions,
    journal: &MemJournal,
    at: u64,
    down: &[&str],
) -> ShardCore {
    let restored = journal.restored().expect("no orphan");
    let flags: BTreeMap<String, NodeFlags> = down
        .iter()
        .map(|n| {
            let flags = NodeFlags {
                down: Some("psu".into()),
                drained: None,
            };
            ((*n).to_owned(), flags)
        })
        .collect();
    let assignment = Assignment {
        flags,
        ..tests::assignment(config(), owned(), Vec::new())
    };
    ShardCore::restored(&assignment, options, at, &restored)
        .expect("restored")
        .0
}

pub(super) fn state(core: &ShardCore, id: JobId) -> JobState {
    core.job(id).expect("job").state
}

pub(super) fn reason(core: &ShardCore, id: JobId) -> String {
    core.job_info_reason(id)
}

pub(super) fn exited(code: i32) -> JobEnd {
    JobEnd {
        cause: EndCause::Completed,
        exit_code: Some(code),
        signal: None,
        note: String::new(),
    }
}

pub(super) fn killed(cause: EndCause, note: &str) -> JobEnd {
    JobEnd {
        cause,
        exit_code: None,
        signal: Some(15),
        note: note.into(),
    }
}

impl ShardCore {
    fn job_info_reason(&self, id: JobId) -> String {
        self.handle_job_info(id).expect("job").summary.reason
    }
}

#[test]
fn exec_jobs_are_launched_and_end_only_when_told() {
    let mut core = exec_core();
    let ok = submit(&mut core, 1, 10, false);
    let bad = submit(&mut core, 2, 10, false);
    core.tick(NOW).expect("tick");
    assert_eq!(
        core.take_exec_actions(),
        vec![ExecAction::Launch(ok), ExecAction::Launch(bad)]
    );
    assert!(core.take_exec_actions().is_empty(), "taken once");
    // The clock does not end exec jobs.
    assert_eq!(core.next_wakeup_ms(), None);
    core.tick(NOW + 3_600_000).expect("tick");
    assert_eq!(state(&core, ok), JobState::Running);
    let start = core
        .job(ok)
        .expect("job")
        .events
        .iter()
        .find(|e| e.name == "start")
        .cloned();
    let start = start.expect("start event");
    assert!(
        start.context_json.contains("/state/jobs/"),
        "{}",
        start.context_json
    );
    assert!(
        start.context_json.contains("stdout"),
        "{}",
        start.context_json
    );

    core.handle_job_ended(NOW + 5_000, ok, &exited(0));
    core.handle_job_ended(NOW + 5_000, bad, &exited(3));
    assert_eq!(state(&core, ok), JobState::Completed);
    assert_eq!(state(&core, bad), JobState::Failed);
    assert_eq!(reason(&core, bad), "exit code 3");
    let finish = core
        .job(bad)
        .expect("job")
        .events
        .iter()
        .find(|e| e.name == "finish")
        .cloned();
    assert!(finish.expect("finish").context_json.contains("768"));
    // A repeated report changes nothing.
    core.handle_job_ended(NOW + 6_000, bad, &exited(0));
    assert_eq!(state(&core, bad), JobState::Failed);
    assert_eq!(core.queue_manager().running_len(), 0);
}

#[test]
fn timeouts_and_start_errors_fail_with_their_reason() {
    let mut core = exec_core();
    let slow = submit(&mut core, 1, 2, false);
    let broken = submit(&mut core, 2, 2, false);
    core.tick(NOW).expect("tick");
    core.handle_job_ended(
        NOW + 2_000,
        slow,
        &killed(EndCause::Timeout, "time limit of 2 s reached"),
    );
    let nothing = JobEnd::without_status(EndCause::Error, "cannot start \"/bin/app\"");
    core.handle_job_ended(NOW + 10, broken, &nothing);
    assert_eq!(state(&core, slow), JobState::Failed);
    assert!(reason(&core, slow).starts_with("timeout: time limit of 2 s reached"));
    assert!(reason(&core, slow).contains("signal 15"));
    assert_eq!(state(&core, broken), JobState::Failed);
    assert!(reason(&core, broken).contains("could not start"));
}

#[test]
fn an_exec_cancel_waits_for_the_processes() {
    let mut core = exec_core();
    let job = submit(&mut core, 1, 60, false);
    let waiting = submit(&mut core, 2, 60, false);
    let third = submit(&mut core, 3, 60, false);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    assert_eq!(
        state(&core, third),
        JobState::Pending,
        "two nodes, two jobs"
    );
    let admin = Peer::new(Role::Admin, "root").expect("peer");
    let outcome = core.handle_cancel(NOW + 1, &admin, &[job]);
    assert_eq!(outcome[0].result, CancelResult::Cancelled);
    assert!(matches!(
        core.take_exec_actions().as_slice(),
        [ExecAction::Kill { id, why }] if *id == job && why.contains("cancelled by")
    ));
    // Still holding its node until its processes are gone.
    core.tick(NOW + 2).expect("tick");
    assert_eq!(state(&core, job), JobState::Running);
    assert_eq!(state(&core, third), JobState::Pending);
    core.handle_job_ended(
        NOW + 3,
        job,
        &killed(EndCause::Cancelled, "cancelled by admin root"),
    );
    core.tick(NOW + 3).expect("tick");
    assert_eq!(state(&core, job), JobState::Cancelled);
    assert!(reason(&core, job).contains("cancelled by"));
    assert_eq!(state(&core, waiting), JobState::Running);
    assert_eq!(state(&core, third), JobState::Running);
}

#[test]
fn forgotten_exec_jobs_have_their_directories_removed() {
    let mut core = core_with(CoreOptions {
        executor: CoreExecutor::Exec {
            jobs_dir: PathBuf::from("/state/jobs"),
        },
        finished_retained: 1,
        ..CoreOptions::default()
    });
    let first = submit(&mut core, 1, 10, false);
    let second = submit(&mut core, 2, 10, false);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    core.handle_job_ended(NOW + 1, first, &exited(0));
    assert!(
        core.take_exec_actions().is_empty(),
        "kept: within the retention"
    );
    core.handle_job_ended(NOW + 2, second, &exited(0));
    assert_eq!(core.take_exec_actions(), vec![ExecAction::Forget(first)]);
    assert!(core.job(first).is_none());
}

#[test]
fn a_moves_deadline_kills_the_processes_before_the_node_is_released() {
    use shardsched_wire::msg::MoveId;
    use shardsched_wire::msg::coord_shard::{CancelJobs, Release};
    let mut core = exec_core();
    let id = submit(&mut core, 1, 600, false);
    core.tick(NOW).expect("tick");
    core.take_exec_actions();
    let node = core.job(id).expect("job").nodes[0].clone();
    let at = |generation| NodeGen {
        node: node.clone(),
        generation: Generation(generation),
    };
    core.handle_release(
        NOW,
        &Release {
            move_id: MoveId(9),
            nodes: vec![at(2)],
        },
    );
    core.handle_cancel_jobs(
        NOW + 1,
        &CancelJobs {
            move_id: MoveId(9),
            nodes: vec![at(2)],
        },
    );
    core.tick(NOW + 1).expect("tick");
    assert!(
        core.take_exec_actions()
            .iter()
            .any(|a| matches!(a, ExecAction::Kill { id: k, .. } if *k == id))
    );
    assert_eq!(core.job(id).expect("job").state, JobState::Running);
    assert!(core.take_released().is_empty(), "its processes still run");
    core.handle_job_ended(NOW + 2, id, &killed(EndCause::Cancelled, "move deadline"));
    core.tick(NOW + 2).expect("tick");
    assert_eq!(core.job(id).expect("job").state, JobState::Cancelled);
    let released = core.take_released();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].nodes, vec![at(2)]);
}

#[test]
fn an_agents_queue_takes_only_signed_jobs_and_journals_their_signature() {
    let options = CoreOptions {
        executor: CoreExecutor::Agents,
        journal: true,
        ..CoreOptions::default()
    };
    let mut core = core_with(options.clone());
    let jobspec = Shorthand {
        nodes: Some(1),
        duration: 60,
        command: vec!["/bin/app".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .expect("jobspec")
    .to_json()
    .to_string();
    let mut submit = Submit {
        idempotency_key: IdempotencyKey([1; 16]),
        jobspec_json: jobspec,
        urgency: None,
        array: None,
        signature: None,
    };
    let refused = core
        .handle_submit(NOW, "alice", &submit)
        .expect_err("unsigned");
    assert!(refused.message.contains("not signed"), "{refused}");
    let signature = JobSignature {
        cert_pem: "-----BEGIN CERTIFICATE-----".into(),
        signature: vec![7; 70],
    };
    submit.signature = Some(signature.clone());
    let id = core
        .handle_submit(NOW, "alice", &submit)
        .expect("signed")
        .id;
    let mut journal = MemJournal::default();
    journal.commit(&core.take_journal());
    let restored = journal.restored().expect("no orphan");
    let again = ShardCore::restored(
        &tests::assignment(config(), owned(), Vec::new()),
        options,
        NOW + 1,
        &restored,
    )
    .expect("restored")
    .0;
    assert_eq!(
        again.job(id).and_then(|j| j.signature.as_deref()),
        Some(&signature),
        "the signature comes back with the job"
    );
}

#[test]
fn a_job_past_its_span_keeps_its_node_until_its_end_is_reported() {
    let mut core = exec_core();
    let first = submit(&mut core, 1, 10, false);
    let second = submit(&mut core, 2, 10, false);
    core.tick(NOW).expect("tick");
    let third = submit(&mut core, 3, 10, false);
    core.tick(NOW).expect("tick");
    assert_eq!(
        core.take_exec_actions(),
        vec![ExecAction::Launch(first), ExecAction::Launch(second)]
    );
    // Both spans are over; their processes are still being killed (nothing reported yet).
    core.tick(NOW + 11_000).expect("tick");
    assert!(
        core.take_exec_actions().is_empty(),
        "nothing starts on a completing node"
    );
    assert_eq!(state(&core, third), JobState::Pending);
    core.invariants().expect("invariants");
    // The first's end is reported: the third starts on its node, and only there.
    core.handle_job_ended(
        NOW + 12_000,
        first,
        &killed(EndCause::Timeout, "time limit"),
    );
    core.tick(NOW + 12_000).expect("tick");
    assert_eq!(core.take_exec_actions(), vec![ExecAction::Launch(third)]);
    let node = |id| core.job(id).expect("job").nodes.clone();
    assert_eq!(node(third), node(first));
    core.invariants().expect("invariants");
}
