//! The agent registry: which node agents registered, where they listen, when each was last
//! heard from and what it last reported (observation, never durable), and what follows
//! from it:
//!
//! - **the owner an agent is told**: at registration, the node's owner unless the node is
//!   in a move (an agent learns a new owner only when the move's `Acquire` is sent, or a
//!   cancelled move's `Reclaim`: [`Core::moves_to_send`] queues those for
//!   [`Core::agents_to_send`]), and when a queue table change gives a queue a node no
//!   queue owned (`Granted`);
//! - **liveness**: an agent silent past `[agents] heartbeat_timeout` has its node marked
//!   down, as `resource down` does, with the reason `node agent unreachable since T`
//!   ([`Core::agents_tick`]); with `[agents] required`, so is a node whose agent never
//!   registered since the coordinator started. With `return_to_service`, such a node comes
//!   back up when its agent registers again; otherwise `resource up` brings it back;
//! - **release means clean**: a donor's release of a moving node is taken only once the
//!   node's agent reports no process of the donor's jobs ([`Core::agent_clean_of`]), or,
//!   when the agent is gone (silent past the heartbeat timeout, its node marked down for
//!   it, and not connected since), on the donor's word: a donor releases a node only once
//!   its jobs there ended, and with their agent unreachable that is once their lease has
//!   surely run out, when their supervisors have stopped them (shard/core's `agents`
//!   module documentation). Without it a dead machine's node could never leave a move.
//!
//! The node table stays the one owner of a node's flags: this module sets and clears the
//! down flag through [`Core::set_node_flag`], like an admin.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use shardsched_wire::msg::agent::{AgentReport, NodeOwner, OwnerChange};
use shardsched_wire::msg::coord_shard::Request as ShardRequest;
use shardsched_wire::msg::shard_coord::AgentAddress;
use shardsched_wire::msg::{NodeGen, Refusal, RefusalCode, coord_node, node_coord};

use super::{ConnId, Core, FlagPlan, NodeFlag};
use crate::moves::NodeIntent;

#[cfg(test)]
mod tests;

/// The start of the reason a node marked down for its agent's silence gets; a node whose
/// down reason starts so is the one `return_to_service` brings back.
pub const UNREACHABLE_REASON: &str = "node agent unreachable since ";

/// What the coordinator knows of one node's agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct AgentSeen {
    /// Its connection, while connected.
    conn: Option<ConnId>,
    /// Where shards and other agents reach it.
    listen: SocketAddr,
    /// When it was last heard from, ms.
    heard_ms: u64,
    /// Its last report.
    report: AgentReport,
}

/// The agents' part of the core: the registry and the owner messages waiting to go.
#[derive(Clone, Debug, Default)]
pub(super) struct Agents {
    /// By node name.
    seen: BTreeMap<String, AgentSeen>,
    /// When the coordinator started watching (its first tick), ms: with `[agents]
    /// required`, a node whose agent has not registered by then plus the timeout is
    /// unreachable.
    since_ms: Option<u64>,
    /// `Owner` messages for agents, queued by [`Core::moves_to_send`].
    out: Vec<AgentCommand>,
}

/// What an agent's word changed in its node's flags, for the shards that have the node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentFlags {
    /// Nodes up again (`return_to_service`).
    pub up: FlagPlan,
    /// Nodes drained: the agent reports them unfit (a failed health check or prolog).
    pub drained: FlagPlan,
}

/// A message for a connected agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentCommand {
    /// The node.
    pub node: String,
    /// Its agent's connection.
    pub conn: ConnId,
    /// The message.
    pub request: coord_node::Request,
}

impl Agents {
    /// The nodes an agent has registered for.
    pub(super) fn nodes(&self) -> impl Iterator<Item = &str> {
        self.seen.keys().map(String::as_str)
    }
}

