//! Each event, matched once to the core call it stands for. What comes back is queued on
//! the batch ([`After`]): answers, commands for shards, and follow-up tasks, all released
//! once the batch is durable.

use super::history::HistoryAsk;
use shardsched_proto::failpoint;
use shardsched_proto::limits::LIST_REPLY_BYTES_MAX;
use shardsched_proto::msg::client_coord::{
    self, MoveRequest, QueueAdmin, Response as ClientResponse,
};
use shardsched_proto::msg::shard_coord::{self, Response as ShardResponse};
use shardsched_proto::msg::{Refusal, RefusalCode, node_coord};
use shardsched_proto::{Peer, Reply};

use super::core_task::{After, CoreTask};
use super::event::{ClientReply, Event, Registration};
use super::followups::{self, Tell};
use crate::core::{
    AgentFlags, Begun, ConnId, FlagPlan, NodeFlag, RegisterError, Registering, flag_commands,
};

impl CoreTask {
    /// Dispatches one event.
    pub(super) fn handle(&mut self, now: u64, event: Event) {
        match event {
            Event::Connected { conn, session } => {
                self.links.insert(conn, super::link::Link::start(session));
            }
            Event::AgentConnected { conn, session } => {
                self.agent_sessions.insert(conn, session);
            }
            Event::Agent {
                conn,
                peer,
                request,
                reply,
            } => {
                let answer = self.agent(now, conn, &peer, request);
                self.after.push(After::Agent(reply, answer));
            }
            Event::Closed { conn, error } => {
                self.links.remove(&conn);
                if self.agent_sessions.remove(&conn).is_some()
                    && let Some(node) = self.core.agent_disconnected(conn)
                {
                    tracing::info!(%node, error = error.as_deref().unwrap_or("closed"), "node agent disconnected");
                }
                if let Some(queue) = self.core.disconnected(conn) {
                    match error {
                        None => tracing::info!(%queue, "shard disconnected; queue offline"),
                        Some(error) => {
                            tracing::warn!(%queue, %error, "shard connection lost; queue offline");
                        }
                    }
                }
            }
            Event::Shard {
                conn,
                remote,
                peer,
                request,
                reply,
                span,
            } => span.in_scope(|| match request {
                shard_coord::Request::Register(register) => self.register(
                    now,
                    Registration {
                        conn,
                        remote,
                        peer,
                        register,
                        reply,
                    },
                ),
                shard_coord::Request::Status(status) => {
                    let answer = self.core.status(conn, &peer.name, status);
                    if answer.is_ok() {
                        self.history_due(now, &peer.name, conn);
                    }
                    self.answer_shard(reply, answer.map(|()| ShardResponse::Ack));
                }
                shard_coord::Request::Released(released) => {
                    let answer = self.core.moves_released(now, conn, &peer.name, &released);
                    self.answer_shard(reply, answer.map(|()| ShardResponse::Ack));
                }
                shard_coord::Request::Agents { nodes } => {
                    let answer = ShardResponse::Agents(self.core.agent_addresses(&nodes));
                    self.answer_shard(reply, Ok(answer));
                }
            }),
            Event::Client {
                peer,
                request,
                reply,
                span,
            } => span.in_scope(|| self.client(now, peer, request, reply)),
            Event::MoveAnswer { command, response } => {
                self.core
                    .moves_answer(now, &command.queue, &command.request, &response);
            }
            Event::HolderProbed {
                alive,
                holder,
                registration,
            } => self.holder_probed(now, alive, holder, registration),
            Event::RemovalAnswer { removal, answer } => {
                self.core.removal_answer(now, removal, answer);
            }
            Event::HistoryPulled { removal, pulled } => {
                self.core.removal_pulled(now, removal, pulled);
            }
            Event::ConfigRead { peer, file, reply } => {
                match file.and_then(|file| self.core.begin_reload(now, file)) {
                    Ok(removal) => {
                        self.removals.insert(removal, (peer, reply));
                    }
                    Err(refusal) => self.answer(reply, Err(refusal)),
                }
            }
            Event::Status { reply } => {
                // The views as of this batch, sent once what they show is durable.
                let status = super::telemetry::cluster_status(&self.core, now);
                self.after.push(After::Spawn(Box::pin(async move {
                    let _ = reply.send(status);
                })));
            }
        }
    }

