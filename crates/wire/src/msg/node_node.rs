//! Node agent → node agent: PMI fences across the nodes of one job.
//!
//! PMI-1's barrier exchanges what every task put in the job's key-value space. On each
//! node, the job's supervisor answers its tasks (the PMI-1 simple wire protocol on
//! `PMI_FD`); once all its local tasks entered the barrier, the node's agent sends the
//! node's puts to the job's first node (its **leader**) with [`Request::Fence`]. The
//! leader's agent, once it holds every node's fence of that epoch, sends the merged space to
//! every node with [`Request::FenceDone`]; each node's tasks then leave the barrier. An
//! agent accepts a fence only from an agent whose certificate names one of the job's
//! nodes, and only for that node.

use serde::{Deserialize, Serialize};

use super::common::{JobId, Refusal, RefusalCode};
use crate::identity::Op;
use crate::limits::{PMI_KEY_BYTES_MAX, PMI_KVS_BYTES_MAX, PMI_VALUE_BYTES_MAX};
use crate::rpc::Rpc;

/// A request from one node agent to another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// To the leader: this node's tasks entered barrier `epoch`, with these puts.
    Fence(Fence),
    /// From the leader: every node entered barrier `epoch`; this is the whole space.
    FenceDone(Fence),
}

/// One fence's key-value pairs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    /// The job.
    pub job: JobId,
    /// Which barrier of the job (0, 1, …).
    pub epoch: u32,
    /// The pairs (keys at most [`PMI_KEY_BYTES_MAX`], values at most
    /// [`PMI_VALUE_BYTES_MAX`], at most [`PMI_KVS_BYTES_MAX`] in all).
    pub kvs: Vec<(String, String)>,
}

/// The answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Received.
    Ack,
}

impl Fence {
    /// The bounds of a fence's pairs.
    pub fn check(&self) -> Result<(), Refusal> {
        let mut total = 0usize;
        for (key, value) in &self.kvs {
            if key.len() > PMI_KEY_BYTES_MAX || value.len() > PMI_VALUE_BYTES_MAX {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!(
                        "a PMI key or value past its bound ({PMI_KEY_BYTES_MAX} / \
                         {PMI_VALUE_BYTES_MAX} bytes)"
                    ),
                ));
            }
            total = total.saturating_add(key.len() + value.len());
        }
        if total > PMI_KVS_BYTES_MAX {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!("{total} bytes of PMI pairs, more than the {PMI_KVS_BYTES_MAX}-byte limit"),
            ));
        }
        Ok(())
    }
}

impl Rpc for Request {
    type Response = Response;

    fn kind(&self) -> &'static str {
        match self {
            Request::Fence(_) => "node_node.fence",
            Request::FenceDone(_) => "node_node.fence_done",
        }
    }

    fn op(&self) -> Op {
        Op::AgentPeer
    }

    fn check(&self) -> Result<(), Refusal> {
        match self {
            Request::Fence(fence) | Request::FenceDone(fence) => fence.check(),
        }
    }
}
