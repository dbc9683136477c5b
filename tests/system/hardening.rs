//! Hardening: what hostile use broke (issue 12), one test per fix, through real processes
//! (`shardsched up`, the CLI, and the wire where a test must misbehave).
//!
//! - a flag cleared while its shard is offline is cleared when it registers;
//! - a command started while the coordinator does not answer waits for it;
//! - reasons have a bound, checked by the CLI and on the wire, and the lists stay readable;
//! - another user sees a job's summary only;
//! - names and reasons reach terminals and logs escaped;
//! - a journal record that does not decode stops the shard with the file, table and key
//!   named, and `up` does not restart it in a loop;
//! - `.ci/run` prints its own wall time.

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use harness::{EXE, System, mem_kib, pid, wait_for};
use rustix::process::{Signal, kill_process};
use serde_json::Value;
use shardsched_journal::{Batch, Committer, Journal};
use shardsched_proto::StreamCode;
use shardsched_proto::limits::{FRAME_BYTES_MAX, REASON_BYTES_MAX};
use shardsched_proto::msg::{RefusalCode, client_coord};

fn online(system: &System, queue: &str) -> bool {
    system
        .rows(&["queue", "list", "--json"])
        .iter()
        .any(|q| q["name"] == queue && q["online"] == true)
}

/// Waits until `up` has restarted `queue`'s shard (its pid is not `old`) and it is online.
fn wait_restarted(system: &System, queue: &str, old: u32) {
    assert!(
        wait_for(|| system.try_child_pid(queue).is_some_and(|p| p != old) && online(system, queue)),
        "{queue}'s shard did not come back"
    );
}

#[test]
fn a_flag_cleared_while_its_shard_is_offline_is_cleared_when_it_registers() {
    let system = System::start("flags-offline", &[]);
    system.ok(&["resource", "drain", "node0", "--reason", "maintenance"]);
    system.ok(&["resource", "down", "node1", "--reason", "disk"]);
    assert!(wait_for(|| system.node_row("node0")["state"] == "drained"
        && system.node_row("node1")["state"] == "down"));

    // alpha's shard stops answering: the coordinator journals the clears (its intent) and
    // cannot tell the shard, which then dies and comes back with its journal's flags.
    let shard = system.child_pid("alpha");
    kill_process(pid(shard), Signal::STOP).unwrap();
    system.ok(&["resource", "undrain", "node0"]);
    system.ok(&["resource", "up", "node1"]);
    kill_process(pid(shard), Signal::KILL).unwrap();
    wait_restarted(&system, "alpha", shard);

    // Both nodes schedule again: a job needing all four of alpha's nodes runs.
    let id = system.submit(&["-q", "alpha", "-N", "4", "-t", "60s", "--", "app"]);
    system.wait_state(&id, "running");
    for name in ["node0", "node1"] {
        let row = system.node_row(name);
        assert_eq!(row["state"], "up", "{row:#}");
        assert_eq!(row["reason"], Value::Null, "{row:#}");
    }
}

#[test]
fn a_command_started_while_the_coordinator_does_not_answer_waits_for_it() {
    let system = System::start("coordinator-away", &[]);
    let coordinator = system.child_pid("coordinator");
    kill_process(pid(coordinator), Signal::STOP).unwrap();
    // Without the routing table the last command cached: with it, a submit goes straight to
    // the shard and never asks the coordinator (crates/client's tests cover that path).
    system.forget_cached_routes();
    let mut submit = Command::new(EXE)
        .args(["submit", "-q", "beta", "-t", "60s", "--", "app"])
        .env("SHARDSCHED_DIR", system.state())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first connection gets no answer: it says it retries (and does not give up).
    let lines = stderr_lines(&mut submit);
    let mut seen = Vec::new();
    let retrying = loop {
        match lines.recv_timeout(harness::WAIT_TIMEOUT) {
            Ok(line) if line.contains("retrying") => break true,
            Ok(line) => seen.push(line),
            Err(_) => break false,
        }
    };
    kill_process(pid(coordinator), Signal::CONT).unwrap();
    let out = submit.wait_with_output().unwrap();
    assert!(retrying, "no retry announced; stderr: {seen:?}");
    assert!(out.status.success(), "the submit failed; stderr: {seen:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    system.wait_state(&id, "running");
}

/// Sends `request` to the coordinator as the admin, over the wire (no CLI check).
fn ask_coordinator(
    system: &System,
    request: &client_coord::Request,
) -> Result<client_coord::Response, shardsched_proto::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (_endpoint, session) = system.admin_session().await;
        let answer = session.request(request).await;
        session.close();
        answer
    })
}

