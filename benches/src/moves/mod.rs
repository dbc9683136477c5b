//! `shardsched bench moves`: how fast node moves are, on the real processes `shardsched up`
//! starts (coordinator + two shards, QUIC with mutual TLS on loopback, journals fsync'd on
//! the disk).
//!
//! A move is done when its node is *up in the recipient*: the recipient's
//! `transitions.log` line (docs/MOVES.md) says when, on CLOCK_MONOTONIC, the clock this
//! benchmark reads just before it sends the request: both ends of every figure come from
//! one clock on one host, at nanosecond resolution. The phases:
//!
//! 1. **full queue**: queue `left` owns node[0-N) (default 1,024), `right` (started too, defined
//!    over all 2N nodes) owns the other N. All N nodes of `left` move to `right` in one
//!    request, then back to `left` in one request: a full swap of a queue's nodes. Figure:
//!    request to the last node up.
//! 2. **one idle node**, repeated (default 200 times, each a different node, 20 ms apart so
//!    that each finds the coordinator's journal idle): request to up.
//!    Median and p99; and where the time goes: the request's round trip (the coordinator
//!    answers once the move is journaled), request to the donor's `released` line (the
//!    coordinator's journal write, `Release` sent, applied by the donor), and from that line
//!    to the recipient's `up` (the donor's journal commit and answer, the coordinator's
//!    journal write of the release, `Acquire` sent and applied).
//! 3. **batch**: 100 idle nodes in one request, repeated (default 5): request to the last up.
//! 4. **job end**: J one-node jobs run on `left` (J = 20, ending 200 ms apart), their nodes
//!    are moved to `right` while the jobs run; per node, from the job's end to the node up in
//!    `right`. The end is taken two ways: the donor's `released` line (when its shard
//!    handled the end, ns), and the job's `end_ms` as `jobs` shows it (ms resolution, turned
//!    into the monotonic clock with an offset read at the start).
//!
//! The working directory defaults to `target/bench-moves-PID` (on the disk, removed
//! afterwards); the report names its file system.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_coord::{self, MoveRequest};
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobId, JobsQuery, MoveId, Route, UserFilter};
use shardsched_shard::driver::transitions::{LogLine, TRANSITIONS_FILE, monotonic_ns, parse_log};

use crate::bench_e2e::{BenchDir, UpProcess, percentile};
use crate::client::output::{Table, emit};
use crate::client::{Client, StateDir, submit::new_key};

/// How long the benchmark waits for any one move (or the jobs) before giving up.
pub const MOVE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often it reads the transition logs while waiting (the figures come from the lines'
/// own timestamps, so this only bounds the benchmark's pace, not what it measures).
pub const LOG_POLL: Duration = Duration::from_millis(1);
/// How often it asks the coordinator whether a move is finished (between moves; not
/// part of any figure).
pub const FINISH_POLL: Duration = Duration::from_millis(2);
/// Pause between two single-node moves (not part of any figure): a move is listed as
/// finished once the coordinator took the recipient's acknowledgement, before its
/// completion record is on disk; a move sent at once would wait behind that write.
pub const SINGLE_MOVE_SPACING: Duration = Duration::from_millis(20);
/// The job-end phase's jobs end this far apart (real time).
pub const JOB_END_SPACING_MS: u64 = 200;
/// Simulated time in the shards runs this much faster than real time, so that the job-end
/// phase's jobs (whole simulated seconds) end [`JOB_END_SPACING_MS`] apart.
pub const TIME_SCALE: u64 = 5;

/// Flags of `shardsched bench moves`.
#[derive(Args, Debug, Clone)]
pub struct MovesArgs {
    /// Nodes per queue (the cluster has twice as many).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(2..=8192))]
    pub nodes: u64,
    /// Single idle-node moves.
    #[arg(long, default_value_t = 200)]
    pub single: u64,
    /// Batches of 100 idle nodes.
    #[arg(long, default_value_t = 5)]
    pub batches: u64,
    /// Jobs of the job-end phase.
    #[arg(long, default_value_t = 20)]
    pub job_ends: u64,
    /// Working directory (the journals go there: put it on the disk to measure) [default:
    /// a fresh `target/bench-moves-PID` when ./target exists, else one under the temp dir;
    /// removed afterwards].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One phase's figures, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct MovesReport {
    /// What was measured.
    pub phase: String,
    /// Samples.
    pub samples: usize,
    /// Nodes per move request.
    pub nodes_per_move: usize,
    /// Median, µs.
    pub median_us: u64,
    /// 99th percentile (nearest rank), µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

impl MovesReport {
    fn new(phase: &str, nodes_per_move: usize, mut samples_ns: Vec<u64>) -> MovesReport {
        let mut us: Vec<u64> = samples_ns.drain(..).map(|ns| ns / 1000).collect();
        us.sort_unstable();
        MovesReport {
            phase: phase.to_owned(),
            samples: us.len(),
            nodes_per_move,
            median_us: percentile(&us, 0.5),
            p99_us: percentile(&us, 0.99),
            max_us: us.last().copied().unwrap_or(0),
        }
    }
}

/// `shardsched bench moves`.
pub fn main(args: &MovesArgs) -> Result<()> {
    let needed = args.single + 100 * args.batches + args.job_ends;
    if needed > args.nodes {
        bail!(
            "--single + 100 × --batches + --job-ends = {needed} nodes, more than the {} of a queue; raise --nodes",
            args.nodes
        );
    }
    let bench = BenchDir::prepare("moves", args.dir.as_deref(), &config_toml(args.nodes))?;
    let result = run(args, &bench.work, &bench.config);
    bench.finish();
    let reports = result?;
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&reports)?))
    } else {
        emit(&report_table(args, &reports, &bench.work, &bench.fs))
    }
}

