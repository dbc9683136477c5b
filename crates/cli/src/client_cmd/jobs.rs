//! `shardsched jobs`, `job info ID` and `cancel ID…` (`job output` is in [`super::output`]).
//!
//! Job lists are gathered from every shard in parallel (each answers from its status
//! snapshot, so listing never blocks scheduling). A job id names its shard (the FLUID
//! generator field), so `job info` and `cancel` go to that shard alone; cancel's owner check
//! is made there, against this client's certificate.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use shardsched_client::{Client, check_locally, output, run};
use shardsched_proto::array::JobRef;
use shardsched_proto::limits::{IDS_PER_REQUEST_MAX, JOBS_PER_RESPONSE_MAX};
use shardsched_proto::msg::client_shard::{CancelResult, Request, Response};
use shardsched_proto::msg::{JobId, JobState, JobsQuery, Route, RouteTable, UserFilter};

use super::job_format::Format;
use super::{history, hold, job_view};

/// Flags of `shardsched jobs`.
#[derive(Args, Debug, Clone)]
pub struct JobsArgs {
    /// Include ended jobs (completed, failed, cancelled).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Every user's jobs, not only yours.
    #[arg(short = 'A', long = "all-users")]
    pub all_users: bool,
    /// Only this user's jobs.
    #[arg(short = 'u', long, conflicts_with = "all_users")]
    pub user: Option<String>,
    /// Only this queue's jobs.
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// At most this many jobs per queue (newest first).
    #[arg(long, default_value_t = JOBS_PER_RESPONSE_MAX as u32)]
    pub limit: u32,
    /// Only jobs in these states (comma-separated: pending, running, completed, failed,
    /// cancelled, or their codes PD, R, CD, F, CA); ended states imply -a.
    #[arg(long, value_name = "STATES", value_delimiter = ',', value_parser = state_arg)]
    pub state: Vec<JobState>,
    /// With ended jobs that ended this long ago or since (e.g. `7d`), from the job history
    /// (kept `history_days`) as well as the shards (implies -a).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration_arg::seconds_or_units)]
    pub since: Option<Duration>,
    /// Only jobs of this name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Print these fields, one line per job (an array's elements each on its own): e.g.
    /// '{id:>14} {name:<10} {state} {time_left}' (fields: see `job_format`, or give a
    /// wrong one to have them listed).
    #[arg(long, value_name = "FORMAT", conflicts_with = "json")]
    pub format: Option<String>,
    /// With --format: no header line.
    #[arg(long = "no-header", requires = "format")]
    pub no_header: bool,
    /// Print a JSON list of jobs instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A job state as typed: its word or its code.
pub fn state_arg(text: &str) -> Result<JobState, String> {
    let states = [
        JobState::Pending,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
    ];
    states
        .into_iter()
        .find(|s| {
            s.as_str().eq_ignore_ascii_case(text)
                || job_view::state_code(*s).eq_ignore_ascii_case(text)
        })
        .ok_or_else(|| {
            format!("{text:?} is not a job state (pending, running, completed, failed, cancelled)")
        })
}

/// Flags of `shardsched job`.
#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    #[command(subcommand)]
    pub command: JobCommand,
}

/// What `shardsched job` does.
#[derive(Subcommand, Debug, Clone)]
pub enum JobCommand {
    /// One job in full: its summary, its R (what it got) and its events.
    Info(JobInfoArgs),
    /// Holds pending jobs (urgency 0): they stay pending, with reason `held`, until
    /// released.
    Hold(hold::JobIdsArgs),
    /// Releases held jobs (urgency back to 16): they take their place again by submit time.
    Release(hold::JobIdsArgs),
    /// Sets a pending job's urgency: 0-31, or `default`, `hold`, `expedite` (above 16
    /// admins only).
    Urgency(hold::UrgencyArgs),
    /// What one of its tasks wrote (standard output, or `--stderr`), `--follow`ing it
    /// while it runs.
    Output(super::output::JobOutputArgs),
}

