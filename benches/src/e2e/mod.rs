//! `shardsched bench e2e`: the whole system, end to end, over QUIC on loopback.
//!
//! What a user of a batch scheduler feels is how fast submitted jobs get resources, and
//! how many jobs a second the system takes in. This benchmark measures exactly that on the
//! real processes `shardsched up` starts (coordinator + one shard per queue, mutual TLS,
//! journal, sim executor), from a client speaking the real wire:
//!
//! 1. **one shard, one at a time**: start `up` with a generated cluster (default 1,024
//!    nodes, the bench shape: 2 sockets × 22 cores) split into two queues of equal halves;
//!    submit L one-core jobs to one queue, each after the previous one was answered. This is
//!    the unloaded latency.
//! 2. **one shard**: on the same system, N more jobs to the same queue over one connection
//!    with C requests in flight at once (each on its own QUIC stream, each with its own
//!    idempotency key); wait until every job is allocated.
//! 3. **two shards**: a fresh `up`, N jobs to each queue at the same time.
//!
//! Reported per phase:
//!
//! - **sustained jobs/s**: jobs / (last allocation − first submission), from the shard's own
//!   start times (`JobSummary::start_ms`) and the client's clock at the first send (one
//!   machine, one clock), so it counts only jobs that actually got resources;
//! - **submit→allocated** as the shard recorded it (`start_ms − submit_ms`, median and p99):
//!   millisecond resolution, and it starts when the shard's core takes the request, so it
//!   leaves out the time a request waits in the shard's queue under load;
//! - **submit round trip** (median, p99, µs): from the client sending the request to reading
//!   the job id. The shard answers a submit only after the scheduling pass that follows it
//!   (and after the journal's fsync), so for a job that fits this is an **upper bound on
//!   submit→allocated as the client sees it**, at microsecond resolution. With C requests
//!   in flight it also holds the queueing that C implies (Little's law: C / throughput); the
//!   one-at-a-time phase gives the unloaded figure.
//!
//! - **journal commits** (fsync latency median and p99, commits, writes per commit): every
//!   submit is journaled (fsync) before it is answered, with group commit; each shard writes
//!   its commit statistics to `journal-stats.json` in its state directory, read before and
//!   after each phase.
//!
//! Jobs last an hour of simulated time, and N is kept under the queue's core count, so no
//! job completes during the run and every job can be allocated at once: the figures are the
//! submit and match path alone, not backlog scheduling. The client shares the machine's
//! cores with the shards and the coordinator, which this report does not hide.
//!
//! The journals must be on the real disk for the fsync figures to mean anything: the working
//! directory defaults to `target/bench-e2e-PID` when run from a directory with a `target/`
//! (a cargo checkout), and the report names the file system it is on (a tmpfs is warned
//! about).

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use rustix::process::{Pid, Signal, kill_process};
use serde::Serialize;
use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobId, JobState, JobSummary, JobsQuery, Route, UserFilter};

use crate::client::output::{Table, emit, now_ms};
use crate::client::{Client, StateDir, submit::new_key};

/// Cores per node of the generated cluster (2 sockets × 22 cores, the bench GRUG shape).
const CORES_PER_NODE: u64 = 44;
/// How long the benchmark waits for `up` to be ready, and for all jobs to be allocated.
pub const PHASE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often it looks at the shard's job list while waiting for allocations.
pub const ALLOCATION_POLL: Duration = Duration::from_millis(250);
/// How long `up` may take to stop after SIGTERM before it is killed.
pub const UP_STOP_GRACE: Duration = Duration::from_secs(15);

