//! The processes' logs under `up` (docs/OPERATIONS.md): with `--log-format json`, every line
//! a process writes is one JSON object, inside its process's span, and a job's, a move's and
//! a request's lines carry their spans; and no log file holds a colour code.

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::path::Path;

use harness::{System, batch_and_debug, wait_for};
use serde_json::Value;

/// The JSON lines of a log file (`up`'s own `====` lines between runs are text).
fn json_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        !text.contains('\u{1b}'),
        "a colour code in {}",
        path.display()
    );
    text.lines()
        .filter(|line| !line.starts_with("==== "))
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", path.display()))
        })
        .collect()
}

/// Whether `line` sits in a span named `name` (whose field `field` is `value`, if given):
/// its own (`span`) or one around it (`spans`).
fn in_span(line: &Value, name: &str, field: &str, value: &str) -> bool {
    let spans = line["spans"].as_array().into_iter().flatten();
    std::iter::once(&line["span"])
        .chain(spans)
        .any(|s| s["name"] == name && (field.is_empty() || s[field].as_str() == Some(value)))
}

#[test]
fn json_logs_carry_the_process_request_job_and_move_spans() {
    let debug = "info,shardsched_shard=debug,shardsched_shard_core=debug,\
                 shardsched_coordinator=debug";
    let system = System::start_with_env(
        "logs",
        &batch_and_debug(),
        &["--log-format", "json"],
        &[("RUST_LOG", debug)],
    );
    let id = system.submit(&["-q", "batch", "-N", "1", "-t", "1h", "--", "app"]);
    system.wait_state(&id, "running");
    system.ok(&["queue", "move", "node5", "--from", "batch", "--to", "debug"]);
    let logs = system.layout().logs_dir();
    let shard_log = logs.join("shard-batch.log");
    let coordinator_log = logs.join("coordinator.log");

    let mut shard = Vec::new();
    let found = wait_for(|| {
        shard = json_lines(&shard_log);
        let job = shard.iter().any(|l| in_span(l, "job", "job", &id));
        let moved = shard.iter().any(|l| in_span(l, "move", "nodes", "node5"));
        job && moved
    });
    assert!(found, "no job or move span in the shard's log: {shard:#?}");
    for line in &shard {
        assert!(
            in_span(line, "shard", "queue", "batch"),
            "a line outside the shard's span: {line}"
        );
    }

    let mut coordinator = Vec::new();
    let found = wait_for(|| {
        coordinator = json_lines(&coordinator_log);
        coordinator
            .iter()
            .any(|l| in_span(l, "move", "nodes", "node5"))
            && coordinator
                .iter()
                .any(|l| in_span(l, "request", "kind", "shard_coord.register"))
    });
    assert!(
        found,
        "no move or request span in the coordinator's log: {coordinator:#?}"
    );
    for line in &coordinator {
        assert!(
            in_span(line, "coordinator", "", ""),
            "a line outside the coordinator's span: {line}"
        );
    }
}

#[test]
fn text_logs_hold_no_colour_code() {
    let system = System::start_with("logs-text", &batch_and_debug(), &[]);
    system.submit(&["-q", "batch", "-N", "1", "--", "app"]);
    for entry in std::fs::read_dir(system.layout().logs_dir()).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains('\u{1b}'),
            "a colour code in {}",
            path.display()
        );
        assert!(!text.is_empty(), "{} is empty", path.display());
    }
}
