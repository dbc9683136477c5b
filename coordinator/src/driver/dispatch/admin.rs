//! An admin's changes: queue state, moves, node flags and the queue table. Each goes
//! core → journal → the shards it concerns → the answer.

use shardsched_proto::failpoint;
use shardsched_proto::msg::client_coord::{MoveRequest, QueueAdmin, Response as ClientResponse};
use shardsched_proto::msg::{Refusal, RefusalCode};
use shardsched_proto::{Peer, Reply};

use super::super::core_task::{After, CoreTask};
use super::super::event::ClientReply;
use super::super::followups::{self, Tell};
use crate::core::{Begun, FlagPlan, NodeFlag, flag_commands};

impl CoreTask {
    /// `queue enable|disable|start|stop`, with a reason or `--release-to`: core, journal,
    /// then the queue's shard, then the answer — `Done`, or `Reconfigured` with what the
    /// admin should know beyond it when there is any (`notes`: not for the plain
    /// `QueueControl` of older clients).
    pub(in crate::driver) fn queue_change(
        &mut self,
        now: u64,
        peer: &Peer,
        req: QueueAdmin,
        notes: bool,
        reply: ClientReply,
    ) {
        let changed = self.core.queue_admin(
            now,
            &req.queue,
            req.action,
            &req.reason,
            req.release_to.as_deref(),
        );
        let control = match changed {
            Ok(control) => control,
            Err(refusal) => return self.answer(reply, Err(refusal)),
        };
        tracing::info!(%peer, queue = %req.queue, action = ?req.action, reason = %req.reason,
            release_to = ?req.release_to, changed = control.changed, move_id = ?control.move_id, "queue control");
        let commands = control
            .notify
            .iter()
            .map(|c| Tell::queue_state(&c.queue, c.conn, c.request()))
            .collect();
        let answer = if !notes || control.notes.is_empty() {
            ClientResponse::Done {
                move_id: control.move_id,
            }
        } else {
            ClientResponse::Reconfigured {
                changes: control.notes,
                move_id: control.move_id,
            }
        };
        self.after.push(After::Tell {
            commands,
            reply,
            answer: Ok(answer),
        });
    }

    /// `queue move HOSTLIST --from A --to B [--deadline D]`.
    pub(in crate::driver) fn move_between(
        &mut self,
        now: u64,
        peer: &Peer,
        req: &MoveRequest,
    ) -> Reply<ClientResponse> {
        let deadline = req.deadline_ms.map(|d| now.saturating_add(d));
        let move_id = self
            .core
            .move_between(now, &req.nodes, &req.from, &req.to, deadline)?;
        tracing::info!(%peer, from = %req.from, to = %req.to, nodes = req.nodes.len(),
            move_id = move_id.0, ?deadline, "move");
        Ok(ClientResponse::Done {
            move_id: Some(move_id),
        })
    }

    /// `--dry-run`: checks the move as if it were to start, then asks the donor what
    /// releasing the nodes would do. Nothing changes anywhere.
    pub(in crate::driver) fn dry_run(&mut self, req: &MoveRequest, reply: ClientReply) {
        let from = &req.from;
        let session = self
            .core
            .check_move(&req.nodes, from, &req.to)
            .and_then(|()| {
                let conn = self.core.shard(from).map(|l| l.conn);
                conn.and_then(|c| self.links.get(&c)).ok_or_else(|| {
                    Refusal::new(
                        RefusalCode::Unavailable,
                        format!(
                            "queue {from}'s shard is not connected: it cannot say when the \
                             nodes would be free"
                        ),
                    )
                })
            })
            .map(|link| link.session().clone());
        match session {
            Ok(session) => {
                let task = followups::dry_run(from.clone(), session, req.nodes.clone(), reply);
                self.after.push(After::Spawn(Box::pin(task)));
            }
            Err(refusal) => self.answer(reply, Err(refusal)),
        }
    }

    /// `resource drain|undrain|down|up`: journaled first, then forwarded to the shards that
    /// have the nodes now, one request per queue and reason (a node flagged again without
    /// a reason keeps its own). A shard that is offline, or does not take it now, gets the
    /// flag when it registers: the flag is the coordinator's intent either way.
    pub(in crate::driver) fn node_flag(
        &mut self,
        peer: &Peer,
        nodes: &[String],
        flag: NodeFlag,
        on: bool,
        reason: &str,
        reply: ClientReply,
    ) {
        failpoint::hit("coord.node_flag.before_core");
        let plan = match self.core.set_node_flag(nodes, flag, on, reason) {
            Ok(plan) => plan,
            Err(refusal) => return self.answer(reply, Err(refusal)),
        };
        tracing::info!(%peer, nodes = nodes.len(), ?flag, on, %reason, "node flag");
        self.after.push(After::Tell {
            commands: flag_tells(flag, on, plan),
            reply,
            answer: Ok(ClientResponse::Done { move_id: None }),
        });
    }

    /// A node flag the coordinator changed on its own (an agent silent past the timeout, or
    /// back in service): forwarded to the shards that have the nodes, once durable.
    pub(in crate::driver) fn node_flag_changed(
        &mut self,
        flag: NodeFlag,
        on: bool,
        plan: FlagPlan,
    ) {
        if !plan.is_empty() {
            self.after.push(After::Notify(flag_tells(flag, on, plan)));
        }
    }

    /// `queue add|update`: applied here; the shards it stops or restarts are told once it
    /// is durable.
    pub(in crate::driver) fn table_change(
        &mut self,
        peer: &Peer,
        change: Result<crate::core::Reconfig, Refusal>,
        reply: ClientReply,
    ) {
        match change {
            Ok(done) => self.table_changed(peer, done, reply),
            Err(refusal) => self.answer(reply, Err(refusal)),
        }
    }

    /// `queue remove Q [--give-to R]`: begun in the core ([`Core::begin_remove`]); its
    /// end comes through [`Core::removals_done`] at the end of a batch.
    ///
    /// [`Core::begin_remove`]: crate::core::Core::begin_remove
    /// [`Core::removals_done`]: crate::core::Core::removals_done
    pub(in crate::driver) fn remove_queue(
        &mut self,
        now: u64,
        peer: Peer,
        queue: String,
        give_to: Option<String>,
        reply: ClientReply,
    ) {
        match self.core.begin_remove(now, &queue, give_to.as_deref()) {
            Ok(Begun::Done(done)) => self.table_changed(&peer, done, reply),
            Ok(Begun::Pending(removal)) => {
                self.removals.insert(removal, (peer, reply));
            }
            Err(refusal) => self.answer(reply, Err(refusal)),
        }
    }

    /// Removals that ended in this batch: the admin is answered once the shards were told
    /// the change (or, refused, their queues' state back).
    pub(in crate::driver) fn removals_ended(&mut self) {
        for done in self.core.removals_done() {
            let Some((peer, reply)) = self.removals.remove(&done.removal) else {
                continue;
            };
            match done.outcome {
                Ok(change) => self.table_changed(&peer, change, reply),
                Err(refusal) => {
                    let commands = done.re_enable.iter().map(Tell::re_enable).collect();
                    self.after.push(After::Tell {
                        commands,
                        reply,
                        answer: Err(refusal),
                    });
                }
            }
        }
    }
}

/// The shards' commands for a flag change ([`flag_commands`]), to be told.
fn flag_tells(flag: NodeFlag, on: bool, plan: FlagPlan) -> Vec<Tell> {
    flag_commands(plan, flag, on)
        .into_iter()
        .map(|(queue, conn, request)| Tell::node_flag(&queue, conn, request))
        .collect()
}