fn run(args: &MovesArgs, work: &Path, config: &Path) -> Result<Vec<MovesReport>> {
    let dir = work.join("up");
    eprintln!("bench moves: starting `up` in {}", dir.display());
    let up = UpProcess::start_with(config, &dir, &["--time-scale", &TIME_SCALE.to_string()])?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(phases(args, &up.dir));
    up.stop();
    result
}

/// The queues and their logs, and the client.
struct Bench {
    client: Client,
    left: LogTail,
    right: LogTail,
}

async fn phases(args: &MovesArgs, dir: &Path) -> Result<Vec<MovesReport>> {
    let state = StateDir::at(dir.to_owned());
    let mut bench = Bench {
        client: Client::connect(&state).await?,
        left: LogTail::new(state.shard_dir("left").join(TRANSITIONS_FILE)),
        right: LogTail::new(state.shard_dir("right").join(TRANSITIONS_FILE)),
    };
    let names = |range: std::ops::Range<u64>| -> Vec<String> {
        range.map(|i| format!("node{i}")).collect()
    };
    let n = args.nodes;
    let mut reports = Vec::new();

    eprintln!("bench moves: full queue: {n} nodes left → right → left");
    let there = bench.move_nodes(&names(0..n), "left", "right").await?;
    let back = bench.move_nodes(&names(0..n), "right", "left").await?;
    reports.push(MovesReport::new(
        &format!("{n} idle nodes (a queue's all), request → last up"),
        n as usize,
        vec![there.last_up_ns, back.last_up_ns],
    ));

    eprintln!("bench moves: {} single idle nodes", args.single);
    let (mut up, mut rtt, mut released, mut handover) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.single {
        // Let the previous move's last journal write (its completion, written after the
        // coordinator marks it finished) end first, so each move is measured alone.
        tokio::time::sleep(SINGLE_MOVE_SPACING).await;
        let m = bench.move_nodes(&names(i..i + 1), "left", "right").await?;
        up.push(m.last_up_ns);
        rtt.push(m.answered_ns);
        released.push(m.released_ns);
        handover.push(m.last_up_ns.saturating_sub(m.released_ns));
    }
    reports.push(MovesReport::new("1 idle node, request → up", 1, up));
    reports.push(MovesReport::new(
        "... request → coordinator's answer",
        1,
        rtt,
    ));
    reports.push(MovesReport::new(
        "... request → donor's released line",
        1,
        released,
    ));
    reports.push(MovesReport::new(
        "... donor's released → recipient's up",
        1,
        handover,
    ));

    eprintln!("bench moves: {} batches of 100 idle nodes", args.batches);
    let mut batch = Vec::new();
    let first = args.single;
    for b in 0..args.batches {
        let from = first + 100 * b;
        let m = bench
            .move_nodes(&names(from..from + 100), "left", "right")
            .await?;
        batch.push(m.last_up_ns);
    }
    reports.push(MovesReport::new(
        "100 idle nodes, request → last up",
        100,
        batch,
    ));

    eprintln!("bench moves: {} job ends", args.job_ends);
    let (by_released, by_end_ms) = job_ends(&mut bench, args.job_ends).await?;
    reports.push(MovesReport::new(
        "job end (donor's released line) → up",
        args.job_ends as usize,
        by_released,
    ));
    reports.push(MovesReport::new(
        "job end (jobs end_ms, ms resolution) → up",
        args.job_ends as usize,
        by_end_ms,
    ));
    bench.client.close().await;
    Ok(reports)
}

