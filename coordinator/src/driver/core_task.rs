//! The task that owns the [`Core`]: it takes events in batches, journals what a batch
//! changed, and — once that is durable — publishes the routing table, answers, and sends
//! the commands the batch released.
//!
//! ```text
//! loop:
//!   wait for an event, or the next wakeup (a move's re-send or deadline, a removal's wait)
//!   take it and every event already queued (≤ BATCH_EVENTS_MAX): dispatch each to the core
//!   core.moves_tick(now); core.removals_tick(now) (a removal waiting for its move goes
//!   on or gives up); the removals that ended are answered (after the write)
//!   write = core.journal_take() → journal.write(write) (group commit, fsync)
//!                                → core.journal_done(write)      a failed write stops here
//!   routes.store(core.routes())   if the epoch moved
//!   core.moves_to_send() → one task per command; its answer comes back as an event
//!   the batch's answers, commands queued on the shards' links, follow-up tasks
//!   core.removals_to_send() → likewise (on the shard's ordered link, or a history pull)
//! ```
//!
//! No answer leaves before the journal holds what it depends on, and the journal is
//! written in the order the core changed: one owner, one order, whatever the scheduling
//! of connection tasks.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use shardsched_proto::Reply;
use shardsched_proto::failpoint;
use shardsched_proto::msg::client_coord::Response as ClientResponse;
use shardsched_proto::msg::shard_coord::Response as ShardResponse;
use shardsched_proto::msg::{RouteTable, coord_shard, node_coord};
use shardsched_telemetry::logs::move_span;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use super::event::{AgentReply, ClientReply, Event, ShardReply};
use super::followups::{self, Tell};
use super::link::Link;
use super::telemetry::Counters;
use super::{BATCH_EVENTS_MAX, DriverError, SHARD_COMMAND_TIMEOUT, now_ms};
use crate::core::{AgentCommand, ConnId, Core, MoveCommand, NodeFlag, Reconfig, RemovalId};
use crate::journal::CoordJournal;

/// A follow-up task, spawned once its batch is durable.
pub(super) type Task = Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What a batch does once its journal write is durable, in the order it was decided.
pub(super) enum After {
    /// Answer a shard.
    Shard(ShardReply, Reply<ShardResponse>),
    /// Answer a client.
    Client(ClientReply, Reply<ClientResponse>),
    /// Answer a node agent.
    Agent(AgentReply, Reply<node_coord::Response>),
    /// Queue commands on shards' links (in this order), then answer the client once each
    /// was answered or timed out.
    Tell {
        commands: Vec<Tell>,
        reply: ClientReply,
        answer: Reply<ClientResponse>,
    },
    /// Queue commands on shards' links (in this order) and log what comes of them: a
    /// change no client waits for (a node down because its agent fell silent).
    Notify(Vec<Tell>),
    /// Spawn a task that needs no order (a fan-out, a probe, a file read).
    Spawn(Task),
}

/// See the module documentation.
pub(super) struct CoreTask {
    pub(super) core: Core,
    journal: CoordJournal,
    routes: Arc<ArcSwap<RouteTable>>,
    /// Connected shards' links, by connection.
    pub(super) links: HashMap<ConnId, Link>,
    /// Connected node agents' sessions, by connection.
    pub(super) agent_sessions: HashMap<ConnId, shardsched_proto::Session>,
    /// The core task's own queue, for follow-up tasks' continuations and move answers.
    pub(super) events: mpsc::Sender<Event>,
    /// Removals under way in the core, with whom to answer.
    pub(super) removals: HashMap<RemovalId, (shardsched_proto::Peer, ClientReply)>,
    /// What the current batch does once durable.
    pub(super) after: Vec<After>,
    /// What the driver counts for `/metrics`.
    pub(super) counters: Counters,
    /// The job history store and its pulls.
    pub(super) history: super::history::History,
}

impl CoreTask {
    /// The task over `core` and `journal`, publishing to `routes`; `events` is the sending
    /// side of the queue it will run on.
    pub(super) fn new(
        core: Core,
        journal: CoordJournal,
        routes: Arc<ArcSwap<RouteTable>>,
        events: mpsc::Sender<Event>,
        history: super::history::History,
    ) -> CoreTask {
        CoreTask {
            core,
            journal,
            routes,
            links: HashMap::new(),
            agent_sessions: HashMap::new(),
            events,
            removals: HashMap::new(),
            after: Vec::new(),
            counters: Counters::default(),
            history,
        }
    }

