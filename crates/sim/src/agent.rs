//! A node agent process: the real [`AgentCore`] (node/core), what it keeps on disk (its
//! jobs' directories, their supervisors' end files, its lease renewals) in memory, the
//! loop of its driver (`node/src/agent.rs`: each input one core call, one
//! [`AgentCore::tick`], the actions carried out, and only then the answers:
//! write-then-acknowledge), and the simulated tasks it started.
//!
//! A task is a process of its own, as a real job's supervisor in its cgroup is: it
//! outlives a crash of the agent, runs until its time limit (and exits 0) or until it is
//! killed, and some ignore SIGTERM for a while (at most the kill grace: SIGKILL then). A
//! restarted agent rebuilds its core with [`AgentCore::recover`] from the directories it
//! finds, each running (its task lives) or ended (its end file), and the renewals it
//! persisted.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use shardsched_coordinator_core::core::ConnId;
use shardsched_node_core::{Action, AgentCore, Recovered};
use shardsched_wire::msg::agent::{EndCause, JobEnd, JobOnNode};
use shardsched_wire::msg::{JobId, Refusal, RefusalCode, node_coord, shard_node};
use shardsched_wire::rpc::Reply;

use crate::net::{Body, Packet};
use crate::shard::Crash;

mod task;

pub(crate) use task::{Reaped, Task};

/// How a task its supervisor stopped at the end of its lease says so.
const LEASE_STOP_MARK: &str = "(stopped by its supervisor)";
// An agent registers with the coordinator as a shard does, on the same timings.
use crate::shard::{REGISTER_RETRY_MS, REGISTER_TIMEOUT_MS};
use task::{Disk, task};

/// The heartbeat timeout an agent assumes until its registration is answered (the
/// driver's `HEARTBEAT_TIMEOUT_DEFAULT_MS`).
const HEARTBEAT_TIMEOUT_ASSUMED_MS: u64 = 30_000;

/// One input of the agent.
#[derive(Debug)]
pub(crate) enum AgentEvent {
    /// A message from the coordinator or a shard.
    Packet(Packet),
    /// A task's processes are gone.
    Ended(JobId, JobEnd),
}

/// Where the agent stands with the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Idle { retry_at: u64 },
    Registering { conn: ConnId, sent_at: u64 },
    Up { conn: ConnId, heartbeat_at: u64 },
}

/// What a batch hands to the world.
#[derive(Debug, Default)]
pub(crate) struct AgentOut {
    pub(crate) packets: Vec<Packet>,
    pub(crate) lines: Vec<String>,
    /// A launch the agent took though its fence should have refused it.
    pub(crate) unfenced: Option<String>,
}

/// See the module documentation.
pub(crate) struct AgentProcess {
    pub(crate) node: String,
    pub(crate) listen: SocketAddr,
    pub(crate) alive: bool,
    pub(crate) core: Option<AgentCore>,
    pub(crate) disk: Disk,
    /// The tasks (processes) on the node, alive: they outlive the agent.
    pub(crate) tasks: BTreeMap<JobId, Task>,
    link: Link,
    heartbeat_every_ms: u64,
    inbox: VecDeque<AgentEvent>,
    pub(crate) restart_at: Option<u64>,
    next_pid: u32,
}

