//! The in-memory network: one connection per shard registration (as the QUIC connection a
//! shard opens to register), and the messages in flight on them.
//!
//! Messages are delivered in any order: the world picks one in flight at random, which
//! delays and reorders all the others. When faults are on, a message may be dropped or
//! duplicated as it is sent (a request that times out and one that is re-sent), except the
//! coordinator's *ordered* commands and their answers, which its per-shard link sends one
//! at a time in order (queue states, node flags, reconfigurations, as the driver's `Link`
//! does): those are only ever lost with their connection. Closing a connection (a cut, a
//! crash of either end) drops every message on it.

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use shardsched_coordinator_core::core::ConnId;
use shardsched_wire::msg::agent::{NodeOwner, OwnerChange};
use shardsched_wire::msg::{coord_shard, node_coord, shard_coord, shard_node};
use shardsched_wire::rpc::Reply;

/// What a message carries.
#[derive(Clone, Debug)]
pub(crate) enum Body {
    /// Shard → coordinator: `Register`, `Status` or `Released`.
    ShardRequest {
        id: u64,
        request: shard_coord::Request,
    },
    /// Coordinator → shard: the answer to one.
    ShardAnswer {
        id: u64,
        answer: Reply<shard_coord::Response>,
    },
    /// Coordinator → shard: a command; `ordered` ones come through the shard's link.
    Command {
        id: u64,
        request: coord_shard::Request,
        ordered: bool,
    },
    /// Shard → coordinator: the answer to a command.
    CommandAnswer {
        id: u64,
        request: coord_shard::Request,
        answer: Reply<coord_shard::Response>,
        ordered: bool,
    },
    /// Agent → coordinator: `Register` or `Heartbeat`; `node` is the name its certificate
    /// proves.
    AgentRequest {
        id: u64,
        node: String,
        request: node_coord::Request,
    },
    /// Coordinator → agent: the answer to one.
    AgentAnswer {
        id: u64,
        answer: Reply<node_coord::Response>,
    },
    /// Coordinator → agent: the node's owner from now on (its answer changes nothing).
    Owner {
        owner: NodeOwner,
        change: OwnerChange,
    },
    /// Shard → agent: a launch, kill, renewal or forget; `from` is the shard's queue, as
    /// its certificate proves.
    ToAgent {
        id: u64,
        from: String,
        request: shard_node::Request,
    },
    /// Agent → shard: the answer to one.
    FromAgent {
        id: u64,
        answer: Reply<shard_node::Response>,
    },
}

impl Body {
    /// Whether the message keeps its place behind earlier ones (see the module
    /// documentation).
    fn ordered(&self) -> bool {
        match self {
            Body::Command { ordered, .. } | Body::CommandAnswer { ordered, .. } => *ordered,
            _ => false,
        }
    }

    /// A short description for the trace.
    pub(crate) fn describe(&self) -> String {
        match self {
            Body::ShardRequest { id, request } => format!("#{id} {}", shard_request(request)),
            Body::ShardAnswer { id, answer } => match answer {
                Ok(shard_coord::Response::Registered(a)) => {
                    format!("#{id} registered owned={}", a.owned.len())
                }
                Ok(_) => format!("#{id} ack"),
                Err(r) => format!("#{id} refused {:?}", r.code),
            },
            Body::Command { id, request, .. } => format!("#{id} {request:?}"),
            Body::CommandAnswer { id, answer, .. } => match answer {
                Ok(response) => format!("#{id} answer {response:?}"),
                Err(r) => format!("#{id} refused {:?}", r.code),
            },
            Body::AgentRequest { id, node, request } => match request {
                node_coord::Request::Register { .. } => format!("#{id} {node} registers"),
                node_coord::Request::Heartbeat(_) => format!("#{id} {node} heartbeat"),
            },
            Body::AgentAnswer { id, answer } => match answer {
                Ok(response) => format!("#{id} {response:?}"),
                Err(r) => format!("#{id} refused {:?}", r.code),
            },
            Body::Owner { owner, change } => {
                format!("owner {}@{} {change:?}", owner.queue, owner.generation.0)
            }
            Body::ToAgent { id, from, request } => match request {
                shard_node::Request::Launch(l) => format!("#{id} {from} launch {}", l.job),
                shard_node::Request::Kill { job, .. } => format!("#{id} {from} kill {job}"),
                shard_node::Request::Renew { seen, .. } => format!("#{id} {from} renew {seen:?}"),
                shard_node::Request::Forget { jobs } => format!("#{id} {from} forget {jobs:?}"),
                shard_node::Request::Output(_) => format!("#{id} {from} output"),
            },
            Body::FromAgent { id, answer } => match answer {
                Ok(shard_node::Response::Report(r)) => format!("#{id} report {:?}", r.jobs),
                Ok(response) => format!("#{id} {response:?}"),
                Err(r) => format!("#{id} refused {:?}: {}", r.code, r.message),
            },
        }
    }
}

