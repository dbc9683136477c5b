//! Node agent → coordinator: registration and heartbeats.
//!
//! An agent's certificate name is its node's name; the coordinator refuses a registration
//! for any other node. The answer says which shard owns the node (the owner as of its last
//! hand-over: an agent learns a new owner only when a move's `Acquire` is sent, see
//! [`coord_node`](super::coord_node)) and how often to send heartbeats. An agent silent past
//! the heartbeat timeout has its node marked down, as `resource down` does.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::agent::{AgentReport, NodeOwner};
use super::bounds;
use super::common::Refusal;
use crate::identity::Op;
use crate::limits::{AGENT_JOBS_MAX, NODE_NAME_BYTES_MAX};
use crate::rpc::Rpc;

/// A request from a node agent to the coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// "I am up": sent first on every (re)connection, with where shards reach the agent
    /// and what it runs.
    Register {
        /// Where shards and other agents reach this agent.
        listen: SocketAddr,
        /// Its table now (a restarted agent reports the tasks it found running).
        report: AgentReport,
    },
    /// "I am alive", every heartbeat interval.
    Heartbeat(AgentReport),
}

/// The coordinator's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to [`Request::Register`].
    Registered {
        /// The node's owner, if a queue owns it.
        owner: Option<NodeOwner>,
        /// How often to send heartbeats, ms.
        heartbeat_interval_ms: u64,
        /// Silence after which the coordinator marks the node down, ms. An agent that has
        /// not heard from its shard for half of it kills that shard's tasks.
        heartbeat_timeout_ms: u64,
    },
    /// Heartbeat received.
    Ack,
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Register { .. } => "node_coord.register",
            Request::Heartbeat(_) => "node_coord.heartbeat",
        }
    }

    fn op(&self) -> Op {
        Op::AgentReport
    }

    fn check(&self) -> Result<(), Refusal> {
        let report = match self {
            Request::Register { report, .. } | Request::Heartbeat(report) => report,
        };
        check_report(report)
    }
}

/// A report's bounds: its node name, its health reason, and at most [`AGENT_JOBS_MAX`]
/// jobs.
pub fn check_report(report: &AgentReport) -> Result<(), Refusal> {
    bounds::text("the node name", &report.node, NODE_NAME_BYTES_MAX)?;
    if let Some(why) = &report.unhealthy {
        bounds::reason(why)?;
    }
    if report.jobs.len() > AGENT_JOBS_MAX {
        return Err(Refusal::new(
            super::common::RefusalCode::Invalid,
            format!(
                "a report of {} jobs, more than the limit of {AGENT_JOBS_MAX}",
                report.jobs.len()
            ),
        ));
    }
    Ok(())
}