/// Flags of `shardsched bench e2e`.
#[derive(Args, Debug, Clone)]
pub struct E2eArgs {
    /// Jobs submitted to each shard in each phase.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: u64,
    /// Jobs submitted one at a time (one request in flight) before the throughput run, for
    /// the unloaded submit→allocated latency (0 skips it).
    #[arg(long, default_value_t = 1000)]
    pub latency_jobs: u64,
    /// Submit requests in flight at once, per shard (each on its own QUIC stream).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub concurrency: u64,
    /// Nodes in the generated cluster (split in two equal queues).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(2..))]
    pub nodes: u64,
    /// Working directory for the two `up`s (the shards' journals go there: put it on the
    /// disk to measure) [default: a fresh `target/bench-e2e-PID` when ./target exists, else
    /// one under the temp dir; removed afterwards].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Only the one-shard phase.
    #[arg(long)]
    pub one_only: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The figures of one phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    /// `one shard` or `two shards`.
    pub phase: String,
    /// Shards submitted to.
    pub shards: usize,
    /// Jobs submitted (all shards).
    pub jobs: u64,
    /// Requests in flight per shard.
    pub concurrency: u64,
    /// Jobs allocated per second, first submission to last allocation (shard clock).
    pub allocated_per_s: f64,
    /// Submissions acknowledged per second, first send to last answer (client clock).
    pub acked_per_s: f64,
    /// Median submit→allocated, milliseconds (shard clock, ms resolution).
    pub alloc_latency_median_ms: u64,
    /// 99th percentile submit→allocated, milliseconds.
    pub alloc_latency_p99_ms: u64,
    /// Share of jobs allocated within the millisecond of their submission.
    pub alloc_same_ms_share: f64,
    /// Median submit round trip seen by the client, microseconds.
    pub submit_rtt_median_us: u64,
    /// 99th percentile submit round trip, microseconds.
    pub submit_rtt_p99_us: u64,
    /// CPU time (user + system) of the shards per job while submitting, microseconds.
    pub cpu_shards_us_per_job: u64,
    /// CPU time of the coordinator per job, microseconds.
    pub cpu_coordinator_us_per_job: u64,
    /// CPU time of this benchmark client per job, microseconds.
    pub cpu_client_us_per_job: u64,
    /// Cores kept busy on average by all of them while submitting.
    pub cores_busy: f64,
    /// Journal commits (transactions, each one fsync'd) during the phase, all shards.
    pub journal_commits: u64,
    /// Journal writes per commit (group commit at work).
    pub journal_writes_per_commit: f64,
    /// Median commit (fsync) latency, microseconds (within 12.5 %: a histogram).
    pub fsync_median_us: u64,
    /// 99th percentile commit (fsync) latency, microseconds.
    pub fsync_p99_us: u64,
}

/// A shard's journal statistics (its `journal-stats.json`), or the sum of several.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct JournalReading {
    commits: u64,
    writes: u64,
    /// Commit latency histogram: largest µs of a bucket → commits.
    fsync_buckets: BTreeMap<u64, u64>,
}

impl JournalReading {
    /// Reads `dir`/journal-stats.json; a missing or unreadable file reads as nothing.
    fn read(dir: &Path) -> JournalReading {
        let Ok(text) = std::fs::read_to_string(dir.join("journal-stats.json")) else {
            return JournalReading::default();
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            return JournalReading::default();
        };
        let fsync_buckets = v["fsync_us"]["buckets"]
            .as_array()
            .map(|b| {
                b.iter()
                    .filter_map(|pair| Some((pair[0].as_u64()?, pair[1].as_u64()?)))
                    .collect()
            })
            .unwrap_or_default();
        JournalReading {
            commits: v["commits"].as_u64().unwrap_or(0),
            writes: v["writes"].as_u64().unwrap_or(0),
            fsync_buckets,
        }
    }

