//! `shardsched bench match` runs end to end on tiny configurations (fast in debug builds):
//! the table and the JSON report are produced and the counts in them add up.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn shardsched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardsched"))
        .args(args)
        .output()
        .expect("shardsched runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "shardsched failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn generated_cluster_prints_the_table() {
    let out = stdout(&shardsched(&[
        "bench",
        "match",
        "--nodes",
        "4",
        "--matches",
        "6",
        "--reserve",
        "2",
    ]));
    for column in ["median µs", "p99 µs", "load ms", "B/vertex", "peak MiB"] {
        assert!(out.contains(column), "no {column:?} column in:\n{out}");
    }
    // 4 nodes: four allocates succeed, two find nothing, both reservations land later.
    let allocate = out
        .lines()
        .find(|l| l.contains(" allocate "))
        .unwrap_or_else(|| panic!("no allocate phase row in:\n{out}"));
    let cells: Vec<&str> = allocate.split_whitespace().collect();
    assert!(
        cells.windows(4).any(|w| w == ["6", "4", "0", "2"]),
        "{allocate}"
    );
    assert!(out.contains("memory: "), "{out}");
}

#[test]
fn json_report_adds_up() {
    let out = stdout(&shardsched(&[
        "bench",
        "match",
        "--nodes",
        "2",
        "--matches",
        "3",
        "--reserve",
        "1",
        "--policy",
        "high",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
    assert_eq!(v["all"]["calls"], 4);
    assert_eq!(v["policy"], "high");
    assert_eq!(v["phases"][0]["allocated"], 2);
    assert_eq!(v["phases"][0]["no_match"], 1);
    assert_eq!(v["phases"][1]["reserved"], 1);
    assert!(v["vertices"].as_u64().is_some_and(|n| n > 2));
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let out = shardsched(&["bench", "match", "--graph", "/nonexistent/graph.graphml"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/graph.graphml"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = shardsched(&["bench", "match", "--nodes", "2", "--policy", "sideways"]);
    assert!(!out.status.success());
    let out = shardsched(&["bench", "match", "--workload", "nope"]);
    assert!(!out.status.success());
}

fn bench_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("SHARDSCHED_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench"),
    };
    if dir.join("bench1024.graphml").is_file() {
        Some(dir)
    } else {
        let msg = format!(
            "skipping: bench inputs not found at {} (set SHARDSCHED_BENCH_DIR)",
            dir.display()
        );
        // As the conformance test: `.ci/run` sets this so missing shared data fails loudly.
        assert!(
            std::env::var("SHARDSCHED_REQUIRE_SHARED").as_deref() != Ok("1"),
            "{msg}"
        );
        println!("{msg}");
        None
    }
}

/// `bench match` on high-1024's first three matches, `repeat` whole-process runs, with
/// `extra` flags; its standard output.
fn high_1024_prefix(dir: &Path, repeat: &str, extra: &[&str]) -> String {
    let dir = dir.to_string_lossy();
    let mut args = vec![
        "bench",
        "match",
        "--workload",
        "high-1024",
        "--limit",
        "3",
        "--repeat",
        repeat,
        "--bench-dir",
        &dir,
    ];
    args.extend(extra);
    stdout(&shardsched(&args))
}

/// A reference workload cut to a few matches, with one whole-process run: exercises the
/// `shardsched query` child, the inside child and the cross-check of their outcome counts.
#[test]
fn workload_prefix_runs_both_ways() {
    let Some(dir) = bench_dir() else { return };
    let out = high_1024_prefix(&dir, "1", &[]);
    assert!(out.contains("high-1024*"), "{out}");
    assert!(out.contains("Fluxion s"), "{out}");
    assert!(!out.contains("WARNING"), "{out}");
}

/// A stand-in for Fluxion's resource-query: a script that runs this binary's `query` with
/// the flags it is given, `high` turned into `to_policy`.
fn fake_resource_query(dir: &Path, name: &str, to_policy: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\nfor a; do shift; [ \"$a\" = high ] && a={to_policy}; set -- \"$@\" \"$a\"; done\n\
         exec '{}' query \"$@\"\n",
        env!("CARGO_BIN_EXE_shardsched")
    );
    std::fs::write(&path, script).expect("write the script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// `--fluxion PATH` runs the other program beside ours on the same stream, times both, and
/// compares their outputs byte for byte: the same program agrees, another policy does not.
#[test]
fn fluxion_side_by_side_is_timed_and_its_output_compared() {
    let Some(dir) = bench_dir() else { return };
    let scripts = tempfile::tempdir().expect("temp dir");
    let run = |fluxion: &Path| -> serde_json::Value {
        let fluxion = fluxion.to_string_lossy();
        let out = high_1024_prefix(&dir, "2", &["--fluxion", &fluxion, "--json"]);
        let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
        doc["workloads"][0].clone()
    };

    let same = run(&fake_resource_query(scripts.path(), "same", "high"));
    assert_eq!(same["fluxion"]["same_output"], true, "{same:#}");
    assert_eq!(
        same["fluxion"]["process"]["runs_s"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(same["fluxion"]["process"]["allocated"], 3);
    assert!(same["speedup"].as_f64().is_some(), "{same:#}");
    assert!(same["cpu_speedup"].as_f64().is_some(), "{same:#}");
    assert_eq!(same["warnings"], serde_json::json!([]));

    let missing = scripts.path().join("no-such-resource-query");
    let out = shardsched(&[
        "bench",
        "match",
        "--workload",
        "high-1024",
        "--bench-dir",
        &dir.to_string_lossy(),
        "--fluxion",
        &missing.to_string_lossy(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-resource-query: no such file"),
        "{err}"
    );

    let other = run(&fake_resource_query(scripts.path(), "other", "low"));
    assert_eq!(other["fluxion"]["same_output"], false, "{other:#}");
    let warning = other["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("printed different outputs: -t file, line "),
        "{other:#}"
    );
}

#[test]
fn print_stream_is_the_readme_stream() {
    let out = stdout(&shardsched(&[
        "bench",
        "match",
        "--workload",
        "low-4096",
        "--print-stream",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 64 + 20 + 1);
    assert_eq!(lines[0], "match allocate d_64node_excl.yaml");
    assert_eq!(
        lines[64],
        "match allocate_orelse_reserve d_64node_excl.yaml"
    );
    assert_eq!(lines[84], "quit");
}
