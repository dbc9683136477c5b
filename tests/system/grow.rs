//! `attach` and `remove` in `shardsched query` (growing and shrinking the session's graph),
//! as golden cases: `tests/data/grow/NAME.in` run on `tiny2.json` (two nodes of two sockets
//! of two cores, ranks 0 and 1) with `-P low -F simple` must print `NAME.out`, and on
//! standard error `NAME.err` (or nothing). `@DATA@` stands for that folder. The expected
//! files follow Fluxion's rules for these commands (docs/MATCHING.md): new vertices after the
//! old ones, jobs keep what they hold, a removed vertex a job holds is given back first.

use std::path::Path;

use crate::query_run::query;

const CASES: &[&str] = &["attach", "attach-errors", "remove", "remove-errors"];

#[test]
fn attach_and_remove_golden_cases() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/grow");
    let dir = data.to_str().expect("utf-8 path");
    let read = |name: &str| {
        std::fs::read_to_string(data.join(name))
            .unwrap_or_default()
            .replace("@DATA@", dir)
    };
    let mut failed = Vec::new();
    for case in CASES {
        let run = query(
            &data,
            &data.join("tiny2.json"),
            &["-f", "jgf", "-P", "low", "-F", "simple"],
            &read(&format!("{case}.in")),
        );
        assert_eq!(run.code, Some(0), "{case}: {}", run.stderr);
        if run.stdout != read(&format!("{case}.out")) {
            failed.push(format!("{case}.out:\n{}", run.stdout));
        }
        if run.stderr != read(&format!("{case}.err")) {
            failed.push(format!("{case}.err:\n{}", run.stderr));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
