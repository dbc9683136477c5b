//! A connected shard as the core task sees it: its session, and a queue of the commands
//! that change its state, sent one at a time in the order the core task queued them.
//!
//! Queue states, node flags, reconfigurations and removal checks must reach a shard in the
//! order they were decided (a `disable` overtaken by an earlier `enable` would leave the
//! queue enabled), so they go through the link's queue ([`Link::send_ordered`]). Move
//! commands need no such order — each carries its move, node and generation, and the shard
//! takes them idempotently — and neither do read-only questions: those use the session
//! directly ([`ask`]).

use std::time::Duration;

use shardsched_proto::msg::{Refusal, RefusalCode, coord_shard};
use shardsched_proto::{Error, Session};
use tokio::sync::{mpsc, oneshot};

use super::SHARD_COMMAND_TIMEOUT;

/// Ordered commands waiting for one shard; past it, a command is refused as busy at once.
pub const ORDERED_COMMANDS_MAX: usize = 64;

/// A shard's answer to a command, or why there is none.
pub(super) type Answer = Result<coord_shard::Response, Refusal>;

/// See the module documentation.
#[derive(Clone)]
pub(super) struct Link {
    session: Session,
    ordered: mpsc::Sender<(coord_shard::Request, oneshot::Sender<Answer>)>,
}

impl Link {
    /// The link of a shard that just connected; its queue's task ends once the link and
    /// every copy of it are dropped.
    pub(super) fn start(session: Session) -> Link {
        let (ordered, mut queued) =
            mpsc::channel::<(coord_shard::Request, oneshot::Sender<Answer>)>(ORDERED_COMMANDS_MAX);
        let sender = session.clone();
        tokio::spawn(async move {
            while let Some((request, answer)) = queued.recv().await {
                let _ = answer.send(ask(&sender, &request, SHARD_COMMAND_TIMEOUT).await);
            }
        });
        Link { session, ordered }
    }

    /// The shard's session.
    pub(super) fn session(&self) -> &Session {
        &self.session
    }

    /// Queues `request` behind every ordered command queued before it; its answer (or
    /// why there is none) comes on the receiver.
    pub(super) fn send_ordered(&self, request: coord_shard::Request) -> oneshot::Receiver<Answer> {
        let (answer, receiver) = oneshot::channel();
        if let Err(e) = self.ordered.try_send((request, answer)) {
            let (_, answer) = e.into_inner();
            let _ = answer.send(Err(Refusal::new(
                RefusalCode::Unavailable,
                format!("{ORDERED_COMMANDS_MAX} commands are waiting for this shard"),
            )));
        }
        receiver
    }
}

/// Sends one command on `session` and waits at most `timeout` for its answer. A shard's
/// refusal comes back as it is (its code and message); anything else is `Unavailable`.
pub(super) async fn ask(
    session: &Session,
    request: &coord_shard::Request,
    timeout: Duration,
) -> Answer {
    match tokio::time::timeout(timeout, session.request(request)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(Error::Refused(r))) => Err(r),
        Ok(Err(e)) => Err(Refusal::new(RefusalCode::Unavailable, e.to_string())),
        Err(_) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("no answer within {} ms", timeout.as_millis()),
        )),
    }
}

/// The answer to a command queued with [`Link::send_ordered`].
pub(super) async fn answer_of(receiver: oneshot::Receiver<Answer>) -> Answer {
    receiver.await.unwrap_or_else(|_| {
        Err(Refusal::new(
            RefusalCode::Unavailable,
            "the shard's connection ended",
        ))
    })
}
