//! Whole-command tests of `shardsched workload generate` and `shardsched replay`: the real
//! binary on real files.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use shardsched_replay::check::check_schedule;

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p =
            std::env::temp_dir().join(format!("shardsched-replay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn shardsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardsched"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = shardsched(args);
    assert!(
        out.status.success(),
        "shardsched {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = shardsched(args);
    assert!(!out.status.success(), "shardsched {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `workload generate` at load 1.2, into `dir/name`.
fn generate(dir: &Scratch, name: &str, jobs: usize, nodes: u64, seed: u64) -> PathBuf {
    generate_with(dir, name, jobs, nodes, seed, "1.2")
}

/// One job of an SWF file as the independent simulator sees it.
#[derive(Clone, Copy)]
struct Job {
    submit: i64,
    run: i64,
    procs: i64,
}

fn jobs_of(swf: &str) -> Vec<(Job, i64)> {
    swf.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(';'))
        .map(|l| {
            let f: Vec<i64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            let requested = if f[8] > 0 { f[8] } else { f[3].max(1) };
            let job = Job {
                submit: f[1],
                run: f[3].min(requested),
                procs: if f[7] > 0 { f[7] } else { f[4] },
            };
            (job, f[2])
        })
        .collect()
}

/// fcfs on `nodes` interchangeable nodes, by definition: in arrival order, each job starts
/// at the first moment at or after the previous job's start (and its own submit) when
/// enough nodes are free; a job larger than the cluster never starts.
fn fcfs_starts(jobs: &[Job], nodes: i64) -> Vec<Option<i64>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].submit, i));
    let mut running: Vec<(i64, i64)> = Vec::new(); // (end, procs)
    let mut prev = i64::MIN;
    let mut starts = vec![None; jobs.len()];
    for i in order {
        let j = &jobs[i];
        if j.procs > nodes {
            continue;
        }
        let mut t = j.submit.max(prev);
        loop {
            let busy: i64 = running.iter().filter(|r| r.0 > t).map(|r| r.1).sum();
            if nodes - busy >= j.procs {
                break;
            }
            t = running
                .iter()
                .map(|r| r.0)
                .filter(|&e| e > t)
                .min()
                .unwrap();
        }
        starts[i] = Some(t);
        prev = t;
        running.push((t + j.run, j.procs));
    }
    starts
}

#[test]
fn generate_is_deterministic_per_seed() {
    let dir = Scratch::new("gen");
    let a = std::fs::read_to_string(generate(&dir, "a.swf", 300, 64, 9)).unwrap();
    let b = std::fs::read_to_string(generate(&dir, "b.swf", 300, 64, 9)).unwrap();
    let c = std::fs::read_to_string(generate(&dir, "c.swf", 300, 64, 10)).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(jobs_of(&a).len(), 300);
    assert!(a.starts_with("; Version: 2.2\n"));
}

