//! What the whole-system benchmarks (`bench e2e`, `bench moves`) share: a working
//! directory on the disk being measured, a `shardsched up` they start and stop, and the
//! configuration of a generated cluster of the bench shape.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::process::{Pid, Signal, kill_process};
use serde::Serialize;
use shardsched_client::Client;
use shardsched_client::output::emit;
use shardsched_proto::msg::client_shard::{Request, Response};
use shardsched_proto::msg::{JobId, JobSummary, JobsQuery, Route, UserFilter};

/// How long a benchmark waits for `up` to say it is up.
pub const UP_START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long `up` may take to stop after SIGTERM before it is killed.
pub const UP_STOP_GRACE: Duration = Duration::from_secs(15);

/// A benchmark's working directory: the journals go there, so it must be on the disk being
/// measured. `--dir` if given (kept), else a fresh `target/bench-NAME-PID` when run from a
/// cargo checkout, else one under the temp dir (both removed by [`BenchDir::finish`]).
pub struct BenchDir {
    /// The directory, canonical.
    pub work: PathBuf,
    /// The configuration file written in it.
    pub config: PathBuf,
    /// Its file system, for the report (a tmpfs is warned about).
    pub fs: String,
    remove_after: bool,
}

impl BenchDir {
    /// Creates the directory for benchmark `name` and writes `config_text` in it.
    pub fn prepare(name: &str, dir: Option<&Path>, config_text: &str) -> Result<BenchDir> {
        let (work, remove_after) = match dir {
            Some(dir) => (dir.to_owned(), false),
            None if Path::new("target").is_dir() => (
                PathBuf::from("target").join(format!("bench-{name}-{}", std::process::id())),
                true,
            ),
            None => (
                std::env::temp_dir()
                    .join(format!("shardsched-bench-{name}-{}", std::process::id())),
                true,
            ),
        };
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let work = work
            .canonicalize()
            .with_context(|| format!("resolving {}", work.display()))?;
        let fs = file_system_of(&work);
        if fs.starts_with("tmpfs") {
            eprintln!(
                "bench {name}: warning: {} is on {fs}: the journals' fsyncs cost nothing there; use --dir on a disk",
                work.display()
            );
        }
        let config = work.join("config.toml");
        std::fs::write(&config, config_text)
            .with_context(|| format!("writing {}", config.display()))?;
        Ok(BenchDir {
            work,
            config,
            fs,
            remove_after,
        })
    }

    /// Removes the directory unless the user chose it.
    pub fn finish(&self) {
        if self.remove_after {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

/// The file system holding `path`, as `TYPE (SOURCE)` from /proc/mounts (the mount point
/// that is the longest prefix of it); `unknown` when it cannot be told.
pub fn file_system_of(path: &Path) -> String {
    let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
        return "unknown".into();
    };
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (source, point, kind) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(point)
                .then(|| (point.len(), format!("{kind} ({source})")))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".into(), |(_, fs)| fs)
}

/// Runs whole-system benchmark `name` in its working directory (`dir`, see [`BenchDir`],
/// with `config_text` written in it) and prints what `run` reports: as JSON with `json`,
/// else as `table` writes it (given the directory, canonical, and its file system).
pub fn run_in_bench_dir<R: Serialize>(
    name: &str,
    dir: Option<&Path>,
    config_text: &str,
    json: bool,
    run: impl FnOnce(&Path, &Path) -> Result<Vec<R>>,
    table: impl FnOnce(&[R], &Path, &str) -> String,
) -> Result<()> {
    let bench = BenchDir::prepare(name, dir, config_text)?;
    let result = run(&bench.work, &bench.config);
    bench.finish();
    let reports = result?;
    if json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&reports)?))
    } else {
        emit(&table(&reports, &bench.work, &bench.fs))
    }
}

/// One queue of a benchmark's configuration.
pub struct BenchQueue<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its definition, a hostlist.
    pub nodes: String,
    /// Whether to name its match policy (`first`) rather than take the default.
    pub match_first: bool,
}