#[test]
fn reasons_have_a_bound_on_the_cli_and_the_wire_and_lists_stay_readable() {
    let system = System::start("bounds", &[]);
    let all = "node[0-7]";
    // The CLI says so before sending anything (100 KB: an argument's limit is 128 KiB).
    let err = system.fails(&["resource", "drain", all, "--reason", &"r".repeat(100_000)]);
    assert!(
        err.contains(&format!("more than the {REASON_BYTES_MAX}-byte limit")),
        "{err}"
    );
    // The wire refuses what the CLI would not send: a 2 MiB reason on every node would have
    // made each shard's journal record of its flags larger than a frame.
    let nodes: Vec<String> = (0..8).map(|i| format!("node{i}")).collect();
    let huge = client_coord::Request::SetNodeDrain {
        nodes: nodes.clone(),
        drained: true,
        reason: "r".repeat(2 * 1024 * 1024),
    };
    match ask_coordinator(&system, &huge) {
        Err(shardsched_proto::Error::Refused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Invalid);
            assert!(
                refusal.message.contains("byte limit"),
                "{}",
                refusal.message
            );
        }
        other => panic!("a 2 MiB reason was not refused: {other:?}"),
    }
    assert!(system.resources().iter().all(|n| n["state"] == "up"));

    // The longest reason allowed, on every node: lists, shards and journals take it.
    let longest = "l".repeat(REASON_BYTES_MAX);
    system.ok(&["resource", "drain", all, "--reason", &longest]);
    system.ok(&["queue", "disable", "beta", "--reason", &longest]);
    assert!(wait_for(|| system.resources().iter().all(|n| n["state"]
        == "drained"
        && n["reason"] == longest.as_str())));
    assert!(system.ok(&["resource", "list"]).contains(&longest));
    let beta = system.child_pid("beta");
    kill_process(pid(beta), Signal::KILL).unwrap();
    wait_restarted(&system, "beta", beta);
    assert!(online(&system, "alpha"));
    assert_eq!(system.node_row("node7")["reason"], longest.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announced_requests_cost_a_server_what_arrives_not_what_is_announced() {
    let system = System::start("memory", &[]);
    let coordinator = system.child_pid("coordinator");
    let (_endpoint, session) = system.admin_session().await;
    session
        .request(&client_coord::Request::Routes)
        .await
        .unwrap();
    let peak_before = mem_kib(coordinator, "VmPeak");

    // 64 streams on one connection, each announcing a 16 MiB request, sending 1 KiB of it
    // and nothing more.
    let announced = u32::try_from(FRAME_BYTES_MAX).unwrap().to_be_bytes();
    let mut streams = Vec::new();
    for _ in 0..64 {
        let (mut send, recv) = session.connection().open_bi().await.unwrap();
        send.write_all(&announced).await.unwrap();
        send.write_all(&[0xAB; 1024]).await.unwrap();
        streams.push((send, recv));
    }
    // The coordinator read every header and waited for the rest in vain: each stream is
    // reset when its frame's time is up.
    for (_send, mut recv) in streams {
        match recv.read_to_end(1024).await {
            Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
                assert_eq!(
                    StreamCode::from_u64(code.into_inner()),
                    Some(StreamCode::Timeout)
                );
            }
            other => panic!("expected a reset, got {other:?}"),
        }
    }
    let peak_after = mem_kib(coordinator, "VmPeak");
    assert!(
        peak_after < peak_before + 256 * 1024,
        "the coordinator's address space peaked at {peak_after} KiB (from {peak_before} KiB): \
         it reserved what the headers announced (64 x 16 MiB)"
    );
    // The connection carries on.
    session
        .request(&client_coord::Request::Routes)
        .await
        .unwrap();
    session.close();
}

