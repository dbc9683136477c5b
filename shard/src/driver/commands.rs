//! The requests the core task takes ([`Command`]), and how each becomes one call of the
//! core and, for those that wait for one, an [`Answer`] held until the batch is durable.
//! One match, one core call per request: the core's own dispatch
//! ([`ShardCore::handle_client`], [`ShardCore::handle_coordinator`]), which the simulator
//! drives too.

use shardsched_proto::failpoint;
use shardsched_proto::msg::shard_coord::{Assignment, HeldNode};
use shardsched_proto::msg::{JobId, client_shard, coord_shard};
use shardsched_proto::{Peer, Reply};
use shardsched_telemetry::logs::move_span;
use tokio::sync::oneshot;

use crate::core::ShardCore;
use crate::exec::JobEnd;

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
            let answer = span.in_scope(|| core.handle_client(now, &peer, &request));
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
        Command::Reassigned(assignment) => core.reassigned(&assignment),
        Command::Held(reply) => {
            let _ = reply.send((core.held(), core.last_job_id()));
        }
        Command::Stop => return true,
    }
    false
}

/// One coordinator request, one core call ([`ShardCore::handle_coordinator`]); a move
/// command runs inside its move's span, also returns its step (see
/// [`Answer::Coordinator`]), and hits `shard.<step>.before_apply` before anything changes
/// (`shard.drain.before_apply` for a drain).
fn coordinator(
    core: &mut ShardCore,
    now: u64,
    request: &coord_shard::Request,
) -> (Reply<coord_shard::Response>, Option<&'static str>) {
    let step = request.move_step();
    let _move = step.map(|step| move_span(request, step).entered());
    match step {
        Some(step) => {
            tracing::debug!("move step");
            failpoint::hit(format_args!("shard.{step}.before_apply"));
        }
        None if matches!(request, coord_shard::Request::SetNodeDrain { .. }) => {
            failpoint::hit("shard.drain.before_apply");
        }
        None => {}
    }
    (core.handle_coordinator(now, request), step)
}
