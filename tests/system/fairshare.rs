//! Fair-share priority across queues, end to end (issue 18, docs/POLICIES.md
//! "Fair-share"): a user whose jobs used the cluster gets a lower factor from the
//! coordinator, every shard hears it, and when that user and a light one wait with the
//! same jobs in two queues, the light user's start first in both. Every wait is on a state
//! (factors shown in `jobs`, jobs' states), with the harness's generous timeout.

use std::path::Path;

use serde_json::Value;

use crate::harness::System;
use crate::harness::two_queues_config;

/// [`two_queues_config`] with fair-share on: usage halves every hour.
fn config() -> String {
    format!(
        "{}\n[fairshare]\nhalf_life = \"1h\"\nweight = 100000\nurgency_weight = 1000\n",
        two_queues_config()
    )
}

/// `submit ARGS` as the user of client directory `dir`; the job id.
fn submit_as(system: &System, dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["submit"];
    all.extend_from_slice(args);
    let out = system.cli_in(dir, &all);
    assert!(
        out.status.success(),
        "submit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn row<'a>(jobs: &'a [Value], id: &str) -> &'a Value {
    jobs.iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("job {id} is not listed: {jobs:#?}"))
}

fn factor(job: &Value) -> Option<f64> {
    job["priority"]["factor"].as_f64()
}

#[test]
fn a_light_users_jobs_start_before_a_heavy_users_in_both_queues() {
    let system = System::start_with("fairshare", &config(), &[]);
    let heavy = system.user_dir("heavy");
    let light = system.user_dir("light");

    // Heavy's past usage: every node of both queues for two seconds.
    let past: Vec<String> = ["alpha", "beta"]
        .into_iter()
        .map(|q| {
            submit_as(
                &system,
                &heavy,
                &["-q", q, "-N", "4", "-t", "2s", "--", "true"],
            )
        })
        .collect();
    for id in &past {
        system.wait_state(id, "completed");
    }

    // Both queues stopped, heavy then light submit the same jobs to each.
    for q in ["alpha", "beta"] {
        system.ok(&["queue", "stop", q]);
    }
    let mut ids: Vec<(&str, String, String)> = Vec::new();
    for q in ["alpha", "beta"] {
        let job = ["-q", q, "-N", "4", "-t", "1s", "--", "true"];
        let h = submit_as(&system, &heavy, &job);
        let l = submit_as(&system, &light, &job);
        ids.push((q, h, l));
    }
    // The factors reach both shards: heavy's pending jobs show one below light's.
    let jobs = system.wait_jobs("heavy's factor below light's in both queues", |jobs| {
        ids.iter().all(|(_, h, l)| {
            let (h, l) = (factor(row(jobs, h)), factor(row(jobs, l)));
            matches!((h, l), (Some(h), Some(l)) if h < 0.9 && l == 1.0)
        })
    });
    for (_, h, l) in &ids {
        let (h, l) = (row(&jobs, h), row(&jobs, l));
        assert!(
            h["priority"]["total"].as_i64() < l["priority"]["total"].as_i64(),
            "{h:#} / {l:#}"
        );
    }
    let table = system.ok(&["jobs", "-A"]);
    assert!(
        table.contains("priority") && table.contains("(base 16000 + fairshare 100000 x "),
        "`jobs` shows a pending job's priority and its parts:\n{table}"
    );

    for q in ["alpha", "beta"] {
        system.ok(&["queue", "start", q]);
    }
    for (q, h, l) in &ids {
        let heavy_job = system.wait_state(h, "completed");
        let light_job = system.wait_state(l, "completed");
        let start = |j: &Value| j["start_ms"].as_u64().expect("started");
        assert!(
            start(&light_job) < start(&heavy_job),
            "in {q}, light's job started after heavy's: {light_job:#} / {heavy_job:#}"
        );
    }
}
