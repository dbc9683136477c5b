//! The agents task's network: one connection per node agent, opened on first use and again
//! after it broke, every request bounded in time; and the coordinator's word on where the
//! agents are.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shardsched_proto::msg::shard_coord::{self, AgentAddress};
use shardsched_proto::msg::shard_node;
use shardsched_proto::{Error, Role, Session, connect};
use tokio::sync::watch;

/// How long one request to an agent (connecting included) may take: then its connection
/// is closed, so that it cannot renew the agent's lease later (the lease argument in
/// [`shardsched_shard_core::agents`]).
pub const AGENT_REQUEST_TIMEOUT: Duration =
    Duration::from_millis(shardsched_shard_core::agents::REQUEST_TIMEOUT_MS);

pub use shardsched_shard_core::agents::Failure;

/// The connections to the agents, shared by the requests in flight.
#[derive(Clone)]
pub struct Links {
    endpoint: quinn::Endpoint,
    sessions: Arc<Mutex<HashMap<String, Session>>>,
    /// The shard's registration connection to the coordinator, while registered.
    coordinator: watch::Receiver<Option<Session>>,
}

impl Links {
    /// Links from the shard's endpoint; `coordinator` follows its registration connection.
    pub fn new(endpoint: quinn::Endpoint, coordinator: watch::Receiver<Option<Session>>) -> Links {
        Links {
            endpoint,
            sessions: Arc::default(),
            coordinator,
        }
    }

    /// Sends `request` to `node`'s agent at `addr`.
    pub async fn ask(
        &self,
        node: &str,
        addr: SocketAddr,
        request: &shard_node::Request,
    ) -> Result<shard_node::Response, Failure> {
        let asked = tokio::time::timeout(AGENT_REQUEST_TIMEOUT, async {
            let session = self.session(node, addr).await?;
            session.request(request).await
        })
        .await;
        match asked {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(Error::Refused(refusal))) => Err(Failure::Refused(refusal)),
            Ok(Err(e)) => {
                self.forget(node);
                Err(Failure::Unreachable(e.to_string()))
            }
            Err(_) => {
                self.forget(node);
                Err(Failure::Unreachable(format!(
                    "no answer within {} s",
                    AGENT_REQUEST_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// Where the agents of `nodes` listen, as the coordinator says.
    pub async fn addresses(&self, nodes: Vec<String>) -> Result<Vec<AgentAddress>, String> {
        let session = self
            .coordinator
            .borrow()
            .clone()
            .ok_or("not registered with the coordinator")?;
        let request = shard_coord::Request::Agents { nodes };
        match tokio::time::timeout(AGENT_REQUEST_TIMEOUT, session.request(&request)).await {
            Ok(Ok(shard_coord::Response::Agents(addresses))) => Ok(addresses),
            Ok(Ok(other)) => Err(format!("the coordinator answered {other:?}")),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the coordinator did not answer in time".to_owned()),
        }
    }

    async fn session(&self, node: &str, addr: SocketAddr) -> Result<Session, Error> {
        let cached = self.lock().get(node).cloned();
        if let Some(session) = cached {
            if session.remote_address() == addr && session.connection().close_reason().is_none() {
                return Ok(session);
            }
            self.forget(node);
        }
        let session = connect(&self.endpoint, addr, Role::Node, node).await?;
        self.lock().insert(node.to_owned(), session.clone());
        Ok(session)
    }

    fn forget(&self, node: &str) {
        if let Some(session) = self.lock().remove(node) {
            session.close();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
