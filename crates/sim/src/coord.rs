//! The coordinator process: the real [`Core`], its journal in memory (a [`Durable`], the
//! journal's content in the core's types), and the loop of its driver
//! (`coordinator/src/driver`): a batch of events, each matched once to the core call the
//! driver makes, `moves_tick`, the journal write (`journal_take` → applied → `journal_done`),
//! and only then the answers, the ordered commands and `moves_to_send`.
//!
//! Each shard connection has a link: commands that change a shard's state (queue states,
//! node flags, `Reconfigure`) leave one at a time in the order decided, as through the
//! driver's `Link`. The liveness probe of a shard that holds a queue while another
//! registers for it is answered by the network: the holder is alive if its connection is
//! open.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use shardsched_coordinator_core::Config;
use shardsched_coordinator_core::core::{
    AgentFlags, Begun, ConnId, Core, FlagPlan, NodeFlag, Reconfig, RegisterError, Registering,
    RemovalDone, RemovalId, RemovalStep, flag_commands,
};
use shardsched_coordinator_core::records::Durable;
use shardsched_wire::msg::client_coord::{QueueAdmin, QueueSpec};
use shardsched_wire::msg::shard_coord::{self, Register};
use shardsched_wire::msg::{MoveId, Refusal, RefusalCode, coord_node, coord_shard, node_coord};
use shardsched_wire::rpc::Reply;

use crate::net::{Body, Packet};
use crate::shard::Crash;

/// Events the core task takes in one batch at most (the driver's `BATCH_EVENTS_MAX`).
const BATCH_EVENTS_MAX: usize = 256;

/// An admin's request to the coordinator.
#[derive(Clone, Debug)]
pub(crate) enum Admin {
    /// `queue move NODES --from --to [--deadline D]` (`deadline_ms` relative).
    Move {
        nodes: Vec<String>,
        from: String,
        to: String,
        deadline_ms: Option<u64>,
    },
    /// `resource move NODES --to Q` (from whoever owns them).
    MoveNodes { nodes: Vec<String>, to: String },
    /// `queue move --cancel ID`.
    CancelMove(MoveId),
    /// `queue enable|disable|start|stop` with a reason, `--take`, `--release-to`.
    Queue(QueueAdmin),
    /// `resource down|up|drain|undrain NODES`.
    Flag {
        nodes: Vec<String>,
        flag: NodeFlag,
        on: bool,
        reason: String,
    },
    /// `queue add`.
    Add(QueueSpec),
    /// `queue update`.
    Update(QueueSpec),
    /// `queue remove QUEUE [--give-to R]`.
    Remove {
        queue: String,
        give_to: Option<String>,
    },
    /// `reload`, the file edited to this.
    Reload(ReloadFile),
}

/// The configuration file a `reload` reads; shown by its queues in the trace.
#[derive(Clone)]
pub(crate) struct ReloadFile(pub(crate) Box<Config>);

impl std::fmt::Debug for ReloadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queues: Vec<(&str, &[usize])> = self
            .0
            .queues
            .iter()
            .map(|q| (q.name.as_str(), q.definition.as_slice()))
            .collect();
        write!(f, "{queues:?}")
    }
}

/// One input of the coordinator's core task.
#[derive(Debug)]
pub(crate) enum CoordEvent {
    /// A message from a shard.
    Packet(Packet),
    /// A connection ended.
    Closed(ConnId),
    /// An admin's request.
    Admin(Admin),
    /// A removal's step that needs no shard answer came back: its history pull (the
    /// simulator keeps no history store: the checker's ledger accounts for a removed
    /// queue's jobs), or an ask for a shard no longer connected.
    RemovalStep(RemovalId, Result<(), Refusal>, bool),
}

/// What a batch hands to the world once it is durable.
#[derive(Debug, Default)]
pub(crate) struct CoordOut {
    pub(crate) packets: Vec<Packet>,
    pub(crate) lines: Vec<String>,
    /// Nodes the coordinator marked down for their agents' silence (for the checker's
    /// ledger, as an admin's `resource down`).
    pub(crate) silent: Vec<String>,
}

/// A connected shard's ordered commands (the driver's `Link`), each with the removal
/// whose step it is, if any (its answer goes back to the core).
#[derive(Debug, Default)]
struct Link {
    waiting: VecDeque<(coord_shard::Request, Option<RemovalId>)>,
    /// The id of the command sent and not yet answered, and its removal.
    in_flight: Option<(u64, Option<RemovalId>)>,
}