#[test]
fn names_and_reasons_reach_terminals_and_logs_escaped() {
    let system = System::start("escapes", &[]);
    let evil_reason = "disk\x1b[2J\nnode9  FORGED";
    system.ok(&["resource", "drain", "node5", "--reason", evil_reason]);
    let id = system.submit(&[
        "-q",
        "alpha",
        "-t",
        "60s",
        "--",
        "/bin/\x1b]0;owned\x07x\nƒFORGED  alpha  root",
    ]);
    system.wait_state(&id, "running");
    assert!(wait_for(|| system.node_row("node5")["state"] == "drained"));

    let unsafe_char = |text: &str| text.chars().find(|&c| c.is_control() && c != '\n');
    for args in [
        &["jobs", "-A"][..],
        &["job", "info", &id],
        &["resource", "list"],
        &["queue", "list"],
    ] {
        let out = system.ok(args);
        assert_eq!(unsafe_char(&out), None, "{}: {out:?}", args.join(" "));
        assert!(
            !out.contains("\nnode9") && !out.contains("\nƒFORGED"),
            "{out:?}"
        );
    }
    let jobs = system.ok(&["jobs", "-A"]);
    assert_eq!(jobs.lines().count(), 2, "a header and one job: {jobs:?}");
    assert!(
        jobs.contains("\\u{1b}]0;owned\\u{7}x\\u{a}ƒFORGED"),
        "{jobs:?}"
    );
    let nodes = system.ok(&["resource", "list"]);
    assert!(
        nodes.contains("drained (disk\\u{1b}[2J\\u{a}node9  FORGED)"),
        "{nodes:?}"
    );
    // JSON carries the text as it is (its encoder escapes it).
    assert_eq!(system.node_row("node5")["reason"], evil_reason);

    // A refusal quoting what the user typed, on standard error.
    let err = system.fails(&["resource", "drain", "evil\x07\x1bEnode"]);
    assert_eq!(unsafe_char(&err), None, "{err:?}");

    // The logs: the coordinator and beta's shard (node5 is beta's) logged the reason, and
    // alpha's shard the job; none of them raw.
    for log in ["coordinator.log", "shard-beta.log", "shard-alpha.log"] {
        let text = std::fs::read_to_string(system.state().join("logs").join(log)).unwrap();
        assert!(
            !text.contains("\x1b[2J") && !text.contains("\x1b]0;") && !text.contains("\nnode9"),
            "{log}: {text}"
        );
        if log != "shard-alpha.log" {
            assert!(text.contains("disk\\u{1b}[2J\\u{a}node9"), "{log}: {text}");
        }
    }
}

