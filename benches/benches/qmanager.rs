//! Queue manager throughput: replays of generated workloads through the real queue manager
//! and matcher, timed as `shardsched replay` times them (wall time inside the queue manager
//! and matcher, not building jobspecs or the replay's bookkeeping), reported as jobs per
//! second.
//!
//! - `replay/<policy>/1024n` — 1,024 generated nodes (2 sockets × 22 cores each), `--unit
//!   node`, match policy first: the configuration, on a short workload so that a
//!   sample takes seconds, not hours. The full 100,000-job figure comes from the
//!   `shardsched replay` command recorded in docs/BENCHMARKS.md.
//! - `replay/<policy>/flat256` — 256 one-core nodes: the matcher's traversals are short, so
//!   this bounds what the queue manager itself costs per job.
//! - `cycle/idle` and `cycle/arrival` — one scheduling cycle with 10,000 jobs pending behind
//!   a blocked head: nothing changed, and one job arrived. Both must stay flat as the queue
//!   grows (no per-cycle work proportional to the jobs pending, let alone ever seen).
//!
//! - `redefine/<held>` — a queue's definition widened by 512 nodes and narrowed back
//!   (`QueueManager::grow` then `shrink`, what a shard does for `queue update --nodes`
//!   without a restart), on a queue of `held` nodes of the bench shape with 64 jobs running:
//!   the cost grows with the queue's graph, not with the change.
//!
//! Run with `cargo bench -p shardsched-benches --bench qmanager`.

use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use shardsched_jobspec::Shorthand;
use shardsched_qmanager::{JobRequest, Params, QueueManager, QueuePolicy};
use shardsched_replay::replay::{Replay, Unit};
use shardsched_replay::swf::{self, Workload};
use shardsched_replay::workload::{GenParams, generate};
use shardsched_resource::{
    CONTAINMENT, GraphBuilder, ResourceGraph, SCHEDULER_TYPES, VertexId, VertexSpec, keep_subtrees,
};

fn workload(jobs: usize, nodes: u64) -> Workload {
    let text = generate(&GenParams {
        jobs,
        nodes,
        seed: 1,
        load: 0.9,
    })
    .expect("valid generator parameters");
    swf::parse(&text).expect("generated workloads parse")
}

fn generated(nodes: usize) -> ResourceGraph {
    shardsched_resource::generated_cluster(nodes)
        .build()
        .expect("generated cluster builds")
}

/// A cluster of `nodes` nodes of one core each.
fn flat(nodes: usize) -> ResourceGraph {
    let mut b = GraphBuilder::new();
    let c = b.add_vertex(VertexSpec::new("cluster", "flat", 0));
    for i in 0..nodes {
        let n = b.add_vertex(VertexSpec::new("node", "node", i as i64));
        b.add_edge(c, n, CONTAINMENT);
        let core = b.add_vertex(VertexSpec::new("core", "core", 0));
        b.add_edge(n, core, CONTAINMENT);
    }
    b.finish().expect("flat cluster builds")
}

fn params(policy: QueuePolicy, queue_depth: usize) -> Params {
    Params {
        queue_depth,
        ..Params::with_policy(policy)
    }
}

/// A replay bench: name, cluster, workload, and (policy, queue depth) pairs to run.
type Case = (
    &'static str,
    ResourceGraph,
    Workload,
    Vec<(QueuePolicy, usize)>,
);

/// Replays `w` once; returns the scheduler time.
fn replay_once(graph: &ResourceGraph, w: &Workload, params: &Params) -> Duration {
    let mut r = Replay::new(graph.clone(), w, Unit::Node, params.clone()).expect("replay starts");
    r.run().expect("replay runs");
    r.scheduler_time()
}

fn replays(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let cases: [Case; 2] = [
        (
            "1024n",
            generated(1024),
            workload(400, 1024),
            vec![(QueuePolicy::Easy, 0), (QueuePolicy::Conservative, 64)],
        ),
        (
            "flat256",
            flat(256),
            workload(4000, 256),
            vec![
                (QueuePolicy::Fcfs, 0),
                (QueuePolicy::Easy, 0),
                (QueuePolicy::Conservative, 64),
            ],
        ),
    ];
    for (name, graph, w, policies) in &cases {
        g.throughput(Throughput::Elements(w.jobs.len() as u64));
        for (policy, depth) in policies {
            let p = params(*policy, *depth);
            let id = BenchmarkId::new(policy.name(), name);
            g.bench_function(id, |b| {
                b.iter_custom(|iters| (0..iters).map(|_| replay_once(graph, w, &p)).sum());
            });
        }
    }
    g.finish();
}

