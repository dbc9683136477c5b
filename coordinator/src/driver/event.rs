//! What reaches the core task: the events of the module documentation, and the
//! continuations of requests that waited on a shard or a file.

use std::net::SocketAddr;

use shardsched_proto::msg::client_coord::{self, Response as ClientResponse};
use shardsched_proto::msg::shard_coord::{self, Register, Response as ShardResponse};
use shardsched_proto::msg::{Refusal, RefusalCode, coord_shard, node_coord};
use shardsched_proto::{Peer, Reply, Session};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::core::{ConnId, MoveCommand, RemovalId};

/// Where a shard's answer goes.
pub(super) type ShardReply = oneshot::Sender<Reply<ShardResponse>>;
/// Where a node agent's answer goes.
pub(super) type AgentReply = oneshot::Sender<Reply<node_coord::Response>>;
/// Where a client's answer goes.
pub(super) type ClientReply = oneshot::Sender<Reply<ClientResponse>>;

/// One input of the core task.
pub(super) enum Event {
    /// A shard connected: its session, for the commands the coordinator sends it.
    Connected { conn: ConnId, session: Session },
    /// A node agent connected: its session, for the `Owner` messages sent to it.
    AgentConnected { conn: ConnId, session: Session },
    /// A node agent's request.
    Agent {
        conn: ConnId,
        peer: Peer,
        request: node_coord::Request,
        reply: AgentReply,
    },
    /// A connection ended (`error`: why, when it did not end cleanly).
    Closed { conn: ConnId, error: Option<String> },
    /// A shard's request.
    Shard {
        conn: ConnId,
        remote: SocketAddr,
        peer: Peer,
        request: shard_coord::Request,
        reply: ShardReply,
        /// The request's span: what the core task logs for it is logged inside.
        span: tracing::Span,
    },
    /// A user's or an admin's request (the role was checked by `serve`).
    Client {
        peer: Peer,
        request: client_coord::Request,
        reply: ClientReply,
        /// The request's span.
        span: tracing::Span,
    },
    /// A shard answered a move command.
    MoveAnswer {
        command: MoveCommand,
        response: coord_shard::Response,
    },
    /// The shard that holds a queue answered a liveness probe (or did not) while another
    /// registered for the queue.
    HolderProbed {
        alive: bool,
        holder: ConnId,
        registration: Registration,
    },
    /// A shard answered a removal's step (or did not: why).
    RemovalAnswer {
        removal: RemovalId,
        answer: Result<coord_shard::Response, Refusal>,
    },
    /// A removed queue's finished jobs were pulled into the history store (or not: why).
    HistoryPulled {
        removal: RemovalId,
        pulled: Result<(), Refusal>,
    },
    /// The configuration file was read again for a reload.
    ConfigRead {
        peer: Peer,
        file: Result<Config, Refusal>,
        reply: ClientReply,
    },
    /// The status page (or a scrape of `/metrics`) asks for the core's views.
    Status {
        reply: oneshot::Sender<shardsched_telemetry::ClusterStatus>,
    },
}

/// A shard's `Register`, kept while the shard that holds its queue is probed.
pub(super) struct Registration {
    pub(super) conn: ConnId,
    pub(super) remote: SocketAddr,
    pub(super) peer: Peer,
    pub(super) register: Register,
    pub(super) reply: ShardReply,
}

/// Queues `event` for the core task and waits for the answer `make` arranges; the answer
/// is a refusal when the core task has stopped (the coordinator is going down).
pub(super) async fn call<T>(
    events: &mpsc::Sender<Event>,
    make: impl FnOnce(oneshot::Sender<Reply<T>>) -> Event,
) -> Reply<T> {
    let (reply, answer) = oneshot::channel();
    if events.send(make(reply)).await.is_err() {
        return Err(stopping());
    }
    answer.await.unwrap_or_else(|_| Err(stopping()))
}

fn stopping() -> Refusal {
    Refusal::new(RefusalCode::Unavailable, "the coordinator is stopping")
}