/// Flags of `shardsched job info`.
#[derive(Args, Debug, Clone)]
pub struct JobInfoArgs {
    /// The job id: F58 like ƒ2KEkBMqV (or f2KEkBMqV, with an ASCII f), or decimal; an
    /// array's element as ID[N].
    pub id: JobRef,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `shardsched cancel`.
#[derive(Args, Debug, Clone)]
pub struct CancelArgs {
    /// The jobs to cancel: F58 ids like ƒ2KEkBMqV (or f2KEkBMqV, with an ASCII f), or
    /// decimal; an array's id cancels all its elements, ID[N] one.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<JobRef>,
}

/// `shardsched jobs`.
pub fn jobs_main(args: &JobsArgs) -> Result<()> {
    let format = args.format.as_deref().map(Format::parse).transpose()?;
    run(|client| async move {
        let routes = client.routes().await?;
        // With --since, a removed queue's jobs are in the history.
        if let Some(queue) = &args.queue
            && routes.queue(queue).is_none()
            && args.since.is_none()
        {
            bail!("no queue named {queue:?} has a shard running");
        }
        let user = match (&args.user, args.all_users) {
            (Some(name), _) => UserFilter::Named(name.clone()),
            (None, true) => UserFilter::All,
            (None, false) => UserFilter::Mine,
        };
        let query = JobsQuery {
            queue: args.queue.clone(),
            user,
            include_inactive: args.all
                || args.since.is_some()
                || args.state.iter().any(|s| !s.is_active()),
            limit: args.limit,
            states: args.state.clone(),
            name: args.name.clone(),
        };
        check_locally(&Request::Jobs(query.clone()))?;
        let (mut list, warnings) = client.jobs(&routes, &query).await?;
        if args.since.is_some() {
            list =
                history::with_history(&client, list, &query, history::since_ms(args.since)).await?;
        }
        for warning in &warnings {
            output::say(format_args!("warning: {warning}"));
        }
        if list.truncated {
            eprintln!("shardsched: warning: the list is truncated (use --limit or -q)");
        }
        if args.json {
            let rows: Vec<Value> = list.jobs.iter().map(job_view::job_json).collect();
            output::emit(&format!("{}\n", Value::Array(rows)))
        } else if let Some(format) = format {
            output::emit(&format.render(&list.jobs, output::now_ms(), !args.no_header))
        } else {
            output::emit(&job_view::jobs_table(&list.jobs))
        }
    })
}

/// `shardsched job …`.
pub fn job_main(args: &JobArgs) -> Result<()> {
    match &args.command {
        JobCommand::Info(info) => job_info_main(info),
        JobCommand::Hold(ids) => hold::hold_main(ids),
        JobCommand::Release(ids) => hold::release_main(ids),
        JobCommand::Urgency(urgency) => hold::urgency_main(urgency),
        JobCommand::Output(out) => super::output::job_output_main(out),
    }
}

fn job_info_main(args: &JobInfoArgs) -> Result<()> {
    let id = job_ids(&[args.id])?[0];
    run(|client| async move {
        let routes = client.routes().await?;
        let route = Client::route_of(&routes, id)?;
        match client.ask_shard(route, &Request::JobInfo { id }).await? {
            Response::JobInfo(info) => {
                if args.json {
                    output::emit(&format!("{}\n", job_view::job_info_json(&info)))
                } else {
                    output::emit(&job_view::job_info_text(&info))
                }
            }
            other => bail!(
                "queue {}'s shard answered job info with {other:?}",
                route.queue
            ),
        }
    })
}

/// `shardsched cancel`: quiet on success, one line per job that was not cancelled, and a
/// failure exit status if any was not found or not ours (an already-ended job is only
/// reported: the caller's intent holds).
pub fn cancel_main(args: &CancelArgs) -> Result<()> {
    let ids = job_ids(&args.ids)?;
    run(|client| async move {
        let routes = client.routes().await?;
        let failures = ask_by_shard(
            &client,
            &routes,
            &ids,
            |ids| Request::Cancel { ids },
            |queue, response| {
                let Response::Cancelled(outcomes) = response else {
                    bail!("queue {queue}'s shard answered cancel with {response:?}");
                };
                let mut failures = 0;
                for outcome in outcomes {
                    match outcome.result {
                        CancelResult::Cancelled => {}
                        CancelResult::AlreadyInactive => {
                            eprintln!("shardsched: {}: already ended", outcome.id);
                        }
                        CancelResult::NotFound => {
                            eprintln!("shardsched: {}: no such job in queue {queue}", outcome.id);
                            failures += 1;
                        }
                        CancelResult::Forbidden => {
                            eprintln!(
                                "shardsched: {}: not your job (only its owner or an admin may \
                                 cancel it)",
                                outcome.id
                            );
                            failures += 1;
                        }
                    }
                }
                Ok(failures)
            },
        )
        .await?;
        if failures > 0 {
            bail!("{failures} of {} jobs not cancelled", args.ids.len());
        }
        Ok(())
    })
}

/// The job ids that `refs` name (`ID[N]`: its element's).
pub(super) fn job_ids(refs: &[JobRef]) -> Result<Vec<JobId>> {
    refs.iter()
        .map(|r| {
            r.job_id()
                .map_err(|e| anyhow::anyhow!("{r}: no such element: {e}"))
        })
        .collect()
}

/// Asks about `ids`, each of the shard that issued it: one request per shard made by `make`
/// (in chunks of [`IDS_PER_REQUEST_MAX`] ids, duplicates asked once), whose answer `read`
/// turns into a count of failures. Returns the failures: those `read` counted, ids no
/// running queue issued, and ids of a request that failed (each said on stderr).
pub(super) async fn ask_by_shard(
    client: &Client,
    routes: &RouteTable,
    ids: &[JobId],
    make: impl Fn(Vec<JobId>) -> Request,
    mut read: impl FnMut(&str, Response) -> Result<usize>,
) -> Result<usize> {
    let mut by_queue: BTreeMap<String, (Route, Vec<JobId>)> = BTreeMap::new();
    let mut failures = 0usize;
    let mut seen = HashSet::new();
    for &id in ids.iter().filter(|id| seen.insert(**id)) {
        match Client::route_of(routes, id) {
            Ok(route) => by_queue
                .entry(route.queue.clone())
                .or_insert_with(|| (route.clone(), Vec::new()))
                .1
                .push(id),
            // The error names the job.
            Err(e) => {
                eprintln!("shardsched: {e:#}");
                failures += 1;
            }
        }
    }
    for (queue, (route, ids)) in by_queue {
        for chunk in ids.chunks(IDS_PER_REQUEST_MAX) {
            match client.ask_shard(&route, &make(chunk.to_vec())).await {
                Ok(response) => failures += read(&queue, response)?,
                Err(e) => {
                    output::say(format_args!("asking queue {queue}: {e:#}"));
                    failures += chunk.len();
                }
            }
        }
    }
    Ok(failures)
}
