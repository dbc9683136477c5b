//! `shardsched bench e2e --agents`: jobs that really run, through node agents.
//!
//! `up --agents` on a generated cluster of `--nodes` nodes (default 16) in one queue: one
//! real `shardsched node` process per node, each on its own loopback address, every job
//! launched by the agents of its nodes under a supervisor of its own, in a cgroup when the
//! host has them (as root, as here). Two phases on the same system:
//!
//! 1. **submit → all tasks started**, one job at a time, at 1, 4 and 16 nodes per job (one
//!    task per node, exclusive nodes), to the moment the last task's supervisor recorded
//!    its exec (`started` in the job's directory), from the bench's clock before it sent
//!    the submit (one machine, one clock). Twice ([`LatencyTask`]): with tasks that sleep
//!    past the launch, as real ones run on (the target's measure); and with tasks that
//!    stamp the moment they ran (`bash -c 'echo $EPOCHREALTIME > FILE'`, bash's µs
//!    real-time clock), also measured to the last stamp: bash's start-up included, and a
//!    job that ends at once, so that its end on one node and the tasks' bash take the two
//!    CPUs from the launch on the others (16 nodes on one 2-core machine). The next job is
//!    submitted once the previous one has ended. Reported: median and p99 per size and
//!    task, and the cost of each extra node (the slope of the sleeping tasks' medians
//!    between the smallest and largest size) ([`latency`]).
//! 2. **throughput**: `--jobs` one-task `/bin/true` jobs submitted with `--concurrency`
//!    requests in flight (as `bench e2e` does), counted when every one has ended: jobs ÷
//!    (last job's end − the first send). CPU per launched task of each kind of process,
//!    from `/proc/PID/stat` deltas over the phase: the client (this process), the shard,
//!    the coordinator, the agents (summed), and the supervisors with their tasks (each
//!    supervisor is reaped by its agent, so its time and its task's are in the agents'
//!    children times, `cutime + cstime`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use shardsched_client::output::{Table, now_ms};
use shardsched_client::{Client, StateDir, new_key};
use shardsched_jobspec::Shorthand;
use shardsched_proto::Session;
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobId, JobState, Route};

mod latency;

use latency::{LatencyDirs, latency_row};
pub use latency::{LatencyRow, LatencyTask};

use super::readings::CpuSample;
use super::{E2eArgs, PHASE_TIMEOUT};
use crate::system::{self, BenchDir, BenchQueue, UpProcess};

/// The one queue of the agents' cluster.
pub const QUEUE: &str = "all";
/// Nodes per job in the latency phase (capped by the cluster's size).
pub const LATENCY_SIZES: [u64; 3] = [1, 4, 16];
/// How often the throughput phase asks how many jobs have ended.
const ENDS_POLL: Duration = Duration::from_millis(500);

/// The throughput phase.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// Jobs submitted.
    pub jobs: u64,
    /// Requests in flight.
    pub concurrency: u64,
    /// Jobs that did not complete with status 0.
    pub not_completed: u64,
    /// Jobs ended per second: jobs ÷ (last end − first send).
    pub completed_per_s: f64,
    /// Submissions acknowledged per second.
    pub acked_per_s: f64,
    /// CPU time per launched task, µs, by process kind.
    pub cpu_us_per_task: CpuPerTask,
    /// Cores kept busy on average by all of them over the phase.
    pub cores_busy: f64,
}

/// CPU time per launched task, µs.
#[derive(Debug, Clone, Serialize)]
pub struct CpuPerTask {
    pub client: u64,
    pub shard: u64,
    pub coordinator: u64,
    pub agents: u64,
    pub supervisors_and_tasks: u64,
}

/// What `bench e2e --agents` reports.
#[derive(Debug, Clone, Serialize)]
pub struct AgentsReport {
    /// Nodes (one agent each).
    pub nodes: u64,
    /// The 1-minute load average when the run began and when it ended.
    pub load_average: (f64, f64),
    /// Per task kind and job size.
    pub latency: Vec<LatencyRow>,
    /// Extra latency per extra node, ms (slope of the sleeping tasks' exec'd medians,
    /// smallest to largest size).
    pub per_extra_node_ms: Option<f64>,
    /// The throughput phase.
    pub throughput: Option<Throughput>,
}