/// One move's times, ns after its request was sent.
struct Moved {
    /// The coordinator's answer (the move is journaled).
    answered_ns: u64,
    /// The donor's last `released` line (written when it applied `Release`, before its
    /// journal commit).
    released_ns: u64,
    /// The recipient's last `up` line.
    last_up_ns: u64,
}

impl Bench {
    /// Moves `nodes` and waits until all are up in the recipient.
    async fn move_nodes(&mut self, nodes: &[String], from: &str, to: &str) -> Result<Moved> {
        self.left.skip_to_end()?;
        self.right.skip_to_end()?;
        let request = client_coord::Request::Move(MoveRequest {
            nodes: nodes.to_vec(),
            from: from.to_owned(),
            to: to.to_owned(),
            deadline_ms: None,
            dry_run: false,
        });
        let sent = monotonic_ns();
        let move_id = match self.client.coordinator(&request).await {
            Ok(client_coord::Response::Done { move_id }) => move_id,
            Ok(other) => bail!("the coordinator answered a move with {other:?}"),
            Err(e) => return Err(crate::client::wire_error(e, "coordinator")),
        };
        let answered = monotonic_ns();
        let tail = if to == "left" {
            &mut self.left
        } else {
            &mut self.right
        };
        let ups = tail.wait_up(nodes).await?;
        let last = ups.values().copied().max().unwrap_or(sent);
        let donor = if to == "left" {
            &mut self.right
        } else {
            &mut self.left
        };
        let released = donor
            .lines_since_skip()?
            .iter()
            .filter(|l| l.kind == "released")
            .map(|l| l.at_ns)
            .max()
            .unwrap_or(sent);
        // The nodes are up; the move is finished once the coordinator journaled the
        // recipient's acknowledgements (the next move of these nodes waits for that).
        self.wait_finished(move_id).await?;
        Ok(Moved {
            answered_ns: ns_between(sent, answered),
            released_ns: ns_between(sent, released),
            last_up_ns: ns_between(sent, last),
        })
    }
}

impl Bench {
    /// Waits until the coordinator no longer lists `move_id` as active.
    async fn wait_finished(&self, move_id: Option<MoveId>) -> Result<()> {
        let Some(id) = move_id else {
            return Ok(());
        };
        let deadline = Instant::now() + MOVE_TIMEOUT;
        loop {
            let moves = match self.client.coordinator(&client_coord::Request::Moves).await {
                Ok(client_coord::Response::Moves { moves, .. }) => moves,
                Ok(other) => bail!("the coordinator answered queue moves with {other:?}"),
                Err(e) => return Err(crate::client::wire_error(e, "coordinator")),
            };
            if !moves
                .iter()
                .any(|m| m.move_id == id && m.status == "active")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "move {} still active after {} s",
                    id.0,
                    MOVE_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(FINISH_POLL).await;
        }
    }
}

fn ns_between(from: u128, to: u128) -> u64 {
    u64::try_from(to.saturating_sub(from)).unwrap_or(u64::MAX)
}

