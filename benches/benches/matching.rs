//! Matching latency through [`Matcher::run`] — the one entry point `shardsched query`, replay
//! and the shards use, so these figures are the ones users get — and graph load time.
//!
//! Each match bench allocates on an empty generated cluster (the shape of the bench GRUGs:
//! racks of 64 nodes, 2 sockets × 22 cores, 2 gpus and 4 memory pools per socket) and cancels
//! the job outside the timed region, so every iteration sees the same state and the graph
//! never fills up. `cancel/…` times the cancel half of that pair on its own.
//!
//! The GRUG load bench reads `bench1024.graphml` from `$SHARDSCHED_BENCH_DIR` (default
//! `../shared/bench` beside the workspace) and is skipped, saying why, when it is absent.
//!
//! Run with `cargo bench -p shardsched-benches --bench matching`; measurement times are short
//! because the project machine has two cores (pass criterion flags such as
//! `--measurement-time` after `--` for longer runs).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Bencher, Criterion, criterion_group, criterion_main};
use shardsched_benches::inputs::{NODE_EXCL, NODES64_EXCL, SOCKET_22C_1G, bench_dir};
use shardsched_jobspec::Jobspec;
use shardsched_matcher::{MatchOp, MatchOutcome, MatchPolicy, Matcher, PruneFilters};
use shardsched_resource::{GraphFormat, ResourceGraph, generated_cluster, read_graph_file};

/// Cluster sizes of the match benches.
const SIZES: [usize; 2] = [1024, 4096];

/// (bench name, jobspec, policies) of the match benches.
const CASES: [(&str, &str, &[&str]); 3] = [
    ("node_excl", NODE_EXCL, &["first", "high", "low"]),
    ("socket_22c_1g", SOCKET_22C_1G, &["first"]),
    ("64node_excl", NODES64_EXCL, &["low"]),
];

fn jobspec(text: &str) -> Jobspec {
    shardsched_jobspec::parse(text).expect("built-in bench jobspec parses")
}

fn cluster(nodes: usize) -> ResourceGraph {
    generated_cluster(nodes)
        .build()
        .expect("generated cluster builds")
}

fn matcher(graph: &ResourceGraph, policy: &str) -> Matcher {
    Matcher::new(
        graph.clone(),
        MatchPolicy::parse(policy).expect("known policy"),
        &PruneFilters::default_filters(),
    )
}

/// Times `Matcher::run(Allocate)` alone; the cancel that restores the empty state runs
/// untimed after each call.
fn allocate_then_cancel(b: &mut Bencher, m: &mut Matcher, js: &Jobspec) {
    let mut jobid = 0u64;
    b.iter_custom(|iters| {
        let mut timed = Duration::ZERO;
        for _ in 0..iters {
            jobid += 1;
            let started = Instant::now();
            let outcome = m.run(MatchOp::Allocate, black_box(js), jobid, 0);
            timed += started.elapsed();
            match black_box(outcome) {
                Ok(MatchOutcome::Allocated(_)) => {}
                other => panic!("bench match did not allocate: {other:?}"),
            }
            m.cancel(jobid).expect("cancel of a fresh allocation");
        }
        timed
    });
}

/// Times `Matcher::cancel` alone; the allocate that precedes it runs untimed.
fn cancel_after_allocate(b: &mut Bencher, m: &mut Matcher, js: &Jobspec) {
    let mut jobid = 0u64;
    b.iter_custom(|iters| {
        let mut timed = Duration::ZERO;
        for _ in 0..iters {
            jobid += 1;
            match m.run(MatchOp::Allocate, js, jobid, 0) {
                Ok(MatchOutcome::Allocated(_)) => {}
                other => panic!("bench match did not allocate: {other:?}"),
            }
            let started = Instant::now();
            let r = m.cancel(black_box(jobid));
            timed += started.elapsed();
            r.expect("cancel of a fresh allocation");
        }
        timed
    });
}

fn matching(c: &mut Criterion) {
    for nodes in SIZES {
        let graph = cluster(nodes);
        let mut group = c.benchmark_group(format!("match/{nodes}"));
        for (name, text, policies) in CASES {
            let js = jobspec(text);
            for policy in policies {
                let mut m = matcher(&graph, policy);
                group.bench_function(format!("{name}/{policy}"), |b| {
                    allocate_then_cancel(b, &mut m, &js)
                });
            }
        }
        group.finish();
    }
    let graph = cluster(4096);
    let js = jobspec(NODE_EXCL);
    let mut m = matcher(&graph, "first");
    c.bench_function("cancel/4096/node_excl/first", |b| {
        cancel_after_allocate(b, &mut m, &js)
    });
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.bench_function("generated_1024_build", |b| {
        b.iter_with_large_drop(|| generated_cluster(1024).build())
    });
    let graph = cluster(1024);
    let filters = PruneFilters::default_filters();
    let policy = MatchPolicy::parse("first").expect("known policy");
    group.bench_function("matcher_new_1024", |b| {
        b.iter_batched(
            || graph.clone(),
            |g| black_box(Matcher::new(g, policy, &filters)),
            criterion::BatchSize::LargeInput,
        )
    });
    match bench_dir() {
        Ok(dir) => {
            let path = dir.join("bench1024.graphml");
            if path.is_file() {
                group.bench_function("read_grug_bench1024", |b| {
                    b.iter_with_large_drop(|| read_graph_file(GraphFormat::Grug, &path))
                });
            } else {
                println!(
                    "skipping load/read_grug_bench1024: {} is absent",
                    path.display()
                );
            }
        }
        Err(why) => println!("skipping load/read_grug_bench1024: {why}"),
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = matching, load
}
criterion_main!(benches);
