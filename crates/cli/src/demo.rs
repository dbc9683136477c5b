//! `shardsched demo`: a short scripted workload against a running `up`, told as it happens.
//!
//! It shows the few things that make shardsched what it is, on the live system:
//!
//! - jobs submitted to two queues go straight to two shards and run on each queue's own
//!   nodes, at the same time;
//! - a running job that is cancelled frees its node at once;
//! - a job that could never fit its queue is denied at submit, with the reason;
//! - everything ends, and the nodes are free again.
//!
//! Durations are a few seconds of simulated run time (the shards' sim executor), so the
//! demo takes about ten seconds with `up`'s default time scale.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use shardsched_jobspec::Shorthand;
use shardsched_proto::msg::client_coord;
use shardsched_proto::msg::client_shard::{CancelResult, Request, Response};
use shardsched_proto::msg::{JobId, JobState, JobSummary, JobsQuery, QueueStatus, UserFilter};
use shardsched_resource::encode_hostlist;

use crate::client::output::{self, human_duration};
use crate::client::{Client, submit, wire_error};

/// `println!` that stops quietly on a closed pipe (`shardsched demo | head`).
macro_rules! say {
    () => { say!("") };
    ($($arg:tt)*) => {{
        let _ = crate::client::output::emit(&format!("{}\n", format_args!($($arg)*)));
    }};
}

