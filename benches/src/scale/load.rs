//! The jobs and the moves of `bench scale` against a running `up`, and their figures.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use shardsched_client::output::now_ms;
use shardsched_client::{Client, StateDir, new_key, wire_error};
use shardsched_histogram::nearest_rank;
use shardsched_jobspec::Shorthand;
use shardsched_proto::array::{ArraySpec, IndexRange};
use shardsched_proto::limits::JOBS_PER_RESPONSE_MAX;
use shardsched_proto::msg::client_coord::{self, MoveNodeInfo, MoveRequest};
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobState, JobSummary, JobsQuery, MoveId, Route, UserFilter};

use super::{IN_FLIGHT_PER_QUEUE, JOB_SECONDS, Plan, ScaleArgs};
use crate::e2e::readings::CpuSample;

/// How long the benchmark waits for every job to end, or every move to finish.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often it asks the shards whether jobs are left (the figures come from the jobs'
/// own end times, so this bounds only the benchmark's pace).
pub const DONE_POLL: Duration = Duration::from_millis(100);
/// How often it asks the coordinator whether the moves are finished (this bounds the move
/// figure's resolution).
pub const MOVE_POLL: Duration = Duration::from_millis(2);

/// What the load phase measured.
pub struct Load {
    pub jobs_per_s: f64,
    pub jobs_wall_s: f64,
    pub submitted_s: f64,
    pub completed: u64,
    pub latency_p50_ms: u64,
    pub latency_p99_ms: u64,
    pub moved_nodes: u64,
    pub move_requests: u64,
    pub move_ms: f64,
    pub cpu: CpuSample,
}

