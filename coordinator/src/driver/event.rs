//! What reaches the core task: the events of the module documentation, and the
//! continuations of requests that waited on a shard or a file.

use std::net::SocketAddr;

use shardsched_proto::msg::client_coord::{self, Response as ClientResponse};
use shardsched_proto::msg::shard_coord::{self, Register, Response as ShardResponse};
use shardsched_proto::msg::{Refusal, RefusalCode, coord_shard, node_coord};
use shardsched_proto::{Peer, Reply, Session};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::core::{ConnId, MoveCommand, Reconfig};

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
    /// The shards of the queues a removal takes away were checked for jobs and disabled
    /// (those in `held`), or one refused (`outcome`).
    RemovalsHeld {
        removal: Removal,
        held: Vec<Held>,
        outcome: Result<(), Refusal>,
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

/// A queue table change that removes queues, kept while their shards are checked.
pub(super) struct Removal {
    pub(super) peer: Peer,
    pub(super) change: TableChange,
    /// The first half of `queue remove --give-to`: the move of the queue's nodes, done.
    pub(super) giving: Option<Reconfig>,
    pub(super) reply: ClientReply,
}

/// The change a [`Removal`] makes once its shards are held.
pub(super) enum TableChange {
    /// `queue remove QUEUE`.
    Remove(String),
    /// `reload`, with the file read again.
    Reload(Box<Config>),
}

/// A removed queue's shard, disabled while it held no job; given the core's state for the
/// queue back if the removal is refused after all.
pub(super) struct Held {
    pub(super) queue: String,
    pub(super) conn: ConnId,
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