/// `shardsched bench e2e --agents`.
pub fn main(args: &E2eArgs) -> Result<()> {
    let nodes = args.nodes.unwrap_or(16);
    let jobs = args.jobs.unwrap_or(3_000);
    let latency_jobs = args.latency_jobs.unwrap_or(50);
    let config = system::config_toml(
        "shardsched bench e2e --agents: a generated cluster in one queue, run by node agents.",
        nodes,
        &[],
        &[BenchQueue {
            name: QUEUE,
            nodes: format!("node[0-{}]", nodes - 1),
            match_first: true,
        }],
    );
    let bench = BenchDir::prepare("e2e-agents", args.dir.as_deref(), &config)?;
    let result = run(args, nodes, jobs, latency_jobs, &bench);
    bench.finish();
    let report = result?;
    if args.json {
        shardsched_client::output::emit(&format!("{}\n", serde_json::to_string_pretty(&report)?))
    } else {
        shardsched_client::output::emit(&report_table(&report, &bench))
    }
}

fn run(
    args: &E2eArgs,
    nodes: u64,
    jobs: u64,
    latency_jobs: u64,
    bench: &BenchDir,
) -> Result<AgentsReport> {
    let load_before = load_average();
    let stamps = bench.work.join("started");
    std::fs::create_dir_all(&stamps).with_context(|| format!("creating {}", stamps.display()))?;
    let dir = bench.work.join("up");
    eprintln!(
        "bench e2e --agents: starting `up --agents` in {}",
        dir.display()
    );
    let up = UpProcess::start(&bench.config, &dir, &["--agents"])?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        let client = Client::connect(&StateDir::at(dir.clone())).await?;
        let route = client
            .routes()
            .await?
            .queue(QUEUE)
            .cloned()
            .with_context(|| format!("queue {QUEUE} has no route"))?;
        let session = client.shard(&route).await?;
        let mut latency = Vec::new();
        let nodes_dir = StateDir::at(dir.clone()).nodes_dir();
        let dirs = LatencyDirs {
            stamps: &stamps,
            nodes: &nodes_dir,
        };
        for task in [LatencyTask::Sleep, LatencyTask::BashStamp] {
            for size in LATENCY_SIZES.into_iter().filter(|&s| s <= nodes) {
                if latency_jobs == 0 {
                    break;
                }
                let row = latency_row(&client, &session, (task, size), latency_jobs, &dirs);
                latency.push(row.await?);
            }
        }
        let throughput = if jobs > 0 {
            Some(throughput(&client, &route, &session, jobs, args.concurrency, up.pid()).await?)
        } else {
            None
        };
        client.close().await;
        anyhow::Ok((latency, throughput))
    });
    up.stop();
    let (latency, throughput) = result?;
    let sleeping: Vec<&LatencyRow> = latency
        .iter()
        .filter(|r| r.task == LatencyTask::Sleep)
        .collect();
    let per_extra_node_ms = match (sleeping.first(), sleeping.last()) {
        (Some(a), Some(b)) if b.nodes_per_job > a.nodes_per_job => {
            Some((b.exec_median_ms - a.exec_median_ms) / (b.nodes_per_job - a.nodes_per_job) as f64)
        }
        _ => None,
    };
    Ok(AgentsReport {
        nodes,
        load_average: (load_before, load_average()),
        latency,
        per_extra_node_ms,
        throughput,
    })
}

/// Submits `jobspec_json`, signed by the client's certificate (agents run only signed
/// jobs); its id.
async fn submit(client: &Client, session: &Session, jobspec_json: &str) -> Result<JobId> {
    let request = Request::Submit(Submit {
        idempotency_key: new_key(),
        jobspec_json: jobspec_json.to_owned(),
        urgency: None,
        array: None,
        signature: client.sign(jobspec_json)?,
    });
    match session.request(&request).await.context("submitting")? {
        Response::Submitted { id, .. } => Ok(id),
        other => bail!("unexpected answer to a submit: {other:?}"),
    }
}

fn jobspec_json(shorthand: Shorthand) -> Result<String> {
    let mut jobspec = shorthand
        .to_jobspec()
        .context("building the benchmark jobspec")?;
    jobspec.attributes.queue = Some(QUEUE.to_owned());
    Ok(jobspec.to_json().to_string())
}

