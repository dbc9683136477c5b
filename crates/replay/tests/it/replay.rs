//! Replays of generated workloads through every policy, verified by the independent
//! schedule checker and by the properties each policy promises.
#![allow(clippy::unwrap_used)]

use shardsched_qmanager::{Params, QueuePolicy};
use shardsched_replay::check::check_schedule;
use shardsched_replay::replay::{JobResult, Replay, Unit};
use shardsched_replay::swf::{self, Workload};
use shardsched_replay::workload::{GenParams, generate};
use shardsched_resource::ResourceGraph;

/// A cluster of `n` nodes (2 sockets × 22 cores each).
fn cluster(n: usize) -> ResourceGraph {
    shardsched_resource::generated_cluster(n).build().unwrap()
}

fn workload(jobs: usize, nodes: u64, seed: u64) -> Workload {
    let text = generate(&GenParams {
        jobs,
        nodes,
        seed,
        load: 1.1,
    })
    .unwrap();
    swf::parse(&text).unwrap()
}

/// The same workload with every job running exactly its requested time.
fn exact(w: &Workload) -> Workload {
    let text: String = w
        .to_string()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if l.starts_with(';') || f.len() != 18 {
                return format!("{l}\n");
            }
            let mut f: Vec<String> = f.iter().map(|s| s.to_string()).collect();
            f[8] = f[3].clone();
            format!("{}\n", f.join(" "))
        })
        .collect();
    swf::parse(&text).unwrap()
}

fn replay(w: &Workload, nodes: usize, unit: Unit, params: Params) -> (Vec<JobResult>, String) {
    let mut r = Replay::new(cluster(nodes), w, unit, params).unwrap();
    while r.step().unwrap() {
        let m = r.queue().matcher();
        let allocs: Vec<_> = m.jobs().map(|(id, j)| (id, &j.alloc)).collect();
        let v = shardsched_matcher::checker::check(&m.graph, &allocs);
        assert!(v.is_empty(), "{v:?}");
    }
    let out = swf::write_with_waits(w, &r.fates());
    (r.results().to_vec(), out)
}

fn params(policy: QueuePolicy) -> Params {
    Params {
        queue_depth: 0,
        reservation_depth: 3,
        ..Params::with_policy(policy)
    }
}

#[test]
fn every_policy_passes_the_schedule_checker() {
    for (seed, nodes, unit) in [(1, 16, Unit::Node), (2, 8, Unit::Node), (3, 2, Unit::Core)] {
        let w = workload(120, if unit == Unit::Core { 64 } else { nodes }, seed);
        let cap = if unit == Unit::Core { 88 } else { nodes };
        for policy in QueuePolicy::ALL {
            let (results, out) = replay(&w, nodes as usize, unit, params(policy));
            let v = check_schedule(&out, cap, policy == QueuePolicy::Fcfs).unwrap();
            assert!(v.is_empty(), "{policy} seed {seed}: {v:?}");
            let ran = results.iter().filter(|r| r.start.is_some()).count();
            assert_eq!(ran, results.len(), "{policy}: every job fits and runs");
        }
    }
}

#[test]
fn backfill_policies_beat_fcfs_on_wait() {
    let w = workload(150, 16, 11);
    let mean = |p| {
        let (r, _) = replay(&w, 16, Unit::Node, params(p));
        let m = shardsched_replay::metrics::compute(&r, 16, 1.0);
        m.wait_mean
    };
    let fcfs = mean(QueuePolicy::Fcfs);
    let easy = mean(QueuePolicy::Easy);
    assert!(easy < fcfs, "easy {easy} vs fcfs {fcfs}");
}

#[test]
fn skipping_unchanged_work_changes_no_start() {
    let cases = [
        (workload(100, 8, 5), 8, Unit::Node),
        (exact(&workload(100, 8, 6)), 8, Unit::Node),
        (workload(80, 64, 7), 2, Unit::Core),
    ];
    for (w, nodes, unit) in &cases {
        for policy in QueuePolicy::ALL {
            // Unlimited, and a depth the backlog exceeds (the window moves as jobs start).
            for queue_depth in [0, 3] {
                let fast_params = Params {
                    queue_depth,
                    ..params(policy)
                };
                let exhaustive = Params {
                    exhaustive: true,
                    ..fast_params.clone()
                };
                let fast = replay(w, *nodes, *unit, fast_params).0;
                let full = replay(w, *nodes, *unit, exhaustive).0;
                let starts = |r: &[JobResult]| r.iter().map(|j| j.start).collect::<Vec<_>>();
                assert_eq!(
                    starts(&fast),
                    starts(&full),
                    "{policy} {unit:?} queue-depth {queue_depth}"
                );
            }
        }
    }
}

#[test]
fn easy_never_starts_the_head_after_its_reservation() {
    for seed in [21, 22] {
        let (results, _) = replay(
            &workload(150, 8, seed),
            8,
            Unit::Node,
            params(QueuePolicy::Easy),
        );
        assert_no_start_after_first_reservation(&results);
    }
}

/// No job started after the first reservation it was given, and the workload gave enough
/// reservations for that to mean something.
fn assert_no_start_after_first_reservation(results: &[JobResult]) {
    let reserved = results
        .iter()
        .filter(|r| r.first_reservation.is_some())
        .count();
    assert!(reserved > 10, "the workload exercises reservations");
    for (i, r) in results.iter().enumerate() {
        if let (Some(first), Some(start)) = (r.first_reservation, r.start) {
            assert!(
                start <= first,
                "job {i} reserved at {first} started at {start}"
            );
        }
    }
}

#[test]
fn conservative_never_starts_a_job_after_its_first_reservation() {
    // Equal priorities, no node lost, run times as requested.
    for seed in [31, 32] {
        let w = exact(&workload(120, 8, seed));
        let (results, _) = replay(&w, 8, Unit::Node, params(QueuePolicy::Conservative));
        assert_no_start_after_first_reservation(&results);
    }
}

#[test]
fn jobs_larger_than_the_cluster_are_denied_and_marked() {
    let text = "; tiny\n\
        1 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 1 1 -1 -1\n\
        2 0 -1 10 9 -1 -1 9 10 -1 1 1 1 -1 1 1 -1 -1\n\
        3 1 -1 10 -1 -1 -1 -1 10 -1 1 1 1 -1 1 1 -1 -1\n\
        4 2 -1 0 1 -1 -1 1 -1 -1 1 1 1 -1 1 1 -1 -1\n";
    let w = swf::parse(text).unwrap();
    let (results, out) = replay(&w, 4, Unit::Node, params(QueuePolicy::Fcfs));
    assert_eq!(results[0].start, Some(0));
    assert!(
        results[1]
            .not_run
            .as_deref()
            .unwrap()
            .contains("unsatisfiable")
    );
    assert_eq!(results[2].not_run.as_deref(), Some("no processor count"));
    assert_eq!(results[3].start, Some(2));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "1 0 0 10 2 -1 -1 2 10 -1 1 1 1 -1 1 1 -1 -1");
    assert_eq!(lines[2], "2 0 -1 10 9 -1 -1 9 10 -1 5 1 1 -1 1 1 -1 -1");
    assert!(check_schedule(&out, 4, true).unwrap().is_empty());
}