    /// A user's or an admin's request.
    fn client(&mut self, now: u64, peer: Peer, request: client_coord::Request, reply: ClientReply) {
        use client_coord::Request as R;
        let answer = match request {
            R::Routes => Ok(ClientResponse::Routes(self.core.routes())),
            R::Queues => Ok(ClientResponse::Queues(self.core.queue_list())),
            R::Resources { queue, start } => self
                .core
                .resources_page(queue.as_deref(), start, LIST_REPLY_BYTES_MAX)
                .map(|(nodes, next)| ClientResponse::Resources { nodes, next }),
            R::Moves => {
                let (moves, truncated) = self.core.move_list();
                Ok(ClientResponse::Moves { moves, truncated })
            }
            R::Jobs(query) => return self.jobs(&peer, &query, reply),
            R::History(query) => return self.history_ask(&peer, HistoryAsk::Jobs(query), reply),
            R::Usage(query) => return self.history_ask(&peer, HistoryAsk::Usage(query), reply),
            R::QueueControl { queue, action } => {
                let req = QueueAdmin {
                    queue,
                    action,
                    reason: String::new(),
                    release_to: None,
                };
                return self.queue_change(now, &peer, req, false, reply);
            }
            R::QueueAdmin(req) => return self.queue_change(now, &peer, req, true, reply),
            R::Move(req) if req.dry_run => return self.dry_run(&req, reply),
            R::Move(req) => self.move_between(now, &peer, &req),
            R::CancelMove { move_id } => {
                failpoint::hit("coord.move.before_cancel");
                self.core.cancel_move(now, move_id).map(|returned| {
                    tracing::info!(%peer, move_id = move_id.0, returned = returned.len(), "move cancelled");
                    ClientResponse::Cancelled { returned }
                })
            }
            R::MoveNodes { nodes, to } => self.core.move_nodes(now, &nodes, &to).map(|move_id| {
                tracing::info!(%peer, %to, ?move_id, "move nodes");
                ClientResponse::Done { move_id }
            }),
            R::SetNodeState {
                nodes,
                down,
                reason,
            } => {
                if !down && let Err(refusal) = self.core.check_agents_heard(now, &nodes) {
                    return self.answer(reply, Err(refusal));
                }
                return self.node_flag(&peer, &nodes, NodeFlag::Down, down, &reason, reply);
            }
            R::SetNodeDrain {
                nodes,
                drained,
                reason,
            } => {
                return self.node_flag(&peer, &nodes, NodeFlag::Drained, drained, &reason, reply);
            }
            R::AddQueue(spec) => {
                let added = self.core.add_queue_spec(&spec);
                return self.table_change(&peer, added, reply);
            }
            R::UpdateQueue(spec) => {
                let updated = self.core.update_queue(now, &spec);
                return self.table_change(&peer, updated, reply);
            }
            R::RemoveQueue { queue, give_to } => {
                return self.remove_queue(now, peer, queue, give_to, reply);
            }
            R::Reload => {
                let origin = self.core.config().origin.clone();
                let task = followups::read_config(origin, peer, reply, self.events.clone());
                self.after.push(After::Spawn(Box::pin(task)));
                return;
            }
        };
        self.answer(reply, answer);
    }

    fn answer(&mut self, reply: ClientReply, answer: Reply<ClientResponse>) {
        self.after.push(After::Client(reply, answer));
    }

    fn answer_shard(&mut self, reply: super::event::ShardReply, answer: Reply<ShardResponse>) {
        self.after.push(After::Shard(reply, answer));
    }

    /// A shard registers; when another connection holds its queue, that one is probed
    /// first ([`Event::HolderProbed`]).
    fn register(&mut self, now: u64, reg: Registration) {
        if !self.links.contains_key(&reg.conn) {
            let gone = Refusal::new(RefusalCode::Unavailable, "the connection has ended");
            return self.answer_shard(reg.reply, Err(gone));
        }
        let registered = self.core.register_shard(now, registering(&reg));
        match registered {
            Ok(assignment) => self.registered(reg, assignment),
            Err(RegisterError::Refused(refusal)) => self.refuse_registration(reg, refusal),
            Err(RegisterError::Held { conn: holder, .. }) => {
                let Some(link) = self.links.get(&holder) else {
                    return self.holder_probed(now, false, holder, reg);
                };
                let (session, events) = (link.session().clone(), self.events.clone());
                self.after.push(After::Spawn(Box::pin(async move {
                    let alive = followups::alive(session).await;
                    let probed = Event::HolderProbed {
                        alive,
                        holder,
                        registration: reg,
                    };
                    let _ = events.send(probed).await;
                })));
            }
        }
    }

