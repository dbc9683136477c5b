//! How long the benchmark graphs take to load, and how much heap a loaded graph keeps.
//!
//! ```text
//! cargo run --release -p shardsched-resource --example load_time [-- [--reps N] [--once] [CASE...]]
//! ```
//!
//! Cases: `bench128`, `bench1024`, `bench4096` (`read_grug_file` on `shared/bench/*.graphml`,
//! file read included), `grug16384` (bench4096.graphml with 256 racks instead of 64, written
//! to a temporary file and read with `read_grug_file`), `spec16384`
//! (`generated_cluster(16384).build()`) and `toml16384` (`read_cluster_spec` on that spec's
//! TOML). Without a case name, all of them, each in a process of its own. The bench
//! directory is `SHARDSCHED_BENCH_DIR`, else `<crate>/../../../shared/bench`.
//!
//! Time: the wall time of the first load of the case (its pages are new to the process), then
//! over N more loads (default 15, and at least 0.5 s of them) the minimum and median wall
//! time and the mean on-CPU time of the thread (`/proc/thread-self/schedstat`: page-fault
//! time included, time spent waiting for a core not). On a machine that other work keeps
//! busy, the minimum wall time and the CPU column are the stable figures. `--once` loads each
//! case once and prints only its wall time, for timing the process from outside
//! (`perf stat -r 10 ... --once bench1024`).
//!
//! Memory: a counting global allocator (the `cap` crate wrapping the system allocator)
//! reports the live heap bytes before and after one load, the graph still held and
//! everything else dropped; the difference divided by the vertex count is "B/vertex"
//! (allocator overhead per block, malloc headers, is not counted). "est B/v" is
//! `ResourceGraph::heap_bytes` per vertex, for comparison.

use std::alloc::System;
use std::path::PathBuf;
use std::time::Instant;

use cap::Cap;
use shardsched_resource::{ResourceGraph, generated_cluster, read_cluster_spec, read_grug_file};

#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

fn bench_dir() -> PathBuf {
    match std::env::var_os("SHARDSCHED_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/bench"),
    }
}

/// bench4096.graphml with `racks` racks: the same shape, 64 × `racks` nodes.
fn grug_with_racks(racks: usize) -> String {
    let text = std::fs::read_to_string(bench_dir().join("bench4096.graphml"))
        .expect("bench4096.graphml (set SHARDSCHED_BENCH_DIR)");
    let rule = "<edge id=\"cluster2rack\" source=\"cluster\" target=\"rack\">\n            \
                <data key=\"multi_scale\">64</data>";
    assert!(text.contains(rule), "bench4096.graphml changed shape");
    text.replace(rule, &rule.replace(">64<", &format!(">{racks}<")))
        .replace("bench4096", &format!("bench{}", racks * 64))
}

type Loader = Box<dyn Fn() -> ResourceGraph>;

fn case(name: &str) -> Option<Loader> {
    let grug_file = |file: &str| -> Loader {
        let path = bench_dir().join(file);
        Box::new(move || read_grug_file(&path).unwrap_or_else(|e| panic!("{e}")))
    };
    Some(match name {
        "bench128" => grug_file("bench128.graphml"),
        "bench1024" => grug_file("bench1024.graphml"),
        "bench4096" => grug_file("bench4096.graphml"),
        "grug16384" => {
            let text = grug_with_racks(256);
            let path = std::env::temp_dir().join("shardsched-load-time-bench16384.graphml");
            std::fs::write(&path, &text).expect("write temporary GRUG");
            Box::new(move || read_grug_file(&path).unwrap_or_else(|e| panic!("{e}")))
        }
        "spec16384" => {
            let spec = generated_cluster(16384);
            Box::new(move || spec.build().unwrap_or_else(|e| panic!("{e}")))
        }
        "toml16384" => {
            let toml = generated_cluster(16384).to_toml();
            Box::new(move || read_cluster_spec(&toml).unwrap_or_else(|e| panic!("{e}")))
        }
        _ => return None,
    })
}

