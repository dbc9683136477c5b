//! Job arrays: `submit --array 1-1000%10` makes one array whose elements `ID[N]` never run
//! more than ten at once; `jobs` folds it, `jobs --json` lists every element; `cancel
//! ID[N]` cancels one and `cancel ID` the rest; an exec element sees its index.

use serde_json::Value;

use crate::harness::{System, wait_for};

/// The rows of `jobs --json` that are elements of `array`.
fn elements(system: &System, array: &str) -> Vec<Value> {
    system
        .jobs()
        .into_iter()
        .filter(|j| j["array_id"] == array)
        .collect()
}

fn count(rows: &[Value], state: &str) -> usize {
    rows.iter().filter(|j| j["state"] == state).count()
}

#[test]
fn an_array_of_a_thousand_never_runs_more_than_its_limit_and_jobs_folds_it() {
    let system = System::start_fast("user-array");
    // Submitted held, so that what is listed does not depend on how fast elements run.
    let array = system.submit(&[
        "--array",
        "1-1000%10",
        "--urgency",
        "hold",
        "-q",
        "alpha",
        "-n",
        "1",
        "-t",
        "1s",
        "--",
        "app",
    ]);
    assert!(
        !array.contains('['),
        "submit prints the array's id: {array}"
    );
    let rows = elements(&system, &array);
    assert_eq!(rows.len(), 1000, "jobs --json lists every element");
    assert_eq!(
        rows[0]["id"].as_str(),
        Some(format!("{array}[{}]", rows[0]["array_index"]).as_str())
    );
    let table = system.ok(&["jobs"]);
    let folded: Vec<&str> = table.lines().filter(|l| l.starts_with(&array)).collect();
    assert_eq!(folded.len(), 1, "one row for the array: {table}");
    assert!(
        folded[0].starts_with(&format!("{array}[1-1000]")),
        "{table}"
    );
    assert!(folded[0].contains("1000 pending"), "{table}");
    assert_eq!(rows[500]["reason"], "held");

    // Element 3 is cancelled alone; the others run, never more than ten at once.
    system.ok(&["cancel", &format!("{array}[3]")]);
    system.ok(&["job", "release", &array]);
    let mut most = 0;
    let mut last = Vec::new();
    let done = wait_for(|| {
        last = elements(&system, &array);
        let running = count(&last, "running");
        assert!(running <= 10, "{running} elements run at once");
        most = most.max(running);
        count(&last, "completed") + count(&last, "cancelled") == 1000
    });
    assert!(
        done,
        "the array never finished: {} completed",
        count(&last, "completed")
    );
    assert_eq!(count(&last, "cancelled"), 1);
    assert_eq!(most, 10, "the limit, and no less, runs at once");
    let table = system.ok(&["jobs", "-a"]);
    let row = table.lines().find(|l| l.starts_with(&array)).unwrap();
    assert!(row.contains("999 completed, 1 cancelled"), "{table}");
}

#[test]
fn cancelling_an_array_cancels_its_elements_and_exec_elements_know_their_index() {
    let system = System::start("user-array-exec", &["--executor", "exec"]);
    let out = system.dir.join("indices");
    std::fs::create_dir_all(&out).unwrap();
    let script = format!(
        "echo $SHARDSCHED_ARRAY_ID > {0}/$SHARDSCHED_ARRAY_INDEX",
        out.display()
    );
    let array = system.submit(&["--array", "0-6:3", "-n", "1", "--", "sh", "-c", &script]);
    let done = wait_for(|| count(&elements(&system, &array), "completed") == 3);
    assert!(done, "{:#?}", elements(&system, &array));
    for index in ["0", "3", "6"] {
        let text = std::fs::read_to_string(out.join(index)).unwrap();
        assert_eq!(text.trim(), array, "element {index}");
    }

    let long = system.submit(&[
        "--array", "1-5%2", "-q", "alpha", "-n", "1", "--", "sleep", "600",
    ]);
    let started = wait_for(|| count(&elements(&system, &long), "running") == 2);
    assert!(started);
    let held = elements(&system, &long)
        .into_iter()
        .find(|j| j["state"] == "pending")
        .unwrap();
    assert_eq!(held["reason"], "array limit");
    system.ok(&["cancel", &long]);
    // The running ones end once their processes are gone.
    let cancelled = wait_for(|| count(&elements(&system, &long), "cancelled") == 5);
    assert!(cancelled, "{:#?}", elements(&system, &long));
    let err = system.fails(&["submit", "--array", "0-1000000", "--", "app"]);
    assert!(err.contains("array_elements_max"), "{err}");
}