/// Long enough that no job ends while a cycle bench runs (time advances a second a cycle).
const CYCLE_JOB_SECS: u64 = 1 << 30;

fn job(id: u64, nodes: u64, submit: i64) -> JobRequest {
    JobRequest {
        id,
        jobspec: Shorthand {
            nodes: Some(nodes),
            duration: CYCLE_JOB_SECS,
            command: vec!["app".into()],
            ..Shorthand::default()
        }
        .to_jobspec()
        .expect("valid shorthand"),
        priority: 0,
        submit_time: submit,
        user: 1,
    }
}

/// An easy queue on 64 flat nodes: one job holds them all, `pending` wait behind it.
fn blocked_queue(pending: u64) -> QueueManager {
    let mut qm = QueueManager::new(flat(64), params(QueuePolicy::Easy, 0)).expect("queue");
    qm.submit(job(0, 64, 0)).expect("submit");
    for id in 1..=pending {
        qm.submit(job(id, 1 + id % 64, 0)).expect("submit");
    }
    qm.schedule(0).expect("schedule");
    while qm.poll_event().is_some() {}
    qm
}

fn cycles(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    for pending in [100u64, 10_000] {
        let mut qm = blocked_queue(pending);
        let mut now = 1;
        g.bench_function(BenchmarkId::new("idle", pending), |b| {
            b.iter(|| {
                now += 1;
                qm.schedule(now).expect("schedule")
            });
        });
        let mut qm = blocked_queue(pending);
        let mut next = pending + 1;
        g.bench_function(BenchmarkId::new("arrival", pending), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let j = job(next, 1 + next % 64, now);
                    now += 1;
                    next += 1;
                    let t = Instant::now();
                    qm.submit(j).expect("submit");
                    qm.schedule(now).expect("schedule");
                    timed += t.elapsed();
                    while qm.poll_event().is_some() {}
                }
                timed
            });
        });
    }
    g.finish();
}

/// Nodes a definition change adds and takes back in `redefine`.
const REDEFINED_NODES: usize = 512;

fn redefines(c: &mut Criterion) {
    let mut g = c.benchmark_group("redefine");
    g.sample_size(10);
    for held in [512usize, 4096] {
        let cluster = generated(held + REDEFINED_NODES);
        let cut = |range: std::ops::Range<usize>| {
            let names: std::collections::HashSet<String> =
                range.map(|i| format!("node{i}")).collect();
            keep_subtrees(&cluster, SCHEDULER_TYPES, &|n| names.contains(n)).expect("cut")
        };
        let (base, added) = (cut(0..held), cut(held..held + REDEFINED_NODES));
        let mut qm = QueueManager::new(base, params(QueuePolicy::Easy, 64)).expect("queue");
        for id in 0..64 {
            qm.submit(job(id, (held / 128) as u64, 0)).expect("submit");
        }
        qm.schedule(0).expect("schedule");
        while qm.poll_event().is_some() {}
        assert_eq!(qm.running_len(), 64);
        // Each sample changes a fresh copy (a removed vertex keeps its row: changing one
        // queue manager again and again would time an ever larger graph).
        g.bench_function(BenchmarkId::from_parameter(held), |b| {
            b.iter_batched(
                || qm.clone(),
                |mut qm| {
                    qm.grow(&added).expect("grow");
                    let graph = &qm.matcher().graph;
                    let roots: Vec<VertexId> = graph
                        .vertices()
                        .filter(|&v| {
                            graph.kind_str(v) == "node"
                                && !graph.is_removed(v)
                                && graph.name(v)[4..].parse::<usize>().is_ok_and(|i| i >= held)
                        })
                        .collect();
                    assert_eq!(roots.len(), REDEFINED_NODES);
                    qm.shrink(&roots).expect("shrink");
                    qm
                },
                BatchSize::LargeInput,
            );
        });
    }
    g.finish();
}

criterion_group!(benches, replays, cycles, redefines);
criterion_main!(benches);
