//! Unit tests of the core's queue-wide behaviour: finished jobs kept up to the retention
//! bound, a stopped or disabled queue, job lists and snapshots, disabling an idle queue.

use shardsched_wire::msg::client_shard::CancelResult;
use shardsched_wire::msg::{JobState, JobsQuery, RefusalCode, UserFilter};

use super::CoreOptions;
use super::tests::{NOW, core, core_with, jobspec, state, submit, user};

#[test]
fn finished_jobs_are_kept_up_to_the_retention_bound() {
    let options = CoreOptions {
        finished_retained: 3,
        ..CoreOptions::default()
    };
    let mut core = core_with(&["n0", "n1"], &["n0", "n1"], options);
    let ids: Vec<_> = (0..5u8)
        .map(|k| {
            core.handle_submit(NOW, "alice", &submit(k, jobspec(None, None, 1)))
                .expect("job")
                .id
        })
        .collect();
    core.tick(NOW).expect("tick");
    core.tick(NOW + 1_000).expect("tick");
    assert_eq!(core.jobs().count(), 3);
    assert!(core.job(ids[0]).is_none() && core.job(ids[1]).is_none());
    assert!(ids[2..].iter().all(|&id| core.job(id).is_some()));
    // The forgotten job's key is forgotten too: reusing it makes a new job.
    let again = core
        .handle_submit(NOW + 2_000, "alice", &submit(0, jobspec(None, None, 1)))
        .expect("job");
    assert!(!again.duplicate);
    // A kept one's key still finds it.
    let kept = core
        .handle_submit(NOW + 2_000, "alice", &submit(4, jobspec(None, None, 1)))
        .expect("job");
    assert_eq!((kept.id, kept.duplicate), (ids[4], true));
}

#[test]
fn a_stopped_queue_accepts_but_does_not_schedule_and_a_disabled_one_refuses() {
    let mut core = core();
    core.set_queue_state(true, false);
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, None, 10)))
        .expect("accepted while stopped");
    core.tick(NOW).expect("tick");
    let summary = core.job(job.id).expect("job").summary("batch", false);
    assert_eq!(summary.state, JobState::Pending);
    assert_eq!(summary.reason, "queue batch is stopped");
    let listed = core.handle_jobs("alice", &query(UserFilter::Mine, false));
    assert_eq!(listed.jobs[0].reason, "queue batch is stopped");
    core.set_queue_state(false, true);
    core.tick(NOW + 1).expect("tick");
    assert_eq!(state(&core, job.id), JobState::Running);
    let refusal = core
        .handle_submit(NOW + 2, "alice", &submit(2, jobspec(None, None, 10)))
        .expect_err("disabled");
    assert_eq!(refusal.code, RefusalCode::Policy);
    // A retry of an accepted submit still finds its job.
    let again = core
        .handle_submit(NOW + 3, "alice", &submit(1, jobspec(None, None, 10)))
        .expect("retry");
    assert!(again.duplicate);
}

fn query(user: UserFilter, include_inactive: bool) -> JobsQuery {
    JobsQuery {
        queue: None,
        user,
        include_inactive,
        limit: 0,
        states: Vec::new(),
        name: None,
    }
}

#[test]
fn job_lists_filter_and_snapshots_do_not_change() {
    let mut core = core();
    let a = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(None, None, 1)))
        .expect("a");
    let b = core
        .handle_submit(NOW + 1, "bob", &submit(1, jobspec(None, None, 100)))
        .expect("b");
    core.tick(NOW + 1).expect("tick");
    let before = core.snapshot();
    core.tick(NOW + 2_000).expect("tick");
    assert_eq!(state(&core, a.id), JobState::Completed);
    assert_eq!(
        before.job(a.id).map(|j| j.state),
        Some(JobState::Running),
        "an old snapshot keeps what it saw"
    );

    let ids = |list: shardsched_wire::msg::JobList| -> Vec<_> {
        list.jobs.iter().map(|j| j.id).collect()
    };
    assert_eq!(
        ids(core.handle_jobs("alice", &query(UserFilter::Mine, false))),
        []
    );
    assert_eq!(
        ids(core.handle_jobs("alice", &query(UserFilter::Mine, true))),
        [a.id]
    );
    assert_eq!(
        ids(core.handle_jobs("x", &query(UserFilter::All, true))),
        [b.id, a.id],
        "newest first"
    );
    assert_eq!(
        ids(core.handle_jobs("x", &query(UserFilter::Named("bob".into()), false))),
        [b.id]
    );
    let one = core.handle_jobs(
        "x",
        &JobsQuery {
            limit: 1,
            ..query(UserFilter::All, true)
        },
    );
    assert!(one.truncated && one.jobs.len() == 1);
    let elsewhere = core.handle_jobs(
        "x",
        &JobsQuery {
            queue: Some("debug".into()),
            ..query(UserFilter::All, true)
        },
    );
    assert!(elsewhere.jobs.is_empty());
    let info = core.handle_job_info(a.id).expect("info");
    assert_eq!(info.summary.queue, "batch");
    assert!(info.r_json.is_some() && !info.events.is_empty());
    assert!(core.handle_job_info(shardsched_wire::Fluid(1)).is_none());
}

/// A queue being removed is disabled only when it holds no job, in one step: a removal
/// refused for jobs never leaves it disabled.
#[test]
fn disable_if_idle_disables_only_an_idle_queue() {
    let mut core = core();
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(1), None, 10)))
        .expect("job");
    let refusal = core.disable_if_idle().expect_err("it has a job");
    assert_eq!(refusal.code, RefusalCode::Policy);
    assert!(refusal.message.contains("1 pending"), "{refusal}");
    assert!(core.status(NOW).queue.enabled, "a refusal changes nothing");
    let cancelled = core.handle_cancel(NOW, &user("alice"), &[job.id]);
    assert_eq!(cancelled[0].result, CancelResult::Cancelled);
    core.disable_if_idle().expect("idle now");
    assert!(!core.status(NOW).queue.enabled);
}

#[test]
fn ended_jobs_are_pulled_by_end_then_id_after_a_cursor_with_their_r_counted() {
    use shardsched_wire::msg::history::HistoryPull;
    let mut core = core();
    let mut submitted = |k: u8, tasks: u64, duration: u64| {
        core.handle_submit(
            NOW,
            "alice",
            &submit(k, jobspec(None, Some(tasks), duration)),
        )
        .expect("job")
        .id
    };
    let (short, two, long) = (submitted(1, 1, 1), submitted(2, 2, 1), submitted(3, 1, 5));
    core.tick(NOW).expect("tick");
    core.tick(NOW + 1_000).expect("tick");
    let snapshot = core.snapshot();
    let all = snapshot.history(&HistoryPull {
        after: None,
        limit: 0,
    });
    let ids: Vec<_> = all.iter().map(|r| r.job.id).collect();
    let mut expected = vec![short, two];
    expected.sort();
    assert_eq!(
        ids, expected,
        "ended jobs only (not {long}), by id at one end time"
    );
    let cores = |id| all.iter().find(|r| r.job.id == id).map(|r| r.cores);
    assert_eq!(
        (cores(short), cores(two)),
        (Some(1), Some(2)),
        "cores from R"
    );
    let rest = snapshot.history(&HistoryPull {
        after: Some(all[0].cursor()),
        limit: 1,
    });
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].job.id, all[1].job.id);
    assert!(rest[0].r_json.is_some() && rest[0].run_ms() == 1_000);
}
