//! `shardsched submit`: one job, straight to its queue's shard.
//!
//! The jobspec is built here (from `--jobspec FILE`, YAML or JSON, or from the `-N -n -c -g
//! -t` shorthand) and sent as canonical JSON; the shard parses and judges it again, because
//! the wire trusts no client. The queue is `-q`, else the jobspec's own, else the routing
//! table's default.
//!
//! A submit carries a random idempotency key chosen once per invocation. If the connection
//! fails before the answer arrives, the job may or may not have been accepted; retrying with
//! the **same** key makes the shard return the first job instead of making a second one, so
//! a retried submit is safe. Retries refresh the routing table first, since a shard that
//! restarted listens at a new address.
//!
//! A queue whose shard is restarting is `offline` in the routing table, and a coordinator that
//! is restarting does not answer: both are waited out ([`super::retry`]: a doubling backoff
//! for up to [`RETRY_WINDOW`](super::retry::RETRY_WINDOW)); after that the submit fails and
//! says which one it waited for. While the coordinator does not answer, the job goes to the
//! shard named by the last routing table this client got, which is most likely still there.
//! Connection failures on the submit itself are retried at most [`SUBMIT_ATTEMPTS_MAX`]
//! times.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use rand::RngCore;
use shardsched_jobspec::{Jobspec, Shorthand};
use shardsched_proto::Error as WireError;
use shardsched_proto::limits::IDEMPOTENCY_KEY_BYTES;
use shardsched_proto::msg::client_shard::{IdempotencyKey, Request, Response, Submit};
use shardsched_proto::msg::{JobId, RefusalCode, Route, RouteTable};

use super::retry::{Retry, retryable};
use super::{Client, describe_refusal};

/// Most attempts one submit makes on a shard (the first try and its retries) before giving
/// up.
pub const SUBMIT_ATTEMPTS_MAX: u32 = 5;

/// Flags of `shardsched submit`.
#[derive(Args, Debug, Clone)]
pub struct SubmitArgs {
    /// Queue [default: the jobspec's queue, else the cluster's default queue].
    #[arg(short = 'q', long)]
    pub queue: Option<String>,
    /// Number of nodes (whole nodes unless --tasks is given too).
    #[arg(short = 'N', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub nodes: Option<u64>,
    /// Number of tasks [default: 1, or one per node].
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
    /// Cores per task.
    #[arg(short = 'c', long = "cores-per-task", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub cores_per_task: u64,
    /// GPUs per task.
    #[arg(short = 'g', long = "gpus-per-task", default_value_t = 0)]
    pub gpus_per_task: u64,
    /// Time limit: minutes, as in Flux and Slurm, or with a unit (90s, 30m, 2h, 1d;
    /// fractions allowed) [default: the queue's].
    #[arg(short = 't', long = "time-limit", value_name = "MIN|DURATION",
          value_parser = crate::duration_arg::time_limit_secs)]
    pub time_limit: Option<u64>,
    /// Whole nodes, even when --tasks would fit in part of them.
    #[arg(short = 'x', long)]
    pub exclusive: bool,
    /// Priority within the queue (higher first) [default: the queue's].
    #[arg(long)]
    pub priority: Option<u32>,
    /// Requeue the job (back to pending, keeping its place) instead of failing it when a
    /// node it runs on is marked down: sets `attributes.system.requeue`.
    #[arg(long)]
    pub requeue: bool,
    /// A jobspec file (RFC 14/25, YAML or JSON) instead of the shorthand flags.
    #[arg(long, value_name = "FILE",
          conflicts_with_all = ["nodes", "tasks", "cores_per_task", "gpus_per_task", "exclusive", "command"])]
    pub jobspec: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `shardsched submit`.
pub fn main(args: &SubmitArgs) -> Result<()> {
    let mut jobspec = build_jobspec(args)?;
    super::run(|client| async move {
        let routes = client.routes().await?;
        let queue = choose_queue(args, &jobspec, &routes)?;
        jobspec.attributes.queue = Some(queue.clone());
        let (id, _duplicate) = submit(
            &client,
            Some(routes),
            &queue,
            jobspec.to_json().to_string(),
            args.priority,
            new_key(),
        )
        .await?;
        super::output::emit(&format!("{id}\n"))
    })
}

/// A fresh random idempotency key.
pub fn new_key() -> IdempotencyKey {
    let mut key = [0u8; IDEMPOTENCY_KEY_BYTES];
    rand::rng().fill_bytes(&mut key);
    IdempotencyKey(key)
}

/// The jobspec the flags describe. Its queue is set later, once the routing table is known.
pub fn build_jobspec(args: &SubmitArgs) -> Result<Jobspec> {
    let mut jobspec = match &args.jobspec {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading jobspec {}", path.display()))?;
            shardsched_jobspec::parse(&text)
                .with_context(|| format!("jobspec {}", path.display()))?
        }
        None => {
            if args.command.is_empty() {
                bail!(
                    "no command: give the job's command after `--`, e.g. \
                     `shardsched submit -N 1 -t 1m -- sleep 60`"
                );
            }
            Shorthand {
                nodes: args.nodes,
                tasks: args.tasks,
                cores_per_task: args.cores_per_task,
                gpus_per_task: args.gpus_per_task,
                duration: 0,
                exclusive: args.exclusive,
                command: args.command.clone(),
                queue: None,
            }
            .to_jobspec()
            .context("building the jobspec from the command line")?
        }
    };
    if let Some(seconds) = args.time_limit {
        jobspec.attributes.duration = seconds;
    }
    if args.requeue {
        jobspec
            .attributes
            .system_other
            .insert("requeue".into(), serde_json::Value::Bool(true));
    }
    Ok(jobspec)
}