    /// Runs the loop of the module documentation until a journal write fails (the task
    /// holds a sender of `queued` itself, so the queue never closes).
    pub(super) async fn run(
        mut self,
        mut queued: mpsc::Receiver<Event>,
    ) -> Result<(), DriverError> {
        loop {
            let first = match self.next_wakeup_ms() {
                Some(at) => {
                    let sleep = Duration::from_millis(at.saturating_sub(now_ms()));
                    tokio::select! {
                        event = queued.recv() => event,
                        () = tokio::time::sleep(sleep) => None,
                    }
                }
                None => queued.recv().await,
            };
            let now = now_ms();
            let epoch = self.core.epoch();
            if let Some(event) = first {
                self.handle(now, event);
                for _ in 1..BATCH_EVENTS_MAX {
                    let Ok(event) = queued.try_recv() else { break };
                    self.handle(now, event);
                }
            }
            self.core.moves_tick(now);
            self.core.fairshare_tick(now);
            let silent = self.core.agents_tick(now);
            self.node_flag_changed(NodeFlag::Down, true, silent);
            self.core.removals_tick(now);
            self.removals_ended();
            self.commit().await?;
            if self.core.epoch() != epoch {
                self.routes.store(Arc::new(self.core.routes()));
            }
            self.release();
        }
    }

    /// Journals what the batch changed, if anything; returns once it is durable.
    async fn commit(&mut self) -> Result<(), DriverError> {
        let Some(write) = self.core.journal_take() else {
            return Ok(());
        };
        let started = Instant::now();
        let commit = match self.journal.write(&write.delta).await {
            Ok(commit) => commit,
            Err(e) => {
                tracing::error!(error = %e, "could not write the coordinator journal; stopping");
                return Err(e.into());
            }
        };
        self.counters.committed(started.elapsed(), commit);
        if !write.steps.is_empty() {
            failpoint::hit("coord.move.after_journal");
        }
        for step in &write.steps {
            failpoint::hit(format_args!("coord.move.after_journal_{step}"));
        }
        self.core.journal_done(&write);
        self.counters.steps_durable(&write.steps_took);
        Ok(())
    }

    /// The batch is durable: its answers, commands and follow-ups go, in order — the move
    /// commands first, as a move's next step waits on them and on nothing the answers carry.
    fn release(&mut self) {
        for command in self.core.moves_to_send() {
            let Some(link) = self.links.get(&command.conn) else {
                continue;
            };
            let session = link.session().clone();
            tokio::spawn(send_move_command(session, command, self.events.clone()));
        }
        for after in std::mem::take(&mut self.after) {
            match after {
                After::Shard(reply, answer) => {
                    let _ = reply.send(answer);
                }
                After::Client(reply, answer) => {
                    let _ = reply.send(answer);
                }
                After::Agent(reply, answer) => {
                    let _ = reply.send(answer);
                }
                After::Tell {
                    commands,
                    reply,
                    answer,
                } => {
                    let queued = self.queue_on_links(commands);
                    tokio::spawn(followups::tell(queued, reply, answer));
                }
                After::Notify(commands) => {
                    let queued = self.queue_on_links(commands);
                    tokio::spawn(followups::notify(queued));
                }
                After::Spawn(task) => {
                    tokio::spawn(task);
                }
            }
        }
        for command in self.core.agents_to_send() {
            let Some(session) = self.agent_sessions.get(&command.conn) else {
                continue;
            };
            tokio::spawn(send_owner(session.clone(), command));
        }
        for (conn, request) in self.core.allowances_to_send() {
            let Some(link) = self.links.get(&conn) else {
                continue;
            };
            tokio::spawn(send_allowances(link.session().clone(), request));
        }
        for (conn, request) in self.core.fairshare_to_send() {
            let Some(link) = self.links.get(&conn) else {
                continue;
            };
            tokio::spawn(send_allowances(link.session().clone(), request));
        }
        for command in self.core.removals_to_send() {
            let link = self.links.get(&command.conn).cloned();
            let history = (self.history.store(), self.history.pulling());
            let step = followups::removal_step(command, link, history, self.events.clone());
            tokio::spawn(step);
        }
    }