/// `jobs` one-task `/bin/true` jobs, `concurrency` submits in flight, until all ended.
async fn throughput(
    client: &Client,
    route: &Route,
    session: &Session,
    jobs: u64,
    concurrency: u64,
    up_pid: u32,
) -> Result<Throughput> {
    let json = jobspec_json(Shorthand {
        tasks: Some(1),
        duration: 60,
        command: vec!["/bin/true".into()],
        ..Shorthand::default()
    })?;
    let signature = client.sign(&json)?;
    let cpu_before = CpuSample::take(up_pid);
    let epoch = Instant::now();
    let first_send_ms = now_ms();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (session, json, signature, next) = (
            session.clone(),
            json.clone(),
            signature.clone(),
            Arc::clone(&next),
        );
        workers.spawn(async move {
            let mut ids = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < jobs as usize {
                let request = Request::Submit(Submit {
                    idempotency_key: new_key(),
                    jobspec_json: json.clone(),
                    urgency: None,
                    array: None,
                    signature: signature.clone(),
                });
                match session.request(&request).await.context("submitting")? {
                    Response::Submitted { id, .. } => ids.push(id),
                    other => bail!("unexpected answer to a submit: {other:?}"),
                }
            }
            anyhow::Ok(ids)
        });
    }
    let mut ours = std::collections::HashSet::new();
    while let Some(joined) = workers.join_next().await {
        ours.extend(joined.context("a submit worker failed")??);
    }
    let acked = epoch.elapsed();
    eprintln!(
        "bench e2e --agents: {} submissions acknowledged in {:.2} s; waiting for their ends",
        ours.len(),
        acked.as_secs_f64()
    );
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let (last_end_ms, not_completed) = loop {
        tokio::time::sleep(ENDS_POLL).await;
        let mine = system::shard_jobs(client, route, &ours).await?;
        let ended: Vec<_> = mine.iter().filter(|j| j.end_ms.is_some()).collect();
        if ended.len() == ours.len() {
            let last = ended.iter().filter_map(|j| j.end_ms).max().unwrap_or(0);
            let bad = ended
                .iter()
                .filter(|j| j.state != JobState::Completed)
                .count();
            break (last, bad as u64);
        }
        if Instant::now() > deadline {
            bail!(
                "{} of {} jobs ended after {} s",
                ended.len(),
                ours.len(),
                PHASE_TIMEOUT.as_secs()
            );
        }
    };
    let wall = epoch.elapsed();
    let cpu = CpuSample::take(up_pid).minus(&cpu_before);
    let n = (ours.len() as u64).max(1);
    let per = |ms: u64| ms * 1000 / n;
    Ok(Throughput {
        jobs: ours.len() as u64,
        concurrency,
        not_completed,
        completed_per_s: ours.len() as f64 * 1000.0
            / last_end_ms.saturating_sub(first_send_ms).max(1) as f64,
        acked_per_s: ours.len() as f64 / acked.as_secs_f64().max(1e-9),
        cpu_us_per_task: CpuPerTask {
            client: per(cpu.client_ms),
            shard: per(cpu.shards_ms),
            coordinator: per(cpu.coordinator_ms),
            agents: per(cpu.agents_ms),
            supervisors_and_tasks: per(cpu.agents_children_ms),
        },
        cores_busy: cpu.total_ms() as f64 / 1000.0 / wall.as_secs_f64().max(1e-9),
    })
}

/// The 1-minute load average (0 when it cannot be read).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn report_table(report: &AgentsReport, bench: &BenchDir) -> String {
    let mut out = format!(
        "bench e2e --agents: {} nodes, one agent each (`up --agents`), {} cores, in {} on {}; \
         load average {:.1} → {:.1}\n\nsubmit → all tasks started, one job at a time, one task \
         per node: to each task's exec as its supervisor recorded it (with tasks that sleep on: \
         the target's measure), and to each task's own stamp (bash's start-up included):\n",
        report.nodes,
        std::thread::available_parallelism().map_or(0, usize::from),
        bench.work.display(),
        bench.fs,
        report.load_average.0,
        report.load_average.1,
    );
    let mut table = Table::new(&[
        "TASKS",
        "NODES/JOB",
        "JOBS",
        "EXEC'D MEDIAN",
        "EXEC'D P99",
        "OWN STAMP MEDIAN",
        "OWN STAMP P99",
    ]);
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms"));
    for row in &report.latency {
        table.row(vec![
            row.task.name().to_owned(),
            row.nodes_per_job.to_string(),
            row.jobs.to_string(),
            ms(Some(row.exec_median_ms)),
            ms(Some(row.exec_p99_ms)),
            ms(row.median_ms),
            ms(row.p99_ms),
        ]);
    }
    out.push_str(&table.render());
    if let Some(slope) = report.per_extra_node_ms {
        out.push_str(&format!(
            "per extra node (sleeping tasks, exec'd): {slope:.2} ms\n"
        ));
    }
    if let Some(t) = &report.throughput {
        let c = &t.cpu_us_per_task;
        out.push_str(&format!(
            "\nthroughput: {} one-task /bin/true jobs, {} in flight: {:.0} jobs/s ended \
             ({:.0}/s acknowledged), {} not completed\nCPU per task: client {} µs, shard {} µs, \
             coordinator {} µs, agents {} µs, supervisors+tasks {} µs; {:.2} cores busy\n",
            t.jobs,
            t.concurrency,
            t.completed_per_s,
            t.acked_per_s,
            t.not_completed,
            c.client,
            c.shard,
            c.coordinator,
            c.agents,
            c.supervisors_and_tasks,
            t.cores_busy,
        ));
    }
    out
}
