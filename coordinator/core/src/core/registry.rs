//! The shard registry: which connection serves each queue, and what it last reported.
//!
//! This is observation, kept apart from intent: a report never changes who owns a node, and
//! a shard that disconnects takes its observations with it (its queue shows offline) while
//! the coordinator's ownership stays as it was.

use std::collections::HashMap;
use std::net::SocketAddr;

use shardsched_wire::msg::shard_coord::{Assignment, Register, ShardStatus};
use shardsched_wire::msg::{
    ClusterDescription, ClusterFormat, NodeStatus, QueueStatus, Refusal, RefusalCode,
};

use super::{ConnId, Core};

/// A connected, registered shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardLink {
    /// Its connection.
    pub conn: ConnId,
    /// Where clients reach it.
    pub address: SocketAddr,
    /// Its last report, if any.
    pub report: Option<Report>,
}

/// A shard's last status report, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Its number on the connection (wire `ShardStatus.seq`): an older one arriving late
    /// is dropped.
    pub seq: u64,
    /// When the shard made it (its clock, milliseconds since the Unix epoch).
    pub time_ms: u64,
    /// Its queue counters.
    pub queue: QueueStatus,
    /// Its nodes' states, by node index (only nodes of the cluster are kept).
    pub nodes: HashMap<usize, NodeStatus>,
}

/// A shard's registration as it arrives: its connection, its certificate's name, where it
/// connected from, and what it sent.
#[derive(Clone, Copy, Debug)]
pub struct Registering<'a> {
    /// Its connection.
    pub conn: ConnId,
    /// Its certificate's name (a shard registers for the queue it names).
    pub shard_name: &'a str,
    /// Where it connected from.
    pub remote: SocketAddr,
    /// Its `Register`.
    pub register: &'a Register,
}

/// Why a registration was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// Refused: send this back.
    Refused(Refusal),
    /// Another connection is registered for the queue. The driver checks whether it is still
    /// alive: if it is, it refuses this one ([`Core::refuse_second_shard`]); if not, it calls
    /// [`Core::disconnected`] for it and registers again.
    Held {
        /// The queue.
        queue: String,
        /// The connection that holds it.
        conn: ConnId,
    },
}

impl Core {
    /// A shard (certificate name `shard_name`, connection `conn` from `remote`) registers.
    pub fn register(
        &mut self,
        conn: ConnId,
        shard_name: &str,
        remote: SocketAddr,
        reg: &Register,
    ) -> Result<Assignment, RegisterError> {
        let refuse = |code, message: String| RegisterError::Refused(Refusal::new(code, message));
        if reg.queue != shard_name {
            return Err(refuse(
                RefusalCode::Forbidden,
                format!(
                    "shard {shard_name} may not register for queue {}: a shard registers for the queue its certificate names",
                    reg.queue
                ),
            ));
        }
        let qi = self
            .queue_index(&reg.queue)
            .ok_or_else(|| RegisterError::Refused(self.no_such_queue(&reg.queue)))?;
        if reg.listen.port() == 0 {
            return Err(refuse(
                RefusalCode::Invalid,
                format!(
                    "queue {}: listen address {} has port 0",
                    reg.queue, reg.listen
                ),
            ));
        }
        if let Some(link) = &self.shards[qi]
            && link.conn != conn
        {
            return Err(RegisterError::Held {
                queue: reg.queue.clone(),
                conn: link.conn,
            });
        }
        let mut address = reg.listen;
        if address.ip().is_unspecified() {
            // A shard listening on every interface is reached where it connected from.
            address.set_ip(remote.ip());
        }
        let generator_id = self.generators.get(&reg.queue).copied().unwrap_or_default();
        if let Some(last) = reg.last_job_id
            && last.generator_id() != generator_id
        {
            tracing::warn!(
                queue = %reg.queue,
                last_job = last.0,
                last_generator = last.generator_id(),
                generator_id,
                "shard's last job id carries another generator id (was the coordinator's state dir replaced?)"
            );
        }
        let unowned_allocated: Vec<&str> = reg
            .held
            .iter()
            .filter(|h| h.allocated && self.owner_of(&h.node.node) != Some(reg.queue.as_str()))
            .map(|h| h.node.node.as_str())
            .collect();
        if !unowned_allocated.is_empty() {
            tracing::warn!(
                queue = %reg.queue,
                nodes = %shardsched_resource::encode_hostlist(&unowned_allocated),
                "shard holds allocations on nodes it no longer owns; they keep running"
            );
        }
        let previous = self.shards[qi].replace(ShardLink {
            conn,
            address,
            report: None,
        });
        if previous.map(|l| l.address) != Some(address) {
            self.bump();
        }
        self.debug_check();
        Ok(self.assignment(qi))
    }

    /// A shard registers, and everything unacknowledged for it is sent again:
    /// [`Core::register`], then, once accepted, [`Core::moves_registered`] with what it says
    /// it holds. The driver answers with the assignment once the batch is durable (it names
    /// generations).
    pub fn register_shard(
        &mut self,
        now_ms: u64,
        reg: Registering<'_>,
    ) -> Result<Assignment, RegisterError> {
        let assignment = self.register(reg.conn, reg.shard_name, reg.remote, reg.register)?;
        self.moves_registered(now_ms, &reg.register.queue, &reg.register.held);
        Ok(assignment)
    }

