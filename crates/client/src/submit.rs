//! A submit that rides out restarts.
//!
//! A submit carries a random idempotency key ([`crate::new_key`]) chosen once per job. If the
//! connection fails before the answer arrives, the job may or may not have been accepted;
//! retrying with the **same** key makes the shard return the first job instead of making a
//! second one, so a retried submit is safe. Retries refresh the routing table first, since a
//! shard that restarted listens at a new address.
//!
//! A queue whose shard is restarting is `offline` in the routing table, and a coordinator that
//! is restarting does not answer: both are waited out ([`crate::retry`]: a doubling backoff
//! for up to [`RETRY_WINDOW`](crate::retry::RETRY_WINDOW)); after that the submit fails and
//! says which one it waited for. While the coordinator does not answer, the job goes to the
//! shard named by the last routing table this client got, which is most likely still there.
//! Connection failures on the submit itself are retried at most [`SUBMIT_ATTEMPTS_MAX`]
//! times.
//!
//! A table from the client's cache ([`Known::Cached`], [`crate::route_cache`]) is tried
//! once: if the shard it names cannot be reached or refuses the job for a reason a fresh
//! table could change (it is not ready, it knows no such queue), the cache is dropped and
//! the submit starts again, at once, from the coordinator's table (same request, same key: a
//! refused submit made no job, and one whose answer was lost is recognised). A refusal that
//! is the queue's own decision (denied, invalid, forbidden, a policy) is the answer: the
//! handshake proved the shard is the queue's, and the coordinator's table leads to it again.

use anyhow::{Result, anyhow, bail};
use shardsched_proto::Error as WireError;
use shardsched_proto::msg::client_shard::{Request, Response, Submit};
use shardsched_proto::msg::{JobId, RefusalCode, Route, RouteTable};

use crate::retry::{Retry, retryable};
use crate::{Client, check_locally, describe_refusal, output};

/// Most attempts one submit makes on a shard (the first try and its retries) before giving
/// up.
pub const SUBMIT_ATTEMPTS_MAX: u32 = 5;

/// The queues a table routes, for messages.
pub fn queue_names(routes: &RouteTable) -> String {
    let names: Vec<&str> = routes.routes.iter().map(|r| r.queue.as_str()).collect();
    if names.is_empty() {
        "no queue has a shard running".to_owned()
    } else {
        format!("routable queues: {}", names.join(", "))
    }
}

/// `jobspec_json` as a plain submit (no urgency, no array) with a fresh idempotency key;
/// [`submit`] signs it.
pub fn plain(jobspec_json: String) -> Submit {
    Submit {
        idempotency_key: crate::new_key(),
        jobspec_json,
        urgency: None,
        array: None,
        signature: None,
    }
}

/// A routing table a caller already has, and where it came from.
#[derive(Clone, Debug)]
pub enum Known {
    /// Just asked of the coordinator.
    Fresh(RouteTable),
    /// From the client's cache ([`Client::cached_routes`]): tried once, then asked again.
    Cached(RouteTable),
}

/// Signs `submit` (replacing any signature it has) and submits it to `queue`'s shard,
/// retrying on connection failures with its key (so at most one job results). `routes` is a
/// routing table if the caller has one; retries fetch their own. Returns the id and
/// whether the shard recognised the key from an earlier attempt.
pub async fn submit(
    client: &Client,
    routes: Option<Known>,
    queue: &str,
    submit: Submit,
) -> Result<(JobId, bool)> {
    let mut submit = submit;
    submit.signature = client.sign(&submit.jobspec_json)?;
    let request = Request::Submit(submit);
    check_locally(&request)?;
    let mut routes = routes;
    let mut retry = Retry::new();
    let mut attempt = 1;
    loop {
        let (table, cached) = match routes.take() {
            Some(Known::Fresh(table)) => (Ok(table), false),
            Some(Known::Cached(table)) => (Ok(table), true),
            None => (client.routes_now().await, false),
        };
        // A coordinator that does not answer is likely restarting; the shards it named are
        // likely where they were.
        let table = table.or_else(|e| client.known_routes().ok_or(e));
        let waiting_for = match table {
            // The coordinator is unreachable and no table is known: nothing was sent yet.
            Err(e) => e.context("the coordinator does not answer"),
            // The cached table does not route the queue: the coordinator's may.
            Ok(table) if cached && table.queue(queue).is_none() => {
                client.forget_cached_routes();
                continue;
            }
            Ok(table) if table.offline.iter().any(|q| q == queue) => {
                anyhow!("queue {queue} is offline: its shard is not connected (restarting?)")
            }
            Ok(table) => {
                let Some(route) = table.queue(queue).cloned() else {
                    bail!("no queue {queue:?} ({})", queue_names(&table));
                };
                match try_submit(client, &route, queue, &request).await {
                    Ok(Ok(done)) => return Ok(done),
                    // The cached table was only a guess: ask the coordinator, at once.
                    Ok(Err(_)) | Err(NotTaken { settled: false, .. }) if cached => {
                        client.forget_shard(queue).await;
                        client.forget_cached_routes();
                        continue;
                    }
                    Err(refused) => return Err(refused.error),
                    Ok(Err(failure)) if attempt >= SUBMIT_ATTEMPTS_MAX => {
                        return Err(failure.context(format!(
                            "submitting to queue {queue}: gave up after {attempt} attempts"
                        )));
                    }
                    Ok(Err(failure)) => {
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
        output::say(format_args!("{waiting_for:#}; retrying"));
        retry.wait().await;
    }
}

/// A submit the shard answered with something other than a job, or could not take.
struct NotTaken {
    error: anyhow::Error,
    /// The queue's own decision, whatever route led to its shard: a refusal denied,
    /// invalid, forbidden or by policy.
    settled: bool,
}

impl NotTaken {
    fn unsettled(error: anyhow::Error) -> NotTaken {
        NotTaken {
            error,
            settled: false,
        }
    }
}

/// One submit attempt: `Ok(Ok(answer))`, or `Ok(Err(why))` when the connection failed in a
/// way a retry with the same key may fix, or `Err` when retrying on this route cannot help.
async fn try_submit(
    client: &Client,
    route: &Route,
    queue: &str,
    request: &Request,
) -> Result<Result<(JobId, bool)>, NotTaken> {
    let failure = match client.shard(route).await {
        Ok(session) => match session.request(request).await {
            Ok(Response::Submitted { id, duplicate }) => return Ok(Ok((id, duplicate))),
            Ok(other) => {
                return Err(NotTaken::unsettled(anyhow!(
                    "queue {queue}'s shard answered a submit with {other:?}"
                )));
            }
            Err(WireError::Refused(refusal)) => {
                let settled = matches!(
                    refusal.code,
                    RefusalCode::Denied
                        | RefusalCode::Invalid
                        | RefusalCode::Forbidden
                        | RefusalCode::Policy
                );
                let error = match refusal.code {
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
                };
                return Err(NotTaken { error, settled });
            }
            Err(e) if retryable(&e) => anyhow::Error::new(e),
            Err(e) => {
                return Err(NotTaken::unsettled(
                    anyhow::Error::new(e).context(format!("submitting to queue {queue}'s shard")),
                ));
            }
        },
        // Could not connect: the shard may be restarting; the job was not sent.
        Err(e) => e,
    };
    Ok(Err(failure))
}