impl Core {
    /// A node agent (certificate name `cert_name`, connection `conn`) registers: it must be
    /// the agent of a node of the cluster, its own. Returns the answer (the node's owner
    /// unless it is moving, the heartbeat interval and timeout) and what its word changed
    /// in the node's flags ([`AgentFlags`]).
    pub fn agent_register(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        cert_name: &str,
        listen: SocketAddr,
        report: AgentReport,
    ) -> Result<(node_coord::Response, AgentFlags), Refusal> {
        let node = report.node.clone();
        if node != cert_name {
            return Err(Refusal::new(
                RefusalCode::Forbidden,
                format!(
                    "node agent {cert_name} may not register for node {node}: an agent \
                     registers for the node its certificate names"
                ),
            ));
        }
        self.check_known(std::slice::from_ref(&node))?;
        if listen.port() == 0 {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!("node agent {node} registered port 0"),
            ));
        }
        tracing::info!(%node, %listen, jobs = report.jobs.len(), "node agent registered");
        let unhealthy = new_reason(self.agents.seen.get(&node), &report);
        self.agents.seen.insert(
            node.clone(),
            AgentSeen {
                conn: Some(conn),
                listen,
                heard_ms: now_ms,
                report,
            },
        );
        let flags = AgentFlags {
            up: self.back_in_service(&node)?,
            drained: self.drain_if_unfit(&node, unhealthy)?,
        };
        let agents = &self.config.agents;
        let answer = node_coord::Response::Registered {
            owner: self.agent_owner(&node),
            heartbeat_interval_ms: agents.heartbeat_interval_ms(),
            heartbeat_timeout_ms: agents.heartbeat_timeout_ms,
        };
        self.debug_check();
        Ok((answer, flags))
    }

    /// A registered agent's heartbeat: it is alive, and this is its table. Returns what its
    /// word changed in the node's flags ([`AgentFlags`]).
    pub fn agent_heartbeat(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        cert_name: &str,
        report: AgentReport,
    ) -> Result<AgentFlags, Refusal> {
        let Some(seen) = self
            .agents
            .seen
            .get_mut(cert_name)
            .filter(|s| s.conn == Some(conn) && report.node == cert_name)
        else {
            return Err(Refusal::new(
                RefusalCode::Stale,
                format!("node agent {cert_name} has not registered on this connection"),
            ));
        };
        seen.heard_ms = seen.heard_ms.max(now_ms);
        let unhealthy = new_reason(Some(&*seen), &report);
        seen.report = report;
        Ok(AgentFlags {
            up: self.back_in_service(cert_name)?,
            drained: self.drain_if_unfit(cert_name, unhealthy)?,
        })
    }

    /// An agent that reports its node unfit for a new reason has it drained with that
    /// reason, unless the node is drained already (an admin's reason is kept). The drain
    /// stays until `resource undrain`, which holds until the agent reports another reason
    /// (a health check that passed and fails again, another job's prolog).
    fn drain_if_unfit(
        &mut self,
        node: &str,
        unhealthy: Option<String>,
    ) -> Result<FlagPlan, Refusal> {
        let drained = self
            .moves
            .nodes()
            .get(node)
            .is_some_and(|i| i.drained.is_some());
        match unhealthy {
            Some(why) if !drained => {
                tracing::warn!(%node, reason = %why, "node agent reports its node unfit: drained");
                self.set_node_flag(&[node.to_owned()], NodeFlag::Drained, true, &why)
            }
            _ => Ok(FlagPlan::new()),
        }
    }

    /// A connection ended: if it was an agent's, the agent is no longer reachable there (its
    /// silence is counted from when it was last heard).
    pub fn agent_disconnected(&mut self, conn: ConnId) -> Option<String> {
        let (node, seen) = self
            .agents
            .seen
            .iter_mut()
            .find(|(_, s)| s.conn == Some(conn))?;
        seen.conn = None;
        Some(node.clone())
    }

    /// Time passes: nodes whose agents are silent past the heartbeat timeout (or, with
    /// `[agents] required`, never registered within it of the first tick) are marked down.
    /// Returns the shards to tell that the nodes are down.
    pub fn agents_tick(&mut self, now_ms: u64) -> FlagPlan {
        let timeout = self.config.agents.heartbeat_timeout_ms;
        self.agents.since_ms.get_or_insert(now_ms);
        let silent: Vec<(String, u64)> = self
            .watched()
            .filter(|&(_, intent, heard)| {
                !unreachable(intent) && now_ms.saturating_sub(heard) >= timeout
            })
            .map(|(name, _, heard)| (name.to_owned(), heard))
            .collect();
        let mut plan = FlagPlan::new();
        for (node, heard) in silent {
            let reason = format!("{UNREACHABLE_REASON}{}", utc(heard));
            tracing::warn!(%node, %reason, "node agent silent past the heartbeat timeout; node down");
            match self.set_node_flag(std::slice::from_ref(&node), NodeFlag::Down, true, &reason) {
                Ok(more) => merge(&mut plan, more),
                Err(refusal) => tracing::error!(%node, %refusal, "could not mark the node down"),
            }
        }
        plan
    }

    /// When [`Core::agents_tick`] next has something to do: the first agent (or, with
    /// `required`, node without one) to reach the timeout. `None` when no node is watched.
    pub fn agents_next_wakeup(&self) -> Option<u64> {
        let timeout = self.config.agents.heartbeat_timeout_ms;
        self.watched()
            .filter(|&(_, intent, _)| !unreachable(intent))
            .map(|(_, _, heard)| heard)
            .min()
            .map(|heard| heard.saturating_add(timeout))
    }

    /// The nodes whose agents are watched, with when each was last heard: with `[agents]
    /// required`, every node (one without an agent as of when watching began); else only
    /// the nodes an agent registered for. Walked at every batch of the core task (the tick
    /// and its next wakeup), so without agents it costs nothing, not a walk of the cluster.
    fn watched(&self) -> Box<dyn Iterator<Item = (&str, &NodeIntent, u64)> + '_> {
        let nodes = self.moves.nodes();
        if self.config.agents.required {
            let since = self.agents.since_ms.unwrap_or(0);
            Box::new(nodes.iter().map(move |(name, intent, _)| {
                let heard = self.agents.seen.get(name).map_or(since, |s| s.heard_ms);
                (name, intent, heard)
            }))
        } else {
            Box::new(self.agents.seen.iter().filter_map(move |(name, seen)| {
                Some((name.as_str(), nodes.get(name)?, seen.heard_ms))
            }))
        }
    }

    /// Refuses to bring `nodes` up (`resource up`) while one's agent is silent past the
    /// heartbeat timeout: [`Core::agents_tick`] would mark it down again at once.
    pub fn check_agents_heard(&self, now_ms: u64, nodes: &[String]) -> Result<(), Refusal> {
        let timeout = self.config.agents.heartbeat_timeout_ms;
        let silent: Vec<String> = nodes
            .iter()
            .filter_map(|node| {
                let heard = match self.agents.seen.get(node) {
                    Some(seen) => seen.heard_ms,
                    None if self.config.agents.required => self.agents.since_ms?,
                    None => return None,
                };
                (now_ms.saturating_sub(heard) >= timeout)
                    .then(|| format!("{node} (last heard {})", utc(heard)))
            })
            .collect();
        if silent.is_empty() {
            return Ok(());
        }
        Err(Refusal::new(
            RefusalCode::Unavailable,
            format!(
                "the node agents of {} are silent past the heartbeat timeout ({} ms): the \
                 nodes would be marked down again at once; bring their agents back first",
                silent.join(", "),
                timeout
            ),
        ))
    }

    /// Where the agents of `nodes` listen, for a shard.
    pub fn agent_addresses(&self, nodes: &[String]) -> Vec<AgentAddress> {
        nodes
            .iter()
            .map(|node| AgentAddress {
                node: node.clone(),
                address: self.agents.seen.get(node).map(|s| s.listen),
            })
            .collect()
    }

    /// Whether `node`'s agent, as last heard, runs no process of `queue`'s jobs: `true` when
    /// the node has no agent (nothing to wait for: a cluster without agents, or a node
    /// whose agent an admin gave up on), or when its agent is gone — disconnected, and its
    /// node marked down for its silence — so that only the donor's word is left (see the
    /// module documentation). A node whose agent is merely unreachable is not clean.
    pub fn agent_clean_of(&self, node: &str, queue: &str) -> bool {
        match self.agents.seen.get(node) {
            None => true,
            Some(seen) if seen.conn.is_some() => seen.report.clean_of(queue),
            Some(_) => self.agent_gone(node),
        }
    }

    /// Whether `node`'s agent registered once and is gone now: disconnected, its node
    /// marked down for its silence.
    pub(super) fn agent_gone(&self, node: &str) -> bool {
        self.agents
            .seen
            .get(node)
            .is_some_and(|seen| seen.conn.is_none())
            && self.down_for_silence(node)
    }

    /// Whether `node` is marked down for its agent's silence ([`Core::agents_tick`]).
    fn down_for_silence(&self, node: &str) -> bool {
        self.moves.nodes().get(node).is_some_and(unreachable)
    }

    /// Whether an agent has registered for `node` since the coordinator started.
    pub fn has_agent(&self, node: &str) -> bool {
        self.agents.seen.contains_key(node)
    }

    /// `Owner` messages for agents, once their `Acquire` or `Reclaim` is sent.
    pub fn agents_to_send(&mut self) -> Vec<AgentCommand> {
        std::mem::take(&mut self.agents.out)
    }

    /// Queues an `Owner` for the agents of the nodes of a move command that hands them to
    /// a queue (`Acquire` to the recipient, `Reclaim` back to the donor).
    pub(super) fn owner_for_agents(&mut self, queue: &str, request: &ShardRequest) {
        match request {
            ShardRequest::Acquire(a) => self.tell_owner(queue, &a.nodes, OwnerChange::Acquired),
            ShardRequest::Reclaim(r) => self.tell_owner(queue, &r.nodes, OwnerChange::Reclaimed),
            _ => {}
        }
    }

    /// Queues an `Owner` (`change`) for the connected agents of `nodes`, now `queue`'s at
    /// their generations: a move's hand-over, or nodes no queue owned that a queue table
    /// change gave a queue (its shard hears of them in `Reconfigure.granted`, or at its
    /// registration).
    pub(super) fn tell_owner(&mut self, queue: &str, nodes: &[NodeGen], change: OwnerChange) {
        for node in nodes {
            let Some(conn) = self.agents.seen.get(&node.node).and_then(|s| s.conn) else {
                continue;
            };
            self.agents.out.push(AgentCommand {
                node: node.node.clone(),
                conn,
                request: coord_node::Request::Owner {
                    owner: NodeOwner {
                        queue: queue.to_owned(),
                        generation: node.generation,
                    },
                    change,
                },
            });
        }
    }

    /// The owner a registering agent is told: the node's, unless the node is in a move (the
    /// agent then keeps the one it knows until the move's `Acquire` or `Reclaim`).
    fn agent_owner(&self, node: &str) -> Option<NodeOwner> {
        if self.moves.moving(node).is_some() {
            return None;
        }
        Some(NodeOwner {
            queue: self.moves.owner_of(node)?.to_owned(),
            generation: self.moves.generation_of(node)?,
        })
    }

    /// With `return_to_service`, a node marked down for its agent's silence comes back up
    /// now that the agent is heard from again.
    fn back_in_service(&mut self, node: &str) -> Result<FlagPlan, Refusal> {
        if !(self.down_for_silence(node) && self.config.agents.return_to_service) {
            return Ok(FlagPlan::new());
        }
        tracing::info!(%node, "node agent back: the node returns to service");
        self.set_node_flag(&[node.to_owned()], NodeFlag::Down, false, "")
    }
}

/// Adds `more`'s nodes to `plan`.
fn merge(plan: &mut FlagPlan, more: FlagPlan) {
    for (key, (conn, nodes)) in more {
        plan.entry(key)
            .or_insert_with(|| (conn, Vec::new()))
            .1
            .extend(nodes);
    }
}

/// A time in ms since the Unix epoch, as UTC text (`2025-01-31T09:15:02Z`).
fn utc(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| format!("{:.0}", t))
        .unwrap_or_else(|| format!("{ms} ms after the Unix epoch"))
}

/// The reason an agent's `report` gives for its node being unfit, if it did not give it in
/// its last report (`seen`): a drain follows the agent's word once, not at every heartbeat.
fn new_reason(seen: Option<&AgentSeen>, report: &AgentReport) -> Option<String> {
    let before = seen.and_then(|s| s.report.unhealthy.as_deref());
    report
        .unhealthy
        .clone()
        .filter(|why| Some(why.as_str()) != before)
}

/// Whether a node is marked down for its agent's silence ([`Core::agents_tick`]).
fn unreachable(intent: &NodeIntent) -> bool {
    intent
        .down
        .as_deref()
        .is_some_and(|r| r.starts_with(UNREACHABLE_REASON))
}
