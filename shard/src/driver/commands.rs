//! The requests the core task takes ([`Command`]), and how each becomes one call of the
//! core and, for those that wait for one, an [`Answer`] held until the batch is durable.
//! One match, one core call per request: no second dispatch.

use shardsched_proto::failpoint;
use shardsched_proto::msg::shard_coord::{Assignment, HeldNode};
use shardsched_proto::msg::{JobId, Refusal, RefusalCode, client_shard, coord_shard};
use shardsched_proto::rpc::Rpc;
use shardsched_proto::{Peer, Reply};
use shardsched_telemetry::logs::move_span;
use tokio::sync::oneshot;

use crate::core::ShardCore;
use crate::exec::JobEnd;
use crate::nodes::Flag;

/// A request for the core task.
#[derive(Debug)]
pub(crate) enum Command {
    /// A client's request that changes the core (submit, cancel, urgency; reads are answered from
    /// the snapshot and never come here). `peer` is who asks, from its certificate.
    Client {
        peer: Peer,
        request: client_shard::Request,
        reply: oneshot::Sender<Reply<client_shard::Response>>,
        /// The request's span: what the core logs for it is logged inside.
        span: tracing::Span,
    },
    /// A coordinator's request the core answers: queue state, removal, node flags, dry
    /// runs, move commands.
    Coordinator {
        request: coord_shard::Request,
        reply: oneshot::Sender<Reply<coord_shard::Response>>,
        /// The request's span.
        span: tracing::Span,
    },
    /// A re-registration's answer: apply queue state, ownership and generator id.
    Reassigned(Box<Assignment>),
    /// What to tell the coordinator when re-registering.
    Held(oneshot::Sender<(Vec<HeldNode>, Option<JobId>)>),
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
    /// With a move command's step: the failpoint `shard.<step>.before_answer` is hit once
    /// the answer is durable, just before it is sent.
    Coordinator(
        oneshot::Sender<Reply<coord_shard::Response>>,
        Reply<coord_shard::Response>,
        Option<&'static str>,
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
        Command::Client {
            peer,
            request,
            reply,
            span,
        } => {
            let answer = span.in_scope(|| client(core, now, &peer, request));
            answers.push(Answer::Client(reply, answer));
        }
        Command::Coordinator {
            request,
            reply,
            span,
        } => {
            let (result, step) = span.in_scope(|| coordinator(core, now, &request));
            answers.push(Answer::Coordinator(reply, result, step));
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

/// One client request, one core call.
fn client(
    core: &mut ShardCore,
    now: u64,
    peer: &Peer,
    request: client_shard::Request,
) -> Reply<client_shard::Response> {
    use client_shard::{Request, Response};
    match request {
        Request::Submit(submit) => {
            core.handle_submit(now, &peer.name, &submit)
                .map(|s| Response::Submitted {
                    id: s.id,
                    duplicate: s.duplicate,
                })
        }
        Request::Cancel { ids } => Ok(Response::Cancelled(core.handle_cancel(now, peer, &ids))),
        Request::Urgency { ids, change } => Ok(Response::Urgency(
            core.handle_urgency(now, peer, &ids, change),
        )),
        Request::Jobs(_) | Request::JobInfo { .. } => Err(answered_by_the_driver(request.kind())),
    }
}

/// One coordinator request, one core call; a move command also returns its step (see
/// [`Answer::Coordinator`]).
fn coordinator(
    core: &mut ShardCore,
    now: u64,
    request: &coord_shard::Request,
) -> (Reply<coord_shard::Response>, Option<&'static str>) {
    use coord_shard::{Request, Response};
    let ack = |()| Response::Ack { stale: Vec::new() };
    let result = match request {
        Request::SetQueueState { enabled, started } => {
            core.set_queue_state(*enabled, *started);
            Ok(ack(()))
        }
        Request::DisableIfIdle => core.disable_if_idle().map(ack),
        Request::SetNodeState {
            nodes,
            down,
            reason,
        } => core
            .set_node_flag(now, nodes, Flag::Down, down.then_some(reason.as_str()))
            .map(ack),
        Request::SetNodeDrain {
            nodes,
            drained,
            reason,
        } => {
            failpoint::hit("shard.drain.before_apply");
            core.set_node_flag(
                now,
                nodes,
                Flag::Drained,
                drained.then_some(reason.as_str()),
            )
            .map(ack)
        }
        Request::DryRunRelease { nodes } => core.dry_run_release(nodes).map(Response::DryRun),
        Request::Release(r) => return step("release", request, || core.handle_release(now, r)),
        Request::Incoming(r) => {
            return step("incoming", request, || core.handle_incoming(now, r));
        }
        Request::Acquire(r) => return step("acquire", request, || core.handle_acquire(now, r)),
        Request::Reclaim(r) => return step("reclaim", request, || core.handle_reclaim(now, r)),
        Request::Withdraw(r) => {
            return step("withdraw", request, || core.handle_withdraw(now, r));
        }
        Request::CancelJobs(r) => {
            return step("cancel_jobs", request, || core.handle_cancel_jobs(now, r));
        }
        Request::Reconfigure(_) | Request::Jobs(_) | Request::History(_) => {
            Err(answered_by_the_driver(request.kind()))
        }
    };
    (result, None)
}

/// The refusal for a request the driver answers itself (reads from the snapshot, a
/// reconfiguration's restart), should one reach the core task.
fn answered_by_the_driver(kind: &str) -> Refusal {
    Refusal::new(
        RefusalCode::Internal,
        format!("{kind} is answered by the driver, not by the core task"),
    )
}

/// A move command's step: hits `shard.<step>.before_apply` before anything changes, then
/// applies it inside the move's span; `shard.<step>.before_answer` is hit once the answer
/// is durable, just before it is sent (see [`Answer::Coordinator`]).
fn step(
    step: &'static str,
    request: &coord_shard::Request,
    apply: impl FnOnce() -> coord_shard::Response,
) -> (Reply<coord_shard::Response>, Option<&'static str>) {
    let _move = move_span(request, step).entered();
    tracing::debug!("move step");
    failpoint::hit(format_args!("shard.{step}.before_apply"));
    (Ok(apply()), Some(step))
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
        tracing::warn!("the queue's policies changed; restart the shard to apply them");
    }
    core.set_queue_state(queue.enabled, queue.started);
    core.apply_assignment(
        &assignment.owned,
        &assignment.incoming,
        Some(&assignment.flags),
    );
    if let Err(e) = core.set_generator_id(assignment.generator_id) {
        tracing::error!(error = %e, "cannot use the new generator id");
    }
}
