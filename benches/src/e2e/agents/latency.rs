//! The latency phase of `bench e2e --agents`: jobs one at a time, submit → every task
//! started, by their supervisors' records of their exec and, for tasks that stamp the
//! moment they ran, by the tasks' own stamps.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use serde::Serialize;
use shardsched_client::Client;
use shardsched_histogram::nearest_rank;
use shardsched_jobspec::Shorthand;
use shardsched_node::layout::{JOBS_DIR, TASKS_STARTED_FILE};
use shardsched_proto::Session;
use shardsched_proto::msg::client_shard::{Request, Response};
use shardsched_proto::msg::{JobId, JobState};

use super::{jobspec_json, submit};
use crate::e2e::PHASE_TIMEOUT;

/// How often the bench looks for a job's tasks' stamps and records. Each look reads every
/// node's job directory: every millisecond, that took CPU from the launch it measures
/// (the times come from the stamps and records, not from when the bench saw them).
const STAMP_POLL: Duration = Duration::from_millis(5);
/// How often it asks whether a job has ended.
const END_POLL: Duration = Duration::from_millis(5);

/// How long a [`LatencyTask::Sleep`] task runs: past its job's launch, and short enough for
/// the phase's jobs one after another.
const SLEEP_TASK: &str = "0.1";

/// What each task of a latency job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyTask {
    /// `/bin/sleep 0.1`: a task that runs on past its job's launch, as real ones do, and
    /// costs little to start; measured to its exec (the target's measure).
    Sleep,
    /// `bash -c 'echo $EPOCHREALTIME > FILE'`: a task that stamps the moment it ran, bash's
    /// start-up included, and ends at once. On a machine that runs every node, each task's
    /// bash and its job's end on one node (the supervisor's exit, the agent's and the
    /// shard's work) take the CPUs from the launch on the other nodes.
    BashStamp,
}

impl LatencyTask {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            LatencyTask::Sleep => "sleep 0.1",
            LatencyTask::BashStamp => "bash stamp",
        }
    }
}

/// Submit → all tasks started at one job size.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// What each task ran.
    pub task: LatencyTask,
    /// Nodes (and tasks) per job.
    pub nodes_per_job: u64,
    /// Jobs measured.
    pub jobs: u64,
    /// Median to the tasks' own stamps, milliseconds ([`LatencyTask::BashStamp`] only).
    pub median_ms: Option<f64>,
    /// 99th percentile to the tasks' own stamps, milliseconds.
    pub p99_ms: Option<f64>,
    /// Median to the supervisors' records of the tasks' exec (the target).
    pub exec_median_ms: f64,
    /// 99th percentile to the supervisors' records of the tasks' exec.
    pub exec_p99_ms: f64,
}

/// Where the latency phase finds when tasks started.
pub(super) struct LatencyDirs<'a> {
    /// The tasks' own stamps, `<job>.<node>`.
    pub(super) stamps: &'a Path,
    /// The agents' state directories, whose job directories hold the supervisors' records
    /// of their tasks' starts.
    pub(super) nodes: &'a Path,
}

/// `jobs` jobs of `size` nodes, one at a time: submit → the last task's own stamp, and
/// submit → the last supervisor's record of its task's exec.
pub(super) async fn latency_row(
    client: &Client,
    session: &Session,
    (task, size): (LatencyTask, u64),
    jobs: u64,
    dirs: &LatencyDirs<'_>,
) -> Result<LatencyRow> {
    let command = match task {
        LatencyTask::Sleep => vec!["/bin/sleep".into(), SLEEP_TASK.into()],
        LatencyTask::BashStamp => vec![
            "/bin/bash".into(),
            "-c".into(),
            format!(
                "echo $EPOCHREALTIME > {}/$SHARDSCHED_JOB_ID.$SHARDSCHED_NODE",
                dirs.stamps.display()
            ),
        ],
    };
    let json = jobspec_json(Shorthand {
        nodes: Some(size),
        duration: 60,
        command,
        ..Shorthand::default()
    })?;
    let mut latencies_us: Vec<u64> = Vec::with_capacity(jobs as usize);
    let mut exec_us: Vec<u64> = Vec::with_capacity(jobs as usize);
    for _ in 0..jobs {
        let sent_us = realtime_us();
        let id = submit(client, session, &json).await?;
        if task == LatencyTask::BashStamp {
            let last_us = last_stamp(dirs.stamps, id, size).await?;
            latencies_us.push(last_us.saturating_sub(sent_us));
        }
        let exec_last_us = last_exec(dirs.nodes, id, size).await?;
        exec_us.push(exec_last_us.saturating_sub(sent_us));
        wait_ended(session, id).await?;
    }
    // Each job's, in the order they ran: a slow first launch on new nodes shows here.
    let each: Vec<u64> = exec_us.iter().map(|us| us / 1000).collect();
    latencies_us.sort_unstable();
    exec_us.sort_unstable();
    let ms = |us: &[u64], rank: f64| nearest_rank(us, rank) as f64 / 1000.0;
    let own = |rank: f64| (!latencies_us.is_empty()).then(|| ms(&latencies_us, rank));
    eprintln!(
        "bench e2e --agents: {jobs} jobs of {size} nodes, tasks {}: exec'd median {:.1} ms; \
         each exec'd, in order, ms: {each:?}",
        task.name(),
        ms(&exec_us, 0.5),
    );
    Ok(LatencyRow {
        task,
        nodes_per_job: size,
        jobs,
        median_ms: own(0.5),
        p99_ms: own(0.99),
        exec_median_ms: ms(&exec_us, 0.5),
        exec_p99_ms: ms(&exec_us, 0.99),
    })
}