/// How often the demo looks at its jobs.
pub const DEMO_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Flags of `shardsched demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Give up waiting for the jobs after this long (2m, 90s; a bare number is seconds).
    #[arg(long, default_value = "2m", value_name = "DURATION",
          value_parser = crate::duration_arg::seconds_or_units)]
    pub timeout: Duration,
}

/// One scripted job.
struct Planned {
    queue: String,
    what: String,
    shorthand: Shorthand,
}

/// `shardsched demo`.
pub fn main(args: &DemoArgs) -> Result<()> {
    crate::client::run(|client| async move { run(&client, args).await })
}

async fn run(client: &Arc<Client>, args: &DemoArgs) -> Result<()> {
    let started = Instant::now();
    let routes = client.routes().await?;
    let queues = match client
        .coordinator(&client_coord::Request::Queues)
        .await
        .map_err(|e| wire_error(e, "coordinator"))?
    {
        client_coord::Response::Queues(queues) => queues,
        other => bail!("the coordinator answered queue list with {other:?}"),
    };
    // Two started, routable queues: the default one first.
    let mut usable: Vec<&QueueStatus> = queues
        .iter()
        .filter(|q| q.started && q.enabled && routes.queue(&q.name).is_some())
        .collect();
    usable.sort_by_key(|q| routes.default_queue.as_deref() != Some(q.name.as_str()));
    let (a, b) = match usable.as_slice() {
        [a, b, ..] => (*a, *b),
        [a] => (*a, *a),
        [] => bail!("no queue is started, enabled and routable: is `shardsched up` ready?"),
    };
    let me = client
        .me()
        .map_or_else(|| "?".to_owned(), |p| format!("{:?} ({})", p.name, p.role));
    say!(
        "demo: as {me}, using queues {} ({} nodes) and {} ({} nodes)\n",
        a.name,
        a.nodes_owned,
        b.name,
        b.nodes_owned
    );

    let plan = script(a, b);
    say!(
        "1. submitting {} jobs straight to the two shards:",
        plan.len()
    );
    let mut jobs: Vec<(JobId, String)> = Vec::new();
    for job in &plan {
        let id = submit_one(client, &job.queue, &job.shorthand).await?;
        say!("   {id}  {:<8} {}", job.queue, job.what);
        jobs.push((id, job.queue.clone()));
    }

    say!("\n2. a job that can never fit:");
    let too_big = Shorthand {
        nodes: Some(u64::from(b.nodes_defined) + 1),
        duration: 1,
        command: vec!["sleep".into(), "1".into()],
        ..Shorthand::default()
    };
    match submit_one(client, &b.name, &too_big).await {
        Ok(id) => say!(
            "   {} nodes in {} was accepted as {id} (the queue must have grown)",
            b.nodes_defined + 1,
            b.name
        ),
        Err(e) => say!(
            "   {} nodes in {} (it has {}): {e:#}",
            b.nodes_defined + 1,
            b.name,
            b.nodes_defined
        ),
    }

    say!("\n3. a long job, cancelled once it runs:");
    let long = Shorthand {
        nodes: Some(1),
        duration: 3600,
        command: vec!["sleep".into(), "3600".into()],
        ..Shorthand::default()
    };
    let long_id = submit_one(client, &a.name, &long).await?;
    say!("   {long_id}  {:<8} 1 node for an hour", a.name);
    let deadline = Instant::now() + args.timeout;
    let running = wait_for(client, long_id, deadline, |j| j.state != JobState::Pending).await?;
    say!(
        "   {long_id} is {} on {}; cancelling it",
        running.state,
        encode_hostlist(&running.nodes)
    );
    cancel(client, long_id).await?;
    let ended = wait_for(client, long_id, deadline, |j| !j.state.is_active()).await?;
    say!(
        "   {long_id} is {} after {}; its node is free again",
        ended.state,
        output::run_time(&ended, output::now_ms())
    );

    say!("\n4. watching the jobs of step 1 until they end:");
    watch(client, &jobs, started, deadline).await?;

    say!("\n5. where they ran:");
    let list = our_jobs(client, &jobs).await?;
    let _ = output::emit(&indent(&output::jobs_table(&list)));
    check_own_nodes(client, &list).await?;
    say!(
        "\ndemo done in {}.",
        human_duration(started.elapsed().as_millis() as u64)
    );
    Ok(())
}

/// The jobs of step 1, sized to the queues.
fn script(a: &QueueStatus, b: &QueueStatus) -> Vec<Planned> {
    let job =
        |queue: &QueueStatus, what: &str, nodes: Option<u64>, tasks: Option<u64>, secs| Planned {
            queue: queue.name.clone(),
            what: what.to_owned(),
            shorthand: Shorthand {
                nodes,
                tasks,
                duration: secs,
                command: vec!["sleep".into(), secs.to_string()],
                ..Shorthand::default()
            },
        };
    let a_pair = if a.nodes_owned >= 2 { 2 } else { 1 };
    let b_pair = if b.nodes_owned >= 2 { 2 } else { 1 };
    vec![
        job(
            a,
            &format!("{a_pair} whole nodes for 3s"),
            Some(a_pair),
            None,
            3,
        ),
        job(
            a,
            &format!("{a_pair} whole nodes for 2s"),
            Some(a_pair),
            None,
            2,
        ),
        job(a, "8 one-core tasks for 2s", None, Some(8), 2),
        job(a, "1 whole node for 4s", Some(1), None, 4),
        job(b, "1 whole node for 2s", Some(1), None, 2),
        job(b, "4 one-core tasks for 3s", None, Some(4), 3),
        job(
            b,
            &format!("{b_pair} whole nodes for 2s"),
            Some(b_pair),
            None,
            2,
        ),
    ]
}

async fn submit_one(client: &Client, queue: &str, shorthand: &Shorthand) -> Result<JobId> {
    let mut shorthand = shorthand.clone();
    shorthand.queue = Some(queue.to_owned());
    let jobspec = shorthand.to_jobspec().context("building a demo jobspec")?;
    let (id, _) = submit::submit(
        client,
        None,
        queue,
        jobspec.to_json().to_string(),
        None,
        submit::new_key(),
    )
    .await?;
    Ok(id)
}

async fn cancel(client: &Client, id: JobId) -> Result<()> {
    let routes = client.routes().await?;
    let route = Client::route_of(&routes, id)?;
    match client
        .ask_shard(route, &Request::Cancel { ids: vec![id] })
        .await?
    {
        Response::Cancelled(outcomes)
            if outcomes.iter().all(|o| {
                matches!(
                    o.result,
                    CancelResult::Cancelled | CancelResult::AlreadyInactive
                )
            }) =>
        {
            Ok(())
        }
        other => bail!("cancelling {id}: {other:?}"),
    }
}

/// Our jobs among everyone's, ended ones included.
async fn our_jobs(client: &Arc<Client>, ids: &[(JobId, String)]) -> Result<Vec<JobSummary>> {
    let routes = client.routes().await?;
    let query = JobsQuery {
        queue: None,
        user: UserFilter::Mine,
        include_inactive: true,
        limit: shardsched_proto::limits::JOBS_PER_RESPONSE_MAX as u32,
    };
    let (list, warnings) = client.jobs(&routes, &query).await?;
    for warning in warnings {
        eprintln!("shardsched: warning: {warning}");
    }
    Ok(list
        .jobs
        .into_iter()
        .filter(|j| ids.iter().any(|(id, _)| *id == j.id))
        .collect())
}

async fn job(client: &Client, id: JobId) -> Result<JobSummary> {
    let routes = client.routes().await?;
    let route = Client::route_of(&routes, id)?;
    match client.ask_shard(route, &Request::JobInfo { id }).await? {
        Response::JobInfo(info) => Ok(info.summary),
        other => bail!("job info {id}: {other:?}"),
    }
}

async fn wait_for(
    client: &Client,
    id: JobId,
    deadline: Instant,
    done: impl Fn(&JobSummary) -> bool,
) -> Result<JobSummary> {
    loop {
        let summary = job(client, id).await?;
        if done(&summary) {
            return Ok(summary);
        }
        if Instant::now() > deadline {
            bail!(
                "gave up waiting for {id}: still {} ({})",
                summary.state,
                summary.reason
            );
        }
        tokio::time::sleep(DEMO_POLL_INTERVAL).await;
    }
}

/// Prints each state change of `ids` as it is seen, until all have ended.
async fn watch(
    client: &Arc<Client>,
    ids: &[(JobId, String)],
    started: Instant,
    deadline: Instant,
) -> Result<()> {
    let mut seen: HashMap<JobId, JobState> = HashMap::new();
    loop {
        let jobs = our_jobs(client, ids).await?;
        let mut active = 0;
        for job in &jobs {
            if job.state.is_active() {
                active += 1;
            }
            if seen.get(&job.id) == Some(&job.state) {
                continue;
            }
            seen.insert(job.id, job.state);
            let detail = match job.state {
                JobState::Pending if !job.reason.is_empty() => format!(" ({})", job.reason),
                JobState::Running => format!(" on {}", encode_hostlist(&job.nodes)),
                JobState::Completed | JobState::Failed | JobState::Cancelled => {
                    format!(" after {}", output::run_time(job, output::now_ms()))
                }
                _ => String::new(),
            };
            say!(
                "   +{:>6.2}s  {}  {:<8} {}{detail}",
                started.elapsed().as_secs_f64(),
                job.id,
                job.queue,
                job.state
            );
        }
        if active == 0 && jobs.len() == ids.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("gave up: {active} jobs still pending or running");
        }
        tokio::time::sleep(DEMO_POLL_INTERVAL).await;
    }
}

/// Checks, from the coordinator's ownership, that every job ran on its own queue's nodes,
/// and says so.
async fn check_own_nodes(client: &Client, jobs: &[JobSummary]) -> Result<()> {
    let nodes = match client
        .coordinator(&client_coord::Request::Resources { queue: None })
        .await
        .map_err(|e| wire_error(e, "coordinator"))?
    {
        client_coord::Response::Resources(nodes) => nodes,
        other => bail!("the coordinator answered resource list with {other:?}"),
    };
    let owner: HashMap<&str, Option<&str>> = nodes
        .iter()
        .map(|n| (n.name.as_str(), n.queue.as_deref()))
        .collect();
    let mut strays = 0;
    for job in jobs {
        for node in &job.nodes {
            if owner.get(node.as_str()).copied().flatten() != Some(job.queue.as_str()) {
                strays += 1;
                say!(
                    "   ! {} ran on {node}, which {} does not own",
                    job.id,
                    job.queue
                );
            }
        }
    }
    let busy = nodes.iter().filter(|n| n.jobs_running > 0).count();
    if strays == 0 {
        say!("   every job ran on its own queue's nodes.");
    }
    say!("   nodes running jobs now: {busy} of {}.", nodes.len());
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}
