//! The task that owns the [`ShardCore`]: it takes requests in batches, runs one scheduling
//! pass per batch, publishes the snapshot, then answers.
//!
//! ```text
//! loop:
//!   wait for a request, or the core's next wakeup, or the next status report
//!   take it and every request already queued (≤ BATCH_REQUESTS_MAX) → ShardCore::handle_*
//!   ShardCore::tick(now)                  scheduling, once for the whole batch
//!   snapshot.store(core.snapshot())       reads see the batch's jobs …
//!   answer the batch                      … before their submitters hear back
//!   hand a status report to the reporter  (at most every STATUS_INTERVAL_MIN)
//!   exec executor: hand the core's launches and kills to the exec task
//! ```

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use shardsched_proto::msg::shard_coord::{Assignment, HeldNode, ShardStatus};
use shardsched_proto::msg::{JobId, client_shard, coord_shard};
use shardsched_proto::{Peer, Reply};
use tokio::sync::{mpsc, oneshot, watch};

use super::exec_task::ExecRequest;
use crate::core::{ExecAction, ShardCore};
use crate::exec::JobEnd;
use crate::limits::{BATCH_REQUESTS_MAX, STATUS_INTERVAL_MAX, STATUS_INTERVAL_MIN};
use crate::snapshot::Snapshot;

/// Longest the task sleeps without looking at the clock again (a wakeup far in the future,
/// e.g. the end of a job of unlimited duration, is re-read after this).
const WAKE_AFTER_MAX: Duration = Duration::from_secs(3600);

/// A request for the core task.
#[derive(Debug)]
pub(crate) enum Command {
    /// A client submits; `owner` is its certificate name.
    Submit {
        owner: String,
        submit: client_shard::Submit,
        reply: oneshot::Sender<Reply<client_shard::Response>>,
    },
    /// A client cancels.
    Cancel {
        peer: Peer,
        ids: Vec<JobId>,
        reply: oneshot::Sender<Reply<client_shard::Response>>,
    },
    /// The coordinator enables/disables or starts/stops the queue.
    SetQueueState {
        enabled: bool,
        started: bool,
        reply: oneshot::Sender<Reply<coord_shard::Response>>,
    },
    /// A re-registration's answer: apply queue state, ownership and generator id.
    Reassigned(Box<Assignment>),
    /// What to tell the coordinator when re-registering.
    Held(oneshot::Sender<(Vec<HeldNode>, Option<JobId>)>),
    /// The coordinator marks nodes down or up.
    SetNodeState {
        nodes: Vec<String>,
        down: bool,
        reason: String,
        reply: oneshot::Sender<Reply<coord_shard::Response>>,
    },
    /// Exec executor: a job's processes are gone.
    JobEnded { id: JobId, end: JobEnd },
    /// Finish the current batch and stop.
    Stop,
}

/// An answer held back until the batch's snapshot is published.
enum Answer {
    Client(
        oneshot::Sender<Reply<client_shard::Response>>,
        Reply<client_shard::Response>,
    ),
    Coordinator(
        oneshot::Sender<Reply<coord_shard::Response>>,
        Reply<coord_shard::Response>,
    ),
}

/// When the last status report was handed out, and what it showed.
#[derive(Default)]
struct StatusClock {
    last_ms: Option<u64>,
    last_version: Option<u64>,
}

/// Runs the core until [`Command::Stop`] or until every sender is gone. `exec` is the exec
/// task's queue in exec mode.
pub(crate) async fn run(
    mut core: ShardCore,
    mut commands: mpsc::Receiver<Command>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    status: watch::Sender<Option<ShardStatus>>,
    exec: Option<mpsc::Sender<ExecRequest>>,
) {
    let mut clock = StatusClock::default();
    let mut answers = Vec::new();
    if let Some(exec) = &exec {
        // Jobs already running (restored by a restart) are watched like new ones.
        for id in core.running_job_ids() {
            let _ = exec.send(ExecRequest::Watch(id)).await;
        }
    }
    loop {
        let wake_ms = [
            core.next_wakeup_ms(),
            Some(clock.due_ms(core.status_version())),
        ]
        .into_iter()
        .flatten()
        .min();
        let first = match wake_ms {
            Some(at) => {
                let sleep = tokio::time::sleep_until(until(at));
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(c) => Some(c),
                        None => break,
                    },
                    () = sleep => None,
                }
            }
            None => match commands.recv().await {
                Some(c) => Some(c),
                None => break,
            },
        };
        let now = now_ms();
        let mut stop = false;
        if let Some(command) = first {
            stop = handle(&mut core, now, command, &mut answers);
            let mut taken = 1;
            while !stop && taken < BATCH_REQUESTS_MAX {
                let Ok(command) = commands.try_recv() else {
                    break;
                };
                stop = handle(&mut core, now, command, &mut answers);
                taken += 1;
            }
        }
        if let Err(e) = core.tick(now) {
            tracing::error!(queue = %core.queue(), error = %e, "scheduling pass failed");
        }
        snapshot.store(Arc::new(core.snapshot()));
        for answer in answers.drain(..) {
            // A client that gave up waiting is not an error.
            let _ = match answer {
                Answer::Client(to, reply) => to.send(reply).is_ok(),
                Answer::Coordinator(to, reply) => to.send(reply).is_ok(),
            };
        }
        hand_exec_actions(&mut core, exec.as_ref()).await;
        if now >= clock.due_ms(core.status_version()) {
            clock.last_ms = Some(now);
            clock.last_version = Some(core.status_version());
            status.send_replace(Some(core.status(now)));
        }
        if stop {
            break;
        }
    }
    tracing::debug!(queue = %core.queue(), "core task stopped");
}