#[test]
fn fcfs_on_whole_nodes_matches_an_independent_simulator() {
    let dir = Scratch::new("fcfs");
    for (seed, nodes) in [(1u64, 16i64), (2, 5)] {
        let input = generate(&dir, "in.swf", 250, nodes as u64, seed);
        let output = dir.path("out.swf");
        ok(&[
            "replay",
            "--nodes",
            &nodes.to_string(),
            "--unit",
            "node",
            "--workload",
            s(&input),
            "--policy",
            "fcfs",
            "--output",
            s(&output),
        ]);
        let text = std::fs::read_to_string(&output).unwrap();
        let replayed = jobs_of(&text);
        let jobs: Vec<Job> = replayed.iter().map(|(j, _)| *j).collect();
        let expected = fcfs_starts(&jobs, nodes);
        for (k, ((job, wait), want)) in replayed.iter().zip(&expected).enumerate() {
            let got = (*wait >= 0).then(|| job.submit + wait);
            assert_eq!(got, *want, "seed {seed}: job {} of {nodes} nodes", k + 1);
        }
        assert!(
            check_schedule(&text, nodes as u64, true)
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn every_policy_passes_the_checker_and_prints_one_table() {
    let dir = Scratch::new("policies");
    let input = generate(&dir, "in.swf", 200, 12, 4);
    let out = dir.path("out.swf");
    let stdout = ok(&[
        "replay",
        "--nodes",
        "12",
        "--workload",
        s(&input),
        "--policy",
        "fcfs,easy,hybrid,conservative",
        "--reservation-depth",
        "2",
        "--output",
        s(&out),
        "--stats",
    ]);
    let table: Vec<&str> = stdout.lines().collect();
    assert!(table[0].contains("(200 jobs) on 12 nodes"), "{stdout}");
    assert!(table[1].starts_with("policy"), "{stdout}");
    for (row, policy) in table[2..6]
        .iter()
        .zip(["fcfs", "easy", "hybrid", "conservative"])
    {
        assert!(row.starts_with(policy), "{stdout}");
        let path = dir.path(&format!("out.{policy}.swf"));
        let text = std::fs::read_to_string(path).unwrap();
        let v = check_schedule(&text, 12, policy == "fcfs").unwrap();
        assert!(v.is_empty(), "{policy}: {v:?}");
    }
    assert!(stdout.contains("replan"), "--stats table: {stdout}");
}

#[test]
fn cores_on_a_cluster_spec() {
    let dir = Scratch::new("cores");
    let spec = dir.path("c.toml");
    std::fs::write(
        &spec,
        "name = \"t\"\n[[nodes]]\nhosts = \"n[0-1]\"\ncores_per_socket = 4\n",
    )
    .unwrap();
    let input = dir.path("in.swf");
    std::fs::write(
        &input,
        "; three jobs on 8 cores\n\
         1 0 -1 100 6 -1 -1 6 100 -1 1 1 1 -1 1 1 -1 -1\n\
         2 0 -1 50 4 -1 -1 4 60 -1 1 1 1 -1 1 1 -1 -1\n\
         3 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 1 1 -1 -1\n",
    )
    .unwrap();
    let out = dir.path("out.swf");
    ok(&[
        "replay",
        "--cluster",
        s(&spec),
        "--unit",
        "core",
        "--workload",
        s(&input),
        "--policy",
        "easy",
        "--output",
        s(&out),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    let waits: Vec<i64> = jobs_of(&text).iter().map(|(_, w)| *w).collect();
    // 6 cores now; 4 more must wait for them (reserved at 100); 2 fit beside the 6 now.
    assert_eq!(waits, vec![0, 100, 0]);
    assert!(check_schedule(&text, 8, false).unwrap().is_empty());
}

#[test]
fn a_job_larger_than_the_cluster_is_denied_not_a_crash() {
    let dir = Scratch::new("big");
    let input = dir.path("in.swf");
    std::fs::write(
        &input,
        "1 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 1 1 -1 -1\n\
         2 0 -1 10 64 -1 -1 64 10 -1 1 1 1 -1 1 1 -1 -1\n",
    )
    .unwrap();
    let out = dir.path("out.swf");
    let stdout = ok(&[
        "replay",
        "--nodes",
        "4",
        "--workload",
        s(&input),
        "--policy",
        "easy",
        "--output",
        s(&out),
    ]);
    assert!(stdout.contains("easy"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "2 0 -1 10 64 -1 -1 64 10 -1 5 1 1 -1 1 1 -1 -1");
}

/// `replay --nodes 4 --workload WORKLOAD --policy POLICY [MORE]`, which must fail; its
/// stderr.
fn replay_fails(workload: &Path, policy: &str, more: &[&str]) -> String {
    let mut args = vec![
        "replay",
        "--nodes",
        "4",
        "--workload",
        s(workload),
        "--policy",
        policy,
    ];
    args.extend(more);
    fails(&args)
}

#[test]
fn malformed_workloads_and_flags_are_errors_naming_the_place() {
    let dir = Scratch::new("bad");
    let input = dir.path("in.swf");
    std::fs::write(
        &input,
        "; ok\n1 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 1 1 -1 -1\n2 0 -1 ten 2 -1 -1 2 10 -1 1 1 1 -1 1 1 -1 -1\n",
    )
    .unwrap();
    let err = replay_fails(&input, "easy", &[]);
    assert!(err.contains("line 3: field 4 (run time)"), "{err}");
    std::fs::write(&input, "1 0 -1 10 2\n").unwrap();
    let err = replay_fails(&input, "fcfs", &[]);
    assert!(err.contains("line 1: expected 18 fields, found 5"), "{err}");
    let err = replay_fails(&input, "sjf", &[]);
    assert!(err.contains("unknown queue policy"), "{err}");
    let err = replay_fails(&dir.path("none.swf"), "easy", &[]);
    assert!(err.contains("none.swf"), "{err}");
    let err = replay_fails(&input, "easy", &["--match-policy", "locality"]);
    assert!(
        err.contains("locality is for `query` sessions only"),
        "{err}"
    );
    let err = fails(&[
        "workload", "generate", "--jobs", "5", "--nodes", "0", "--output", "-",
    ]);
    assert!(err.contains("nodes must be at least 1"), "{err}");
}

/// `workload generate` with these flags, into `dir/name`.
fn generate_with(
    dir: &Scratch,
    name: &str,
    jobs: usize,
    nodes: u64,
    seed: u64,
    load: &str,
) -> PathBuf {
    let out = dir.path(name);
    ok(&[
        "workload",
        "generate",
        "--jobs",
        &jobs.to_string(),
        "--nodes",
        &nodes.to_string(),
        "--seed",
        &seed.to_string(),
        "--load",
        load,
        "--output",
        s(&out),
    ]);
    out
}

/// The same workload with every job running exactly its requested time: no early end, so
/// reservations come due exactly and are started where they are.
fn exact_estimates(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let exact: String = text
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split_whitespace().collect();
            if !l.starts_with(';') && f.len() == 18 {
                f[8] = f[3];
                return f.join(" ") + "\n";
            }
            format!("{l}\n")
        })
        .collect();
    std::fs::write(path, exact).unwrap();
}

/// A generated workload and the cluster and queue depth it is replayed with.
struct Shape {
    jobs: usize,
    /// Processors the workload is generated for.
    procs: u64,
    seed: u64,
    load: &'static str,
    cluster: &'static [&'static str],
    queue_depth: &'static str,
    /// Every job runs exactly its requested time.
    exact: bool,
}

/// The queue manager's shortcuts against the definition, through the command: each
/// workload is replayed by every policy with and without `--exhaustive`, and the output
/// files must be identical byte for byte.
#[test]
fn replays_match_the_exhaustive_definition_byte_for_byte() {
    let dir = Scratch::new("exhaustive");
    let shape = |jobs, procs, seed, load, cluster, queue_depth, exact| Shape {
        jobs,
        procs,
        seed,
        load,
        cluster,
        queue_depth,
        exact,
    };
    let shapes = [
        // Overloaded whole nodes, every pending job considered.
        shape(240, 16, 1, "1.2", &["--nodes", "16"], "0", false),
        // The benchmark's shape, scaled down: a queue depth the backlog exceeds.
        shape(240, 64, 2, "0.9", &["--nodes", "64"], "16", false),
        // Cores of two nodes (88 cores) as processors.
        shape(
            200,
            88,
            3,
            "1.1",
            &["--nodes", "2", "--unit", "core"],
            "8",
            false,
        ),
        // Exact estimates: reservations come due where they are.
        shape(240, 16, 4, "1.1", &["--nodes", "16"], "0", true),
        // Another seed of the overloaded shape, with a small depth.
        shape(240, 32, 5, "1.3", &["--nodes", "32"], "4", false),
    ];
    for (k, sh) in shapes.iter().enumerate() {
        let input = generate_with(
            &dir,
            &format!("in{k}.swf"),
            sh.jobs,
            sh.procs,
            sh.seed,
            sh.load,
        );
        if sh.exact {
            exact_estimates(&input);
        }
        let run = |out: &Path, exhaustive: bool| {
            let mut args = vec!["replay", "--workload", s(&input)];
            args.extend_from_slice(sh.cluster);
            args.extend([
                "--policy",
                "fcfs,easy,hybrid,conservative",
                "--queue-depth",
                sh.queue_depth,
                "--reservation-depth",
                "3",
                "--output",
                s(out),
            ]);
            if exhaustive {
                args.push("--exhaustive");
            }
            ok(&args);
        };
        run(&dir.path("fast.swf"), false);
        run(&dir.path("full.swf"), true);
        for policy in ["fcfs", "easy", "hybrid", "conservative"] {
            let fast = std::fs::read(dir.path(&format!("fast.{policy}.swf"))).unwrap();
            let full = std::fs::read(dir.path(&format!("full.{policy}.swf"))).unwrap();
            assert!(
                fast == full,
                "shape {k} (seed {}), {policy}: the replay differs from --exhaustive",
                sh.seed
            );
        }
    }
}