    /// The holder was probed: the core decides ([`Core::register_after_probe`]); a
    /// newcomer whose own connection is gone meanwhile is refused as if the holder lived.
    ///
    /// [`Core::register_after_probe`]: crate::core::Core::register_after_probe
    fn holder_probed(&mut self, now: u64, alive: bool, holder: ConnId, reg: Registration) {
        let alive = alive || !self.links.contains_key(&reg.conn);
        if !alive && let Some(old) = self.links.remove(&holder) {
            old.session().close();
        }
        let registered = self
            .core
            .register_after_probe(now, holder, alive, registering(&reg));
        match registered {
            Ok(assignment) => self.registered(reg, assignment),
            Err(refusal) => self.refuse_registration(reg, refusal),
        }
    }

    fn refuse_registration(&mut self, reg: Registration, refusal: Refusal) {
        tracing::warn!(peer = %reg.peer, remote = %reg.remote, %refusal, "registration refused");
        self.answer_shard(reg.reply, Err(refusal));
    }

    /// The registration answer names generations: it leaves once the batch is durable.
    fn registered(&mut self, reg: Registration, assignment: shard_coord::Assignment) {
        let queue = &reg.register.queue;
        let address = self.core.shard(queue).map(|l| l.address);
        tracing::info!(
            %queue,
            address = ?address,
            generator_id = assignment.generator_id,
            owned = assignment.owned.len(),
            "shard registered"
        );
        self.answer_shard(
            reg.reply,
            Ok(ShardResponse::Registered(Box::new(assignment))),
        );
    }

    /// `jobs`: the plan here, the asking in a follow-up task.
    fn jobs(&mut self, peer: &Peer, query: &shardsched_proto::msg::JobsQuery, reply: ClientReply) {
        let plan = match self.core.jobs_plan(peer, query) {
            Ok(plan) => plan,
            Err(refusal) => return self.answer(reply, Err(refusal)),
        };
        let sessions = plan
            .ask
            .iter()
            .map(|(queue, conn)| {
                let session = self.links.get(conn).map(|l| l.session().clone());
                (queue.clone(), session)
            })
            .collect();
        let task = followups::jobs(plan, sessions, query.queue.is_some(), reply);
        self.after.push(After::Spawn(Box::pin(task)));
    }

    /// `queue enable|disable|start|stop`, with a reason or `--release-to`: core, journal,
    /// then the queue's shard, then the answer — `Done`, or `Reconfigured` with what the
    /// admin should know beyond it when there is any (`notes`: not for the plain
    /// `QueueControl` of older clients).
    fn queue_change(
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
    fn move_between(&mut self, now: u64, peer: &Peer, req: &MoveRequest) -> Reply<ClientResponse> {
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
    fn dry_run(&mut self, req: &MoveRequest, reply: ClientReply) {
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
    fn node_flag(
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
    pub(super) fn node_flag_changed(&mut self, flag: NodeFlag, on: bool, plan: FlagPlan) {
        if !plan.is_empty() {
            self.after.push(After::Notify(flag_tells(flag, on, plan)));
        }
    }

    /// What an agent's word changed in node flags, forwarded to the shards once durable.
    fn agent_flags(&mut self, flags: AgentFlags) {
        self.node_flag_changed(NodeFlag::Down, false, flags.up);
        self.node_flag_changed(NodeFlag::Drained, true, flags.drained);
    }

    /// A node agent's request.
    fn agent(
        &mut self,
        now: u64,
        conn: ConnId,
        peer: &Peer,
        request: node_coord::Request,
    ) -> Reply<node_coord::Response> {
        match request {
            node_coord::Request::Register { listen, report } => {
                let (answer, back) = self
                    .core
                    .agent_register(now, conn, &peer.name, listen, report)?;
                self.agent_flags(back);
                Ok(answer)
            }
            node_coord::Request::Heartbeat(report) => {
                let back = self.core.agent_heartbeat(now, conn, &peer.name, report)?;
                self.agent_flags(back);
                Ok(node_coord::Response::Ack)
            }
        }
    }

    /// `queue add|update`: applied here; the shards it stops or restarts are told once it
    /// is durable.
    fn table_change(
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
    fn remove_queue(
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
    pub(super) fn removals_ended(&mut self) {
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

/// The core's view of a registration the driver holds.
fn registering(reg: &Registration) -> Registering<'_> {
    Registering {
        conn: reg.conn,
        shard_name: &reg.peer.name,
        remote: reg.remote,
        register: &reg.register,
    }
}

/// The shards' commands for a flag change ([`flag_commands`]), to be told.
fn flag_tells(flag: NodeFlag, on: bool, plan: FlagPlan) -> Vec<Tell> {
    flag_commands(plan, flag, on)
        .into_iter()
        .map(|(queue, conn, request)| Tell::node_flag(&queue, conn, request))
        .collect()
}