fn main() {
    let mut reps = 15usize;
    let mut once = false;
    let mut names = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--once" {
            once = true;
        } else if a == "--reps" {
            reps = args.next().and_then(|n| n.parse().ok()).expect("--reps N");
        } else {
            names.push(a);
        }
    }
    if names.is_empty() {
        names = [
            "bench128",
            "bench1024",
            "bench4096",
            "grug16384",
            "spec16384",
            "toml16384",
        ]
        .map(String::from)
        .to_vec();
    }
    if once {
        // One load per case and nothing else, for timing the whole process from outside
        // (`perf stat`, `/usr/bin/time`).
        for name in &names {
            let Some(load) = case(name) else {
                eprintln!("unknown case {name}");
                std::process::exit(2);
            };
            let start = Instant::now();
            let g = load();
            let wall = start.elapsed().as_secs_f64() * 1e3;
            println!("{name}: {} vertices in {wall:.2} ms", g.len());
        }
        return;
    }
    let reps = reps.max(1);
    if names.len() > 1 {
        // One process per case: glibc adapts its mmap threshold to the blocks freed before,
        // so a case measured after another would reuse (or not) that one's pages.
        print_header();
        for name in &names {
            let out = std::process::Command::new(std::env::current_exe().expect("own path"))
                .args(["--reps", &reps.to_string(), name])
                .env("LOAD_TIME_CHILD", "1")
                .output()
                .expect("run a case");
            print!("{}", String::from_utf8_lossy(&out.stdout));
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            if !out.status.success() {
                std::process::exit(1);
            }
        }
        return;
    }
    if std::env::var_os("LOAD_TIME_CHILD").is_none() {
        print_header();
    }
    for name in &names {
        let Some(load) = case(name) else {
            eprintln!("unknown case {name}");
            std::process::exit(2);
        };
        // Memory first, on a quiet heap: live bytes held by one loaded graph. This first
        // load is also timed apart: its pages are new to the process, as in a process that
        // loads one graph and goes on to schedule.
        let before = ALLOC.allocated();
        let start = Instant::now();
        let g = load();
        let first = start.elapsed().as_secs_f64() * 1e3;
        let live = ALLOC.allocated().saturating_sub(before);
        let n = g.len();
        let estimate = g.heap_bytes();
        drop(g);
        // At least `reps` loads and at least half a second of them, so that the on-CPU
        // average is well above the kernel's accounting granularity.
        let mut wall = Vec::new();
        let cpu0 = thread_cpu_ns();
        let all = Instant::now();
        while wall.len() < reps || all.elapsed().as_secs_f64() < 0.5 {
            let start = Instant::now();
            let g = load();
            wall.push(start.elapsed().as_secs_f64() * 1e3);
            assert_eq!(g.len(), n);
        }
        let cpu = match (cpu0, thread_cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e6 / wall.len() as f64,
            _ => f64::NAN,
        };
        wall.sort_by(f64::total_cmp);
        println!(
            "{:<10} {:>8} | {:>8.2} | {:>5} {:>8.2} {:>8.2} {:>8.2} | {:>10} {:>8.1} {:>8.1}",
            name,
            n,
            first,
            wall.len(),
            wall[0],
            wall[wall.len() / 2],
            cpu,
            live,
            live as f64 / n as f64,
            estimate as f64 / n as f64
        );
    }
}

fn print_header() {
    println!(
        "{:<10} {:>8} | {:>8} | {:>5} {:>8} {:>8} {:>8} | {:>10} {:>8} {:>8}",
        "case",
        "vertices",
        "1st wall",
        "loads",
        "min wall",
        "med wall",
        "cpu/load",
        "live bytes",
        "B/vertex",
        "est B/v"
    );
}

/// This thread's on-CPU time in ns, from `/proc/thread-self/schedstat` (kernel time for
/// page faults included, time spent waiting for a core excluded). The kernel updates it at
/// scheduler ticks and switches, so it is only meaningful summed over many loads.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
