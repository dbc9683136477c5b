//! The requests the core task takes ([`Command`]), and how each becomes one call of the
//! core and, for those that wait for one, an [`Answer`] held until the batch is durable.
//! One match, one core call per request: no second dispatch.

use shardsched_proto::failpoint;
use shardsched_proto::msg::shard_coord::{Assignment, HeldNode};
use shardsched_proto::msg::{JobId, Refusal, RefusalCode, client_shard, coord_shard};
use shardsched_proto::rpc::Rpc;
use shardsched_proto::{Peer, Reply};
use tokio::sync::oneshot;

use crate::core::ShardCore;
use crate::exec::JobEnd;
use crate::nodes::Flag;

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
    /// The coordinator removes the queue: disable it if it holds no job.
    DisableIfIdle {
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
    /// A move command from the coordinator (Release, Incoming, Acquire, Reclaim,
    /// Withdraw, CancelJobs).
    Move {
        request: coord_shard::Request,
        reply: oneshot::Sender<Reply<coord_shard::Response>>,
    },
    /// The coordinator drains or undrains nodes.
    SetNodeDrain {
        nodes: Vec<String>,
        drained: bool,
        reason: String,
        reply: oneshot::Sender<Reply<coord_shard::Response>>,
    },
    /// What releasing these nodes would do (changes nothing).
    DryRunRelease {
        nodes: Vec<String>,
        reply: oneshot::Sender<Reply<coord_shard::Response>>,
    },
    /// Exec executor: a job's processes are gone.
    JobEnded { id: JobId, end: JobEnd },
    /// Finish the current batch and stop.
    Stop,
}

/// An answer held back until the batch's snapshot is published.
pub(crate) enum Answer {
    Client(
        oneshot::Sender<Reply<client_shard::Response>>,
        Reply<client_shard::Response>,
    ),
    Coordinator(
        oneshot::Sender<Reply<coord_shard::Response>>,
        Reply<coord_shard::Response>,
    ),
    /// A move command's answer, with its step: the failpoint `shard.<step>.before_answer`
    /// is hit once it is durable, just before it is sent.
    Move(
        oneshot::Sender<Reply<coord_shard::Response>>,
        Reply<coord_shard::Response>,
        &'static str,
    ),
}

/// Applies one request; returns whether the task must stop after this batch.
pub(crate) fn handle(
    core: &mut ShardCore,
    now: u64,
    command: Command,
    answers: &mut Vec<Answer>,
) -> bool {
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
        Command::DisableIfIdle { reply } => {
            let result = core
                .disable_if_idle()
                .map(|()| coord_shard::Response::Ack { stale: Vec::new() });
            answers.push(Answer::Coordinator(reply, result));
        }
        Command::SetNodeState {
            nodes,
            down,
            reason,
            reply,
        } => {
            let result = core
                .set_node_flag(now, &nodes, Flag::Down, down.then_some(reason.as_str()))
                .map(|()| coord_shard::Response::Ack { stale: Vec::new() });
            answers.push(Answer::Coordinator(reply, result));
        }
        Command::Move { request, reply } => {
            let (result, step) = handle_move(core, now, &request);
            answers.push(Answer::Move(reply, result, step));
        }
        Command::SetNodeDrain {
            nodes,
            drained,
            reason,
            reply,
        } => {
            failpoint::hit("shard.drain.before_apply");
            let result = core
                .set_node_flag(
                    now,
                    &nodes,
                    Flag::Drained,
                    drained.then_some(reason.as_str()),
                )
                .map(|()| coord_shard::Response::Ack { stale: Vec::new() });
            answers.push(Answer::Coordinator(reply, result));
        }
        Command::DryRunRelease { nodes, reply } => {
            let result = core
                .dry_run_release(&nodes)
                .map(coord_shard::Response::DryRun);
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

/// Applies one move command; returns the answer and its step (`release`, …, `move` for a
/// request that is not one), whose failpoint `shard.<step>.before_answer` is hit once the
/// answer is durable, just before it is sent. `shard.<step>.before_apply` is hit first,
/// before anything changes.
fn handle_move(
    core: &mut ShardCore,
    now: u64,
    request: &coord_shard::Request,
) -> (Reply<coord_shard::Response>, &'static str) {
    use coord_shard::Request;
    let (step, response) = match request {
        Request::Release(r) => applied("release", || core.handle_release(now, r)),
        Request::Incoming(r) => applied("incoming", || core.handle_incoming(now, r)),
        Request::Acquire(r) => applied("acquire", || core.handle_acquire(now, r)),
        Request::Reclaim(r) => applied("reclaim", || core.handle_reclaim(now, r)),
        Request::Withdraw(r) => applied("withdraw", || core.handle_withdraw(now, r)),
        Request::CancelJobs(r) => applied("cancel_jobs", || core.handle_cancel_jobs(now, r)),
        other => {
            let refusal = Refusal::new(
                RefusalCode::Invalid,
                format!("{} is not a move command", other.kind()),
            );
            return (Err(refusal), "move");
        }
    };
    (Ok(response), step)
}

/// Hits `shard.<step>.before_apply`, then applies the step.
fn applied<T>(step: &'static str, apply: impl FnOnce() -> T) -> (&'static str, T) {
    failpoint::hit(format_args!("shard.{step}.before_apply"));
    (step, apply())
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
    core.apply_assignment(
        &assignment.owned,
        &assignment.incoming,
        Some(&assignment.flags),
    );
    if let Err(e) = core.set_generator_id(assignment.generator_id) {
        tracing::error!(queue = %core.queue(), error = %e, "cannot use the new generator id");
    }
}
