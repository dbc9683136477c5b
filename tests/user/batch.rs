//! `shardsched batch`: a script whose `#SBATCH`, `#FLUX:` and `#SHARDSCHED` lines carry
//! its options, run once for its allocation with its arguments, in the directory it was
//! submitted from.

use std::process::Command;

use crate::harness::{EXE, System};

#[test]
fn a_batch_script_with_sbatch_lines_runs_as_they_ask() {
    let system = System::start("user-batch", &["--executor", "exec"]);
    let work = system.dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let script = work.join("sweep.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         #SBATCH -N 2 -t 10\n\
         #SBATCH --output=batch-%j.out --mail-type=END\n\
         #FLUX: -q alpha\n\
         # a comment between directives\n\
         #SHARDSCHED --env GREETING=hi\n\
         echo \"$SHARDSCHED_JOB_NNODES $GREETING $1 $(basename \"$0\")\"\n\
         #SBATCH -N 3\n",
    )
    .unwrap();
    let out = Command::new(EXE)
        .args(["batch", "sweep.sh", "first-arg"])
        .current_dir(&work)
        .env("SHARDSCHED_DIR", system.state())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--mail-type=END: not supported here, skipped"),
        "{stderr}"
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let row = system.wait_state(&id, "completed");
    assert_eq!(
        row["nnodes"], 2,
        "#SBATCH -N 2 (a directive after the first command is not one)"
    );
    assert_eq!(row["duration_ms"], 600_000, "#SBATCH -t 10 is ten minutes");
    assert_eq!(row["queue"], "alpha");
    assert_eq!(
        row["name"], "sweep.sh",
        "the script's name, as sbatch names it"
    );
    let text = std::fs::read_to_string(work.join(format!("batch-{id}.out"))).unwrap();
    assert_eq!(text, "2 hi first-arg script\n");

    // The command line wins over the script's lines.
    let id = system
        .ok(&["batch", "-N", "1", "-J", "one", script.to_str().unwrap()])
        .trim()
        .to_owned();
    let row = system.wait_state(&id, "completed");
    assert_eq!(
        (row["nnodes"].as_u64(), row["name"].as_str()),
        (Some(1), Some("one"))
    );
    assert!(
        system.dir.join(format!("batch-{id}.out")).exists(),
        "a job's files go where it was submitted from (the harness types commands there)"
    );
    let err = system.fails(&["batch", "/nonexistent/script.sh"]);
    assert!(
        err.contains("reading script /nonexistent/script.sh"),
        "{err}"
    );
}
