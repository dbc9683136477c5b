//! Submit options: a name and output files with templates, the submitter's working
//! directory and environment reaching an exec job (and `--cwd`, `--env`, `--env-remove`
//! changing them), node lists, and begin times.

use std::process::Command;

use crate::harness::{EXE, System};

#[test]
fn cwd_environment_name_and_output_files_reach_an_exec_job() {
    let system = System::start("user-options-exec", &["--executor", "exec"]);
    let here = system.dir.join("work");
    std::fs::create_dir_all(&here).unwrap();
    let submit = |extra: &[&str]| {
        let out = Command::new(EXE)
            .arg("submit")
            .args(extra)
            .args([
                "-n",
                "1",
                "--",
                "sh",
                "-c",
                "pwd; echo \"$GREETING/$DROPPED/$ADDED\"",
            ])
            .current_dir(&here)
            .env("SHARDSCHED_DIR", system.state())
            .env("GREETING", "hello")
            .env("DROPPED", "gone")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let id = submit(&[
        "-J",
        "greeter",
        "-o",
        "out-{{id}}-{{name}}.txt",
        "--env-remove",
        "DROP*",
        "--env",
        "ADDED=yes",
    ]);
    let row = system.wait_state(&id, "completed");
    assert_eq!(row["name"], "greeter");
    let text = std::fs::read_to_string(here.join(format!("out-{id}-greeter.txt"))).unwrap();
    assert_eq!(
        text,
        format!("{}\nhello//yes\n", here.display()),
        "the submitter's directory and environment, as changed"
    );
    let info = system.ok(&["job", "info", &id]);
    assert!(info.contains(&format!("out-{id}-greeter.txt")), "{info}");

    let elsewhere = system.dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let cwd = elsewhere.to_str().unwrap();
    let id = submit(&["--cwd", cwd, "-o", "plain.out", "-e", "/dev/null"]);
    system.wait_state(&id, "completed");
    let text = std::fs::read_to_string(elsewhere.join("plain.out")).unwrap();
    assert_eq!(text, format!("{cwd}\nhello/gone/\n"));
    let err = system.fails(&["submit", "-J", &"n".repeat(200), "--", "app"]);
    assert!(err.contains("more than the 128-byte limit"), "{err}");
}

#[test]
fn node_lists_and_begin_times_are_kept() {
    let system = System::start("user-options-nodes", &[]);
    let on = system.submit(&[
        "-q", "alpha", "-w", "node2", "-N", "1", "-t", "1h", "--", "app",
    ]);
    assert_eq!(system.wait_state(&on, "running")["nodes"], "node2");
    let off = system.submit(&[
        "-q",
        "alpha",
        "--exclude",
        "node[0-1]",
        "-N",
        "2",
        "-t",
        "1h",
        "--",
        "app",
    ]);
    let row = system.wait_state(&off, "pending");
    assert_eq!(row["nnodes"], 2);
    system.ok(&["cancel", &on]);
    assert_eq!(system.wait_state(&off, "running")["nodes"], "node[2-3]");

    let later = system.submit(&["-q", "beta", "--begin-time", "+1h", "--", "app"]);
    let row = system.job(&later);
    assert_eq!(
        (row["state"].as_str(), row["reason"].as_str()),
        (Some("pending"), Some("begin time"))
    );
    let begin = row["begin_ms"].as_u64().unwrap();
    let table = system.ok(&["jobs"]);
    let line = table.lines().find(|l| l.starts_with(&later)).unwrap();
    assert!(
        line.contains("begin time at ") && line.contains("(in 5"),
        "{table}"
    );
    assert!(begin > row["submit_ms"].as_u64().unwrap() + 3_500_000);

    let soon = system.submit(&["-q", "beta", "--begin-time", "+2s", "--", "app"]);
    let row = system.wait_state(&soon, "running");
    assert!(
        row["start_ms"].as_u64() >= row["begin_ms"].as_u64(),
        "{row:#}"
    );
    let err = system.fails(&["submit", "--begin-time", "soon", "--", "app"]);
    assert!(err.contains("is not a time"), "{err}");
}
