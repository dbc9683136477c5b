//! The harness of the whole-system tests: a `shardsched up` (coordinator + one shard per
//! queue, real processes, real QUIC) in a fresh directory, driven through the `shardsched`
//! commands and their `--json` output, and through the wire where a test must misbehave.
//! Every process is stopped by [`System`]'s `Drop`, even when a test fails: SIGTERM to `up`
//! (which stops its children in order), then SIGKILL to anything left.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;
use shardsched_proto::Credentials;

pub const EXE: &str = env!("CARGO_BIN_EXE_shardsched");
/// How long `up` may take to be ready (a debug build, on a loaded 2-core machine).
pub const UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a test waits for something to happen.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Two queues over disjoint halves of an 8-node cluster (1 socket × 4 cores per node):
/// alpha (fcfs) on node[0-3], beta (easy) on node[4-7], both with a default duration of
/// 60 s. [`two_queues`] gives the same with another default duration.
pub fn two_queues_config() -> String {
    with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[4-7]"
policy = "easy"
default_duration = "60s"
max_duration = "2h"
"#,
    )
}

/// A cluster of `hosts` (1 socket × 4 cores per node) with queue alpha (fcfs, node[0-3],
/// the default) and the queue sections `queues` (TOML) after it: the shape most tests
/// start from.
pub fn with_alpha(hosts: &str, queues: &str) -> String {
    format!(
        r#"
default_queue = "alpha"

[cluster.inline]
name = "tiny"

[[cluster.inline.nodes]]
hosts = "{hosts}"
sockets = 1
cores_per_socket = 4

[queues.alpha]
nodes = "node[0-3]"
policy = "fcfs"
default_duration = "60s"
max_duration = "2h"
{queues}"#
    )
}

/// [`two_queues_config`] with jobs lasting `default_duration` (e.g. `"10s"`) when they
/// give none.
pub fn two_queues(default_duration: &str) -> String {
    two_queues_config().replace(
        "default_duration = \"60s\"",
        &format!("default_duration = \"{default_duration}\""),
    )
}

/// A running `shardsched up` in its own directory; stopped (SIGTERM, then SIGKILL) on drop.
pub struct System {
    up: Option<Child>,
    pub dir: PathBuf,
}

impl System {
    /// Starts `up` with [`two_queues_config`] and `extra` arguments; waits until it says it
    /// is up.
    pub fn start(name: &str, extra: &[&str]) -> System {
        System::start_with(name, &two_queues_config(), extra)
    }

    /// Starts `up` with the configuration `config` and `extra` arguments.
    pub fn start_with(name: &str, config: &str, extra: &[&str]) -> System {
        System::start_with_env(name, config, extra, &[])
    }

