//! `shardsched demo`: a short scripted workload against a running `up`, told as it happens.
//!
//! It shows the few things that make shardsched what it is, on the live system:
//!
//! - jobs submitted to two queues go straight to two shards and run on each queue's own
//!   nodes, at the same time;
//! - a running job that is cancelled frees its node at once;
//! - a job that could never fit its queue is denied at submit, with the reason;
//! - a node busy in one running queue moves to another whose definition overlaps it: it is
//!   outgoing while its job runs, and up in the recipient right after the job's end
//!   (`move_step`);
//! - everything ends, and the nodes are free again.
//!
//! Durations are a few seconds of simulated run time (the shards' sim executor), so the
//! demo takes about ten seconds with `up`'s default time scale.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use shardsched_client::output::{self, human_duration};
use shardsched_client::submit::{plain, submit};
use shardsched_client::{Client, wire_error};
use shardsched_jobspec::{Jobspec, Shorthand};
use shardsched_proto::msg::client_coord;
use shardsched_proto::msg::client_shard::{CancelResult, Request, Response};
use shardsched_proto::msg::{JobId, JobState, JobSummary, JobsQuery, QueueStatus, UserFilter};
use shardsched_resource::encode_hostlist;

use crate::client_cmd::job_view;

/// `println!` that stops quietly on a closed pipe (`shardsched demo | head`), escaping
/// control characters (reasons come from the system).
macro_rules! say {
    () => { say!("") };
    ($($arg:tt)*) => {{
        let text = shardsched_client::output::escape_lines(&format!($($arg)*));
        let _ = shardsched_client::output::emit(&format!("{text}\n"));
    }};
}

mod move_step;

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
    shardsched_client::run(|client| async move { run(&client, args).await })
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
        job_view::run_time(&ended, output::now_ms())
    );

    say!("\n4. watching the jobs of step 1 until they end:");
    watch(client, &jobs, started, deadline).await?;

    say!("\n5. a busy node moves between two running queues:");
    move_step::run(client, &queues, started, deadline).await?;

    say!("\n6. where they ran:");
    let list = our_jobs(client, &jobs).await?;
    let _ = output::emit(&indent(&job_view::jobs_table(&list)));
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
    submit_jobspec(client, queue, &jobspec).await
}

async fn submit_jobspec(client: &Client, queue: &str, jobspec: &Jobspec) -> Result<JobId> {
    let (id, _) = submit(client, None, queue, plain(jobspec.to_json().to_string())).await?;
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
    let mine = list_jobs(client, UserFilter::Mine, true).await?;
    Ok(mine
        .into_iter()
        .filter(|j| ids.iter().any(|(id, _)| *id == j.id))
        .collect())
}

/// The jobs of `user`, asked of every shard (live ones, or all with `include_inactive`).
async fn list_jobs(
    client: &Arc<Client>,
    user: UserFilter,
    include_inactive: bool,
) -> Result<Vec<JobSummary>> {
    let routes = client.routes().await?;
    let query = JobsQuery {
        queue: None,
        user,
        include_inactive,
        limit: shardsched_proto::limits::JOBS_PER_RESPONSE_MAX as u32,
        states: Vec::new(),
        name: None,
    };
    let (list, warnings) = client.jobs(&routes, &query).await?;
    for warning in warnings {
        output::say(format_args!("warning: {warning}"));
    }
    Ok(list.jobs)
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
                JobState::Pending if !job.reason.is_empty() => {
                    format!(" ({})", job_view::job_reason(job, output::now_ms()))
                }
                JobState::Running => format!(" on {}", encode_hostlist(&job.nodes)),
                JobState::Completed | JobState::Failed | JobState::Cancelled => {
                    format!(" after {}", job_view::run_time(job, output::now_ms()))
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
/// and says so; then how many nodes run jobs now, from the shards' own job lists (the
/// coordinator's per-node counts are its last status reports, a moment old).
async fn check_own_nodes(client: &Arc<Client>, jobs: &[JobSummary]) -> Result<()> {
    let nodes = client.resources(None).await?;
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
    if strays == 0 {
        say!("   every job ran on its own queue's nodes.");
    }
    let live = list_jobs(client, UserFilter::All, false).await?;
    let busy = busy_nodes(&live);
    say!("   nodes running jobs now: {busy} of {}.", nodes.len());
    Ok(())
}

/// How many distinct nodes the running ones of `jobs` hold.
fn busy_nodes(jobs: &[JobSummary]) -> usize {
    let nodes: std::collections::BTreeSet<&str> = jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .flat_map(|j| j.nodes.iter().map(String::as_str))
        .collect();
    nodes.len()
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}