/// A benchmark's coordinator configuration (TOML): a generated cluster `node[0-(nodes-1)]`
/// of the bench shape (racks of 64, 2 sockets × 22 cores, plus the `node_keys` lines), and
/// `queues`, fcfs, the first the default. `title` is its first comment line.
pub fn config_toml(title: &str, nodes: u64, node_keys: &[&str], queues: &[BenchQueue]) -> String {
    let mut out = format!(
        "# {title}\ndefault_queue = \"{}\"\n\n[cluster.inline]\nname = \"bench\"\n\n\
         [[cluster.inline.nodes]]\nhosts = \"node[0-{}]\"\nrack_size = 64\nsockets = 2\n\
         cores_per_socket = 22\n",
        queues.first().map_or("", |q| q.name),
        nodes.saturating_sub(1)
    );
    for key in node_keys {
        let _ = writeln!(out, "{key}");
    }
    for q in queues {
        let _ = write!(
            out,
            "\n[queues.{}]\nnodes = \"{}\"\npolicy = \"fcfs\"\n",
            q.name, q.nodes
        );
        if q.match_first {
            out.push_str("match_policy = \"first\"\n");
        }
        out.push_str("default_duration = \"1h\"\nmax_duration = \"24h\"\n");
    }
    out
}

/// A `shardsched up` started by a benchmark (this very binary, `up --config FILE --dir
/// DIR`), stopped on drop.
pub struct UpProcess {
    child: Option<Child>,
    pub dir: PathBuf,
}

impl UpProcess {
    /// Starts `up` with `config` in `dir`, and `extra` arguments, and waits for its "is
    /// up" line.
    pub fn start(config: &Path, dir: &Path, extra: &[&str]) -> Result<UpProcess> {
        let exe = std::env::current_exe().context("finding this executable")?;
        let mut child = Command::new(exe)
            .arg("up")
            .args(extra)
            .arg("--config")
            .arg(config)
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting `shardsched up`")?;
        let stdout = child.stdout.take().context("no stdout from `up`")?;
        let mut up = UpProcess {
            child: Some(child),
            dir: dir.to_owned(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut ready = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("shardsched is up")
                    && let Some(tx) = ready.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        match rx.recv_timeout(UP_START_TIMEOUT) {
            Ok(()) => Ok(up),
            Err(_) => {
                up.stop_now();
                bail!(
                    "`shardsched up` did not come up within {} s (logs in {}/logs)",
                    UP_START_TIMEOUT.as_secs(),
                    dir.display()
                )
            }
        }
    }

    /// Its process id (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Stops it: SIGTERM, then SIGKILL after [`UP_STOP_GRACE`].
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = kill_process(Pid::from_child(&child), Signal::TERM);
        let deadline = Instant::now() + UP_STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for UpProcess {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// The jobs of `wanted` in `route`'s shard's own list (finished ones too, up to the
/// response bound), in its order: how the benchmarks see their jobs start and end.
pub async fn shard_jobs(
    client: &Client,
    route: &Route,
    wanted: &std::collections::HashSet<JobId>,
) -> Result<Vec<JobSummary>> {
    let query = Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: true,
        limit: shardsched_proto::limits::JOBS_PER_RESPONSE_MAX as u32,
        states: Vec::new(),
        name: None,
    });
    match client.ask_shard(route, &query).await? {
        Response::Jobs(list) => Ok(list
            .jobs
            .into_iter()
            .filter(|j| wanted.contains(&j.id))
            .collect()),
        other => bail!("unexpected answer to a job list: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_configuration_reads_as_the_coordinator_expects() {
        let text = config_toml(
            "test",
            8,
            &["gpus_per_socket = 2"],
            &[
                BenchQueue {
                    name: "left",
                    nodes: "node[0-3]".into(),
                    match_first: true,
                },
                BenchQueue {
                    name: "right",
                    nodes: "node[4-7]".into(),
                    match_first: false,
                },
            ],
        );
        let config = shardsched_coordinator::Config::parse(&text, "bench", Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.default_queue, "left");
        assert_eq!(config.queues.len(), 2);
    }
}
