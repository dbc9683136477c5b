//! Job history on the command line: `jobs --since` (the live list, plus what the
//! coordinator's history store kept of finished jobs) and `shardsched usage` (core- and
//! GPU-seconds by user, from the same store).

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use serde_json::{Value, json};
use shardsched_client::{Client, check_locally, output, run};
use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_proto::msg::history::{HistoryQuery, UsageQuery, UsageRow};
use shardsched_proto::msg::{JobList, JobsQuery, UserFilter};

/// Flags of `shardsched usage`.
#[derive(Args, Debug, Clone)]
pub struct UsageArgs {
    /// Only this user's jobs (default: everyone's).
    #[arg(short = 'u', long)]
    pub user: Option<String>,
    /// Only jobs that ended this long ago or since (e.g. `7d`, `12h`; default: all the
    /// history keeps, `history_days`).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration_arg::seconds_or_units)]
    pub since: Option<Duration>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Milliseconds since the epoch `ago` before now (0 for none: the whole history).
pub fn since_ms(ago: Option<Duration>) -> u64 {
    ago.map_or(0, |d| {
        output::now_ms().saturating_sub(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// `jobs --since`: `live` (the shards' list, ended jobs included) with the jobs ended since
/// `since_ms` that the history store kept and the shards no longer have; the shards' rows
/// win, newest first.
pub async fn with_history(
    client: &Client,
    live: JobList,
    query: &JobsQuery,
    since_ms: u64,
) -> Result<JobList> {
    let request = Request::History(HistoryQuery {
        jobs: query.clone(),
        since_ms,
    });
    check_locally(&request)?;
    let kept = match client.coordinator(&request).await? {
        Response::History(list) => list,
        other => bail!("the coordinator answered a history query with {other:?}"),
    };
    let mut jobs: Vec<_> = live
        .jobs
        .into_iter()
        .filter(|j| j.state.is_active() || j.end_ms.is_none_or(|end| end >= since_ms))
        .collect();
    let seen: HashSet<_> = jobs.iter().map(|j| j.id).collect();
    jobs.extend(
        kept.records
            .into_iter()
            .map(|r| r.job)
            .filter(|j| !seen.contains(&j.id)),
    );
    jobs.sort_by_key(|j| std::cmp::Reverse(j.id));
    Ok(JobList {
        jobs,
        truncated: live.truncated || kept.truncated,
    })
}

/// `shardsched usage`.
pub fn usage_main(args: &UsageArgs) -> Result<()> {
    let request = Request::Usage(UsageQuery {
        user: args.user.clone().map_or(UserFilter::All, UserFilter::Named),
        since_ms: since_ms(args.since),
    });
    check_locally(&request)?;
    run(|client| async move {
        let rows = match client.coordinator(&request).await? {
            Response::Usage(rows) => rows,
            other => bail!("the coordinator answered a usage query with {other:?}"),
        };
        if args.json {
            let rows: Vec<Value> = rows.iter().map(usage_json).collect();
            output::emit(&format!("{}\n", Value::Array(rows)))
        } else {
            output::emit(&usage_table(&rows))
        }
    })
}

fn seconds(ms: u64) -> f64 {
    // Exact below 2^53 ms (285,000 years of one core).
    ms as f64 / 1000.0
}

fn usage_json(row: &UsageRow) -> Value {
    json!({
        "user": row.user,
        "jobs": row.jobs,
        "core_seconds": seconds(row.core_ms),
        "gpu_seconds": seconds(row.gpu_ms),
    })
}

fn usage_table(rows: &[UsageRow]) -> String {
    let mut table = output::Table::new(&["USER", "JOBS", "CORE-SECONDS", "GPU-SECONDS"]);
    for row in rows {
        table.row(vec![
            row.user.clone(),
            row.jobs.to_string(),
            format!("{:.1}", seconds(row.core_ms)),
            format!("{:.1}", seconds(row.gpu_ms)),
        ]);
    }
    table.render()
}
