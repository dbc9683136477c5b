//! `Released` reports to the coordinator: sent once the batch that released the nodes is
//! durable, repeated until acknowledged (they are idempotent), on whichever registration
//! connection is current. A report lost with a connection is not lost for the move: a
//! re-registering shard is asked about every outgoing node again (`Release` is re-sent
//! and answered `FreeAt::Now`).

use std::sync::{Arc, Mutex};

use shardsched_proto::Session;
use shardsched_proto::failpoint;
use shardsched_proto::msg::shard_coord::{self, Released};
use tokio::sync::Notify;

use crate::limits::{RELEASED_PENDING_MAX, RELEASED_RESEND_INTERVAL};

/// Reports waiting for the coordinator's acknowledgement (shared by the publisher, which
/// adds, and the reporter of the current connection, which sends and removes).
#[derive(Clone, Default)]
pub(crate) struct ReleasedQueue {
    pending: Arc<Mutex<Vec<Released>>>,
    added: Arc<Notify>,
}

impl ReleasedQueue {
    /// Queues reports (the oldest are dropped beyond [`RELEASED_PENDING_MAX`]: the
    /// coordinator re-asks about outgoing nodes anyway).
    pub(crate) fn push(&self, reports: Vec<Released>) {
        if reports.is_empty() {
            return;
        }
        if let Ok(mut pending) = self.pending.lock() {
            pending.extend(reports);
            let over = pending.len().saturating_sub(RELEASED_PENDING_MAX);
            if over > 0 {
                tracing::warn!(dropped = over, "too many unacknowledged Released reports");
                pending.drain(..over);
            }
        }
        self.added.notify_one();
    }

    fn snapshot(&self) -> Vec<Released> {
        self.pending.lock().map(|p| p.clone()).unwrap_or_default()
    }

    fn acknowledged(&self, report: &Released) {
        if let Ok(mut pending) = self.pending.lock()
            && let Some(i) = pending.iter().position(|r| r == report)
        {
            pending.remove(i);
        }
    }
}

/// Sends the queue's reports on `session` until it closes.
pub(crate) async fn report(session: Session, queue: ReleasedQueue) {
    loop {
        let pending = queue.snapshot();
        for r in &pending {
            failpoint::hit("shard.released.before_send");
            match session
                .request(&shard_coord::Request::Released(r.clone()))
                .await
            {
                Ok(_) => {
                    queue.acknowledged(r);
                    failpoint::hit("shard.released.after_ack");
                }
                Err(shardsched_proto::Error::Refused(refusal)) => {
                    // Refused, not lost: sending it again would be refused again (the
                    // coordinator re-asks about outgoing nodes if it still needs to know).
                    tracing::warn!(move_id = ?r.move_id, %refusal, "Released refused by the coordinator; dropped");
                    queue.acknowledged(r);
                }
                Err(e) => {
                    tracing::debug!(error = %e, move_id = ?r.move_id, "Released not acknowledged");
                    if session.connection().close_reason().is_some() {
                        return;
                    }
                    break;
                }
            }
        }
        if queue.snapshot().is_empty() {
            queue.added.notified().await;
        } else {
            tokio::select! {
                () = queue.added.notified() => {}
                () = tokio::time::sleep(RELEASED_RESEND_INTERVAL) => {}
            }
        }
    }
}
