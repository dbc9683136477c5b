//! What a shard tells about time and availability while nodes move: a pending job's
//! reservation when the node it was planned on leaves, the free times a move and a dry run
//! are given (on the timeline the queue manager reserves on, whatever the sim's time
//! scale), and which pending jobs a release would strand (against what the queue would
//! still own, not its whole definition).

use shardsched_wire::msg::coord_shard::{FreeAt, Release, Response};
use shardsched_wire::msg::{Generation, JobState, MoveId, NodeGen};

use super::tests::{NOW, core_with, jobspec, submit};
use super::{CoreOptions, ShardCore};

fn release(node: &str) -> Release {
    Release {
        move_id: MoveId(1),
        nodes: vec![NodeGen {
            node: node.into(),
            generation: Generation(2),
        }],
    }
}

fn job(core: &mut ShardCore, key: u8, nodes: u64, secs: u64) -> shardsched_wire::Fluid {
    core.handle_submit(NOW, "alice", &submit(key, jobspec(Some(nodes), None, secs)))
        .expect("accepted")
        .id
}

#[test]
fn a_reservation_on_a_node_that_moves_out_is_not_shown_any_more() {
    let mut core = core_with(&["n0", "n1"], &["n0", "n1"], CoreOptions::default());
    let running = job(&mut core, 1, 2, 100);
    let waiting = job(&mut core, 2, 2, 10);
    core.tick(NOW).expect("tick");
    let summary = core.job(waiting).expect("job").summary("batch", true);
    assert_eq!(summary.reserved_ms, Some(NOW + 100_000), "{summary:?}");

    // n1 moves out (its job keeps it until then): the waiting job needs two nodes and the
    // queue will have one, so its reservation is gone, and it says why it waits now.
    core.handle_release(NOW + 1, &release("n1"));
    core.tick(NOW + 1).expect("tick");
    core.tick(NOW + 200_000).expect("past the old reservation");
    assert_eq!(core.job(running).expect("job").state, JobState::Completed);
    let summary = core.job(waiting).expect("job").summary("batch", true);
    assert_eq!(summary.state, JobState::Pending);
    assert_eq!(summary.reserved_ms, None, "{summary:?}");
    assert_eq!(summary.reason, "resources it needs are down or not owned");
}

/// Under `--time-scale 10` a 100 s sim job ends after 10 s, but the queue manager plans on
/// its 100 s: the donor's own reservations, a move's expected free time and a dry run all
/// say 100 s (one timeline; the node is released when the job really ends).
#[test]
fn move_and_dry_run_free_times_are_on_the_planners_timeline_under_a_time_scale() {
    let options = CoreOptions {
        time_scale: 10.0,
        ..CoreOptions::default()
    };
    let mut core = core_with(&["n0", "n1"], &["n0", "n1"], options);
    let running = job(&mut core, 1, 1, 100);
    let waiting = job(&mut core, 2, 2, 10);
    core.tick(NOW).expect("tick");
    let reserved = core
        .job(waiting)
        .expect("job")
        .summary("batch", true)
        .reserved_ms
        .expect("reserved at the running job's planned end");
    assert_eq!(reserved, NOW + 100_000);
    let dry = core.dry_run_release(&["n0".into()]).expect("dry run");
    assert_eq!(dry.nodes[0].free, FreeAt::Expected(reserved));
    let Response::Releasing { nodes, .. } = core.handle_release(NOW + 1, &release("n0")) else {
        panic!("not a release answer");
    };
    assert_eq!(nodes[0].free, FreeAt::Expected(reserved));
    // The sim still ends the job at its scaled time, and the node is released then.
    core.tick(NOW + 10_000).expect("tick");
    assert_eq!(core.job(running).expect("job").state, JobState::Completed);
    assert_eq!(core.take_released().len(), 1);
}

/// A queue defined over n0..n3 that owns n0 and n1: releasing n1 would leave it one node,
/// so a pending two-node job could never run there, though its definition has four.
#[test]
fn a_dry_run_judges_stranded_jobs_against_what_the_queue_will_still_own() {
    let mut core = core_with(
        &["n0", "n1", "n2", "n3"],
        &["n0", "n1"],
        CoreOptions::default(),
    );
    let blocker = job(&mut core, 1, 2, 100);
    let wide = job(&mut core, 2, 2, 10);
    core.tick(NOW).expect("tick");
    assert_eq!(core.job(blocker).expect("job").state, JobState::Running);
    let report = core.dry_run_release(&["n1".into()]).expect("dry run");
    assert_eq!(report.stranded, vec![wide]);
    let report = core
        .dry_run_release(&["n3".into()])
        .expect("not owned anyway");
    assert!(report.stranded.is_empty(), "{report:?}");
}

/// The queue manager plans in whole seconds: a job started at 0.728 s into a second holds
/// its node from that second's start for its duration. The sim ends it at that span's end
/// at the latest, so the next job on the node never starts while it still runs (found by
/// the simulator: both "ran" on one exclusive node for 728 ms).
#[test]
fn a_sim_job_ends_by_the_end_of_its_span_so_two_never_share_a_node() {
    let mut core = core_with(&["n0"], &["n0"], CoreOptions::default());
    let start = NOW + 728;
    let first = core
        .handle_submit(start, "alice", &submit(1, jobspec(Some(1), None, 11)))
        .expect("accepted")
        .id;
    let second = core
        .handle_submit(start, "alice", &submit(2, jobspec(Some(1), None, 1)))
        .expect("accepted")
        .id;
    core.tick(start).expect("tick");
    assert_eq!(core.job(first).expect("job").state, JobState::Running);
    assert_eq!(core.next_wakeup_ms(), Some(NOW + 11_000), "the span's end");
    core.tick(NOW + 11_000).expect("tick at the span's end");
    let states = (
        core.job(first).expect("job").state,
        core.job(second).expect("job").state,
    );
    assert_eq!(states, (JobState::Completed, JobState::Running));
}