impl AgentProcess {
    /// The agent of node number `index` (not started).
    pub(crate) fn new(node: &str, index: usize) -> AgentProcess {
        let octet = u8::try_from(index + 1).unwrap_or(u8::MAX);
        AgentProcess {
            node: node.to_owned(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, octet, 1)), 7000),
            alive: false,
            core: None,
            disk: Disk::default(),
            tasks: BTreeMap::new(),
            link: Link::Idle { retry_at: 0 },
            heartbeat_every_ms: HEARTBEAT_TIMEOUT_ASSUMED_MS / 3,
            inbox: VecDeque::new(),
            restart_at: None,
            next_pid: 100,
        }
    }

    /// The process starts: its core recovered from its state directory and the tasks that
    /// still run, as the driver's `executor::recover` finds them.
    pub(crate) fn start(&mut self, now: u64) {
        let found = self
            .disk
            .jobs
            .iter()
            .map(|(&job, (queue, generation))| {
                let state = match (self.disk.ends.get(&job), self.tasks.get(&job)) {
                    (Some(end), _) => JobOnNode::Ended(end.clone()),
                    (None, Some(task)) => JobOnNode::Running {
                        supervisor_pid: task.pid,
                    },
                    (None, None) => JobOnNode::Ended(JobEnd::without_status(
                        EndCause::Lost,
                        "its supervisor is gone",
                    )),
                };
                Recovered {
                    job,
                    queue: queue.clone(),
                    generation: *generation,
                    state,
                }
            })
            .collect();
        self.core = Some(AgentCore::recover(
            &self.node,
            HEARTBEAT_TIMEOUT_ASSUMED_MS,
            now,
            found,
            &self.disk.leases,
        ));
        self.alive = true;
        self.link = Link::Idle { retry_at: now };
        self.inbox.clear();
        self.restart_at = None;
    }

    /// The process dies (its tasks live on); returns its coordinator connection.
    pub(crate) fn crash(&mut self) -> Option<ConnId> {
        self.alive = false;
        self.core = None;
        self.inbox.clear();
        let conn = self.conn();
        self.link = Link::Idle { retry_at: 0 };
        conn
    }

    /// Its connection to the coordinator.
    pub(crate) fn conn(&self) -> Option<ConnId> {
        match self.link {
            Link::Registering { conn, .. } | Link::Up { conn, .. } => Some(conn),
            Link::Idle { .. } => None,
        }
    }

    /// Whether it is registered (as far as it knows).
    pub(crate) fn is_registered(&self) -> bool {
        matches!(self.link, Link::Up { .. })
    }

    /// It noticed its coordinator connection `conn` is gone.
    pub(crate) fn lost(&mut self, conn: ConnId, now: u64) {
        if self.alive && self.conn() == Some(conn) {
            self.link = Link::Idle {
                retry_at: now + REGISTER_RETRY_MS,
            };
        }
    }

    pub(crate) fn push(&mut self, event: AgentEvent) {
        if self.alive {
            self.inbox.push_back(event);
        }
    }

    /// The tasks that end by `now`, removed, with their ends (written to their end files;
    /// the agent, if running, hears of them in its next batch).
    pub(crate) fn reap(&mut self, now: u64) -> Vec<Reaped> {
        // The supervisors stop the tasks whose lease is over, agent or none.
        for task in self.tasks.values_mut() {
            if let Some(at) = task.lease_over_at(&self.disk).filter(|&at| at <= now) {
                let why = format!("lease expired: queue {}'s {LEASE_STOP_MARK}", task.queue);
                task.dies_at = Some((at + task.ignores_term_ms, why));
            }
        }
        let over: Vec<JobId> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.end().0 <= now)
            .map(|(&job, _)| job)
            .collect();
        let mut reaped = Vec::with_capacity(over.len());
        for job in over {
            if let Some(task) = self.tasks.remove(&job) {
                let (at, end) = task.end();
                reaped.push(Reaped {
                    job,
                    overran: task.overruns && at >= task.exits_at,
                    lease_stopped: end.note.ends_with(LEASE_STOP_MARK),
                });
                if self.disk.jobs.contains_key(&job) {
                    self.disk.ends.insert(job, end.clone());
                }
                self.push(AgentEvent::Ended(job, end));
            }
        }
        reaped
    }

    /// When it next has work without an input.
    pub(crate) fn next_wakeup(&self) -> Option<u64> {
        let tasks = self
            .tasks
            .values()
            .flat_map(|t| [Some(t.end().0), t.lease_over_at(&self.disk)])
            .flatten()
            .min();
        if !self.alive {
            return tasks;
        }
        let link = match self.link {
            Link::Idle { retry_at } => retry_at,
            Link::Registering { sent_at, .. } => sent_at + REGISTER_TIMEOUT_MS,
            Link::Up { heartbeat_at, .. } => heartbeat_at,
        };
        let core = self.core.as_ref().and_then(AgentCore::next_wake_ms);
        [Some(link), core, tasks].into_iter().flatten().min()
    }

    pub(crate) fn due(&self, now: u64) -> bool {
        self.alive && (!self.inbox.is_empty() || self.next_wakeup().is_some_and(|t| t <= now))
    }

    /// Registers if it is time: opens a connection (`open`) and sends `Register`.
    pub(crate) fn register_if_due(
        &mut self,
        now: u64,
        open: impl FnOnce() -> (ConnId, u64),
    ) -> Option<Packet> {
        let Link::Idle { retry_at } = self.link else {
            return None;
        };
        let core = self.core.as_ref()?;
        if !self.alive || retry_at > now {
            return None;
        }
        let (conn, id) = open();
        self.link = Link::Registering { conn, sent_at: now };
        let request = node_coord::Request::Register {
            listen: self.listen,
            report: core.report(),
        };
        Some(Packet {
            conn,
            to_coordinator: true,
            body: Body::AgentRequest {
                id,
                node: self.node.clone(),
                request,
            },
        })
    }

    /// Gives up on a registration unanswered in time: the connection to close.
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

    /// One batch at `now`; `ignores_term` draws how long a new task ignores SIGTERM
    /// given its grace; `ids` gives request ids.
    pub(crate) fn batch(
        &mut self,
        now: u64,
        crash: Crash,
        ignores_term: &mut dyn FnMut(u64) -> u64,
        ids: &mut dyn FnMut() -> u64,
    ) -> AgentOut {
        let mut out = AgentOut::default();
        let Some(mut core) = self.core.take() else {
            return out;
        };
        let events: Vec<AgentEvent> = self.inbox.drain(..).collect();
        let mut answers = Vec::new();
        for event in events {
            self.handle(&mut core, now, event, &mut answers, &mut out);
        }
        core.tick(now);
        let actions = core.take_actions();
        if crash == Crash::BeforeWrite {
            return AgentOut::default();
        }
        for action in actions {
            self.carry_out(&mut core, now, action, ignores_term, &mut out);
        }
        if crash == Crash::AfterWrite {
            return AgentOut::default();
        }
        if let Link::Up { conn, heartbeat_at } = self.link
            && heartbeat_at <= now
        {
            self.link = Link::Up {
                conn,
                heartbeat_at: now + self.heartbeat_every_ms,
            };
            out.packets.push(Packet {
                conn,
                to_coordinator: true,
                body: Body::AgentRequest {
                    id: ids(),
                    node: self.node.clone(),
                    request: node_coord::Request::Heartbeat(core.report()),
                },
            });
        }
        out.packets.extend(answers);
        self.core = Some(core);
        out
    }

    /// One input, one core call (the driver's `handle`).
    fn handle(
        &mut self,
        core: &mut AgentCore,
        now: u64,
        event: AgentEvent,
        answers: &mut Vec<Packet>,
        out: &mut AgentOut,
    ) {
        let packet = match event {
            AgentEvent::Ended(job, end) => {
                core.handle_ended(now, job, end);
                return;
            }
            AgentEvent::Packet(packet) => packet,
        };
        let conn = packet.conn;
        match packet.body {
            Body::AgentAnswer { answer, .. } => self.coordinator_answer(core, now, conn, answer),
            Body::Owner { owner, change } => {
                if let Err(refused) = core.handle_owner(now, owner, change) {
                    out.lines
                        .push(format!("{} refuses owner: {refused}", self.node));
                }
            }
            Body::ToAgent { id, from, request } => {
                let launched = match &request {
                    shard_node::Request::Launch(launch) => Some(launch.generation),
                    _ => None,
                };
                let answer = shard_request(core, now, &from, request);
                // The fence, as the agent's answers show it: a launch is taken only from
                // the owner it was told of, at that owner's generation.
                if let (Some(generation), Ok(_)) = (launched, &answer) {
                    let owner = core.owner();
                    if owner.is_none_or(|o| o.queue != from || o.generation != generation) {
                        out.unfenced.get_or_insert(format!(
                            "{}'s agent took {from}'s launch at generation {} while its owner \
                             is {owner:?}",
                            self.node, generation.0
                        ));
                    }
                }
                answers.push(Packet {
                    conn,
                    to_coordinator: false,
                    body: Body::FromAgent { id, answer },
                });
            }
            _ => {}
        }
    }

    fn coordinator_answer(
        &mut self,
        core: &mut AgentCore,
        now: u64,
        conn: ConnId,
        answer: Reply<node_coord::Response>,
    ) {
        match (self.link, answer) {
            (
                Link::Registering { conn: c, .. },
                Ok(node_coord::Response::Registered {
                    owner,
                    heartbeat_interval_ms,
                    heartbeat_timeout_ms,
                }),
            ) if c == conn => {
                core.set_heartbeat_timeout(heartbeat_timeout_ms);
                self.heartbeat_every_ms = heartbeat_interval_ms.max(1);
                if let Some(owner) = owner {
                    let _ = core.handle_owner(
                        now,
                        owner,
                        shardsched_wire::msg::agent::OwnerChange::Registered,
                    );
                }
                self.link = Link::Up {
                    conn,
                    heartbeat_at: now + self.heartbeat_every_ms,
                };
            }
            (Link::Registering { conn: c, .. }, _) if c == conn => {
                self.link = Link::Idle {
                    retry_at: now + REGISTER_RETRY_MS,
                };
            }
            // A heartbeat refused: the coordinator no longer has this connection as the
            // agent's; register again.
            (Link::Up { conn: c, .. }, Err(_)) if c == conn => {
                self.link = Link::Idle {
                    retry_at: now + REGISTER_RETRY_MS,
                };
            }
            _ => {}
        }
    }

    /// Carries out one action: the state directory written, a task started or signalled.
    fn carry_out(
        &mut self,
        core: &mut AgentCore,
        now: u64,
        action: Action,
        ignores_term: &mut dyn FnMut(u64) -> u64,
        out: &mut AgentOut,
    ) {
        match action {
            Action::Spawn { queue, launch } => {
                let job = launch.job;
                self.next_pid += 1;
                let pid = self.next_pid;
                self.disk
                    .jobs
                    .insert(job, (queue.clone(), launch.generation));
                self.disk.ends.remove(&job);
                out.lines.push(format!(
                    "{} spawns {job} of {queue}@{}",
                    self.node, launch.generation.0
                ));
                let launch_deadline_ms = core
                    .lease_deadline_ms(&queue)
                    .unwrap_or_else(|| now.saturating_add(core.lease_ms()));
                self.tasks.insert(
                    job,
                    task(now, &queue, &launch, pid, launch_deadline_ms, ignores_term),
                );
                core.handle_spawned(now, job, pid);
            }
            Action::Kill { job, why } => {
                if let Some(task) = self.tasks.get_mut(&job)
                    && task.dies_at.is_none()
                {
                    task.dies_at = Some((now + task.ignores_term_ms, why));
                }
            }
            Action::RemoveFiles(job) => {
                self.disk.jobs.remove(&job);
                self.disk.ends.remove(&job);
            }
            Action::PersistLease { queue, heard_ms } => {
                self.disk.leases.insert(queue.clone(), heard_ms);
                // As the driver writes them: every persisted renewal plus the lease now.
                let lease_ms = core.lease_ms();
                self.disk.lease_deadlines = self
                    .disk
                    .leases
                    .iter()
                    .map(|(q, heard)| (q.clone(), heard.saturating_add(lease_ms)))
                    .collect();
            }
        }
    }
}

/// A shard's request, answered as the driver answers it.
fn shard_request(
    core: &mut AgentCore,
    now: u64,
    from: &str,
    request: shard_node::Request,
) -> Reply<shard_node::Response> {
    let refusal = |e: shardsched_node_core::Refused, code| Refusal::new(code, e.to_string());
    match request {
        shard_node::Request::Launch(launch) => core
            .handle_launch(now, from, launch)
            .map(|()| shard_node::Response::Launched)
            .map_err(|e| refusal(e, RefusalCode::Stale)),
        shard_node::Request::Kill { job, why } => core
            .handle_kill(now, from, job, &why)
            .map(|()| shard_node::Response::Killing)
            .map_err(|e| refusal(e, RefusalCode::Forbidden)),
        shard_node::Request::Renew { seen, .. } => Ok(shard_node::Response::Report(
            core.handle_renew(now, from, &seen),
        )),
        shard_node::Request::Forget { jobs } => {
            core.handle_forget(now, from, &jobs);
            Ok(shard_node::Response::Forgotten)
        }
        shard_node::Request::Output(_) => Err(Refusal::new(
            RefusalCode::NotFound,
            "simulated tasks write no output",
        )),
    }
}
