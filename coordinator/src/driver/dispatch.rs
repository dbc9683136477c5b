//! Each event, matched once to the core call it stands for. What comes back is queued on
//! the batch ([`After`]): answers, commands for shards, and follow-up tasks, all released
//! once the batch is durable.

mod admin;
mod registration;

use super::history::HistoryAsk;
use shardsched_proto::failpoint;
use shardsched_proto::limits::LIST_REPLY_BYTES_MAX;
use shardsched_proto::msg::client_coord::{self, QueueAdmin, Response as ClientResponse};
use shardsched_proto::msg::node_coord;
use shardsched_proto::msg::shard_coord::{self, Response as ShardResponse};
use shardsched_proto::{Peer, Reply};

use super::core_task::{After, CoreTask};
use super::event::{ClientReply, Event, Registration};
use super::followups::{self, Tell};
use crate::core::{AgentFlags, ConnId, NodeFlag};

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
                shard_coord::Request::Status(mut status) => {
                    let waiting_on = std::mem::take(&mut status.waiting_on);
                    let answer = self.core.status(conn, &peer.name, *status);
                    if answer.is_ok() {
                        self.history_due(now, &peer.name, conn);
                        self.facts_due(conn, &waiting_on);
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
            R::MoveOf { move_id } => {
                let (moves, truncated) = self.core.move_of(move_id);
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
            R::Limits => Ok(ClientResponse::Limits(self.core.limits().clone())),
            R::SetLimit { kind, scope, value } => {
                let commands = match self.core.set_limit(kind, scope.clone(), value) {
                    Ok(commands) => commands,
                    Err(refusal) => return self.answer(reply, Err(refusal)),
                };
                tracing::info!(%peer, %kind, %scope, ?value, "limit set");
                let commands = commands
                    .into_iter()
                    .filter_map(|(conn, request)| {
                        let queue = self.core.registered_queue(conn)?.to_owned();
                        Some(Tell::limits(&queue, conn, request))
                    })
                    .collect();
                self.after.push(After::Tell {
                    commands,
                    reply,
                    answer: Ok(ClientResponse::Done { move_id: None }),
                });
                return;
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
}
