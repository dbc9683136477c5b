//! The shard's link to the coordinator: registration (with the journal's held nodes and
//! last job id), the coordinator's commands and the status and `Released` reports on that
//! connection, and — when it is lost — registering again and handing the new assignment
//! to the core task, until shutdown, a restart or the coordinator is lost for good.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use shardsched_proto::backoff::Backoff;
use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::msg::RefusalCode;
use shardsched_proto::msg::shard_coord::{self, Assignment, Register, ShardStatus};
use shardsched_proto::{Error, Role, Session, connect, serve};
use tokio::sync::{oneshot, watch};

use super::core_task::Command;
use super::tasks::Tasks;
use super::{ShardOptions, released, serve as handlers};
use crate::error::DriverError;
use crate::journal::Restored;
use crate::limits::{
    COORDINATOR_LOST_AFTER, RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN, RESTART_ACK_LINGER,
};
use crate::status_rows::SentRows;

/// The link: where the coordinator is, and what this shard tells it when registering.
pub(super) struct Link<'a> {
    options: &'a ShardOptions,
    endpoint: &'a quinn::Endpoint,
    register: Register,
}

impl<'a> Link<'a> {
    /// A link that registers `listen` for the queue, holding what the journal says.
    pub(super) fn new(
        options: &'a ShardOptions,
        endpoint: &'a quinn::Endpoint,
        listen: SocketAddr,
        restored: &Restored,
    ) -> Link<'a> {
        let register = Register {
            queue: options.queue.clone(),
            listen,
            held: restored.held(),
            last_job_id: restored.last_id,
        };
        Link {
            options,
            endpoint,
            register,
        }
    }

    /// Registers (at start, or again after the connection was lost), retrying for up to
    /// [`COORDINATOR_LOST_AFTER`]: `None` if shutdown came first.
    pub(super) async fn register<S: Future<Output = ()>>(
        &self,
        shutdown: &mut Pin<&mut S>,
    ) -> Result<Option<(Session, Assignment)>, DriverError> {
        tokio::select! {
            () = shutdown.as_mut() => Ok(None),
            registered = self.register_with_retry() => registered.map(Some),
        }
    }

    /// Serves the coordinator on `session` (see the module documentation) until shutdown
    /// (`Ok`), a restart, the core task's end or the coordinator lost for good (`Err`).
    /// The core decides on a restart (a new configuration it cannot take in place, from a
    /// `Reconfigure` or a re-registration): its task then ends with
    /// [`DriverError::Restart`].
    pub(super) async fn serve<S: Future<Output = ()>>(
        &mut self,
        mut session: Session,
        tasks: &mut Tasks,
        shutdown: &mut Pin<&mut S>,
    ) -> Result<(), DriverError> {
        let queue = self.options.queue.as_str();
        let outcome = loop {
            tasks.coordinator.send_replace(Some(session.clone()));
            let on_link = serve_coordinator(&session, tasks);
            let lost = tokio::select! {
                () = shutdown.as_mut() => break Ok(()),
                ended = tasks.core_ended() => {
                    if matches!(ended, Err(DriverError::Restart)) {
                        // Let the acknowledgement leave before the connection closes.
                        tokio::time::sleep(RESTART_ACK_LINGER).await;
                    }
                    break ended;
                }
                lost = session.connection().closed() => lost,
            };
            on_link.abort();
            tracing::warn!(%queue, error = %Error::from(lost), "lost the coordinator; reconnecting");
            let (held_tx, held_rx) = oneshot::channel();
            if tasks.commands.send(Command::Held(held_tx)).await.is_ok()
                && let Ok((held, last_job_id)) = held_rx.await
            {
                self.register.held = held;
                self.register.last_job_id = last_job_id;
            }
            let (new_session, assignment) = match self.register(shutdown).await {
                Ok(Some(registered)) => registered,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            tracing::info!(%queue, "registered again");
            session = new_session;
            // A configuration changed while we were away (a coordinator restart with an
            // edited file, a Reconfigure that did not reach us) is the core's to take.
            let _ = tasks
                .commands
                .send(Command::Reassigned(Box::new(assignment)))
                .await;
        };
        session.close();
        outcome
    }

    /// Connects and registers, retrying with a doubling backoff for up to
    /// [`COORDINATOR_LOST_AFTER`].
    async fn register_with_retry(&self) -> Result<(Session, Assignment), DriverError> {
        let addr = self.options.coordinator;
        let started = Instant::now();
        let mut backoff = Backoff::new(RECONNECT_BACKOFF_MIN, RECONNECT_BACKOFF_MAX);
        loop {
            let last = match register_once(self.endpoint, addr, &self.register).await {
                Ok(registered) => return Ok(registered),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(why)) => why,
            };
            if started.elapsed() >= COORDINATOR_LOST_AFTER {
                return Err(DriverError::CoordinatorLost {
                    addr,
                    secs: COORDINATOR_LOST_AFTER.as_secs(),
                    last,
                });
            }
            tracing::info!(coordinator = %addr, error = %last, retry_in_ms = backoff.peek().as_millis() as u64, "coordinator not reached");
            tokio::time::sleep(backoff.next_wait()).await;
        }
    }
}

