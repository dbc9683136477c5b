//! A shard process: the real [`ShardCore`], its journal in memory ([`MemJournal`]), and
//! the loop of its driver (`shard/src/driver`): register with what the journal holds,
//! build the core from the answer ([`ShardCore::start`]), then batches — each input one
//! core call ([`ShardCore::handle_client`], [`ShardCore::handle_coordinator`],
//! [`ShardCore::reassigned`]), one [`ShardCore::tick`], the journal written, and only then
//! the answers, the `Released` reports and a status report.
//!
//! Reads (`Jobs`) are answered from the core's snapshot, as the driver answers them from
//! its published one; a `Reconfigure` the core cannot take in place (a new match policy
//! or durations) is acknowledged and restarts the process, as the driver exits for `up` to
//! restart it.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use shardsched_coordinator_core::core::ConnId;
use shardsched_shard_core::agents::Runs;
use shardsched_shard_core::journal::{JournalRecord, MemJournal, Restored};
use shardsched_shard_core::{CoreOptions, ReportClock, ShardCore};
use shardsched_wire::identity::Role;
use shardsched_wire::msg::shard_coord::{self, Register, Released};
use shardsched_wire::msg::{Refusal, RefusalCode, client_shard, coord_shard};
use shardsched_wire::rpc::Reply;
use shardsched_wire::{Fluid, Peer};

use crate::agents_exec::{self, Executor};
use crate::net::{Body, Packet};

/// How long a registration waits for its answer before the shard gives up on the
/// connection and registers again.
pub(crate) const REGISTER_TIMEOUT_MS: u64 = 3_000;
/// Wait before registering again after a failed attempt (the driver backs off from
/// 100 ms to 2 s).
pub(crate) const REGISTER_RETRY_MS: u64 = 500;
/// `Released` reports unacknowledged are sent again after this (the driver's
/// `RELEASED_RESEND_INTERVAL`).
pub(crate) const RELEASED_RESEND_MS: u64 = 1_000;

/// Where a crash falls in a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Crash {
    /// The batch runs whole.
    No,
    /// Before its journal write: nothing of it survives.
    BeforeWrite,
    /// After its journal write, before its answers leave.
    AfterWrite,
}

/// One input of the shard.
#[derive(Debug)]
pub(crate) enum ShardEvent {
    /// A client's submit or cancel; `ticket` names it for the client's ledger.
    Client {
        ticket: u64,
        peer: Peer,
        request: client_shard::Request,
    },
    /// A message from the coordinator.
    Packet(Packet),
}

/// What a batch hands to the world once it is durable.
#[derive(Debug, Default)]
pub(crate) struct ShardOut {
    /// Messages to the coordinator.
    pub(crate) packets: Vec<Packet>,
    /// Answers to clients, by ticket.
    pub(crate) answers: Vec<(u64, Reply<client_shard::Response>)>,
    /// The core asked for a restart (a configuration it cannot take in place): the process
    /// restarts once the batch is out.
    pub(crate) restart: bool,
    /// A `Reconfigure` was taken in place (counted in the stats).
    pub(crate) reconfigured_in_place: bool,
    /// Lines for the trace.
    pub(crate) lines: Vec<String>,
    /// Connections to agents it closed (a request on them timed out).
    pub(crate) closed: Vec<ConnId>,
}

/// Where the shard stands with the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// Not registered: register at `retry_at`.
    Idle { retry_at: u64 },
    /// `Register` sent on `conn` at `sent_at`.
    Registering { conn: ConnId, sent_at: u64 },
    /// Registered on `conn`.
    Up { conn: ConnId },
}

