//! Request handlers: clients on the shard's own endpoint, the coordinator on the connection
//! the shard opened to register. Reads are answered from the snapshot at once; everything
//! that changes the core goes through the core task's queue.

use std::sync::Arc;

use arc_swap::ArcSwap;
use shardsched_proto::msg::{Refusal, RefusalCode, client_shard, coord_shard};
use shardsched_proto::{Peer, Reply, accept, serve};
use tokio::sync::{mpsc, oneshot};

use super::core_task::Command;
use super::output::OutputSource;
use crate::snapshot::Snapshot;

/// Accepts client connections until the endpoint closes; each is served on its own task.
pub(crate) async fn clients(
    endpoint: quinn::Endpoint,
    commands: mpsc::Sender<Command>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    output: OutputSource,
) {
    while let Some(incoming) = endpoint.accept().await {
        let commands = commands.clone();
        let snapshot = Arc::clone(&snapshot);
        let output = output.clone();
        tokio::spawn(async move {
            let session = match accept(incoming).await {
                Ok(session) => session,
                Err(e) => {
                    tracing::info!(error = %e, "refused a connection");
                    return;
                }
            };
            let peer = session.peer().clone();
            tracing::debug!(%peer, "client connected");
            let served = serve(session, move |peer, request| {
                let output = output.clone();
                client_request(
                    commands.clone(),
                    Arc::clone(&snapshot),
                    output,
                    peer,
                    request,
                )
            })
            .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "client connection ended");
            }
        });
    }
}

/// One client request.
pub(crate) async fn client_request(
    commands: mpsc::Sender<Command>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    output: OutputSource,
    peer: Peer,
    request: client_shard::Request,
) -> Reply<client_shard::Response> {
    use client_shard::{Request, Response};
    match request {
        request @ (Request::Submit(_) | Request::Cancel { .. } | Request::Urgency { .. }) => {
            ask(&commands, |reply| Command::Client {
                peer,
                request,
                reply,
                span: tracing::Span::current(),
            })
            .await
        }
        Request::Jobs(query) => Ok(Response::Jobs(snapshot.load().jobs(&peer.name, &query))),
        Request::Output(query) => {
            let snapshot = snapshot.load_full();
            super::output::read(&output, &snapshot, &peer, query)
                .await
                .map(Response::Output)
        }
        Request::JobInfo { id } => {
            let snapshot = snapshot.load();
            snapshot
                .job_info(id)
                .map(|info| {
                    // Private unless the peer owns the job or is an admin.
                    let info = if peer.may_read_job(&info.summary.owner) {
                        info
                    } else {
                        info.summary_only()
                    };
                    Response::JobInfo(Box::new(info))
                })
                .ok_or_else(|| {
                    Refusal::new(
                        RefusalCode::NotFound,
                        format!("no job {id} in queue {}", snapshot.queue()),
                    )
                })
        }
    }
}

/// One coordinator command. Everything but the reads (the jobs list, history, job facts:
/// from the snapshot) goes through the core task, a dry run and a reconfiguration too: they
/// read the queue manager (a reconfiguration the core cannot take in place ends the core
/// task for a restart, once its acknowledgement is out).
pub(crate) async fn coordinator_request(
    commands: mpsc::Sender<Command>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    peer: Peer,
    request: coord_shard::Request,
) -> Reply<coord_shard::Response> {
    use coord_shard::{Request, Response};
    match request {
        Request::Jobs(query) => Ok(Response::Jobs(snapshot.load().jobs(&peer.name, &query))),
        Request::History(pull) => Ok(Response::History(snapshot.load().history(&pull))),
        // What is durable: another queue's job is released only on a fact that survives
        // this shard's crash.
        Request::JobFacts { ids } => Ok(Response::JobFacts(snapshot.load().job_facts(&ids))),
        request => {
            let span = tracing::Span::current();
            ask(&commands, |reply| Command::Coordinator {
                request,
                reply,
                span,
            })
            .await
        }
    }
}

/// Sends a command to the core task and waits for its answer.
async fn ask<T>(
    commands: &mpsc::Sender<Command>,
    make: impl FnOnce(oneshot::Sender<Reply<T>>) -> Command,
) -> Reply<T> {
    let stopping = || Refusal::new(RefusalCode::Unavailable, "the shard is shutting down");
    let (reply, answer) = oneshot::channel();
    commands.send(make(reply)).await.map_err(|_| stopping())?;
    answer.await.map_err(|_| stopping())?
}