/// Phase 4: `count` jobs on `left`, their nodes moved to `right` while they run; per node,
/// job end → up, by the donor's `released` line and by the job's `end_ms`.
async fn job_ends(bench: &mut Bench, count: u64) -> Result<(Vec<u64>, Vec<u64>)> {
    let routes = bench.client.routes().await?;
    let Some(route) = routes.queue("left").cloned() else {
        bail!("queue left has no route");
    };
    // Wall − monotonic, to put `end_ms` on the logs' clock.
    let offset_ns = i128::from(crate::client::output::now_ms()) * 1_000_000
        - i128::try_from(monotonic_ns()).unwrap_or(0);
    let mut ids = Vec::new();
    for i in 0..count {
        // Simulated seconds; the spacing in real time is JOB_END_SPACING_MS.
        let secs = (1000 + i * JOB_END_SPACING_MS) * TIME_SCALE / 1000;
        let jobspec = Shorthand {
            nodes: Some(1),
            exclusive: true,
            duration: secs,
            command: vec!["sleep".into(), secs.to_string()],
            queue: Some("left".into()),
            ..Shorthand::default()
        }
        .to_jobspec()
        .context("building the job-end jobspec")?;
        let request = Request::Submit(Submit {
            idempotency_key: new_key(),
            jobspec_json: jobspec.to_json().to_string(),
            priority: None,
        });
        match bench.client.ask_shard(&route, &request).await? {
            Response::Submitted { id, .. } => ids.push(id),
            other => bail!("unexpected answer to a submit: {other:?}"),
        }
    }
    let running = jobs_of(&bench.client, &route, &ids).await?;
    let mut nodes = Vec::new();
    for id in &ids {
        match running.get(id).and_then(|j| j.nodes.first()) {
            Some(node) if running[id].end_ms.is_none() => nodes.push(node.clone()),
            _ => bail!("job {id} did not start at once, or ended before its node moved"),
        }
    }
    bench.move_nodes(&nodes, "left", "right").await?;
    // Every node is up in right now; the donor's released lines are in its log.
    let released = bench.left.lines_since_skip()?;
    let ups = bench.right.lines_since_skip()?;
    let ended = jobs_of(&bench.client, &route, &ids).await?;
    let (mut by_released, mut by_end_ms) = (Vec::new(), Vec::new());
    for (id, node) in ids.iter().zip(&nodes) {
        let up = find(&ups, node, "up").context("no up line")?;
        let rel = find(&released, node, "released").context("no released line")?;
        by_released.push(ns_between(rel, up));
        if let Some(end_ms) = ended.get(id).and_then(|j| j.end_ms) {
            let end_mono = i128::from(end_ms) * 1_000_000 - offset_ns;
            by_end_ms.push(u64::try_from(i128::try_from(up).unwrap_or(0) - end_mono).unwrap_or(0));
        }
    }
    Ok((by_released, by_end_ms))
}

fn find(lines: &[LogLine], node: &str, kind: &str) -> Option<u128> {
    lines
        .iter()
        .find(|l| l.node == node && l.kind == kind)
        .map(|l| l.at_ns)
}

/// The jobs `ids` as `route`'s shard lists them, by id.
async fn jobs_of(
    client: &Client,
    route: &Route,
    ids: &[JobId],
) -> Result<BTreeMap<JobId, shardsched_proto::msg::JobSummary>> {
    let wanted: HashSet<JobId> = ids.iter().copied().collect();
    let query = Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: true,
        limit: shardsched_proto::limits::JOBS_PER_RESPONSE_MAX as u32,
    });
    match client.ask_shard(route, &query).await? {
        Response::Jobs(list) => Ok(list
            .jobs
            .into_iter()
            .filter(|j| wanted.contains(&j.id))
            .map(|j| (j.id, j))
            .collect()),
        other => bail!("unexpected answer to a job list: {other:?}"),
    }
}

/// A transition log read as it grows.
struct LogTail {
    path: PathBuf,
    /// Bytes already read.
    offset: usize,
    /// Lines read since the last [`LogTail::skip_to_end`].
    seen: Vec<LogLine>,
}

impl LogTail {
    fn new(path: PathBuf) -> LogTail {
        LogTail {
            path,
            offset: 0,
            seen: Vec::new(),
        }
    }