/// See the module documentation.
pub(crate) struct ShardProcess {
    pub(crate) queue: String,
    /// Where it listens, for its registration.
    listen: SocketAddr,
    /// What survives a crash.
    pub(crate) journal: MemJournal,
    /// Running (a process exists).
    pub(crate) alive: bool,
    /// The core, once the first registration answered.
    pub(crate) core: Option<ShardCore>,
    /// What the journal read back at the process's start, until the core is built.
    restored: Restored,
    link: Link,
    inbox: VecDeque<ShardEvent>,
    /// `Released` reports not yet acknowledged (the driver's `ReleasedQueue`), each with
    /// the ids it was sent under, and when they were last sent.
    released: Vec<(Released, Vec<u64>)>,
    released_sent_ms: u64,
    /// When the next status report is due (the driver's rule).
    report_clock: ReportClock,
    /// The last status report's number (wire `ShardStatus.seq`): one counter for the
    /// process, so increasing on every connection it opens, as the driver's per
    /// connection counter is.
    status_seq: u64,
    /// Restart once the process is not running: at this time.
    pub(crate) restart_at: Option<u64>,
    /// Bumped whenever the core or the journal may have changed (a batch, a start, a
    /// crash): the checker looks again only at shards whose version moved.
    pub(crate) version: u64,
    /// Jobs run through node agents (the agents executor), while the core runs.
    pub(crate) executor: Option<Executor>,
}