/// Applies one request; returns whether the task must stop after this batch.
fn handle(core: &mut ShardCore, now: u64, command: Command, answers: &mut Vec<Answer>) -> bool {
    match command {
        Command::Submit {
            owner,
            submit,
            reply,
        } => {
            let result = core.handle_submit(now, &owner, &submit).map(|s| {
                client_shard::Response::Submitted {
                    id: s.id,
                    duplicate: s.duplicate,
                }
            });
            answers.push(Answer::Client(reply, result));
        }
        Command::Cancel { peer, ids, reply } => {
            let outcomes = core.handle_cancel(now, &peer, &ids);
            answers.push(Answer::Client(
                reply,
                Ok(client_shard::Response::Cancelled(outcomes)),
            ));
        }
        Command::SetQueueState {
            enabled,
            started,
            reply,
        } => {
            core.set_queue_state(enabled, started);
            answers.push(Answer::Coordinator(
                reply,
                Ok(coord_shard::Response::Ack { stale: Vec::new() }),
            ));
        }
        Command::SetNodeState {
            nodes,
            down,
            reason,
            reply,
        } => {
            let result = core
                .set_node_state(now, &nodes, down, &reason)
                .map(|()| coord_shard::Response::Ack { stale: Vec::new() });
            answers.push(Answer::Coordinator(reply, result));
        }
        Command::JobEnded { id, end } => core.handle_job_ended(now, id, &end),
        Command::Reassigned(assignment) => reassigned(core, &assignment),
        Command::Held(reply) => {
            let _ = reply.send((core.held(), core.last_job_id()));
        }
        Command::Stop => return true,
    }
    false
}

/// Passes the core's launches and kills to the exec task (waiting when its queue is full:
/// it never waits on this task).
async fn hand_exec_actions(core: &mut ShardCore, exec: Option<&mpsc::Sender<ExecRequest>>) {
    for action in core.take_exec_actions() {
        let Some(exec) = exec else {
            tracing::error!(queue = %core.queue(), ?action, "an exec action in a shard without the exec executor");
            continue;
        };
        let request = match action {
            ExecAction::Launch(id) => match core.job(id) {
                Some(job) => ExecRequest::Launch(Box::new(job.clone())),
                None => continue,
            },
            ExecAction::Kill { id, why } => ExecRequest::Kill { id, why },
        };
        if exec.send(request).await.is_err() {
            tracing::error!(queue = %core.queue(), "the exec task is gone");
        }
    }
}

/// Applies what a re-registration handed back. The cluster and the queue's policies are
/// fixed for the life of the process: a change there needs a shard restart.
fn reassigned(core: &mut ShardCore, assignment: &Assignment) {
    let queue = &assignment.queue;
    let config = core.config();
    if (
        &config.queue_policy,
        &config.match_policy,
        config.queue_depth,
    ) != (&queue.queue_policy, &queue.match_policy, queue.queue_depth)
    {
        tracing::warn!(queue = %core.queue(), "the queue's policies changed; restart the shard to apply them");
    }
    core.set_queue_state(queue.enabled, queue.started);
    if let Err(e) = core.set_owned(&assignment.owned) {
        tracing::error!(queue = %core.queue(), error = %e, "cannot apply the new ownership");
    }
    if let Err(e) = core.set_generator_id(assignment.generator_id) {
        tracing::error!(queue = %core.queue(), error = %e, "cannot use the new generator id");
    }
}

impl StatusClock {
    /// When the next report is due: at once at first, then [`STATUS_INTERVAL_MIN`] after the
    /// last one if something changed, else [`STATUS_INTERVAL_MAX`] after it (a heartbeat).
    fn due_ms(&self, version: u64) -> u64 {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        match self.last_ms {
            None => 0,
            Some(last) if self.last_version != Some(version) => {
                last.saturating_add(ms(STATUS_INTERVAL_MIN))
            }
            Some(last) => last.saturating_add(ms(STATUS_INTERVAL_MAX)),
        }
    }
}

/// The wall clock, ms since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The tokio instant at wall-clock time `at_ms` (at most [`WAKE_AFTER_MAX`] away).
fn until(at_ms: u64) -> tokio::time::Instant {
    let wait = Duration::from_millis(at_ms.saturating_sub(now_ms())).min(WAKE_AFTER_MAX);
    tokio::time::Instant::now() + wait
}
