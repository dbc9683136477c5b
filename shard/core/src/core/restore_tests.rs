//! Unit tests of the core's journal records, retention, and restore refusals (the
//! property test in shard/tests/props/ restarts the core at random points).

use super::tests::{NOW, core_with, jobspec, submit};
use super::{CoreOptions, ShardCore};
use crate::error::ShardError;
use crate::journal::{
    AcceptedJob, AllocatedVertex, EndState, HoldingRecord, JournalRecord, Restored, RestoredJob,
    StartedJob,
};

fn journaling(retention_ms: u64, finished_retained: usize) -> ShardCore {
    core_with(
        &["n0", "n1"],
        &["n0", "n1"],
        CoreOptions {
            retention_ms,
            finished_retained,
            journal: true,
            ..CoreOptions::default()
        },
    )
}

fn kinds(records: &[JournalRecord]) -> Vec<&'static str> {
    records
        .iter()
        .filter(|r| !matches!(r, JournalRecord::Node(..)))
        .map(|r| match r {
            JournalRecord::Accepted(_) => "accepted",
            JournalRecord::Signed(_) => "signed",
            JournalRecord::Started(_) => "started",
            JournalRecord::Ended(_) => "ended",
            JournalRecord::Forgotten(_) => "forgotten",
            JournalRecord::LastId(_) => "last_id",
            JournalRecord::Requeued(_) => "requeued",
            JournalRecord::KillRequested(_) => "kill",
            JournalRecord::Urgency(..) => "urgency",
            JournalRecord::Array(_) => "array",
            JournalRecord::ArrayForgotten { .. } => "array_forgotten",
            JournalRecord::Node(..) => "node",
            JournalRecord::Allowance(..) => "allowance",
        })
        .collect()
}

#[test]
fn a_job_life_is_journaled_as_it_happens() {
    let mut core = journaling(u64::MAX, 100);
    let first = core.take_journal();
    assert!(kinds(&first).is_empty(), "{first:?}");
    let nodes: Vec<&str> = first
        .iter()
        .filter_map(|r| match r {
            JournalRecord::Node(n, e) if e.holding == HoldingRecord::Owned => Some(n.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, ["n0", "n1"], "each owned node journaled once");
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, Some(1), 10)))
        .expect("job");
    core.tick(NOW).expect("tick");
    let records = core.take_journal();
    assert_eq!(kinds(&records), vec!["accepted", "started", "last_id"]);
    let JournalRecord::Started(run) = &records[1] else {
        panic!("{records:?}");
    };
    assert_eq!(
        (run.id, run.start_ms, run.sim_end_ms),
        (job.id.0, NOW, NOW + 10_000)
    );
    assert!(
        run.vertices.iter().any(|v| v.path.ends_with("/n0")),
        "{run:?}"
    );
    // A retry is not a change.
    core.handle_submit(NOW, "alice", &submit(1, jobspec(None, Some(1), 10)))
        .expect("retry");
    assert!(core.take_journal().is_empty());
    core.tick(NOW + 10_000).expect("tick");
    let records = core.take_journal();
    assert!(
        matches!(&records[..], [JournalRecord::Ended(e)] if e.state == EndState::Completed && e.end_ms == NOW + 10_000),
        "{records:?}"
    );
}

#[test]
fn finished_jobs_past_retention_leave_the_table_and_the_journal() {
    let mut core = journaling(5_000, 100);
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, Some(1), 1)))
        .expect("job");
    core.tick(NOW).expect("tick");
    core.tick(NOW + 1_000).expect("tick");
    core.take_journal();
    core.tick(NOW + 5_999).expect("tick");
    assert!(core.job(job.id).is_some(), "kept within retention");
    assert!(core.take_journal().is_empty());
    core.tick(NOW + 6_001).expect("tick");
    assert!(core.job(job.id).is_none(), "forgotten after retention");
    assert_eq!(core.take_journal(), vec![JournalRecord::Forgotten(job.id)]);
    // Its key is forgotten with it: the same key is a new job.
    let again = core
        .handle_submit(NOW + 6_001, "alice", &submit(1, jobspec(None, Some(1), 1)))
        .expect("job");
    assert!(!again.duplicate && again.id != job.id);
}

#[test]
fn finished_jobs_beyond_the_count_are_forgotten_in_the_journal_too() {
    let mut core = journaling(u64::MAX, 1);
    let ids: Vec<_> = (0..3u8)
        .map(|k| {
            core.handle_submit(NOW, "alice", &submit(k, jobspec(None, Some(1), 1)))
                .expect("job")
                .id
        })
        .collect();
    core.tick(NOW).expect("tick");
    core.tick(NOW + 1_000).expect("tick");
    let forgotten: Vec<_> = core
        .take_journal()
        .into_iter()
        .filter_map(|r| match r {
            JournalRecord::Forgotten(id) => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(forgotten.len(), 2);
    assert_eq!(core.jobs().count(), 1);
    assert!(forgotten.iter().all(|id| ids.contains(id)));
}

#[test]
fn a_running_job_on_a_vertex_the_cluster_lacks_refuses_the_restore() {
    let mut core = journaling(u64::MAX, 100);
    let id = shardsched_wire::Fluid(42);
    let restored = Restored {
        nodes: Vec::new(),
        allowances: Vec::new(),
        jobs: vec![RestoredJob {
            id: id.0,
            array: None,
            accepted: std::sync::Arc::new(AcceptedJob {
                id: id.0,
                owner: "alice".into(),
                key: [9; 16],
                jobspec_json: jobspec(None, Some(1), 10),
                urgency: 16,
                submit_ms: NOW - 5_000,
            }),
            signature: None,
            started: Some(StartedJob {
                id: id.0,
                start_ms: NOW - 5_000,
                sim_end_ms: NOW + 5_000,
                vertices: vec![AllocatedVertex {
                    path: "/c0/n9".into(),
                    needs: 1,
                    exclusive: true,
                }],
                at: i64::try_from((NOW - 5_000) / 1000).expect("time"),
                duration: 10,
            }),
            ended: None,
            urgency: None,
            kill: None,
        }],
        last_id: Some(id),
    };
    let e = core
        .restore_jobs(NOW, &restored)
        .expect_err("restored onto a missing node");
    assert!(matches!(e, ShardError::Restore(_)), "{e}");
    assert!(e.to_string().contains("/c0/n9"), "{e}");
}
