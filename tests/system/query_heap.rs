//! `shardsched query` starts itself again, once, with glibc's heap on transparent huge
//! pages (crates/cli/src/query/heap.rs), unless its caller already chose.
//!
//! Each session is asked one command and answers it before its environment is read from
//! `/proc`: by then it runs in its last image, so no wait on time is needed.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use crate::query_run::{GRUG, Scratch};

/// The `GLIBC_TUNABLES` a session of `shardsched query` ran under, read from its
/// `/proc/PID/environ` once it answered a command; `tunables` is what it was started with.
fn tunables_of_a_session(tunables: Option<&str>) -> Option<String> {
    let s = Scratch::new("heap");
    let grug = s.file("mini.graphml", GRUG);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shardsched"));
    cmd.args(["query", "-L"])
        .arg(&grug)
        .env_remove("LD_PRELOAD")
        .env_remove("GLIBC_TUNABLES")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(t) = tunables {
        cmd.env("GLIBC_TUNABLES", t);
    }
    let mut child = cmd.spawn().expect("shardsched query starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"stat\n").expect("a command");
    stdin.flush().expect("sent");
    // Read to its end, so that no answer meets a closed pipe.
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut answer = String::new();
    stdout.read_line(&mut answer).expect("an answer");
    assert!(answer.starts_with("INFO: "), "stat answered {answer:?}");
    let environ = std::fs::read(format!("/proc/{}/environ", child.id())).expect("environ");
    stdin.write_all(b"quit\n").expect("quit");
    drop(stdin);
    stdout.read_to_string(&mut answer).expect("the rest");
    assert!(child.wait().expect("exit").success(), "answered {answer:?}");
    // glibc cuts the value at each `:` in place (a NUL for each): its tunables are the
    // pieces from `GLIBC_TUNABLES=` on that name a `glibc.` tunable.
    let mut pieces = environ.split(|&b| b == 0);
    let first = pieces.find_map(|e| e.strip_prefix(b"GLIBC_TUNABLES="))?;
    let mut value = vec![String::from_utf8_lossy(first).into_owned()];
    value.extend(
        pieces
            .take_while(|e| e.starts_with(b"glibc."))
            .map(|e| String::from_utf8_lossy(e).into_owned()),
    );
    Some(value.join(":"))
}

/// Whether this host lets a process ask for transparent huge pages and runs glibc.
fn huge_pages_askable() -> bool {
    let policy =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !(policy.contains("[always]") || policy.contains("[madvise]")) {
        eprintln!("skipped: transparent huge pages are off or absent here ({policy:?})");
        return false;
    }
    if !cfg!(target_env = "gnu") {
        eprintln!("skipped: not glibc");
        return false;
    }
    true
}

#[test]
fn query_restarts_on_huge_pages_unless_its_caller_chose() {
    if !huge_pages_askable() {
        return;
    }
    let ours = "glibc.malloc.hugetlb=1:glibc.malloc.top_pad=33554432";
    assert_eq!(tunables_of_a_session(None).as_deref(), Some(ours));
    // Another tunable of the caller's is kept, before ours.
    assert_eq!(
        tunables_of_a_session(Some("glibc.malloc.arena_max=2")),
        Some(format!("glibc.malloc.arena_max=2:{ours}"))
    );
    // A caller who names the tunable decides: no restart, the value as given.
    assert_eq!(
        tunables_of_a_session(Some("glibc.malloc.hugetlb=0")).as_deref(),
        Some("glibc.malloc.hugetlb=0")
    );
}
