//! The connection side: accept, then serve each connection by its peer's role, turning
//! every request into an [`Event`] for the core task and waiting for its answer.

use std::sync::Arc;

use arc_swap::ArcSwap;
use shardsched_proto::msg::RouteTable;
use shardsched_proto::msg::client_coord::{self, Response as ClientResponse};
use shardsched_proto::{CloseCode, Peer, Reply, Role, Rpc, Session, accept, serve};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::CONNECTIONS_MAX;
use super::event::{Event, call};
use crate::core::ConnId;

/// Accepts connections until the endpoint closes, at most [`CONNECTIONS_MAX`] at once.
pub(super) async fn accept_loop(
    endpoint: quinn::Endpoint,
    events: mpsc::Sender<Event>,
    routes: Arc<ArcSwap<RouteTable>>,
) {
    let connections = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    while let Some(incoming) = endpoint.accept().await {
        match Arc::clone(&connections).try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(connection(
                    incoming,
                    events.clone(),
                    Arc::clone(&routes),
                    permit,
                ));
            }
            Err(_) => {
                tracing::warn!(
                    remote = %incoming.remote_address(),
                    limit = CONNECTIONS_MAX,
                    "connection refused: too many connections"
                );
                incoming.refuse();
            }
        }
    }
}

/// Serves one connection by its peer's role.
async fn connection(
    incoming: quinn::Incoming,
    events: mpsc::Sender<Event>,
    routes: Arc<ArcSwap<RouteTable>>,
    _permit: OwnedSemaphorePermit,
) {
    let remote = incoming.remote_address();
    let session = match accept(incoming).await {
        Ok(session) => session,
        Err(e) => {
            tracing::info!(%remote, error = %e, "connection refused");
            return;
        }
    };
    match session.peer().role {
        Role::Shard => shard_connection(session, events).await,
        Role::User | Role::Admin => client_connection(session, events, routes).await,
        Role::Node => agent_connection(session, events).await,
        Role::Coordinator => {
            tracing::warn!(%remote, peer = %session.peer(), "refusing a coordinator certificate as a client");
            session.connection().close(
                CloseCode::NoIdentity.varint(),
                b"coordinators do not connect to coordinators",
            );
        }
    }
}

/// Serves a shard's connection until it ends, then tells the core task (its queue goes
/// offline).
async fn shard_connection(session: Session, events: mpsc::Sender<Event>) {
    let conn = ConnId(session.connection().stable_id() as u64);
    let remote = session.remote_address();
    tracing::debug!(peer = %session.peer(), %remote, "shard connected");
    let connected = Event::Connected {
        conn,
        session: session.clone(),
    };
    serve_peer(
        session,
        conn,
        connected,
        events,
        move |peer, request, reply| Event::Shard {
            conn,
            remote,
            peer,
            request,
            reply,
            span: tracing::Span::current(),
        },
    )
    .await;
}

/// Serves a node agent's connection (its registration and heartbeats; the coordinator
/// sends it `Owner` on the same connection) until it ends, then tells the core task.
async fn agent_connection(session: Session, events: mpsc::Sender<Event>) {
    let conn = ConnId(session.connection().stable_id() as u64);
    let connected = Event::AgentConnected {
        conn,
        session: session.clone(),
    };
    serve_peer(
        session,
        conn,
        connected,
        events,
        move |peer, request, reply| Event::Agent {
            conn,
            peer,
            request,
            reply,
        },
    )
    .await;
}

/// Serves the connection `conn` of a peer whose session the core task keeps (a shard, a
/// node agent) until it ends: the core task hears `connected`, then each request as the
/// event `request` makes of it (with the channel for its answer), then `Closed`.
async fn serve_peer<R: Rpc>(
    session: Session,
    conn: ConnId,
    connected: Event,
    events: mpsc::Sender<Event>,
    request: impl Fn(Peer, R, oneshot::Sender<Reply<R::Response>>) -> Event
    + Copy
    + Send
    + Sync
    + 'static,
) {
    if events.send(connected).await.is_err() {
        return;
    }
    let requests = events.clone();
    let served = serve(session, move |peer, req: R| {
        let events = requests.clone();
        async move { call(&events, |reply| request(peer, req, reply)).await }
    })
    .await;
    let error = served.err().map(|e| e.to_string());
    let _ = events.send(Event::Closed { conn, error }).await;
}

/// Serves a user's or an admin's connection until it ends. `Routes` is answered from the
/// published table without the core task; everything else goes to it.
async fn client_connection(
    session: Session,
    events: mpsc::Sender<Event>,
    routes: Arc<ArcSwap<RouteTable>>,
) {
    let peer = session.peer().clone();
    let served = serve(session, move |peer, request: client_coord::Request| {
        let events = events.clone();
        let routes = Arc::clone(&routes);
        async move {
            if request == client_coord::Request::Routes {
                return Ok(ClientResponse::Routes(routes.load().as_ref().clone()));
            }
            call(&events, |reply| Event::Client {
                peer,
                request,
                reply,
                span: tracing::Span::current(),
            })
            .await
        }
    })
    .await;
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "client connection ended");
    }
}