/// See the module documentation.
pub(crate) struct Coordinator {
    /// The configuration file it starts from.
    file: Config,
    /// What the journal holds.
    pub(crate) journal: Durable,
    /// The core, while the process runs.
    pub(crate) core: Option<Core>,
    inbox: VecDeque<CoordEvent>,
    links: BTreeMap<ConnId, Link>,
    /// Reloads under way: the file the admin edited, which becomes the file the process
    /// starts from once the reload is written (a refused one, the admin puts back).
    reloads: BTreeMap<RemovalId, Config>,
    /// Restart once down: at this time.
    pub(crate) restart_at: Option<u64>,
}

impl Coordinator {
    /// A coordinator over configuration `file`, with an empty journal (not started).
    pub(crate) fn new(file: Config) -> Coordinator {
        Coordinator {
            file,
            journal: Durable::default(),
            core: None,
            inbox: VecDeque::new(),
            links: BTreeMap::new(),
            reloads: BTreeMap::new(),
            restart_at: None,
        }
    }

    /// The process starts as the driver's `bind` does: the core from the file and the
    /// journal, and the start's changes written before anything is served.
    pub(crate) fn start(&mut self, now: u64) -> Result<(), String> {
        let (core, durable) = Core::new(self.file.clone(), &self.journal, now)
            .map_err(|e| format!("the coordinator cannot start from its journal: {e}"))?;
        self.journal
            .apply(durable.diff(&self.journal))
            .map_err(|e| format!("the coordinator's start write does not apply: {e}"))?;
        self.core = Some(core);
        self.restart_at = None;
        Ok(())
    }

    /// The process dies: its core, its events and its links are gone.
    pub(crate) fn crash(&mut self) {
        self.core = None;
        self.inbox.clear();
        self.links.clear();
        self.reloads.clear();
    }

    /// Whether it runs.
    pub(crate) fn alive(&self) -> bool {
        self.core.is_some()
    }

    /// Queues an event for the next batch.
    pub(crate) fn push(&mut self, event: CoordEvent) {
        if self.alive() {
            self.inbox.push_back(event);
        }
    }

