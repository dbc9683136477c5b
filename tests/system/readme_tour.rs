//! The README's five-minute tour, run as written: its first block (`shardsched up`) in the
//! background, its second with `sh -e`, in a fresh `$HOME` so that the default state
//! directory the tour names is this test's own. Then what the tour says should follow does:
//! the busy nodes were outgoing, and once the job is cancelled they come up in debug, on
//! the status page too.

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness::{EXE, UP_TIMEOUT, http_get, pid, read_pid_file, wait_for};
use rustix::process::{Signal, kill_process};
use serde_json::Value;

const README: &str = include_str!("../../README.md");
/// The nodes the tour moves.
const MOVED: [&str; 4] = ["node96", "node97", "node98", "node99"];

/// The shell block after the line starting with `marker` in the README.
fn block(marker: &str) -> String {
    let after = README
        .split_once(marker)
        .unwrap_or_else(|| panic!("the README has no {marker:?}"))
        .1;
    let body = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("no sh block after {marker:?}"))
        .0;
    body.to_owned()
}

/// `sh FLAGS -c SCRIPT` in the tour's environment: `shardsched` on the `PATH`, `HOME` = `home`,
/// and no state directory named by the caller's environment.
fn shell(home: &Path, flags: &[&str], script: &str) -> Command {
    let bin = Path::new(EXE).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_owned()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut command = Command::new("sh");
    command
        .args(flags)
        .arg("-c")
        .arg(script)
        .current_dir(home)
        .env("HOME", home)
        .env("PATH", path)
        .env_remove("SHARDSCHED_DIR")
        .env_remove("XDG_STATE_HOME")
        .stdin(Stdio::null());
    command
}

/// Terminal 1: `up`, stopped (SIGTERM to the pid in its lock file) on drop.
struct Up {
    shell: Child,
    pid_file: std::path::PathBuf,
    output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Up {
    fn drop(&mut self) {
        if self.pid_file.exists() {
            let _ = kill_process(pid(read_pid_file(&self.pid_file)), Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.shell.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

#[test]
fn the_tour_runs_as_written() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join(".local/state/shardsched");

    // Terminal 1.
    let mut shell1 = shell(home.path(), &[], &block("<!-- tour: terminal 1"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = shell1.stdout.take().unwrap();
    let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = std::sync::Arc::clone(&output);
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let ready = line.starts_with("Ctrl-C stops everything");
            lines.lock().unwrap().push_str(&(line + "\n"));
            if ready && let Some(tx) = tx.take() {
                let _ = tx.send(());
            }
        }
    });
    let up = Up {
        shell: shell1,
        pid_file: state.join("up.pid"),
        output,
    };
    assert!(
        rx.recv_timeout(UP_TIMEOUT).is_ok(),
        "`shardsched up` did not come up: {}",
        up.output.lock().unwrap()
    );
    let banner = up.output.lock().unwrap().clone();
    let page = banner
        .lines()
        .find_map(|l| l.strip_prefix("status page: "))
        .unwrap_or_else(|| panic!("up printed no status page: {banner}"))
        .to_owned();

    // Terminal 2.
    let run = shell(
        home.path(),
        &["-e", "-x"],
        &block("<!-- tour: terminal 2 -->"),
    )
    .output()
    .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "the tour failed:\n{out}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        out.contains("node[0-111]"),
        "the job is not on node[0-111]:\n{out}"
    );
    assert!(out.contains("outgoing"), "no node was outgoing:\n{out}");
    assert!(
        out.contains(&page),
        "the http-address file does not hold {page}:\n{out}"
    );

    // What follows the cancel: the nodes come up in debug, and the page shows it.
    let addr = page
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let mut last = Value::Null;
    let moved = wait_for(|| {
        let (_, body) = http_get(addr, "/api/status");
        last = serde_json::from_str(&body).unwrap_or(Value::Null);
        let nodes = last["nodes"].as_array().cloned().unwrap_or_default();
        MOVED.iter().all(|name| {
            nodes
                .iter()
                .any(|n| n["name"] == *name && n["queue"] == "debug" && n["state"] == "up")
        })
    });
    assert!(
        moved,
        "node[96-99] never came up in debug on the page: {last:#}"
    );
}