fn shard_request(request: &shard_coord::Request) -> String {
    match request {
        shard_coord::Request::Register(r) => format!("register {} held={:?}", r.queue, r.held),
        shard_coord::Request::Status(_) => "status".to_owned(),
        shard_coord::Request::Released(r) => format!("released {r:?}"),
        shard_coord::Request::Agents { nodes } => format!("agents {nodes:?}"),
    }
}

/// One message on one connection.
#[derive(Clone, Debug)]
pub(crate) struct Packet {
    pub(crate) conn: ConnId,
    /// Towards the coordinator (else towards the connection's shard).
    pub(crate) to_coordinator: bool,
    pub(crate) body: Body,
}

/// How lossy the network is for a seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Weather {
    /// Chance that a message is dropped as it is sent.
    pub(crate) drop: f64,
    /// Chance that it is sent twice.
    pub(crate) duplicate: f64,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Net {
    packets: Vec<Packet>,
    /// Every connection ever opened: its shard's queue, and whether it is open.
    conns: BTreeMap<ConnId, (String, bool)>,
    next_conn: u64,
    /// Messages dropped and duplicated so far.
    pub(crate) dropped: u64,
    pub(crate) duplicated: u64,
}

impl Net {
    /// Opens a connection for `queue`'s shard.
    pub(crate) fn open(&mut self, queue: &str) -> ConnId {
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        self.conns.insert(conn, (queue.to_owned(), true));
        conn
    }

    /// Closes `conn` and drops what is in flight on it; `false` if it was closed already.
    pub(crate) fn close(&mut self, conn: ConnId) -> bool {
        let Some((_, open)) = self.conns.get_mut(&conn) else {
            return false;
        };
        if !*open {
            return false;
        }
        *open = false;
        self.packets.retain(|p| p.conn != conn);
        true
    }

    /// Whether `conn` is open.
    pub(crate) fn is_open(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|(_, open)| *open)
    }

    /// The open connections, oldest first.
    pub(crate) fn open_conns(&self) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, (_, open))| *open)
            .map(|(c, _)| *c)
            .collect()
    }

    /// Sends `packet` on its connection (nothing if it is closed); with `weather`, an
    /// unordered one may be dropped or duplicated.
    pub(crate) fn send(&mut self, rng: &mut ChaCha8Rng, weather: Option<Weather>, packet: Packet) {
        if !self.is_open(packet.conn) {
            return;
        }
        if let Some(w) = weather.filter(|_| !packet.body.ordered()) {
            if rng.random_bool(w.drop) {
                self.dropped += 1;
                return;
            }
            if rng.random_bool(w.duplicate) {
                self.duplicated += 1;
                self.packets.push(packet.clone());
            }
        }
        self.packets.push(packet);
    }

    /// Takes a message to deliver, chosen at random (an ordered one only behind the
    /// ordered ones before it on its connection and in its direction).
    pub(crate) fn take(&mut self, rng: &mut ChaCha8Rng) -> Option<Packet> {
        if self.packets.is_empty() {
            return None;
        }
        let mut i = rng.random_range(0..self.packets.len());
        let picked = &self.packets[i];
        if picked.body.ordered() {
            let (conn, up) = (picked.conn, picked.to_coordinator);
            i = self
                .packets
                .iter()
                .position(|p| p.body.ordered() && p.conn == conn && p.to_coordinator == up)
                .unwrap_or(i);
        }
        Some(self.packets.remove(i))
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}
