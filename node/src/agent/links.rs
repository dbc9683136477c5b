//! The agent's connections: shards and other agents accepted (their requests to the core
//! task, their fences to the executor task), the coordinator's link (registration,
//! heartbeats, the owner it names), and the site's health check.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shardsched_node_core::pmi::Fence;
use shardsched_proto::msg::agent::{AgentReport, OwnerChange};
use shardsched_proto::msg::{RefusalCode, coord_node, node_coord, node_node, shard_node};
use shardsched_proto::{Peer, Role, Session, accept, connect, serve};
use tokio::sync::{Notify, mpsc, oneshot};

use super::{COORDINATOR_RETRY, Event, ExecInput, refusal};

/// Accepts shards and other agents.
pub(super) async fn accept_loop(
    endpoint: quinn::Endpoint,
    events: mpsc::Sender<Event>,
    exec: mpsc::UnboundedSender<ExecInput>,
) {
    while let Some(incoming) = endpoint.accept().await {
        let events = events.clone();
        let exec = exec.clone();
        tokio::spawn(async move {
            let session = match accept(incoming).await {
                Ok(session) => session,
                Err(e) => {
                    tracing::debug!(error = %e, "connection refused");
                    return;
                }
            };
            match session.peer().role {
                Role::Shard => serve_shard(session, events).await,
                Role::Node => serve_peer(session, exec).await,
                _ => session.close(),
            }
        });
    }
}

async fn serve_shard(session: Session, events: mpsc::Sender<Event>) {
    let _ = serve(session, move |peer: Peer, request: shard_node::Request| {
        let events = events.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            let event = Event::Shard {
                from: peer.name,
                request,
                reply,
            };
            if events.send(event).await.is_err() {
                return Err(refusal("the agent is stopping", RefusalCode::Unavailable));
            }
            answer
                .await
                .unwrap_or_else(|_| Err(refusal("the agent is stopping", RefusalCode::Unavailable)))
        }
    })
    .await;
}

async fn serve_peer(session: Session, exec: mpsc::UnboundedSender<ExecInput>) {
    let _ = serve(session, move |peer: Peer, request: node_node::Request| {
        let exec = exec.clone();
        async move {
            let (fence, done) = match request {
                node_node::Request::Fence(f) => (f, false),
                node_node::Request::FenceDone(f) => (f, true),
            };
            let _ = exec.send(ExecInput::Fence {
                from: peer.name,
                job: fence.job,
                fence: Fence {
                    epoch: fence.epoch,
                    kvs: fence.kvs,
                },
                done,
            });
            Ok(node_node::Response::Ack)
        }
    })
    .await;
}

/// Registers with the coordinator, sends heartbeats, and serves its `Owner` requests;
/// reconnects whenever the connection fails.
pub(super) async fn coordinator_link(
    endpoint: quinn::Endpoint,
    coordinator: SocketAddr,
    listen: SocketAddr,
    events: mpsc::Sender<Event>,
    heartbeat_now: Arc<Notify>,
) {
    loop {
        let registered =
            registered_session(&endpoint, coordinator, listen, &events, &heartbeat_now).await;
        if let Err(e) = registered {
            tracing::warn!(%coordinator, error = %e, "cannot reach the coordinator; retrying");
        }
        tokio::time::sleep(COORDINATOR_RETRY).await;
    }
}

async fn report(events: &mpsc::Sender<Event>) -> Option<AgentReport> {
    let (tx, rx) = oneshot::channel();
    events.send(Event::Report(tx)).await.ok()?;
    rx.await.ok()
}

async fn registered_session(
    endpoint: &quinn::Endpoint,
    coordinator: SocketAddr,
    listen: SocketAddr,
    events: &mpsc::Sender<Event>,
    heartbeat_now: &Notify,
) -> Result<(), String> {
    let session = connect(
        endpoint,
        coordinator,
        Role::Coordinator,
        shardsched_proto::identity::COORDINATOR_NAME,
    )
    .await
    .map_err(|e| e.to_string())?;
    let report_now = report(events).await.ok_or("the agent is stopping")?;
    let answer = session
        .request(&node_coord::Request::Register {
            listen,
            report: report_now,
        })
        .await
        .map_err(|e| e.to_string())?;
    let node_coord::Response::Registered {
        owner,
        heartbeat_interval_ms,
        heartbeat_timeout_ms,
    } = answer
    else {
        return Err("the coordinator did not answer the registration".to_owned());
    };
    let _ = events
        .send(Event::Registered {
            heartbeat_timeout_ms,
        })
        .await;
    if let Some(owner) = owner {
        let (reply, answer) = oneshot::channel();
        let _ = events
            .send(Event::Owner {
                owner,
                change: OwnerChange::Registered,
                reply,
            })
            .await;
        if let Ok(Err(e)) = answer.await {
            tracing::warn!(error = %e, "the coordinator's owner was refused");
        }
    }
    let owner_events = events.clone();
    tokio::spawn(serve(
        session.clone(),
        move |_peer, request: coord_node::Request| {
            let events = owner_events.clone();
            async move {
                let coord_node::Request::Owner { owner, change } = request;
                let (reply, answer) = oneshot::channel();
                events
                    .send(Event::Owner {
                        owner,
                        change,
                        reply,
                    })
                    .await
                    .map_err(|_| refusal("the agent is stopping", RefusalCode::Unavailable))?;
                match answer.await {
                    Ok(Ok(())) => Ok(coord_node::Response::Ack),
                    Ok(Err(e)) => Err(refusal(e, RefusalCode::Stale)),
                    Err(_) => Err(refusal("the agent is stopping", RefusalCode::Unavailable)),
                }
            }
        },
    ));
    let interval = Duration::from_millis(heartbeat_interval_ms.max(100));
    loop {
        // Every interval, and at once when the node's health changed.
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = heartbeat_now.notified() => {}
        }
        let report_now = report(events).await.ok_or("the agent is stopping")?;
        session
            .request(&node_coord::Request::Heartbeat(report_now))
            .await
            .map_err(|e| e.to_string())?;
    }
}

/// Runs the site's health check every `every`, and tells the core what it says.
pub(super) async fn health_checks(
    script: PathBuf,
    every: Duration,
    node: String,
    events: mpsc::Sender<Event>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let unhealthy = crate::site::health_check(&script, &node).await.err();
        if events.send(Event::Health(unhealthy)).await.is_err() {
            return;
        }
    }
}
