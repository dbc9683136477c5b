//! Coordinator → node agent, on the connection the agent opened to register: who owns the
//! node now.
//!
//! The coordinator sends [`Request::Owner`] when it sends a move's `Acquire` to the
//! recipient (the agent learns a new owner only then, never at the move's start: the
//! donor's jobs may still run there) and when a cancelled move gives the node back to its
//! donor. The agent accepts an owner only at a newer generation than the one it knows (or
//! the same owner again).

use serde::{Deserialize, Serialize};

use super::agent::{NodeOwner, OwnerChange};
use super::bounds;
use super::common::Refusal;
use crate::identity::Op;
use crate::rpc::Rpc;

/// A request from the coordinator to a node agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The node's owner from now on.
    Owner {
        /// The new owner.
        owner: NodeOwner,
        /// Why it changed.
        change: OwnerChange,
    },
}

/// The agent's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The owner is recorded (or was already).
    Ack,
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Owner { .. } => "coord_node.owner",
        }
    }

    fn op(&self) -> Op {
        Op::AgentOwner
    }

    fn check(&self) -> Result<(), Refusal> {
        match self {
            Request::Owner { owner, .. } => bounds::name("the queue name", &owner.queue),
        }
    }
}