    /// The sum over the shards of `queues` under `up_dir`, once it stops changing (the
    /// shards write it about once a second).
    async fn settled(up_dir: &Path, queues: &[&str]) -> JournalReading {
        let read_all = || {
            let mut sum = JournalReading::default();
            for queue in queues {
                sum.add(&JournalReading::read(
                    &StateDir::at(up_dir.to_owned()).shard_dir(queue),
                ));
            }
            sum
        };
        let mut last = read_all();
        for _ in 0..JOURNAL_SETTLE_READS_MAX {
            tokio::time::sleep(JOURNAL_SETTLE_WAIT).await;
            let now = read_all();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    fn add(&mut self, other: &JournalReading) {
        self.commits += other.commits;
        self.writes += other.writes;
        for (&bound, &n) in &other.fsync_buckets {
            *self.fsync_buckets.entry(bound).or_default() += n;
        }
    }

    fn minus(&self, before: &JournalReading) -> JournalReading {
        JournalReading {
            commits: self.commits.saturating_sub(before.commits),
            writes: self.writes.saturating_sub(before.writes),
            fsync_buckets: self
                .fsync_buckets
                .iter()
                .map(|(&b, &n)| {
                    (
                        b,
                        n.saturating_sub(before.fsync_buckets.get(&b).copied().unwrap_or(0)),
                    )
                })
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }

    /// The `q` quantile of the commit latencies, µs (a bucket's bound).
    fn fsync_quantile(&self, q: f64) -> u64 {
        let total: u64 = self.fsync_buckets.values().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (&bound, &n) in &self.fsync_buckets {
            seen += n;
            if seen >= rank {
                return bound;
            }
        }
        0
    }
}

/// How long to wait between two readings of the journal statistics (the shards write
/// them every second).
const JOURNAL_SETTLE_WAIT: Duration = Duration::from_millis(1200);
/// Readings taken at most while waiting for them to stop changing.
const JOURNAL_SETTLE_READS_MAX: usize = 10;

/// Linux reports process times in `/proc` in units of USER_HZ, which is 100 on every
/// architecture Linux exports it for (it is not the kernel's tick rate).
const USER_HZ: u64 = 100;

/// CPU time used so far by this process, and by `up`'s shard and coordinator children, in ms.
#[derive(Default)]
struct CpuSample {
    client_ms: u64,
    shards_ms: u64,
    coordinator_ms: u64,
}

impl CpuSample {
    /// Best effort: a process that cannot be read counts as zero.
    fn take(up_pid: u32) -> CpuSample {
        let mut sample = CpuSample {
            client_ms: cpu_ms("self").unwrap_or(0),
            ..CpuSample::default()
        };
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return sample;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.parse::<u32>().is_err() || parent_of(&name) != Some(up_pid) {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{name}/cmdline")).unwrap_or_default();
            let role = cmdline.split(|&b| b == 0).nth(1).unwrap_or_default();
            let used = cpu_ms(&name).unwrap_or(0);
            match role {
                b"shard" => sample.shards_ms += used,
                b"coordinator" => sample.coordinator_ms += used,
                _ => {}
            }
        }
        sample
    }

    fn minus(&self, before: &CpuSample) -> CpuSample {
        CpuSample {
            client_ms: self.client_ms.saturating_sub(before.client_ms),
            shards_ms: self.shards_ms.saturating_sub(before.shards_ms),
            coordinator_ms: self.coordinator_ms.saturating_sub(before.coordinator_ms),
        }
    }
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces).
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn parent_of(pid: &str) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// User + system CPU time of a process, in ms (`stat` fields 14 and 15).
fn cpu_ms(pid: &str) -> Option<u64> {
    let fields = stat_fields(pid)?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 1000 / USER_HZ)
}

/// `shardsched bench e2e`.
pub fn main(args: &E2eArgs) -> Result<()> {
    if args.jobs + args.latency_jobs > (args.nodes / 2) * CORES_PER_NODE {
        bail!(
            "{} one-core jobs do not all fit in a queue of {} nodes × {CORES_PER_NODE} cores; \
             lower --jobs and --latency-jobs, or raise --nodes",
            args.jobs + args.latency_jobs,
            args.nodes / 2
        );
    }
    let bench = BenchDir::prepare("e2e", args.dir.as_deref(), &config_toml(args.nodes))?;
    let result = run_phases(args, &bench.work, &bench.config);
    bench.finish();
    let reports = result?;
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&reports)?))
    } else {
        emit(&report_table(args, &reports, &bench.work, &bench.fs))
    }
}

/// A benchmark's working directory: the journals go there, so it must be on the disk being
/// measured. `--dir` if given (kept), else a fresh `target/bench-NAME-PID` when run from a
/// cargo checkout, else one under the temp dir (both removed by [`BenchDir::finish`]).
pub(crate) struct BenchDir {
    /// The directory, canonical.
    pub(crate) work: PathBuf,
    /// The configuration file written in it.
    pub(crate) config: PathBuf,
    /// Its file system, for the report (a tmpfs is warned about).
    pub(crate) fs: String,
    remove_after: bool,
}