    /// Queues each command on its shard's link (in order); those whose shard is gone are
    /// dropped (the shard gets the state at its next registration).
    fn queue_on_links(
        &self,
        commands: Vec<Tell>,
    ) -> Vec<(Tell, tokio::sync::oneshot::Receiver<super::link::Answer>)> {
        commands
            .into_iter()
            .filter_map(|tell| {
                let link = self.links.get(&tell.conn)?;
                let receiver = link.send_ordered(tell.request.clone());
                Some((tell, receiver))
            })
            .collect()
    }

    /// When the loop next has work without an event: a move's re-send or deadline, a
    /// removal's wait running out, or an agent reaching the heartbeat timeout.
    fn next_wakeup_ms(&self) -> Option<u64> {
        let waits = self.core.removals_next_wakeup();
        let agents = self.core.agents_next_wakeup();
        self.core
            .moves_next_wakeup()
            .into_iter()
            .chain(waits)
            .chain(agents)
            .min()
    }

    /// Answers a queue table change once durable, after telling the shards it stops and
    /// restarts.
    pub(super) fn table_changed(
        &mut self,
        peer: &shardsched_proto::Peer,
        done: Reconfig,
        reply: ClientReply,
    ) {
        tracing::info!(%peer, changes = ?done.changes, "queue table changed");
        let stops = done
            .stop
            .iter()
            .map(|c| Tell::stop(&c.queue, c.conn, c.request()));
        let restarts = done
            .restart
            .iter()
            .map(|c| Tell::restart(&c.queue, c.conn, c.request()));
        let commands = stops.chain(restarts).collect();
        self.after.push(After::Tell {
            commands,
            reply,
            answer: Ok(ClientResponse::Reconfigured {
                changes: done.changes,
                move_id: done.move_id,
            }),
        });
    }
}

/// Sends a shard its allowances or its fair-share update (durable already). One lost is
/// sent again when the shard's next status report shows it did not apply it
/// (docs/POLICIES.md, "Limits" and "Fair-share").
async fn send_allowances(session: shardsched_proto::Session, request: coord_shard::Request) {
    let sent = super::link::ask(&session, &request, SHARD_COMMAND_TIMEOUT).await;
    if let Err(refusal) = sent {
        tracing::debug!(%refusal, "not delivered; the next report brings it again");
    }
}

/// Tells a node's agent its new owner. One that does not take it learns the owner at its
/// next registration.
async fn send_owner(session: shardsched_proto::Session, command: AgentCommand) {
    let node = command.node;
    match tokio::time::timeout(SHARD_COMMAND_TIMEOUT, session.request(&command.request)).await {
        Ok(Ok(_)) => tracing::debug!(%node, "node agent told its owner"),
        Ok(Err(e)) => tracing::warn!(%node, error = %e, "node agent did not take its owner"),
        Err(_) => tracing::warn!(%node, "node agent did not answer its owner in time"),
    }
}

/// Sends one move command and hands the answer to the core task. A command that gets no
/// answer is not retried here: the move machine sends it again (re-send interval,
/// registration).
async fn send_move_command(
    session: shardsched_proto::Session,
    command: MoveCommand,
    events: mpsc::Sender<Event>,
) {
    let step = command.request.move_step().unwrap_or("other");
    let span = move_span(&command.request, step);
    async move {
        failpoint::hit(format_args!("coord.move.before_send_{step}"));
        tracing::debug!(queue = %command.queue, "sending a move command");
        match super::link::ask(&session, &command.request, SHARD_COMMAND_TIMEOUT).await {
            Ok(response) => {
                failpoint::hit(format_args!("coord.move.after_answer_{step}"));
                let _ = events.send(Event::MoveAnswer { command, response }).await;
            }
            Err(refusal) => {
                tracing::debug!(queue = %command.queue, %refusal, "shard did not take a move command");
            }
        }
    }
    .instrument(span)
    .await;
}
