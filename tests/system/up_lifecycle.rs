//! `up`'s life: it owns its state directory for as long as anything it started runs, and it
//! stops what it started however it is stopped.
//!
//! - a second `up` on the directory touches nothing and names the live processes, whether
//!   the first `up` lives or was SIGKILLed while its coordinator and shards still serve;
//! - `up` stops its children on SIGTERM and SIGHUP even when its stderr is gone (a closed
//!   terminal, `up 2>&1 | tee` after Ctrl-C): it used to panic printing and leave them.

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use harness::{EXE, System, alive, children_of, pid, two_queues_config, wait_for};
use rustix::process::{Signal, kill_process};

/// Kills the listed processes when dropped: the children of an `up` the test SIGKILLed,
/// which no `up` stops any more.
struct Orphans(Vec<u32>);

impl Drop for Orphans {
    fn drop(&mut self) {
        for &p in &self.0 {
            let _ = kill_process(pid(p), Signal::KILL);
        }
    }
}

/// `up`'s children (coordinator, alpha's and beta's shards), killed when the guard drops.
fn children(system: &System) -> Orphans {
    let pids: Vec<u32> = children_of(system.up_pid())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(pids.len(), 3, "coordinator, alpha and beta");
    Orphans(pids)
}

/// Runs a second `up` on `system`'s directory; it must exit by itself (a generous timeout
/// catches one that started a system instead).
fn second_up(system: &System) -> Output {
    let mut child = Command::new(EXE)
        .arg("up")
        .arg("--config")
        .arg(system.config_file())
        .arg("--dir")
        .arg(system.state())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + harness::WAIT_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = kill_process(pid(child.id()), Signal::TERM);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// The files a second `up` used to clobber: the coordinator's address and certificate.
fn clobberable(system: &System) -> Vec<Vec<u8>> {
    [
        "coordinator/address",
        "coordinator/coordinator.pem",
        "up.pid",
    ]
    .iter()
    .map(|f| std::fs::read(system.state().join(f)).unwrap_or_default())
    .collect()
}

#[test]
fn a_second_up_on_the_directory_touches_nothing_and_names_the_live_processes() {
    let system = System::start("up-lock", &[]);
    let before = clobberable(&system);
    assert!(!before[0].is_empty() && !before[1].is_empty());

    // While the first `up` lives.
    let out = second_up(&system);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second up started: {stderr}");
    assert!(
        stderr.contains(&format!(
            "another `shardsched up` (pid {})",
            system.up_pid()
        )),
        "{stderr}"
    );
    assert_eq!(clobberable(&system), before);

    // After it was SIGKILLed: its coordinator and shards still serve.
    let orphans = children(&system);
    kill_process(pid(system.up_pid()), Signal::KILL).unwrap();
    assert!(wait_for(|| !alive(system.up_pid())));

    let out = second_up(&system);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second up started: {stderr}");
    for child in &orphans.0 {
        assert!(
            stderr.contains(&format!("pid {child} (")),
            "pid {child} not named: {stderr}"
        );
    }
    assert!(stderr.contains("(coordinator)"), "{stderr}");
    assert!(stderr.contains("(shard alpha)"), "{stderr}");
    assert_eq!(
        clobberable(&system),
        before,
        "the second up touched the directory"
    );
    // Clients are not cut off.
    system.ok(&["queue", "list"]);
    assert!(orphans.0.iter().all(|&c| alive(c)));
}

/// Starts `up` with its stderr a pipe whose reading end is closed: every write fails.
fn start_without_stderr(name: &str) -> System {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    System::start_with_stderr(
        name,
        &two_queues_config(),
        &[],
        &[],
        Some(Stdio::from(writer)),
    )
}

/// `signal` to `up`, whose stderr is gone: it exits 0 and no child is left.
fn stops_its_children_on(name: &str, signal: Signal) {
    let mut system = start_without_stderr(name);
    let orphans = children(&system);
    kill_process(pid(system.up_pid()), signal).unwrap();
    assert!(
        wait_for(|| orphans.0.iter().all(|&c| !alive(c))),
        "after {signal:?}, up left {:?} running",
        orphans.0.iter().filter(|&&c| alive(c)).collect::<Vec<_>>()
    );
    let (clean, left) = system.stop();
    assert!(clean, "up did not exit 0 after {signal:?}");
    assert!(left.is_empty());
}

#[test]
fn up_stops_its_children_on_sigterm_when_its_stderr_is_gone() {
    stops_its_children_on("up-no-stderr-term", Signal::TERM);
}

#[test]
fn up_stops_its_children_on_sighup_when_its_stderr_is_gone() {
    stops_its_children_on("up-no-stderr-hup", Signal::HUP);
}