/// The queue a job goes to: `-q`, else the jobspec's, else the table's default.
fn choose_queue(args: &SubmitArgs, jobspec: &Jobspec, routes: &RouteTable) -> Result<String> {
    let queue = args
        .queue
        .clone()
        .or_else(|| jobspec.attributes.queue.clone())
        .or_else(|| routes.default_queue.clone())
        .ok_or_else(|| {
            anyhow!(
                "no queue given and the cluster has no default queue: use -q ({})",
                queue_names(routes)
            )
        })?;
    Ok(queue)
}

fn queue_names(routes: &RouteTable) -> String {
    let names: Vec<&str> = routes.routes.iter().map(|r| r.queue.as_str()).collect();
    if names.is_empty() {
        "no queue has a shard running".to_owned()
    } else {
        format!("routable queues: {}", names.join(", "))
    }
}

/// Submits `jobspec_json` to `queue`'s shard with `key`, retrying on connection failures
/// with the same key (so at most one job results). `routes` is a fresh routing table if the
/// caller has one; retries fetch their own. Returns the id and whether the shard recognised
/// the key from an earlier attempt.
pub async fn submit(
    client: &Client,
    routes: Option<RouteTable>,
    queue: &str,
    jobspec_json: String,
    priority: Option<u32>,
    key: IdempotencyKey,
) -> Result<(JobId, bool)> {
    let request = Request::Submit(Submit {
        idempotency_key: key,
        jobspec_json,
        priority,
    });
    super::check_locally(&request)?;
    let mut routes = routes;
    let mut retry = Retry::new();
    let mut attempt = 1;
    loop {
        let table = match routes.take() {
            Some(table) => Ok(table),
            None => client.routes_now().await,
        };
        // A coordinator that does not answer is likely restarting; the shards it named are
        // likely where they were.
        let table = table.or_else(|e| client.known_routes().ok_or(e));
        let waiting_for = match table {
            // The coordinator is unreachable and no table is known: nothing was sent yet.
            Err(e) => e.context("the coordinator does not answer"),
            Ok(table) if table.offline.iter().any(|q| q == queue) => {
                anyhow!("queue {queue} is offline: its shard is not connected (restarting?)")
            }
            Ok(table) => {
                let Some(route) = table.queue(queue).cloned() else {
                    bail!("no queue {queue:?} ({})", queue_names(&table));
                };
                match try_submit(client, &route, queue, &request).await? {
                    Ok(done) => return Ok(done),
                    Err(failure) if attempt >= SUBMIT_ATTEMPTS_MAX => {
                        return Err(failure.context(format!(
                            "submitting to queue {queue}: gave up after {attempt} attempts"
                        )));
                    }
                    Err(failure) => {
                        attempt += 1;
                        client.forget_shard(queue).await;
                        failure.context(format!("submit to queue {queue} failed"))
                    }
                }
            }
        };
        if retry.spent() {
            return Err(waiting_for.context(format!(
                "submitting to queue {queue}: gave up after waiting {} s",
                retry.elapsed().as_secs()
            )));
        }
        super::output::say(format_args!("{waiting_for:#}; retrying"));
        retry.wait().await;
    }
}

/// One submit attempt: `Ok(Ok(answer))`, or `Ok(Err(why))` when the connection failed in a
/// way a retry with the same key may fix, or `Err` when retrying cannot help.
async fn try_submit(
    client: &Client,
    route: &Route,
    queue: &str,
    request: &Request,
) -> Result<Result<(JobId, bool)>> {
    let failure = match client.shard(route).await {
        Ok(session) => match session.request(request).await {
            Ok(Response::Submitted { id, duplicate }) => return Ok(Ok((id, duplicate))),
            Ok(other) => bail!("queue {queue}'s shard answered a submit with {other:?}"),
            Err(WireError::Refused(refusal)) => {
                return Err(match refusal.code {
                    // The shard's reason usually names the queue already.
                    RefusalCode::Denied if refusal.message.contains(queue) => {
                        anyhow!("{}", refusal.message)
                    }
                    RefusalCode::Denied => {
                        anyhow!("job denied by queue {queue}: {}", refusal.message)
                    }
                    // A disabled queue: the admin's reason, as the routing table has it.
                    _ if !route.enabled && !route.reason.is_empty() => anyhow!(
                        "queue {queue} refused the job: {} (disabled: {})",
                        describe_refusal(&refusal),
                        route.reason
                    ),
                    _ => anyhow!(
                        "queue {queue} refused the job: {}",
                        describe_refusal(&refusal)
                    ),
                });
            }
            Err(e) if retryable(&e) => anyhow::Error::new(e),
            Err(e) => {
                return Err(
                    anyhow::Error::new(e).context(format!("submitting to queue {queue}'s shard"))
                );
            }
        },
        // Could not connect: the shard may be restarting; the job was not sent.
        Err(e) => e,
    };
    Ok(Err(failure))
}