impl BenchDir {
    /// Creates the directory for benchmark `name` and writes `config_text` in it.
    pub(crate) fn prepare(name: &str, dir: Option<&Path>, config_text: &str) -> Result<BenchDir> {
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
    pub(crate) fn finish(&self) {
        if self.remove_after {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

/// The file system holding `path`, as `TYPE (SOURCE)` from /proc/mounts (the mount point
/// that is the longest prefix of it); `unknown` when it cannot be told.
pub(crate) fn file_system_of(path: &Path) -> String {
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

/// What one phase does: which queues it submits to, how many jobs each, how many at once.
struct Phase {
    name: &'static str,
    queues: &'static [&'static str],
    jobs: u64,
    concurrency: u64,
}

fn run_phases(args: &E2eArgs, work: &Path, config: &Path) -> Result<Vec<PhaseReport>> {
    let latency = Phase {
        name: "one shard, one at a time",
        queues: &["left"],
        jobs: args.latency_jobs,
        concurrency: 1,
    };
    let one = Phase {
        name: "one shard",
        queues: &["left"],
        jobs: args.jobs,
        concurrency: args.concurrency,
    };
    let two = Phase {
        name: "two shards",
        queues: &["left", "right"],
        jobs: args.jobs,
        concurrency: args.concurrency,
    };
    // Each group runs on a fresh `up`, so that the two-shard figures do not inherit the
    // first group's jobs.
    let mut groups: Vec<Vec<Phase>> = vec![vec![latency, one]];
    if !args.one_only {
        groups.push(vec![two]);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut reports = Vec::new();
    for (i, group) in groups.iter().enumerate() {
        let dir = work.join(format!("up{}", i + 1));
        eprintln!("bench e2e: starting `up` in {}", dir.display());
        let up = UpProcess::start(config, &dir)?;
        for phase in group.iter().filter(|p| p.jobs > 0) {
            reports.push(runtime.block_on(phase_run(phase, &up.dir, up.pid()))?);
        }
        up.stop();
    }
    Ok(reports)
}

/// The cluster and its two queues, as the coordinator's TOML.
fn config_toml(nodes: u64) -> String {
    let half = nodes / 2;
    format!(
        r#"# shardsched bench e2e: a generated cluster split in two equal queues.
default_queue = "left"

[cluster.inline]
name = "bench"

[[cluster.inline.nodes]]
hosts = "node[0-{last}]"
rack_size = 64
sockets = 2
cores_per_socket = 22
gpus_per_socket = 2
memory_per_socket_gb = 64
memory_pools_per_socket = 4

[queues.left]
nodes = "node[0-{left_last}]"
policy = "fcfs"
match_policy = "first"
default_duration = "1h"
max_duration = "24h"

[queues.right]
nodes = "node[{half}-{last}]"
policy = "fcfs"
match_policy = "first"
default_duration = "1h"
max_duration = "24h"
"#,
        last = nodes - 1,
        left_last = half - 1,
    )
}

/// One submission: the job, and the client-side times in nanoseconds since the phase began.
struct Sent {
    id: JobId,
    sent_ns: u64,
    answered_ns: u64,
}

async fn phase_run(phase: &Phase, dir: &Path, up_pid: u32) -> Result<PhaseReport> {
    let client = Arc::new(Client::connect(&StateDir::at(dir.to_owned())).await?);
    let routes = client.routes().await?;
    let mut targets: Vec<Route> = Vec::new();
    for queue in phase.queues {
        match routes.queue(queue) {
            Some(route) => targets.push(route.clone()),
            None => bail!("queue {queue} has no route"),
        }
    }
    let jobspec = Shorthand {
        tasks: Some(1),
        duration: 3600,
        command: vec!["sleep".into(), "3600".into()],
        ..Shorthand::default()
    }
    .to_jobspec()
    .context("building the benchmark jobspec")?;
    let journal_before = JournalReading::settled(dir, phase.queues).await;
    let cpu_before = CpuSample::take(up_pid);
    let epoch = Instant::now();
    let first_send_ms = now_ms();
    let mut workers = tokio::task::JoinSet::new();
    for route in &targets {
        let session = client.shard(route).await?;
        let mut jobspec = jobspec.clone();
        jobspec.attributes.queue = Some(route.queue.clone());
        let jobspec_json = Arc::new(jobspec.to_json().to_string());
        let next = Arc::new(AtomicUsize::new(0));
        for _ in 0..phase.concurrency {
            let session = session.clone();
            let jobspec_json = Arc::clone(&jobspec_json);
            let next = Arc::clone(&next);
            let total = phase.jobs as usize;
            workers.spawn(async move {
                let mut sent = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let request = Request::Submit(Submit {
                        idempotency_key: new_key(),
                        jobspec_json: String::clone(&jobspec_json),
                        priority: None,
                    });
                    let sent_ns = elapsed_ns(epoch);
                    match session.request(&request).await {
                        Ok(Response::Submitted { id, .. }) => sent.push(Sent {
                            id,
                            sent_ns,
                            answered_ns: elapsed_ns(epoch),
                        }),
                        Ok(other) => bail!("unexpected answer to a submit: {other:?}"),
                        Err(e) => return Err(anyhow::Error::new(e).context("submitting")),
                    }
                }
                Ok(sent)
            });
        }
    }
    let mut sent: Vec<Sent> = Vec::with_capacity(phase.jobs as usize * targets.len());
    while let Some(joined) = workers.join_next().await {
        sent.extend(joined.context("a submit worker failed")??);
    }
    let acked_ns = sent.iter().map(|s| s.answered_ns).max().unwrap_or(1).max(1);
    let cpu = CpuSample::take(up_pid).minus(&cpu_before);
    eprintln!(
        "bench e2e: {}: {} submissions acknowledged in {:.2} s; waiting for allocations",
        phase.name,
        sent.len(),
        acked_ns as f64 / 1e9
    );

    // Every job of this phase allocated (none pending), from each shard's own list.
    let ours: HashSet<JobId> = sent.iter().map(|s| s.id).collect();
    let mut alloc_ms: Vec<u64> = Vec::new();
    let mut last_start_ms = 0u64;
    let deadline = Instant::now() + PHASE_TIMEOUT;
    for route in &targets {
        loop {
            let list = match client
                .ask_shard(
                    route,
                    &Request::Jobs(JobsQuery {
                        queue: None,
                        user: UserFilter::All,
                        include_inactive: true,
                        limit: shardsched_proto::limits::JOBS_PER_RESPONSE_MAX as u32,
                    }),
                )
                .await?
            {
                Response::Jobs(list) => list,
                other => bail!("unexpected answer to a job list: {other:?}"),
            };
            let mine: Vec<&JobSummary> =
                list.jobs.iter().filter(|j| ours.contains(&j.id)).collect();
            let pending = mine.iter().filter(|j| j.state == JobState::Pending).count();
            if pending == 0 && mine.len() as u64 >= phase.jobs {
                for job in mine {
                    if let Some(start) = job.start_ms {
                        alloc_ms.push(start.saturating_sub(job.submit_ms));
                        last_start_ms = last_start_ms.max(start);
                    }
                }
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "queue {}: {pending} of {} jobs still pending after {} s",
                    route.queue,
                    mine.len(),
                    PHASE_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(ALLOCATION_POLL).await;
        }
    }
    client.close().await;
    let journal = JournalReading::settled(dir, phase.queues)
        .await
        .minus(&journal_before);

    let jobs = sent.len() as u64;
    let span_ms = last_start_ms.saturating_sub(first_send_ms).max(1);
    let mut rtt_us: Vec<u64> = sent
        .iter()
        .map(|s| (s.answered_ns - s.sent_ns) / 1000)
        .collect();
    rtt_us.sort_unstable();
    alloc_ms.sort_unstable();
    let same_ms = alloc_ms.iter().filter(|&&ms| ms == 0).count();
    Ok(PhaseReport {
        phase: phase.name.to_owned(),
        shards: targets.len(),
        jobs,
        concurrency: phase.concurrency,
        allocated_per_s: jobs as f64 * 1000.0 / span_ms as f64,
        acked_per_s: jobs as f64 * 1e9 / acked_ns as f64,
        alloc_latency_median_ms: percentile(&alloc_ms, 0.5),
        alloc_latency_p99_ms: percentile(&alloc_ms, 0.99),
        alloc_same_ms_share: same_ms as f64 / alloc_ms.len().max(1) as f64,
        submit_rtt_median_us: percentile(&rtt_us, 0.5),
        submit_rtt_p99_us: percentile(&rtt_us, 0.99),
        cpu_shards_us_per_job: cpu.shards_ms * 1000 / jobs.max(1),
        cpu_coordinator_us_per_job: cpu.coordinator_ms * 1000 / jobs.max(1),
        cpu_client_us_per_job: cpu.client_ms * 1000 / jobs.max(1),
        cores_busy: (cpu.shards_ms + cpu.coordinator_ms + cpu.client_ms) as f64 * 1e6
            / acked_ns as f64,
        journal_commits: journal.commits,
        journal_writes_per_commit: journal.writes as f64 / journal.commits.max(1) as f64,
        fsync_median_us: journal.fsync_quantile(0.5),
        fsync_p99_us: journal.fsync_quantile(0.99),
    })
}

fn elapsed_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The `p` quantile of sorted values (nearest rank).
pub(crate) fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn report_table(args: &E2eArgs, reports: &[PhaseReport], work: &Path, fs: &str) -> String {
    let mut out = format!(
        "bench e2e: {} nodes, one-core jobs, sim executor, QUIC + mutual TLS on loopback, \
         {} cores; journals in {} on {fs}\n",
        args.nodes,
        std::thread::available_parallelism().map_or(0, usize::from),
        work.display()
    );
    let mut table = Table::new(&[
        "PHASE",
        "JOBS",
        "IN FLIGHT",
        "ALLOCATED/S",
        "ALLOC MEDIAN/P99",
        "RTT MEDIAN",
        "RTT P99",
        "CPU/JOB SHARD+COORD+CLIENT",
        "CORES BUSY",
        "FSYNC MEDIAN/P99",
        "COMMITS (WRITES EACH)",
    ]);
    for r in reports {
        table.row(vec![
            r.phase.clone(),
            r.jobs.to_string(),
            format!("{}×{}", r.concurrency, r.shards),
            format!("{:.0}", r.allocated_per_s),
            format!(
                "{}/{} ms ({:.0}% same ms)",
                r.alloc_latency_median_ms,
                r.alloc_latency_p99_ms,
                r.alloc_same_ms_share * 100.0
            ),
            format!("{} µs", r.submit_rtt_median_us),
            format!("{} µs", r.submit_rtt_p99_us),
            format!(
                "{}+{}+{} µs",
                r.cpu_shards_us_per_job, r.cpu_coordinator_us_per_job, r.cpu_client_us_per_job
            ),
            format!("{:.2}", r.cores_busy),
            format!(
                "{:.1}/{:.1} ms",
                r.fsync_median_us as f64 / 1000.0,
                r.fsync_p99_us as f64 / 1000.0
            ),
            format!("{} ({:.1})", r.journal_commits, r.journal_writes_per_commit),
        ]);
    }
    out.push_str(&table.render());
    let by_name = |name: &str| reports.iter().find(|r| r.phase == name);
    if let (Some(one), Some(two)) = (by_name("one shard"), by_name("two shards")) {
        out.push_str(&format!(
            "two shards / one shard: {:.2}× allocated/s\n",
            two.allocated_per_s / one.allocated_per_s.max(f64::MIN_POSITIVE)
        ));
    }
    out
}

/// A `shardsched up` started by the benchmark, stopped on drop (also used by
/// `bench moves`).
pub(crate) struct UpProcess {
    child: Option<Child>,
    pub(crate) dir: PathBuf,
}

impl UpProcess {
    /// Starts `up` with `config` in `dir` and waits for its "is up" line.
    fn start(config: &Path, dir: &Path) -> Result<UpProcess> {
        UpProcess::start_with(config, dir, &[])
    }

    /// [`UpProcess::start`] with `extra` arguments for `up`.
    pub(crate) fn start_with(config: &Path, dir: &Path, extra: &[&str]) -> Result<UpProcess> {
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
        match rx.recv_timeout(PHASE_TIMEOUT) {
            Ok(()) => Ok(up),
            Err(_) => {
                up.stop_now();
                bail!(
                    "`shardsched up` did not come up within {} s (logs in {}/logs)",
                    PHASE_TIMEOUT.as_secs(),
                    dir.display()
                )
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub(crate) fn stop(mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_readings_subtract_and_give_quantiles() {
        let reading = |commits, buckets: &[(u64, u64)]| JournalReading {
            commits,
            writes: commits * 10,
            fsync_buckets: buckets.iter().copied().collect(),
        };
        let before = reading(10, &[(1000, 10)]);
        let after = reading(110, &[(1000, 10), (2000, 90), (9000, 10)]);
        let phase = after.minus(&before);
        assert_eq!(phase.commits, 100);
        assert_eq!(phase.fsync_buckets.get(&1000), None);
        assert_eq!(phase.fsync_quantile(0.5), 2000);
        assert_eq!(phase.fsync_quantile(0.99), 9000);
        assert_eq!(JournalReading::default().fsync_quantile(0.5), 0);
        let mut sum = phase.clone();
        sum.add(&phase);
        assert_eq!(sum.commits, 200);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