impl ShardProcess {
    /// A shard process for `queue` (not started), listening on port `port`.
    pub(crate) fn new(queue: &str, port: u16, journal: MemJournal) -> ShardProcess {
        ShardProcess {
            queue: queue.to_owned(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            journal,
            alive: false,
            core: None,
            restored: Restored::default(),
            link: Link::Idle { retry_at: 0 },
            inbox: VecDeque::new(),
            released: Vec::new(),
            released_sent_ms: 0,
            report_clock: ReportClock::default(),
            status_seq: 0,
            restart_at: None,
            version: 0,
            executor: None,
        }
    }

    /// The process starts: reads its journal back, and registers at once.
    pub(crate) fn start(&mut self, now: u64) -> Result<(), String> {
        self.restored = self.journal.restored().map_err(|o| {
            format!(
                "{}'s journal does not read back: {} record {} has no job",
                self.queue, o.table, o.key
            )
        })?;
        self.version += 1;
        self.alive = true;
        self.core = None;
        self.executor = None;
        self.link = Link::Idle { retry_at: now };
        self.inbox.clear();
        self.released.clear();
        self.report_clock = ReportClock::default();
        self.status_seq = 0;
        self.restart_at = None;
        Ok(())
    }

    /// The process dies: everything not in the journal is gone. Returns the connection it
    /// had, for the network to close.
    pub(crate) fn crash(&mut self) -> Option<ConnId> {
        self.version += 1;
        self.alive = false;
        self.core = None;
        self.executor = None;
        self.inbox.clear();
        self.released.clear();
        self.conn()
    }

    /// The connection it registered (or is registering) on.
    pub(crate) fn conn(&self) -> Option<ConnId> {
        match self.link {
            Link::Registering { conn, .. } | Link::Up { conn } => Some(conn),
            Link::Idle { .. } => None,
        }
    }

    /// Whether it is registered (on an open connection, as far as it knows).
    pub(crate) fn is_registered(&self) -> bool {
        matches!(self.link, Link::Up { .. })
    }

    /// Whether `Released` reports wait for the coordinator's acknowledgement.
    pub(crate) fn reporting_released(&self) -> bool {
        !self.released.is_empty()
    }

    /// The shard noticed that `conn` is gone: it registers again after a while.
    pub(crate) fn lost(&mut self, conn: ConnId, now: u64) {
        if self.alive && self.conn() == Some(conn) {
            self.link = Link::Idle {
                retry_at: now + REGISTER_RETRY_MS,
            };
        }
    }

    /// Queues an input for the next batch.
    pub(crate) fn push(&mut self, event: ShardEvent) {
        if self.alive {
            self.inbox.push_back(event);
        }
    }

    /// Whether the core takes client requests (the driver serves clients once its core
    /// exists).
    pub(crate) fn serving(&self) -> bool {
        self.alive && self.core.is_some()
    }

    /// When the process next has work without an input: its core's wakeup, a status
    /// report or `Released` re-send, a registration to start or to give up on.
    pub(crate) fn next_wakeup(&self) -> Option<u64> {
        if !self.alive {
            return None;
        }
        let link = match self.link {
            Link::Idle { retry_at } => Some(retry_at),
            Link::Registering { sent_at, .. } => Some(sent_at + REGISTER_TIMEOUT_MS),
            Link::Up { .. } => None,
        };
        let core = self.core.as_ref().and_then(ShardCore::next_wakeup_ms);
        let up = matches!(self.link, Link::Up { .. });
        let released =
            (up && !self.released.is_empty()).then_some(self.released_sent_ms + RELEASED_RESEND_MS);
        let status = match (up, &self.core) {
            (true, Some(core)) => Some(self.report_clock.due_ms(core)),
            _ => None,
        };
        let executor = self.executor.as_ref().and_then(Executor::next_wakeup);
        [link, core, released, status, executor]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether a batch has anything to do at `now`.
    pub(crate) fn due(&self, now: u64) -> bool {
        self.alive && (!self.inbox.is_empty() || self.next_wakeup().is_some_and(|t| t <= now))
    }

    /// Registers if it is time: opens a connection (`open`) and sends `Register` with
    /// what the core holds (the journal's view before it exists).
    pub(crate) fn register_if_due(
        &mut self,
        now: u64,
        open: impl FnOnce() -> (ConnId, u64),
    ) -> Option<Packet> {
        let Link::Idle { retry_at } = self.link else {
            return None;
        };
        if !self.alive || retry_at > now {
            return None;
        }
        let (held, last_job_id) = match &self.core {
            Some(core) => (core.held(), core.last_job_id()),
            None => (self.restored.held(), self.restored.last_id),
        };
        let (conn, id) = open();
        self.link = Link::Registering { conn, sent_at: now };
        let request = shard_coord::Request::Register(Register {
            queue: self.queue.clone(),
            listen: self.listen,
            held,
            last_job_id,
        });
        Some(Packet {
            conn,
            to_coordinator: true,
            body: Body::ShardRequest { id, request },
        })
    }

    /// Gives up on a registration that got no answer in time: returns the connection to
    /// close.
    pub(crate) fn registration_timed_out(&mut self, now: u64) -> Option<ConnId> {
        let Link::Registering { conn, sent_at } = self.link else {
            return None;
        };
        if now < sent_at + REGISTER_TIMEOUT_MS {
            return None;
        }
        self.link = Link::Idle {
            retry_at: now + REGISTER_RETRY_MS,
        };
        Some(conn)
    }

    /// Runs one batch at `now` (see the module documentation); `crash` says whether the
    /// process dies in it. `ids` gives request ids. Errors are violations (a core that
    /// cannot be built from its own journal).
    pub(crate) fn batch(
        &mut self,
        now: u64,
        crash: Crash,
        options: &CoreOptions,
        ids: &mut dyn FnMut() -> u64,
        agent_conn: &mut dyn FnMut(Option<ConnId>) -> ConnId,
    ) -> Result<ShardOut, String> {
        self.version += 1;
        let mut out = ShardOut::default();
        let events: Vec<ShardEvent> = self.inbox.drain(..).collect();
        for event in events {
            self.handle(now, event, options, &mut out)?;
        }
        let Some(core) = self.core.as_mut() else {
            return Ok(out);
        };
        if let Some(executor) = &mut self.executor {
            executor.ended_to(core, now);
        }
        core.tick(now)
            .map_err(|e| format!("{}: scheduling pass failed: {e}", self.queue))?;
        let records = core.take_journal();
        core.take_transitions();
        let released = core.take_released();
        if crash == Crash::BeforeWrite {
            return Ok(ShardOut::default());
        }
        self.journal.commit(&records);
        if crash == Crash::AfterWrite {
            return Ok(ShardOut::default());
        }
        if !records.is_empty() {
            let what: Vec<String> = records.iter().map(describe).collect();
            out.lines
                .push(format!("{} journal {}", self.queue, what.join(", ")));
        }
        self.released
            .extend(released.into_iter().map(|r| (r, Vec::new())));
        let coordinator = match self.link {
            Link::Up { conn } => Some(conn),
            _ => None,
        };
        if let Some(conn) = coordinator {
            self.reports(now, conn, ids, &mut out);
        }
        if let (Some(executor), Some(core)) = (&mut self.executor, &mut self.core) {
            executor.run(core, now, coordinator, agent_conn, ids, &mut out.packets);
            out.closed.append(&mut executor.closed);
        }
        Ok(out)
    }

    /// One input, one core call.
    fn handle(
        &mut self,
        now: u64,
        event: ShardEvent,
        options: &CoreOptions,
        out: &mut ShardOut,
    ) -> Result<(), String> {
        match event {
            ShardEvent::Client {
                ticket,
                peer,
                request,
            } => {
                let answer = match self.core.as_mut() {
                    Some(core) => core.handle_client(now, &peer, &request),
                    None => Err(Refusal::new(RefusalCode::Unavailable, "not serving yet")),
                };
                out.answers.push((ticket, answer));
            }
            ShardEvent::Packet(packet) => self.packet(now, packet, options, out)?,
        }
        Ok(())
    }

    fn packet(
        &mut self,
        now: u64,
        packet: Packet,
        options: &CoreOptions,
        out: &mut ShardOut,
    ) -> Result<(), String> {
        let conn = packet.conn;
        match packet.body {
            Body::ShardAnswer { answer, .. } if matches!(self.link, Link::Registering { conn: c, .. } if c == conn) =>
            {
                self.registered(now, conn, answer, options, out)?;
            }
            Body::ShardAnswer {
                id,
                answer: Ok(shard_coord::Response::Agents(addresses)),
            } => {
                if let Some(executor) = &mut self.executor {
                    executor.addresses(id, Ok(addresses));
                }
            }
            Body::FromAgent { id, answer } => {
                if let Some(executor) = &mut self.executor {
                    executor.answer(now, id, answer);
                }
            }
            Body::ShardAnswer { id, .. } => {
                if let Some(executor) = &mut self.executor {
                    executor.addresses(id, Err("refused".to_owned()));
                }
                if self.link == (Link::Up { conn }) {
                    // Acknowledged or refused: either way the report is done with.
                    self.released.retain(|(_, sent)| !sent.contains(&id));
                }
            }
            Body::Command {
                id,
                request,
                ordered,
            } => {
                if self.link != (Link::Up { conn }) {
                    return Ok(());
                }
                let Some(core) = self.core.as_mut() else {
                    return Ok(());
                };
                let answer = match &request {
                    coord_shard::Request::Jobs(query) => Ok(coord_shard::Response::Jobs(
                        core.handle_jobs(shardsched_wire::identity::COORDINATOR_NAME, query),
                    )),
                    _ => core.handle_coordinator(now, &request),
                };
                // A configuration the core cannot take in place: the process restarts once
                // the batch (this acknowledgement) is out, as the driver's does.
                let restart = core.take_restart().is_some();
                out.restart |= restart;
                if matches!(request, coord_shard::Request::Reconfigure(_)) && !restart {
                    out.reconfigured_in_place = true;
                }
                out.packets.push(Packet {
                    conn,
                    to_coordinator: true,
                    body: Body::CommandAnswer {
                        id,
                        request,
                        answer,
                        ordered,
                    },
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The answer to this process's registration on `conn`.
    fn registered(
        &mut self,
        now: u64,
        conn: ConnId,
        answer: Reply<shard_coord::Response>,
        options: &CoreOptions,
        out: &mut ShardOut,
    ) -> Result<(), String> {
        let assignment = match answer {
            Ok(shard_coord::Response::Registered(assignment)) => assignment,
            Ok(other) => return Err(format!("{}: registration answered {other:?}", self.queue)),
            Err(refusal) => {
                // Unavailable: the driver retries; anything else stops the process, which
                // its supervisor restarts (a queue removed meanwhile is not restarted).
                out.lines.push(format!(
                    "{} registration refused {:?}",
                    self.queue, refusal.code
                ));
                self.link = Link::Idle {
                    retry_at: now + REGISTER_RETRY_MS,
                };
                return Ok(());
            }
        };
        self.link = Link::Up { conn };
        match self.core.as_mut() {
            None => {
                let core = ShardCore::start(&assignment, options.clone(), now, &self.restored)
                    .map_err(|e| format!("{} cannot start from its journal: {e}", self.queue))?;
                if core.is_exec() {
                    let grace = agents_exec::KILL_GRACE_MS;
                    let runs = Runs::new(&self.queue, grace, agents_exec::launches);
                    self.executor = Some(Executor::watching(runs, &core, now));
                }
                self.core = Some(core);
                self.restored = Restored::default();
                out.lines.push(format!("{} core started", self.queue));
            }
            Some(core) => {
                core.reassigned(&assignment);
                out.restart |= core.take_restart().is_some();
            }
        }
        Ok(())
    }

    /// Status and `Released` reports, as the driver's reporters send them: a status report
    /// when one is due, and every unacknowledged `Released` report when new ones came or
    /// the re-send interval passed.
    fn reports(
        &mut self,
        now: u64,
        conn: ConnId,
        ids: &mut dyn FnMut() -> u64,
        out: &mut ShardOut,
    ) {
        let Some(core) = &self.core else {
            return;
        };
        if now >= self.report_clock.due_ms(core) {
            let mut status = core.status(now);
            self.status_seq += 1;
            status.seq = self.status_seq;
            self.report_clock.sent(now, core, &status);
            out.packets.push(Packet {
                conn,
                to_coordinator: true,
                body: Body::ShardRequest {
                    id: ids(),
                    request: shard_coord::Request::Status(Box::new(status)),
                },
            });
        }
        let fresh = self.released.iter().any(|(_, sent)| sent.is_empty());
        if fresh || now >= self.released_sent_ms + RELEASED_RESEND_MS {
            for (report, sent) in &mut self.released {
                let id = ids();
                sent.push(id);
                out.packets.push(Packet {
                    conn,
                    to_coordinator: true,
                    body: Body::ShardRequest {
                        id,
                        request: shard_coord::Request::Released(report.clone()),
                    },
                });
            }
            self.released_sent_ms = now;
        }
    }
}

/// A journal record, in a few words for the trace.
fn describe(record: &JournalRecord) -> String {
    match record {
        JournalRecord::Accepted(job) => format!("accepted {}", Fluid(job.id)),
        JournalRecord::Started(run) => {
            format!("started {} until {}", Fluid(run.id), run.sim_end_ms)
        }
        JournalRecord::Ended(end) => format!("ended {} {:?}", Fluid(end.id), end.state),
        JournalRecord::Forgotten(id) => format!("forgotten {id}"),
        JournalRecord::LastId(id) => format!("last id {id}"),
        JournalRecord::Requeued(id) => format!("requeued {id}"),
        JournalRecord::KillRequested(kill) => format!("kill {}", Fluid(kill.id)),
        JournalRecord::Node(name, node) => {
            format!("{name}@{} {:?}", node.generation, node.holding)
        }
        JournalRecord::Signed(signed) => format!("signed {}", Fluid(signed.id)),
        JournalRecord::Urgency(id, urgency) => format!("urgency {id} {urgency}"),
        JournalRecord::Array(array) => {
            format!("array {} {}", Fluid(array.id), array.spec())
        }
        JournalRecord::ArrayForgotten { id, elements } => {
            format!("array forgotten {id} ({} elements)", elements.len())
        }
        JournalRecord::Allowance(user, a) => {
            format!("allowance {user} seq {} jobs {}", a.seq, a.jobs)
        }
    }
}

/// A user's peer, as from their certificate.
pub(crate) fn user(name: &str) -> Peer {
    Peer {
        role: Role::User,
        name: name.to_owned(),
    }
}