#[test]
fn another_user_sees_a_jobs_summary_only() {
    let system = System::start("privacy", &[]);
    let alice = system.user_dir("alice");
    let bob = system.user_dir("bob");
    let jobspec = system.dir.join("secret.yaml");
    std::fs::write(
        &jobspec,
        r#"
version: 1
resources:
  - type: node
    count: 1
    with:
      - type: slot
        label: task
        count: 1
        with:
          - type: core
            count: 1
tasks:
  - command: ["app", "--password", "hunter2"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: 60
    environment:
      API_TOKEN: s3cret-token
"#,
    )
    .unwrap();
    let out = system.cli_in(
        &alice,
        &[
            "submit",
            "-q",
            "alpha",
            "--jobspec",
            jobspec.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    system.wait_state(&id, "running");

    let read = |dir: &std::path::Path, json: bool| {
        let mut args = vec!["job", "info", id.as_str()];
        if json {
            args.push("--json");
        }
        let out = system.cli_in(dir, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // Bob sees the summary: whose, which state, where; nothing of the jobspec.
    let theirs: Value = serde_json::from_str(&read(&bob, true)).unwrap();
    assert_eq!(theirs["owner"], "alice");
    assert_eq!(theirs["state"], "running");
    assert_eq!(theirs["jobspec"], Value::Null, "{theirs:#}");
    assert_eq!(theirs["R"], Value::Null, "{theirs:#}");
    assert_eq!(theirs["events"], Value::Array(Vec::new()), "{theirs:#}");
    let text = read(&bob, false);
    for secret in ["s3cret-token", "hunter2"] {
        assert!(
            !text.contains(secret) && !theirs.to_string().contains(secret),
            "{text}"
        );
    }
    assert!(
        text.contains("shown to its owner and to admins only"),
        "{text}"
    );

    // Alice, and the admin, see it all.
    let own: Value = serde_json::from_str(&read(&alice, true)).unwrap();
    assert_eq!(
        own["jobspec"]["attributes"]["system"]["environment"]["API_TOKEN"],
        "s3cret-token"
    );
    let admin = system.json(&["job", "info", &id, "--json"]);
    assert!(admin["jobspec"].to_string().contains("s3cret-token"));
    assert!(admin["events"].as_array().is_some_and(|e| !e.is_empty()));
}

#[test]
fn a_journal_record_that_does_not_decode_stops_the_shard_naming_it_and_up_does_not_loop() {
    let system = System::start("journal-decode", &[]);
    let id = system.submit(&["-q", "alpha", "-t", "60s", "--", "app"]);
    system.wait_state(&id, "running");
    // alpha dies while `up` is stopped, so that its journal can be damaged before `up`
    // restarts it: a record with a good checksum whose value is not a job.
    kill_process(pid(system.up_pid()), Signal::STOP).unwrap();
    let alpha = system.child_pid("alpha");
    kill_process(pid(alpha), Signal::KILL).unwrap();
    assert!(wait_for(|| !harness::alive(alpha)));
    let journal = system.shard_dir("alpha").join("journal.redb");
    {
        // The main thread shows as a zombie before the other threads have exited and closed
        // the journal's file (and its lock): wait until the lock is free, not for the pid.
        let mut opened = None;
        assert!(
            wait_for(|| {
                opened = Journal::open(&journal).ok();
                opened.is_some()
            }),
            "alpha's journal stayed locked after alpha died"
        );
        let committer = Committer::start(opened.unwrap()).unwrap();
        let mut batch = Batch::new();
        batch.put("jobs", 12345, b"not a job".to_vec());
        committer
            .submit_blocking(batch)
            .unwrap()
            .wait_blocking()
            .unwrap();
    }
    kill_process(pid(system.up_pid()), Signal::CONT).unwrap();

    // `up` restarts alpha once; alpha stops, naming the file, table and key; `up` says it
    // will not restart it, and does not.
    let up_stderr = || std::fs::read_to_string(system.dir.join("up.stderr")).unwrap_or_default();
    assert!(
        wait_for(|| up_stderr().contains("cannot read its journal back")),
        "up kept restarting alpha: {}",
        up_stderr()
    );
    let said = up_stderr();
    assert!(
        said.contains(&journal.display().to_string()) && said.contains("table jobs, key 12345"),
        "{said}"
    );
    let log = std::fs::read_to_string(system.state().join("logs/shard-alpha.log")).unwrap();
    assert_eq!(
        log.matches("==== shardsched up: starting shard alpha")
            .count(),
        2,
        "started, then restarted once: {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    // The rest of the system carries on.
    let other = system.submit(&["-q", "beta", "-t", "60s", "--", "app"]);
    system.wait_state(&other, "running");
}

#[test]
fn ci_run_prints_its_own_wall_time_even_when_it_fails() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run");
    // A missing shared data folder stops the run at its first check, in a second.
    let out = Command::new("bash")
        .arg(&script)
        .env(
            "SHARDSCHED_CONFORMANCE_DIR",
            "/nonexistent/shardsched-conformance",
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("== .ci/run wall time: ") && last.contains("exit status 1"),
        "last line: {last:?}; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads a child's standard error line by line on a thread, so a test can wait for a line.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