    /// When the core next has work without an event.
    pub(crate) fn next_wakeup(&self) -> Option<u64> {
        let core = self.core.as_ref()?;
        [
            core.moves_next_wakeup(),
            core.removals_next_wakeup(),
            core.agents_next_wakeup(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether a batch has anything to do at `now`.
    pub(crate) fn due(&self, now: u64) -> bool {
        self.alive() && (!self.inbox.is_empty() || self.next_wakeup().is_some_and(|t| t <= now))
    }

    /// Runs one batch at `now`; `holder_alive` answers the liveness probe of a
    /// connection; `ids` gives request ids. See the module documentation.
    pub(crate) fn batch(
        &mut self,
        now: u64,
        crash: Crash,
        holder_alive: &dyn Fn(ConnId) -> bool,
        ids: &mut dyn FnMut() -> u64,
    ) -> Result<CoordOut, String> {
        let mut out = CoordOut::default();
        let Some(core) = self.core.as_mut() else {
            return Ok(out);
        };
        let take = self.inbox.len().min(BATCH_EVENTS_MAX);
        let events: Vec<CoordEvent> = self.inbox.drain(..take).collect();
        let mut tells = Vec::new();
        for event in events {
            if let CoordEvent::Admin(Admin::Reload(file)) = &event {
                let removal = core.begin_reload(now, (*file.0).clone());
                let answer = match removal {
                    Ok(removal) => {
                        self.reloads.insert(removal, (*file.0).clone());
                        format!("reload: removal {} begun", removal.0)
                    }
                    Err(refusal) => format!("refused {:?}", refusal.code),
                };
                out.lines.push(format!("coord: admin {answer}"));
                continue;
            }
            handle(
                core,
                now,
                event,
                holder_alive,
                &mut self.links,
                &mut tells,
                &mut out,
            );
        }
        core.moves_tick(now);
        core.fairshare_tick(now);
        let silent = core.agents_tick(now);
        out.silent = silent
            .values()
            .flat_map(|(_, nodes)| nodes.clone())
            .collect();
        told(&mut tells, silent, NodeFlag::Down, true);
        core.removals_tick(now);
        let mut edited = None;
        for done in core.removals_done() {
            if let Some(file) = self.reloads.remove(&done.removal) {
                edited = done.outcome.is_ok().then_some(file).or(edited);
            }
            out.lines.push(removal_done(&done, &mut tells));
        }
        if let Some(write) = core.journal_take() {
            if crash == Crash::BeforeWrite {
                return Ok(CoordOut::default());
            }
            self.journal
                .apply(write.delta.clone())
                .map_err(|e| format!("a coordinator journal write does not apply: {e}"))?;
            core.journal_done(&write);
        }
        if let Some(file) = edited.filter(|_| crash != Crash::BeforeWrite) {
            self.file = file;
        }
        if crash != Crash::No {
            return Ok(CoordOut::default());
        }
        for (conn, request) in tells {
            if let Some(link) = self.links.get_mut(&conn) {
                link.waiting.push_back((request, None));
            }
        }
        for command in core.removals_to_send() {
            let link = self.links.get_mut(&command.conn);
            match (command.step, link) {
                (RemovalStep::Ask(request), Some(link)) => {
                    link.waiting.push_back((request, Some(command.removal)));
                }
                (RemovalStep::Ask(_), None) => {
                    let gone = Refusal::new(RefusalCode::Unavailable, "not connected");
                    let event = CoordEvent::RemovalStep(command.removal, Err(gone), true);
                    self.inbox.push_back(event);
                }
                (RemovalStep::PullHistory, _) => {
                    let event = CoordEvent::RemovalStep(command.removal, Ok(()), false);
                    self.inbox.push_back(event);
                }
            }
        }
        for (&conn, link) in &mut self.links {
            send_ordered(conn, link, ids, &mut out);
        }
        for command in core.agents_to_send() {
            let coord_node::Request::Owner { owner, change } = command.request;
            out.packets.push(Packet {
                conn: command.conn,
                to_coordinator: false,
                body: Body::Owner { owner, change },
            });
        }
        let fairshare = core.fairshare_to_send();
        for (conn, request) in core.allowances_to_send().into_iter().chain(fairshare) {
            out.packets.push(Packet {
                conn,
                to_coordinator: false,
                body: Body::Command {
                    id: ids(),
                    request,
                    ordered: false,
                },
            });
        }
        for command in core.moves_to_send() {
            out.packets.push(Packet {
                conn: command.conn,
                to_coordinator: false,
                body: Body::Command {
                    id: ids(),
                    request: command.request,
                    ordered: false,
                },
            });
        }
        Ok(out)
    }
}

/// The link's next ordered command, once the one before it was answered.
fn send_ordered(conn: ConnId, link: &mut Link, ids: &mut dyn FnMut() -> u64, out: &mut CoordOut) {
    if link.in_flight.is_some() {
        return;
    }
    let Some((request, removal)) = link.waiting.pop_front() else {
        return;
    };
    let id = ids();
    link.in_flight = Some((id, removal));
    out.packets.push(Packet {
        conn,
        to_coordinator: false,
        body: Body::Command {
            id,
            request,
            ordered: true,
        },
    });
}

/// One event, matched once to its core call (the driver's `dispatch`).
fn handle(
    core: &mut Core,
    now: u64,
    event: CoordEvent,
    holder_alive: &dyn Fn(ConnId) -> bool,
    links: &mut BTreeMap<ConnId, Link>,
    tells: &mut Vec<(ConnId, coord_shard::Request)>,
    out: &mut CoordOut,
) {
    match event {
        CoordEvent::Closed(conn) => {
            links.remove(&conn);
            if let Some(node) = core.agent_disconnected(conn) {
                out.lines.push(format!("coord: agent {node} disconnected"));
            }
            if let Some(queue) = core.disconnected(conn) {
                out.lines.push(format!("coord: {queue} offline"));
            }
        }
        CoordEvent::Admin(admin) => {
            let answer = self::admin(core, now, admin, tells);
            out.lines.push(format!("coord: admin {answer}"));
        }
        CoordEvent::RemovalStep(removal, outcome, ask) => {
            if ask {
                let answer = outcome.map(|()| coord_shard::Response::Ack { stale: Vec::new() });
                core.removal_answer(now, removal, answer);
            } else {
                core.removal_pulled(now, removal, outcome);
            }
        }
        CoordEvent::Packet(packet) => {
            let conn = packet.conn;
            match packet.body {
                Body::ShardRequest { id, request } => {
                    let answer = shard_request(core, now, conn, request, holder_alive, links);
                    out.packets.push(Packet {
                        conn,
                        to_coordinator: false,
                        body: Body::ShardAnswer { id, answer },
                    });
                }
                Body::CommandAnswer {
                    id,
                    request,
                    answer,
                    ordered,
                } => {
                    if ordered {
                        if let Some(link) = links.get_mut(&conn)
                            && let Some((sent, removal)) = link.in_flight
                            && sent == id
                        {
                            link.in_flight = None;
                            if let Some(removal) = removal {
                                core.removal_answer(now, removal, answer);
                            }
                        }
                        return;
                    }
                    let (Some(queue), Ok(response)) = (core.registered_queue(conn), answer) else {
                        return;
                    };
                    let queue = queue.to_owned();
                    core.moves_answer(now, &queue, &request, &response);
                }
                Body::AgentRequest { id, node, request } => {
                    let answer = agent_request(core, now, conn, &node, request, tells);
                    out.packets.push(Packet {
                        conn,
                        to_coordinator: false,
                        body: Body::AgentAnswer { id, answer },
                    });
                }
                _ => {}
            }
        }
    }
}

/// A shard's request on connection `conn`.
fn shard_request(
    core: &mut Core,
    now: u64,
    conn: ConnId,
    request: shard_coord::Request,
    holder_alive: &dyn Fn(ConnId) -> bool,
    links: &mut BTreeMap<ConnId, Link>,
) -> Reply<shard_coord::Response> {
    let ack = |()| shard_coord::Response::Ack;
    // The shard's certificate names its queue: the connection's.
    let name = || core.registered_queue(conn).map(str::to_owned);
    match request {
        shard_coord::Request::Register(register) => {
            let registered = register_shard(core, now, conn, &register, holder_alive);
            if registered.is_ok() {
                links.entry(conn).or_default();
            }
            registered.map(|a| shard_coord::Response::Registered(Box::new(a)))
        }
        shard_coord::Request::Status(status) => {
            let name = name().unwrap_or_default();
            core.status(conn, &name, *status).map(ack)
        }
        shard_coord::Request::Released(released) => {
            let name = name().unwrap_or_default();
            core.moves_released(now, conn, &name, &released).map(ack)
        }
        shard_coord::Request::Agents { nodes } => {
            Ok(shard_coord::Response::Agents(core.agent_addresses(&nodes)))
        }
    }
}

/// A node agent's request, as the driver's `agent` answers it: its word may bring its
/// node back up or drain it, which the shards that have the node are told.
fn agent_request(
    core: &mut Core,
    now: u64,
    conn: ConnId,
    node: &str,
    request: node_coord::Request,
    tells: &mut Vec<(ConnId, coord_shard::Request)>,
) -> Reply<node_coord::Response> {
    let (answer, flags) = match request {
        node_coord::Request::Register { listen, report } => {
            core.agent_register(now, conn, node, listen, report)?
        }
        node_coord::Request::Heartbeat(report) => (
            node_coord::Response::Ack,
            core.agent_heartbeat(now, conn, node, report)?,
        ),
    };
    let AgentFlags { up, drained } = flags;
    told(tells, up, NodeFlag::Down, false);
    told(tells, drained, NodeFlag::Drained, true);
    Ok(answer)
}

/// A node flag change's commands for the shards that have the nodes.
fn told(tells: &mut Vec<(ConnId, coord_shard::Request)>, plan: FlagPlan, flag: NodeFlag, on: bool) {
    tells.extend(
        flag_commands(plan, flag, on)
            .into_iter()
            .map(|(_, conn, request)| (conn, request)),
    );
}

/// A registration: [`Core::register_shard`], and when another connection holds the queue,
/// its probe and [`Core::register_after_probe`], as the driver does.
fn register_shard(
    core: &mut Core,
    now: u64,
    conn: ConnId,
    register: &Register,
    holder_alive: &dyn Fn(ConnId) -> bool,
) -> Result<shardsched_wire::msg::shard_coord::Assignment, Refusal> {
    // The shard's certificate names its queue.
    let reg = Registering {
        conn,
        shard_name: &register.queue,
        remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1),
        register,
    };
    match core.register_shard(now, reg) {
        Ok(assignment) => Ok(assignment),
        Err(RegisterError::Refused(refusal)) => Err(refusal),
        Err(RegisterError::Held { conn: holder, .. }) => {
            core.register_after_probe(now, holder, holder_alive(holder), reg)
        }
    }
}

/// An admin's request: the core call, and the commands for shards' links. Returns a line
/// for the trace.
fn admin(
    core: &mut Core,
    now: u64,
    admin: Admin,
    tells: &mut Vec<(ConnId, coord_shard::Request)>,
) -> String {
    let outcome: Result<String, Refusal> = match admin {
        Admin::Move {
            nodes,
            from,
            to,
            deadline_ms,
        } => {
            let deadline = deadline_ms.map(|d| now.saturating_add(d));
            core.move_between(now, &nodes, &from, &to, deadline)
                .map(|id| format!("move {} {from}→{to} {nodes:?} deadline {deadline:?}", id.0))
        }
        Admin::MoveNodes { nodes, to } => core
            .move_nodes(now, &nodes, &to)
            .map(|id| format!("move-nodes {nodes:?} → {to}: {id:?}")),
        Admin::CancelMove(id) => core
            .cancel_move(now, id)
            .map(|returned| format!("cancel move {}: returned {returned:?}", id.0)),
        Admin::Queue(req) => core
            .queue_admin(
                now,
                &req.queue,
                req.action,
                &req.reason,
                req.release_to.as_deref(),
            )
            .map(|control| {
                tells.extend(control.notify.iter().map(|c| (c.conn, c.request())));
                format!(
                    "{} {:?} release_to {:?}: move {:?}",
                    req.queue, req.action, req.release_to, control.move_id
                )
            }),
        Admin::Flag {
            nodes,
            flag,
            on,
            reason,
        } => {
            let heard = match (flag, on) {
                (NodeFlag::Down, false) => core.check_agents_heard(now, &nodes),
                _ => Ok(()),
            };
            heard
                .and_then(|()| core.set_node_flag(&nodes, flag, on, &reason))
                .map(|plan| {
                    told(tells, plan, flag, on);
                    format!("{flag:?} {on} {nodes:?}")
                })
        }
        Admin::Add(spec) => core
            .add_queue_spec(&spec)
            .map(|done| table_changed(&done, tells, &spec.name)),
        Admin::Update(spec) => core
            .update_queue(now, &spec)
            .map(|done| table_changed(&done, tells, &spec.name)),
        Admin::Remove { queue, give_to } => {
            core.begin_remove(now, &queue, give_to.as_deref())
                .map(|begun| match begun {
                    Begun::Done(done) => table_changed(&done, tells, &queue),
                    Begun::Pending(removal) => format!("removal {} of {queue} begun", removal.0),
                })
        }
        // Taken by the batch, which keeps the edited file (see `Coordinator::reloads`).
        Admin::Reload(_) => Err(Refusal::new(RefusalCode::Internal, "reload")),
    };
    match outcome {
        Ok(line) => line,
        Err(refusal) => format!("refused {:?}", refusal.code),
    }
}

/// A removal's end: its table change's commands, or its held queues' state back. Returns
/// a line for the trace.
fn removal_done(done: &RemovalDone, tells: &mut Vec<(ConnId, coord_shard::Request)>) -> String {
    let line = match &done.outcome {
        Ok(change) => table_changed(change, tells, "(removal)"),
        Err(refusal) => {
            tells.extend(done.re_enable.iter().map(|c| (c.conn, c.request())));
            format!("refused {:?}", refusal.code)
        }
    };
    format!("coord: admin removal {} ended: {line}", done.removal.0)
}

/// A queue table change's commands: stops, then restarts (the driver's `table_changed`).
fn table_changed(
    done: &Reconfig,
    tells: &mut Vec<(ConnId, coord_shard::Request)>,
    queue: &str,
) -> String {
    tells.extend(done.stop.iter().map(|c| (c.conn, c.request())));
    tells.extend(done.restart.iter().map(|c| (c.conn, c.request())));
    format!(
        "table change {queue}: {} restarts, move {:?}",
        done.restart.len(),
        done.move_id
    )
}