    /// As [`System::start_with`], with environment variables for `up` and its children
    /// (e.g. `SHARDSCHED_FAILPOINTS`).
    pub fn start_with_env(
        name: &str,
        config: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> System {
        System::start_with_stderr(name, config, extra, env, None)
    }

    /// As [`System::start_with_env`], with `up`'s stderr going to `stderr` instead of the
    /// file `up.stderr` (e.g. a pipe the test closes).
    pub fn start_with_stderr(
        name: &str,
        config: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        stderr: Option<Stdio>,
    ) -> System {
        let dir = std::env::temp_dir().join(format!(
            "shardsched-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let config_file = dir.join("config.toml");
        std::fs::write(&config_file, config).unwrap();
        let stderr =
            stderr.unwrap_or_else(|| std::fs::File::create(dir.join("up.stderr")).unwrap().into());
        let mut up = Command::new(EXE)
            .envs(env.iter().copied())
            .arg("up")
            .args(extra)
            .arg("--config")
            .arg(&config_file)
            .arg("--dir")
            .arg(dir.join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = up.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("shardsched is up")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        let system = System { up: Some(up), dir };
        if rx.recv_timeout(UP_TIMEOUT).is_err() {
            panic!(
                "`shardsched up` was not ready within {} s; its stderr: {}; logs in {}",
                UP_TIMEOUT.as_secs(),
                std::fs::read_to_string(system.dir.join("up.stderr")).unwrap_or_default(),
                system.state().join("logs").display()
            );
        }
        system
    }

    /// The configuration file `up` was started with.
    pub fn config_file(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// `up`'s pid.
    pub fn up_pid(&self) -> u32 {
        self.up.as_ref().unwrap().id()
    }

    /// The coordinator's address, as it wrote it.
    pub fn address(&self) -> SocketAddr {
        std::fs::read_to_string(self.state().join("coordinator/address"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The admin credentials `up` issued.
    pub fn admin(&self) -> Credentials {
        creds_in(&self.state().join("client"))
    }

    /// A queue's shard state directory.
    pub fn shard_dir(&self, queue: &str) -> PathBuf {
        self.state().join("shards").join(queue)
    }

    /// Runs `shardsched ARGS` against this system.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(EXE)
            .args(args)
            .env("SHARDSCHED_DIR", self.state())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// A user (not admin) certificate `name` in a client directory of its own (with the
    /// coordinator's address), for `SHARDSCHED_DIR`.
    pub fn user_dir(&self, name: &str) -> PathBuf {
        let dir = self.dir.join(format!("user-{name}"));
        let out = Command::new(EXE)
            .args([
                "cert",
                "issue",
                "--role",
                "user",
                "--name",
                name,
                "--state-dir",
            ])
            .arg(self.state().join("coordinator"))
            .arg("--out")
            .arg(dir.join("client"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cert issue: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::create_dir_all(dir.join("coordinator")).unwrap();
        std::fs::copy(
            self.state().join("coordinator/address"),
            dir.join("coordinator/address"),
        )
        .unwrap();
        dir
    }

    /// Runs `shardsched ARGS` with `SHARDSCHED_DIR=dir`.
    pub fn cli_in(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(EXE)
            .args(args)
            .env("SHARDSCHED_DIR", dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "shardsched {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command that must fail; returns its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            !out.status.success(),
            "shardsched {} succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("shardsched {} printed {text:?}: {e}", args.join(" ")))
    }

    /// A command printing a JSON list; its rows.
    pub fn rows(&self, args: &[&str]) -> Vec<Value> {
        match self.json(args) {
            Value::Array(rows) => rows,
            other => panic!("shardsched {} printed {other:?}", args.join(" ")),
        }
    }

    /// Submits; returns the job id printed.
    pub fn submit(&self, args: &[&str]) -> String {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        self.ok(&all).trim().to_owned()
    }

    pub fn jobs(&self) -> Vec<Value> {
        self.rows(&["jobs", "-A", "-a", "--json"])
    }

    pub fn job(&self, id: &str) -> Value {
        self.jobs()
            .into_iter()
            .find(|j| j["id"] == id)
            .unwrap_or_else(|| panic!("job {id} is not listed"))
    }

    pub fn resources(&self) -> Vec<Value> {
        self.rows(&["resource", "list", "--json"])
    }

    /// One queue's row in `queue list --json`.
    pub fn queue_row(&self, name: &str) -> Value {
        self.rows(&["queue", "list", "--json"])
            .into_iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("no queue {name}"))
    }

    /// One node's row in `resource list --json`.
    pub fn node_row(&self, name: &str) -> Value {
        self.resources()
            .into_iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// A wire session to the coordinator with the admin certificate, and the endpoint it
    /// runs on (keep both).
    pub async fn admin_session(&self) -> (quinn::Endpoint, shardsched_proto::Session) {
        let endpoint =
            shardsched_proto::tls::client_endpoint(&self.admin(), "127.0.0.1:0".parse().unwrap())
                .unwrap();
        let session = shardsched_proto::connect(
            &endpoint,
            self.address(),
            shardsched_proto::Role::Coordinator,
            "coordinator",
        )
        .await
        .unwrap();
        (endpoint, session)
    }

    /// The pid of `up`'s child whose command line has `word` (`coordinator`, or a queue).
    pub fn child_pid(&self, word: &str) -> u32 {
        self.try_child_pid(word)
            .unwrap_or_else(|| panic!("no child of up with {word:?} in its command line"))
    }

    /// The same, `None` when there is none (between a death and its restart).
    pub fn try_child_pid(&self, word: &str) -> Option<u32> {
        children_of(self.up_pid())
            .into_iter()
            .find(|(_, cmdline)| cmdline.iter().any(|a| a == word))
            .map(|(pid, _)| pid)
    }

    /// Waits until `done` holds for the job list (`jobs -A -a`); returns it.
    pub fn wait_jobs(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut jobs = Vec::new();
        let found = wait_for(|| {
            jobs = self.jobs();
            done(&jobs)
        });
        assert!(found, "timed out waiting for {what}; jobs: {jobs:#?}");
        jobs
    }

    /// Waits until job `id` is in `state`; returns its row.
    pub fn wait_state(&self, id: &str, state: &str) -> Value {
        let mut last = Value::Null;
        let found = wait_for(|| {
            last = self.job(id);
            last["state"] == state
        });
        assert!(found, "job {id} never became {state}: {last:#}");
        last
    }
}

impl System {
    /// Stops `up` with SIGTERM and returns whether it exited 0 with no child left behind
    /// (the children left are killed).
    pub fn stop(&mut self) -> (bool, Vec<u32>) {
        let Some(mut up) = self.up.take() else {
            return (false, Vec::new());
        };
        let children: Vec<u32> = children_of(up.id()).into_iter().map(|(p, _)| p).collect();
        let _ = kill_process(pid(up.id()), Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut status = None;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = up.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if status.is_none() {
            let _ = up.kill();
            let _ = up.wait();
        }
        let survivors: Vec<u32> = children.into_iter().filter(|&p| alive(p)).collect();
        for &p in &survivors {
            let _ = kill_process(pid(p), Signal::KILL);
        }
        (status.is_some_and(|s| s.success()), survivors)
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("test state kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Polls `done` every 100 ms for up to [`WAIT_TIMEOUT`]; whether it held.
pub fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn pid(p: u32) -> Pid {
    Pid::from_raw(p as i32).unwrap()
}

/// Whether process `p` runs (a zombie has exited: only its parent's wait is missing).
pub fn alive(p: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{p}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Reads a pid a job wrote to a file (waiting for it to appear).
pub fn read_pid_file(path: &Path) -> u32 {
    let mut text = String::new();
    assert!(
        wait_for(|| {
            text = std::fs::read_to_string(path).unwrap_or_default();
            text.ends_with('\n')
        }),
        "{} never written",
        path.display()
    );
    text.trim().parse().unwrap()
}

/// The live children of `parent`, with their command lines.
pub fn children_of(parent: u32) -> Vec<(u32, Vec<String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() < 2 || fields[0] == "Z" || fields[1].parse::<u32>() != Ok(parent) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let args = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.push((p, args));
    }
    out
}

/// The credentials in a client or state directory (`ca.pem`, `cert.pem`, `key.pem`).
pub fn creds_in(dir: &Path) -> Credentials {
    Credentials::load(
        &dir.join("ca.pem"),
        &dir.join("cert.pem"),
        &dir.join("key.pem"),
    )
    .unwrap()
}

/// A field of `/proc/PID/status` (`VmRSS`, `VmPeak`, …), in KiB.
pub fn mem_kib(p: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The wall clock, ms since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