/// Submits the jobs, moves the nodes once a quarter are acknowledged, waits for every job
/// to end, and reads the figures.
pub async fn run(args: &ScaleArgs, plan: &Plan, dir: &Path, up_pid: u32) -> Result<Load> {
    let client = Arc::new(Client::connect(&StateDir::at(dir.to_owned())).await?);
    let routes = client.routes().await?;
    let mut targets = Vec::new();
    for queue in &plan.queues {
        targets.push(
            routes
                .queue(queue)
                .cloned()
                .context(format!("queue {queue} has no route"))?,
        );
    }
    let acked = Arc::new(AtomicU64::new(0));
    let cpu_before = CpuSample::take(up_pid);
    let first_submit_ms = now_ms();
    let epoch = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    let q = targets.len() as u64;
    for (i, route) in targets.iter().enumerate() {
        let jobs = args.jobs / q + u64::from((i as u64) < args.jobs % q);
        let jobspec_json = Arc::new(jobspec(&route.queue)?);
        let session = client.shard(route).await?;
        let next = Arc::new(AtomicU64::new(0));
        for _ in 0..IN_FLIGHT_PER_QUEUE {
            let (session, jobspec_json) = (session.clone(), Arc::clone(&jobspec_json));
            let (next, acked) = (Arc::clone(&next), Arc::clone(&acked));
            let per = u64::from(args.per_request);
            workers.spawn(async move {
                loop {
                    let from = next.fetch_add(per, Ordering::Relaxed);
                    if from >= jobs {
                        return anyhow::Ok(());
                    }
                    let count = per.min(jobs - from);
                    let last = u32::try_from(count - 1).context("array size")?;
                    let request = Request::Submit(Submit {
                        idempotency_key: new_key(),
                        jobspec_json: String::clone(&jobspec_json),
                        urgency: None,
                        array: Some(ArraySpec {
                            ranges: vec![IndexRange {
                                first: 0,
                                last,
                                step: 1,
                            }],
                            max_running: 0,
                        }),
                        signature: None,
                    });
                    match session.request(&request).await {
                        Ok(Response::Submitted { .. }) => {
                            acked.fetch_add(count, Ordering::Relaxed);
                        }
                        Ok(other) => bail!("unexpected answer to a submit: {other:?}"),
                        Err(e) => return Err(anyhow::Error::new(e).context("submitting")),
                    }
                }
            });
        }
    }
    let mover = {
        let (client, acked) = (Arc::clone(&client), Arc::clone(&acked));
        let (moves, queues, quarter) = (plan.moves.clone(), plan.queues.clone(), args.jobs / 4);
        tokio::spawn(async move {
            while acked.load(Ordering::Relaxed) < quarter {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            move_all(&client, &moves, &queues).await
        })
    };
    while let Some(joined) = workers.join_next().await {
        joined.context("a submit worker failed")??;
    }
    let submitted_s = epoch.elapsed().as_secs_f64();
    eprintln!(
        "bench scale: {} jobs acknowledged in {submitted_s:.2} s; waiting for them to end",
        args.jobs
    );
    let (moved_nodes, move_requests, move_ms) = mover.await.context("the mover failed")??;
    let jobs = wait_all_ended(&client, &targets).await?;
    let cpu = CpuSample::take(up_pid).minus(&cpu_before);
    client.close().await;
    let completed = jobs
        .iter()
        .filter(|j| j.state == JobState::Completed)
        .count() as u64;
    if completed != args.jobs {
        bail!(
            "{completed} of {} jobs completed ({} listed)",
            args.jobs,
            jobs.len()
        );
    }
    let last_end_ms = jobs
        .iter()
        .filter_map(|j| j.end_ms)
        .max()
        .unwrap_or(first_submit_ms);
    let wall_s = (last_end_ms.saturating_sub(first_submit_ms).max(1)) as f64 / 1000.0;
    let mut latency: Vec<u64> = jobs
        .iter()
        .filter_map(|j| Some(j.start_ms?.saturating_sub(j.submit_ms)))
        .collect();
    latency.sort_unstable();
    Ok(Load {
        jobs_per_s: args.jobs as f64 / wall_s,
        jobs_wall_s: wall_s,
        submitted_s,
        completed,
        latency_p50_ms: nearest_rank(&latency, 0.5),
        latency_p99_ms: nearest_rank(&latency, 0.99),
        moved_nodes,
        move_requests,
        move_ms,
        cpu,
    })
}

/// One core for one simulated second, in `queue`.
fn jobspec(queue: &str) -> Result<String> {
    let jobspec = Shorthand {
        tasks: Some(1),
        duration: JOB_SECONDS,
        command: vec!["true".into()],
        queue: Some(queue.to_owned()),
        ..Shorthand::default()
    }
    .to_jobspec()
    .context("building the benchmark jobspec")?;
    Ok(jobspec.to_json().to_string())
}

/// Sends every donor's move to the last queue at once and waits until all are finished:
/// (nodes, requests, ms from the first request to the last finished).
async fn move_all(
    client: &Arc<Client>,
    moves: &[Vec<u64>],
    queues: &[String],
) -> Result<(u64, u64, f64)> {
    let Some(to) = queues.last() else {
        return Ok((0, 0, 0.0));
    };
    let started = Instant::now();
    let started_ms = now_ms();
    let mut ids: Vec<MoveId> = Vec::new();
    let mut requests = tokio::task::JoinSet::new();
    for (donor, nodes) in queues.iter().zip(moves).filter(|(_, n)| !n.is_empty()) {
        let request = client_coord::Request::Move(MoveRequest {
            nodes: nodes.iter().map(|i| format!("node{i}")).collect(),
            from: donor.clone(),
            to: to.clone(),
            deadline_ms: None,
            dry_run: false,
        });
        let client = Arc::clone(client);
        requests.spawn(async move { client.coordinator(&request).await });
    }
    let count = requests.len() as u64;
    while let Some(answer) = requests.join_next().await {
        match answer.context("a move request failed")? {
            Ok(client_coord::Response::Done { move_id }) => ids.extend(move_id),
            Ok(other) => bail!("the coordinator answered a move with {other:?}"),
            Err(e) => return Err(wire_error(e, "coordinator")),
        }
    }
    let answered_ms = now_ms();
    let deadline = Instant::now() + LOAD_TIMEOUT;
    loop {
        let moves = match client.coordinator(&client_coord::Request::Moves).await {
            Ok(client_coord::Response::Moves { moves, .. }) => moves,
            Ok(other) => bail!("the coordinator answered queue moves with {other:?}"),
            Err(e) => return Err(wire_error(e, "coordinator")),
        };
        if !moves
            .iter()
            .any(|m| ids.contains(&m.move_id) && m.status == "active")
        {
            let ours = moves.iter().filter(|m| ids.contains(&m.move_id));
            let steps = ours.flat_map(|m| &m.nodes);
            let last = |at: fn(&MoveNodeInfo) -> Option<u64>| {
                steps.clone().filter_map(at).max().unwrap_or(0)
            };
            let after = |ms: u64| ms.saturating_sub(started_ms);
            eprintln!(
                "bench scale: moves (coordinator's clock, ms after the first request): all \
                 answered {}, last release recorded {}, last acquisition recorded {}, seen \
                 finished {}",
                after(answered_ms),
                after(last(|n| n.released_ms)),
                after(last(|n| n.acquired_ms)),
                after(now_ms())
            );
            break;
        }
        if Instant::now() > deadline {
            bail!("moves still active after {} s", LOAD_TIMEOUT.as_secs());
        }
        tokio::time::sleep(MOVE_POLL).await;
    }
    let moved = moves.iter().map(|m| m.len() as u64).sum();
    Ok((moved, count, started.elapsed().as_secs_f64() * 1000.0))
}

/// Waits until no shard lists a pending or running job, then every shard's whole list.
async fn wait_all_ended(client: &Client, targets: &[Route]) -> Result<Vec<JobSummary>> {
    let deadline = Instant::now() + LOAD_TIMEOUT;
    for route in targets {
        while !list(client, route, vec![JobState::Pending, JobState::Running], 1)
            .await?
            .is_empty()
        {
            if Instant::now() > deadline {
                bail!(
                    "jobs of queue {} still live after {} s",
                    route.queue,
                    LOAD_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(DONE_POLL).await;
        }
    }
    let mut all = Vec::new();
    for route in targets {
        let limit = u32::try_from(JOBS_PER_RESPONSE_MAX).unwrap_or(u32::MAX);
        all.extend(list(client, route, Vec::new(), limit).await?);
    }
    let ids: HashSet<_> = all.iter().map(|j| j.id).collect();
    if ids.len() != all.len() {
        bail!("a job is listed twice");
    }
    Ok(all)
}

/// `route`'s shard's jobs in `states` (any, finished too, when empty), at most `limit`.
async fn list(
    client: &Client,
    route: &Route,
    states: Vec<JobState>,
    limit: u32,
) -> Result<Vec<JobSummary>> {
    let query = Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: states.is_empty(),
        limit,
        states,
        name: None,
    });
    match client.ask_shard(route, &query).await? {
        Response::Jobs(list) => Ok(list.jobs),
        other => bail!("unexpected answer to a job list: {other:?}"),
    }
}