/// The latest of job `id`'s `size` task stamps (µs since the epoch), once all are there.
async fn last_stamp(stamps: &Path, id: JobId, size: u64) -> Result<u64> {
    let prefix = format!("{id}.");
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(stamps)?.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().starts_with(&prefix) {
                continue;
            }
            // A stamp being written reads empty or short: looked at again next time.
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            if let Some(us) = parse_stamp(&text) {
                found.push((entry.path(), us));
            }
        }
        if found.len() as u64 >= size {
            for (path, _) in &found {
                let _ = std::fs::remove_file(path);
            }
            return Ok(found.iter().map(|(_, us)| *us).max().unwrap_or(0));
        }
        if Instant::now() > deadline {
            bail!("job {id}: {} of {size} tasks started", found.len());
        }
        tokio::time::sleep(STAMP_POLL).await;
    }
}

/// The latest of the moments job `id`'s supervisors record their `size` tasks exec'd (µs
/// since the epoch; `started` in the job's directory on each node, `RANK µs` lines), once
/// all are there.
async fn last_exec(nodes: &Path, id: JobId, size: u64) -> Result<u64> {
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        let mut found = Vec::new();
        for node in std::fs::read_dir(nodes)?.flatten() {
            let path = node
                .path()
                .join(JOBS_DIR)
                .join(id.to_string())
                .join(TASKS_STARTED_FILE);
            // Written whole (replaced) once all of the node's tasks started.
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            found.extend(text.lines().filter_map(parse_exec_record));
        }
        if found.len() as u64 >= size {
            return Ok(found.into_iter().max().unwrap_or(0));
        }
        if Instant::now() > deadline {
            bail!(
                "job {id}: {} of {size} tasks recorded as started",
                found.len()
            );
        }
        tokio::time::sleep(STAMP_POLL).await;
    }
}

/// A supervisor's `RANK µs` record: the µs.
fn parse_exec_record(line: &str) -> Option<u64> {
    let (_rank, us) = line.split_once(' ')?;
    us.parse().ok()
}

/// Bash's `$EPOCHREALTIME` (`1796172231.573325`, a full line) in µs.
fn parse_stamp(text: &str) -> Option<u64> {
    let line = text.strip_suffix('\n')?;
    let (secs, micros) = line.split_once(['.', ','])?;
    if micros.len() != 6 {
        return None;
    }
    Some(secs.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?)
}

fn realtime_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Waits until job `id` is no longer running; fails unless it completed.
async fn wait_ended(session: &Session, id: JobId) -> Result<()> {
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        let info = match session.request(&Request::JobInfo { id }).await? {
            Response::JobInfo(info) => info,
            other => bail!("unexpected answer to job info: {other:?}"),
        };
        match info.summary.state {
            JobState::Completed => return Ok(()),
            JobState::Pending | JobState::Running if Instant::now() < deadline => {}
            state => bail!("job {id} is {state:?}: {}", info.summary.reason),
        }
        tokio::time::sleep(END_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_as_microseconds_and_partial_ones_do_not() {
        assert_eq!(
            parse_stamp("1796172231.573325\n"),
            Some(1_796_172_231_573_325)
        );
        assert_eq!(parse_stamp("1796172231.5733"), None);
        assert_eq!(parse_stamp(""), None);
        assert_eq!(parse_stamp("1796172231.57\n"), None);
    }

    #[test]
    fn a_supervisors_records_read_as_microseconds() {
        assert_eq!(
            parse_exec_record("3 1796172231573325"),
            Some(1_796_172_231_573_325)
        );
        assert_eq!(parse_exec_record("3"), None);
        assert_eq!(parse_exec_record("3 x"), None);
    }
}