    /// A registration that found its queue [held](RegisterError::Held) by connection
    /// `holder`, once the driver probed it: `alive` (it answered, or the newcomer's own
    /// connection is gone already) refuses the newcomer; a dead holder is disconnected and
    /// the newcomer registered in its place ([`Core::register_shard`]).
    pub fn register_after_probe(
        &mut self,
        now_ms: u64,
        holder: ConnId,
        alive: bool,
        reg: Registering<'_>,
    ) -> Result<Assignment, Refusal> {
        let queue = &reg.register.queue;
        if alive {
            return Err(self.refuse_second_shard(queue));
        }
        tracing::info!(%queue, "the shard that held the queue does not answer; replacing it");
        self.disconnected(holder);
        match self.register_shard(now_ms, reg) {
            Ok(assignment) => Ok(assignment),
            Err(RegisterError::Refused(refusal)) => Err(refusal),
            Err(RegisterError::Held { queue, .. }) => Err(self.refuse_second_shard(&queue)),
        }
    }

    /// The refusal for a second live shard of a queue.
    pub fn refuse_second_shard(&self, queue: &str) -> Refusal {
        let at = self
            .queue_index(queue)
            .and_then(|qi| self.shards[qi].as_ref())
            .map(|l| l.address.to_string())
            .unwrap_or_else(|| "another address".into());
        Refusal::new(
            RefusalCode::Unavailable,
            format!(
                "queue {queue} already has a live shard (at {at}); only one shard may serve a queue"
            ),
        )
    }

    /// A connection ended. If it was a registered shard, its queue goes offline; returns the
    /// queue's name then.
    pub fn disconnected(&mut self, conn: ConnId) -> Option<String> {
        let qi = self
            .shards
            .iter()
            .position(|l| l.as_ref().is_some_and(|l| l.conn == conn))?;
        self.shards[qi] = None;
        self.removals_disconnected(conn);
        self.bump();
        self.debug_check();
        Some(self.config.queues[qi].name.clone())
    }

    /// A shard's status report: stored as observation, the whole rows or a change to those
    /// of the link's last report (wire `ShardStatus.nodes_complete`). Refused from a
    /// connection that has not registered; dropped (with `Ok`: the shard has moved on)
    /// when numbered at or below the last one applied on the connection (wire
    /// `ShardStatus.seq`).
    pub fn status(
        &mut self,
        conn: ConnId,
        shard_name: &str,
        status: ShardStatus,
    ) -> Result<(), Refusal> {
        let qi = self.registered(conn, shard_name)?;
        let last = self.shards[qi].as_ref().and_then(|l| l.report.as_ref());
        if last.is_some_and(|r| status.seq <= r.seq) {
            return Ok(());
        }
        self.allowance_reports(qi, &status.allowances);
        self.fairshare_report(qi, status.usage.as_ref(), status.factors_version);
        let Some(link) = self.shards[qi].as_mut() else {
            return Ok(());
        };
        // A whole report replaces the rows; a change (the shard sends one after a report
        // this link acknowledged, wire `nodes_complete`) applies to them.
        let mut nodes = match link.report.take() {
            Some(report) if !status.nodes_complete => report.nodes,
            _ => HashMap::with_capacity(status.nodes.len()),
        };
        let index = |name: &str| self.moves.nodes().index_of(name);
        for name in &status.nodes_gone {
            if let Some(n) = index(name) {
                nodes.remove(&n);
            }
        }
        for node in status.nodes {
            if let Some(n) = index(&node.name) {
                nodes.insert(n, node);
            }
        }
        link.report = Some(Report {
            seq: status.seq,
            time_ms: status.time_ms,
            queue: status.queue,
            nodes,
        });
        Ok(())
    }

    /// The queue a connection is registered for, if it is.
    pub fn registered_queue(&self, conn: ConnId) -> Option<&str> {
        self.shards
            .iter()
            .position(|l| l.as_ref().is_some_and(|l| l.conn == conn))
            .map(|qi| self.config.queues[qi].name.as_str())
    }

    /// A queue's shard link, if connected.
    pub fn shard(&self, queue: &str) -> Option<&ShardLink> {
        self.queue_index(queue)
            .and_then(|qi| self.shards[qi].as_ref())
    }

    pub(super) fn registered(&self, conn: ConnId, shard_name: &str) -> Result<usize, Refusal> {
        self.queue_index(shard_name)
            .filter(|&qi| self.shards[qi].as_ref().is_some_and(|l| l.conn == conn))
            .ok_or_else(|| {
                Refusal::new(
                    RefusalCode::Unavailable,
                    format!(
                        "shard {shard_name} is not registered on this connection: register first"
                    ),
                )
            })
    }

    fn assignment(&self, qi: usize) -> Assignment {
        let q = &self.config.queues[qi];
        // From the move machine, in cluster order: a node still outgoing to this queue is
        // incoming, not owned, until its donor released it. (The driver makes the journal
        // durable before it sends this answer.)
        let owned = self.moves.owned_for(&q.name);
        let incoming = self.moves.incoming_for(&q.name);
        let flags = self.flags_of(
            owned
                .iter()
                .map(|ng| ng.node.as_str())
                .chain(incoming.iter().map(|(_, i)| i.node.node.as_str())),
        );
        Assignment {
            generator_id: self.generators.get(&q.name).copied().unwrap_or_default(),
            cluster: ClusterDescription {
                format: ClusterFormat::Spec,
                text: self.config.cluster.spec_toml.clone(),
                load_allowlist: self.config.cluster.load_allowlist.clone(),
            },
            queue: self.queue_config_at(qi),
            owned,
            incoming,
            flags,
            limits: self.limits.clone(),
            allowances: self.allowances_of(&q.name),
            fairshare: self.fairshare_assignment(&q.name),
        }
    }
}
