//! `shardsched bench scale` end to end, small: 64 nodes, 4 queues, 500 jobs, 12 nodes
//! moved under load. Its one JSON object has the figures the issue asks for, and every job
//! completed.

use std::process::Command;

#[test]
fn bench_scale_runs_small_and_reports_every_figure() {
    let dir = std::env::temp_dir().join(format!("shardsched-bench-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_shardsched"))
        .args([
            "bench", "scale", "--nodes", "64", "--queues", "4", "--jobs", "500",
        ])
        .args(["--move-nodes", "12", "--json", "--dir"])
        .arg(&dir)
        .output()
        .expect("shardsched runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench scale failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["completed"], 500, "{v}");
    assert_eq!(v["moved_nodes"], 12, "{v}");
    assert_eq!(v["move_requests"], 3, "one per donor: {v}");
    for positive in ["start_s", "rss_total_mb", "jobs_per_s", "move_1000_ms"] {
        assert!(
            v[positive].as_f64().is_some_and(|x| x > 0.0),
            "{positive} is not a positive number: {v}"
        );
    }
    // up, the coordinator and the four shards.
    let processes = v["rss_after"].as_array().expect("rss_after");
    assert_eq!(processes.len(), 6, "{v}");
    assert!(
        processes
            .iter()
            .any(|p| p["name"] == "shard q3" && p["rss_mb"].as_f64().is_some_and(|m| m > 0.0)),
        "{v}"
    );
}