/// The tasks bound to one registration connection: serving the coordinator's commands and
/// sending status reports. Aborted together when the connection is lost.
struct OnLink(Vec<tokio::task::JoinHandle<()>>);

impl OnLink {
    fn abort(self) {
        for task in self.0 {
            task.abort();
        }
    }
}

fn serve_coordinator(session: &Session, tasks: &Tasks) -> OnLink {
    let (status, released) = (&tasks.status, &tasks.released);
    let (commands, snapshot) = (tasks.commands.clone(), Arc::clone(&tasks.snapshot));
    let serving = tokio::spawn({
        let session = session.clone();
        async move {
            let served = serve(session, move |peer, request| {
                handlers::coordinator_request(
                    commands.clone(),
                    Arc::clone(&snapshot),
                    peer,
                    request,
                )
            })
            .await;
            if let Err(e) = served {
                tracing::debug!(error = %e, "coordinator connection ended");
            }
        }
    });
    let mut status = status.clone();
    status.mark_changed();
    let reporting = tokio::spawn(report_status(session.clone(), status));
    let releasing = tokio::spawn(released::report(session.clone(), released.clone()));
    OnLink(vec![serving, reporting, releasing])
}

/// Sends every status report the core task hands out (it bounds their rate), one at a
/// time, each as the change since the last one acknowledged on this connection
/// ([`SentRows`]): the first whole.
async fn report_status(session: Session, mut reports: watch::Receiver<Option<ShardStatus>>) {
    let mut sent = SentRows::default();
    let mut seq = 0;
    while reports.changed().await.is_ok() {
        let Some(mut report) = reports.borrow_and_update().clone() else {
            continue;
        };
        seq += 1;
        report.seq = seq;
        let rows = sent.reduce(&mut report);
        match session
            .request(&shard_coord::Request::Status(Box::new(report)))
            .await
        {
            Ok(_) => sent.acknowledged(rows),
            Err(e) => {
                sent.forget();
                tracing::debug!(error = %e, "status report not delivered");
                if session.connection().close_reason().is_some() {
                    return;
                }
            }
        }
    }
}

/// Why one registration attempt failed.
enum Attempt {
    /// Worth trying again (coordinator not up yet, network).
    Retry(String),
    /// Trying again would not help (refused, wrong certificates).
    Fatal(DriverError),
}

async fn register_once(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    register: &Register,
) -> Result<(Session, Assignment), Attempt> {
    let session = match connect(endpoint, addr, Role::Coordinator, COORDINATOR_NAME).await {
        Ok(session) => session,
        Err(e @ (Error::Handshake(_) | Error::Identity(_) | Error::PeerVersionMismatch { .. })) => {
            return Err(Attempt::Fatal(e.into()));
        }
        Err(e) => return Err(Attempt::Retry(e.to_string())),
    };
    let answer = session
        .request(&shard_coord::Request::Register(register.clone()))
        .await;
    match answer {
        Ok(shard_coord::Response::Registered(assignment)) => Ok((session, *assignment)),
        Ok(other) => Err(Attempt::Fatal(DriverError::Refused(format!(
            "unexpected answer to register: {other:?}"
        )))),
        Err(Error::Refused(r)) if r.code != RefusalCode::Unavailable => {
            Err(Attempt::Fatal(DriverError::Refused(r.message)))
        }
        Err(e) => {
            session.close();
            Err(Attempt::Retry(e.to_string()))
        }
    }
}
