//! Where a delivered message goes: the coordinator, a shard (its registration connection,
//! or its connection to a node agent) or a node agent.

use super::*;

/// Who a delivered message went to.
pub(super) enum Receiver {
    Coordinator,
    Shard(String),
    Agent(String),
}

impl World {
    /// Hands `packet` to its receiver's inbox; returns who that is.
    pub(super) fn route(&mut self, packet: Packet) -> Option<Receiver> {
        if packet.to_coordinator {
            if let Body::ShardRequest {
                request: shardsched_wire::msg::shard_coord::Request::Status(status),
                ..
            } = &packet.body
                && let Some(batch) = &status.usage
            {
                self.checker.usage.delivered(packet.conn, batch);
            }
            self.coord.push(CoordEvent::Packet(packet));
            return Some(Receiver::Coordinator);
        }
        let conn = packet.conn;
        match &packet.body {
            Body::AgentAnswer { .. } | Body::Owner { .. } => {
                let agent = self.agents.values_mut().find(|a| a.conn() == Some(conn))?;
                agent.push(AgentEvent::Packet(packet));
                Some(Receiver::Agent(agent.node.clone()))
            }
            Body::ToAgent { .. } => {
                let (_, node) = self.agent_link(conn)?;
                let agent = self.agents.get_mut(&node)?;
                agent.push(AgentEvent::Packet(packet));
                Some(Receiver::Agent(node))
            }
            Body::FromAgent { .. } => {
                let (queue, _) = self.agent_link(conn)?;
                self.shards
                    .get_mut(&queue)?
                    .push(ShardEvent::Packet(packet));
                Some(Receiver::Shard(queue))
            }
            _ => {
                let queue = self.shard_on(conn)?;
                self.shards
                    .get_mut(&queue)?
                    .push(ShardEvent::Packet(packet));
                Some(Receiver::Shard(queue))
            }
        }
    }

    /// The shard and the node of a shard's connection to a node agent.
    pub(super) fn agent_link(&self, conn: ConnId) -> Option<(String, String)> {
        self.shards.values().find_map(|s| {
            let executor = s.executor.as_ref().filter(|_| s.alive)?;
            let (node, _) = executor.conns.iter().find(|(_, c)| **c == conn)?;
            Some((s.queue.clone(), node.clone()))
        })
    }
}