    fn read_all(&self) -> Result<Vec<u8>> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("reading {}", self.path.display())),
        }
    }

    /// Forgets what is there now: later reads see only new lines.
    fn skip_to_end(&mut self) -> Result<()> {
        self.offset = self.read_all()?.len();
        self.seen.clear();
        Ok(())
    }

    /// Reads the complete lines added since the last read.
    fn poll(&mut self) -> Result<()> {
        let bytes = self.read_all()?;
        let Some(new) = bytes.get(self.offset..) else {
            return Ok(());
        };
        let Some(end) = new.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let text = std::str::from_utf8(&new[..=end])
            .with_context(|| format!("{} is not UTF-8", self.path.display()))?;
        self.seen
            .extend(parse_log(text).map_err(|e| anyhow::anyhow!("{}: {e}", self.path.display()))?);
        self.offset += end + 1;
        Ok(())
    }

    /// The lines since the last skip.
    fn lines_since_skip(&mut self) -> Result<Vec<LogLine>> {
        self.poll()?;
        Ok(self.seen.clone())
    }

    /// Waits until every node of `nodes` has an `up` line; their times.
    async fn wait_up(&mut self, nodes: &[String]) -> Result<BTreeMap<String, u128>> {
        let wanted: HashSet<&str> = nodes.iter().map(String::as_str).collect();
        let deadline = Instant::now() + MOVE_TIMEOUT;
        loop {
            self.poll()?;
            let ups: BTreeMap<String, u128> = self
                .seen
                .iter()
                .filter(|l| l.kind == "up" && wanted.contains(l.node.as_str()))
                .map(|l| (l.node.clone(), l.at_ns))
                .collect();
            if ups.len() == wanted.len() {
                return Ok(ups);
            }
            if Instant::now() > deadline {
                bail!(
                    "{} of {} nodes up in {} after {} s",
                    ups.len(),
                    wanted.len(),
                    self.path.display(),
                    MOVE_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(LOG_POLL).await;
        }
    }
}

/// Two started queues: `left` owns node[0-N); `right`, defined over all 2N nodes (an
/// overlap: `left` owns the shared half, first by name), owns node[N-2N), so `left`'s nodes
/// can move to it and back while both run.
fn config_toml(nodes: u64) -> String {
    format!(
        r#"# shardsched bench moves: two queues of {nodes} nodes; right may take left's.
default_queue = "left"

[cluster.inline]
name = "bench"

[[cluster.inline.nodes]]
hosts = "node[0-{last}]"
rack_size = 64
sockets = 2
cores_per_socket = 22

[queues.left]
nodes = "node[0-{left_last}]"
policy = "fcfs"
default_duration = "1h"
max_duration = "24h"

[queues.right]
nodes = "node[0-{last}]"
policy = "fcfs"
default_duration = "1h"
max_duration = "24h"
"#,
        last = 2 * nodes - 1,
        left_last = nodes - 1,
    )
}

fn report_table(args: &MovesArgs, reports: &[MovesReport], work: &Path, fs: &str) -> String {
    let mut out = format!(
        "bench moves: two queues of {} nodes, QUIC + mutual TLS on loopback, {} cores; journals in {} on {fs}\n",
        args.nodes,
        std::thread::available_parallelism().map_or(0, usize::from),
        work.display()
    );
    let mut table = Table::new(&["PHASE", "SAMPLES", "MEDIAN", "P99", "MAX"]);
    let ms = |us: u64| format!("{:.2} ms", us as f64 / 1000.0);
    for r in reports {
        table.row(vec![
            r.phase.clone(),
            r.samples.to_string(),
            ms(r.median_us),
            ms(r.p99_us),
            ms(r.max_us),
        ]);
    }
    out.push_str(&table.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_take_quantiles_in_microseconds() {
        let r = MovesReport::new("x", 1, (1..=100).map(|i| i * 1000).collect());
        assert_eq!(
            (r.median_us, r.p99_us, r.max_us, r.samples),
            (50, 99, 100, 100)
        );
    }

    #[test]
    fn the_log_tail_reads_only_new_complete_lines() {
        let dir = std::env::temp_dir().join(format!("bench-moves-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(TRANSITIONS_FILE);
        std::fs::write(&path, "1 right node0 up 1 assignment\n").expect("write");
        let mut tail = LogTail::new(path.clone());
        tail.skip_to_end().expect("skip");
        std::fs::write(
            &path,
            "1 right node0 up 1 assignment\n2 right node1 up 2 acquire\n3 right no",
        )
        .expect("write");
        let lines = tail.lines_since_skip().expect("read");
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].node.as_str(), lines[0].at_ns), ("node1", 2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
