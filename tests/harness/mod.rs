//! The harness of the whole-system tests: a `shardsched up` (coordinator + one shard per
//! queue, real processes, real QUIC) in a fresh directory, driven through the `shardsched`
//! commands and their `--json` output, and through the wire where a test must misbehave.
//! Every process is stopped by [`System`]'s `Drop`, even when a test fails: SIGTERM to `up`
//! (which stops its children in order), then SIGKILL to anything left.
//!
//! [`System`] starts and stops the system ([`System::start_with`]) and says where its parts
//! are; its commands and their answers are in [`cli`], the configurations tests start
//! from in [`config`], what they read over HTTP (`/metrics`, the status page) in [`http`],
//! and what tests read of processes (`/proc`) in [`process`].

// Each test binary uses part of the harness.
#![allow(dead_code, unused_imports, clippy::unwrap_used)]

mod agents;
mod cli;
mod config;
mod http;
mod netns;
mod process;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Signal, kill_process};
use shardsched_proto::{Credentials, StateDir};

pub use agents::{
    agents_config, alpha_agents_config, issue_cert, parent_of, spares_of, unified_cgroup_of,
};
pub use config::{batch_and_debug, two_queues, two_queues_config, with_alpha};
pub use http::{http_get, sample, scrape};
pub use netns::{
    AgentSetup, HEAD_ADDRESS, NetCluster, REQUIRE_PRIVILEGED, ip, privileged, remove_cgroups,
};
pub use process::{alive, children_of, creds_in, mem_kib, now_ms, pid, read_pid_file};

pub const EXE: &str = env!("CARGO_BIN_EXE_shardsched");
/// The per-job supervisor, built beside it (where `shardsched` looks for it).
pub const SUPERVISOR_EXE: &str = env!("CARGO_BIN_EXE_shardsched-supervisor");
/// Sim time in [`System::start_fast`] runs this much faster than real time: a 10 s job
/// takes 1 s.
pub const FAST_TIME_SCALE: &str = "10";
/// How long `up` may take to be ready (a debug build, on a loaded 2-core machine).
pub const UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a test waits for something to happen.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `shardsched up` in its own directory; stopped (SIGTERM, then SIGKILL) on drop.
pub struct System {
    up: Option<Child>,
    pub dir: PathBuf,
    /// The network namespace its commands run in (by `nsenter`), if not the test's.
    netns: Option<String>,
}

impl System {
    /// Starts `up` with [`two_queues_config`] and `extra` arguments; waits until it says it
    /// is up.
    pub fn start(name: &str, extra: &[&str]) -> System {
        System::start_with(name, &two_queues_config(), extra)
    }

    /// Starts `up` with [`two_queues`] whose jobs last 10 s unless they say otherwise, and
    /// sim time [`FAST_TIME_SCALE`] times faster than real time.
    pub fn start_fast(name: &str) -> System {
        System::start_with(name, &two_queues("10s"), &["--time-scale", FAST_TIME_SCALE])
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
        let system = System {
            up: Some(up),
            dir,
            netns: None,
        };
        if rx.recv_timeout(UP_TIMEOUT).is_err() {
            panic!(
                "`shardsched up` was not ready within {} s; its stderr: {}; logs in {}",
                UP_TIMEOUT.as_secs(),
                std::fs::read_to_string(system.dir.join("up.stderr")).unwrap_or_default(),
                system.layout().logs_dir().display()
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

    /// The state directory's layout.
    pub fn layout(&self) -> StateDir {
        StateDir::at(self.state())
    }

    /// Removes the routing table client commands cached ([`shardsched_client::route_cache`]),
    /// so that the next command asks the coordinator: with it, a submit goes straight to
    /// its shard.
    pub fn forget_cached_routes(&self) {
        let file = self
            .layout()
            .client_dir()
            .join(shardsched_client::route_cache::ROUTES_FILE);
        let _ = std::fs::remove_file(file);
    }

    /// The coordinator's address, as it wrote it.
    pub fn address(&self) -> SocketAddr {
        self.layout().coordinator_address().unwrap()
    }

    /// The admin credentials `up` issued.
    pub fn admin(&self) -> Credentials {
        self.layout().credentials().unwrap()
    }

    /// A queue's shard state directory.
    pub fn shard_dir(&self, queue: &str) -> PathBuf {
        self.layout().shard_dir(queue)
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
        self.remove_agent_cgroups();
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
