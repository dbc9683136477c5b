//! The agents executor's bookkeeping, without I/O: each running job's share on each of its
//! nodes, each agent's address, lease and last word, and what to send next. The shard's
//! agents task (shard/src/agents) feeds it the core's launches, kills and forgets, the
//! agents' answers and the time, and sends what [`Runs::tick`] asks for; the simulator
//! (crates/sim) drives the same calls over its network.
//!
//! A share (one node's part of one job) goes
//!
//! ```text
//!   Waiting ──(addresses known, retry due)──► Sending ──Launched──► Live ──report: ended──► Ended
//!      ▲                                         │ unreachable          │ unreachable past
//!      └──── report lacks the job ◄──── Unknown ◄┘ (or a restart)       │ lease + grace
//!                                                                        ▼
//!                                                                  Ended (lost)
//! ```
//!
//! A report speaks only for shares that were launched (or in doubt) before it was asked
//! for: every event gets a sequence number, and a renewal carries the one it was sent at.
//!
//! # Taking tasks as killed by their lease
//!
//! A node agent kills a shard's tasks once no request from that shard has reached it for
//! its lease (node/core's `lease`): every request renews it — launch, kill, renewal,
//! forget. So the shard may take an unreachable agent's live shares as killed only when
//! no request left for that agent for long enough that none can still renew the lease:
//!
//! 1. every request leaves through [`Runs::tick`], which notes when the last one left for
//!    each agent (`sent_ms`; a restarted shard counts from the job's watch, after anything
//!    its earlier run sent);
//! 2. a request reaches its agent within [`REQUEST_TIMEOUT_MS`] of leaving or never: the
//!    driver (and the simulator) close the connection a request went on once it is
//!    unanswered that long, which drops it;
//! 3. so the agent last renewed the lease no later than `sent_ms + REQUEST_TIMEOUT_MS`,
//!    killed the tasks a lease later, and SIGKILLed what was left a kill grace after that.
//!
//! Hence a share is given up ("lost: …") only at `sent_ms + REQUEST_TIMEOUT_MS + lease +
//! grace + LOST_MARGIN_MS`, and only while its agent is failing, or cannot be asked at all
//! because its address is not known (counting from the last answer, as before this rule,
//! was wrong: when only the answers are lost, the requests still renew the lease and the
//! tasks live on). For that moment to come, a shard stops
//! sending anything to an agent that has been failing for half its lease
//! ([`QUIET_AFTER_LEASE_DIVISOR`]) while it has shares live or in doubt there, until they
//! are given up or the agent answers (a late answer to an earlier request, or a new
//! address). One lost answer does not silence an agent: the next renewal, due a quarter
//! of a lease later, is answered and the agent is no longer failing.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use shardsched_wire::msg::agent::{
    AgentReport, EndCause, JobEnd, JobNode, JobOnNode, NodeLaunch, SignedJobspec,
};
use shardsched_wire::msg::shard_coord::AgentAddress;
use shardsched_wire::msg::{Generation, JobId, Refusal, RefusalCode};

use crate::job::JobRecord;

/// The generation the shard holds each of a job's nodes at (what a node agent checks a
/// launch against).
pub type Generations = BTreeMap<String, Generation>;

/// What a launch is made of, beyond the job itself.
pub struct LaunchFacts<'a> {
    /// The shard's queue.
    pub queue: &'a str,
    /// The generation this shard holds each of the job's nodes at.
    pub generations: &'a Generations,
    /// Where each node's agent listens.
    pub agents: &'a BTreeMap<String, SocketAddr>,
    /// SIGTERM-to-SIGKILL grace, ms.
    pub kill_grace_ms: u64,
}

/// Builds the launch of a job on each of its nodes, in node-rank order, or says why it
/// cannot be launched: the shard's `node_launches` (its task layout and environment).
pub type BuildLaunches = fn(&JobRecord, &LaunchFacts<'_>) -> Result<Vec<NodeLaunch>, String>;

/// The launch of `job` on each of `nodes` (its node-rank order), each with the generation
/// this shard holds that node at, the same task layout `nodes`, environment `env` and R:
/// what every [`BuildLaunches`] ends with, once it has laid out the job's tasks.
pub fn launches_on(
    job: &JobRecord,
    facts: &LaunchFacts<'_>,
    nodes: &[JobNode],
    signed: &SignedJobspec,
    env: &[(String, String)],
    r_json: &str,
) -> Result<Vec<NodeLaunch>, String> {
    nodes
        .iter()
        .enumerate()
        .map(|(rank, node)| {
            let generation = *facts
                .generations
                .get(&node.node)
                .ok_or_else(|| format!("node {} is not this queue's", node.node))?;
            Ok(NodeLaunch {
                job: job.id,
                generation,
                signed: signed.clone(),
                nodes: nodes.to_vec(),
                node_rank: u32::try_from(rank).unwrap_or(u32::MAX),
                time_limit_ms: job.duration_ms,
                kill_grace_ms: facts.kill_grace_ms,
                env: env.to_vec(),
                r_json: r_json.to_owned(),
            })
        })
        .collect()
}

/// Why a request to an agent did not get an answer.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The agent could not be reached (or did not answer in time): the request may or may
    /// not have arrived.
    Unreachable(String),
    /// The agent refused it.
    Refused(Refusal),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(why) => write!(f, "unreachable: {why}"),
            Failure::Refused(r) => write!(f, "refused: {}", r.message),
        }
    }
}

/// How long a launch that an agent refuses for a fencing reason (its owner not yet
/// updated), or that cannot reach its agent, is tried again before the job fails, ms.
pub const LAUNCH_RETRY_FOR_MS: u64 = 30_000;
/// The wait between two tries of such a launch, ms.
pub const LAUNCH_RETRY_MS: u64 = 250;
/// How often an agent whose lease is not known yet is renewed, ms.
pub const RENEW_FIRST_MS: u64 = 250;
/// The longest wait between two renewals of an agent, ms: also how late a job's end may be
/// heard of.
pub const RENEW_MAX_MS: u64 = 500;
/// Renewals of one agent in flight at once, at most: the next is sent when due (a quarter
/// of the lease after the last) though the one before is unanswered, so one slow or lost
/// answer (up to [`REQUEST_TIMEOUT_MS`], longer than a short lease) does not hold back the
/// renewals that keep the agent's lease; an agent that answers none waits for one of them
/// to fail before it is sent another.
pub const RENEWALS_OUT_MAX: usize = 2;
/// How often the addresses of unreachable agents, or of agents the coordinator did not
/// know, are asked for again, ms (an agent never asked about is asked about at once).
pub const ADDRESSES_RETRY_MS: u64 = 1_000;
/// How often a kill is sent again to an agent whose share is still live, ms.
pub const KILL_RESEND_MS: u64 = 2_000;
/// How long a request to an agent may go unanswered, ms: then the connection it went on
/// is closed (the driver's `AGENT_REQUEST_TIMEOUT`, the simulator's too), so a request
/// reaches its agent within this long of leaving or never.
pub const REQUEST_TIMEOUT_MS: u64 = 5_000;
/// An agent failing for its lease divided by this, with shares live or in doubt, is sent
/// nothing more until they are given up or it answers (see the module documentation).
pub const QUIET_AFTER_LEASE_DIVISOR: u64 = 2;
/// Past the last request's timeout, the lease and the kill grace, this much more before an
/// unreachable agent's tasks are taken as killed, ms (timers and queues).
pub const LOST_MARGIN_MS: u64 = 1_000;
/// The lease assumed until an agent reports its own, ms (the coordinator's default
/// heartbeat timeout, halved).
pub const LEASE_DEFAULT_MS: u64 = 15_000;

mod tick;

#[cfg(test)]
mod tests;

/// One node's part of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Share {
    /// Not sent yet: waiting for the agents' addresses, or to try again at `retry_ms`.
    Waiting { retry_ms: u64 },
    /// The launch is on its way.
    Sending,
    /// Sent (or found by a restart) without an answer: the agent's next report, asked for
    /// after event `since`, says whether it has the job.
    Unknown { since: u64 },
    /// The agent accepted it at event `since`.
    Live { since: u64 },
    /// Every process of it on the node is gone.
    Ended(JobEnd),
}

/// One running job.
#[derive(Debug)]
struct JobRun {
    job: Box<JobRecord>,
    generations: Generations,
    shares: BTreeMap<String, Share>,
    /// Built once every node's agent address is known.
    launches: Option<BTreeMap<String, NodeLaunch>>,
    /// When the launch began, ms.
    since_ms: u64,
    /// The kill asked for, and when it was last sent.
    kill: Option<(String, u64)>,
    /// The end of the node that made the job stop elsewhere (it could not start there, or
    /// lost it): the job's end.
    failed: Option<JobEnd>,
}

/// One node's agent, as this shard knows it.
#[derive(Clone, Debug, Default)]
struct Agent {
    address: Option<SocketAddr>,
    /// Its address was asked of the coordinator at least once: asked again only every
    /// [`ADDRESSES_RETRY_MS`] (a node never asked about is asked about at once).
    address_asked: bool,
    /// Failing since, ms (none: the last request was answered).
    failing_since: Option<u64>,
    lease_ms: Option<u64>,
    /// Renewals sent and not yet answered (nor failed), at most [`RENEWALS_OUT_MAX`].
    renewals_out: usize,
    next_renew_ms: u64,
    /// Ended jobs this shard recorded, to tell the agent (it then stops reporting them).
    seen: BTreeSet<JobId>,
    /// Forgotten jobs whose files to remove there.
    forgets: BTreeSet<JobId>,
    /// When the last request left for it, ms: the latest it can have renewed the lease.
    sent_ms: Option<u64>,
    /// Failing for part of its lease with shares live or in doubt: sent nothing, so that
    /// its lease runs out (set by each tick).
    quiet: bool,
}

impl Agent {
    /// The lease it reported, or the one assumed until it does.
    fn lease(&self) -> u64 {
        self.lease_ms.unwrap_or(LEASE_DEFAULT_MS)
    }
}

/// What the task must send.
#[derive(Clone, Debug)]
pub enum Send {
    /// Ask the coordinator where these nodes' agents are.
    Addresses(Vec<String>),
    /// A job's launch on one node.
    Launch {
        node: String,
        addr: SocketAddr,
        launch: Box<NodeLaunch>,
    },
    /// Stop a job on one node.
    Kill {
        node: String,
        addr: SocketAddr,
        job: JobId,
        why: String,
    },
    /// Renew the lease; the answer is the agent's report. `asked` is the event it was sent
    /// at, handed back with the answer.
    Renew {
        node: String,
        addr: SocketAddr,
        seen: Vec<JobId>,
        asked: u64,
    },
    /// Remove forgotten jobs' files.
    Forget {
        node: String,
        addr: SocketAddr,
        jobs: Vec<JobId>,
    },
}

impl Send {
    /// The node whose agent it goes to (none: the coordinator).
    pub fn node(&self) -> Option<&str> {
        match self {
            Send::Addresses(_) => None,
            Send::Launch { node, .. }
            | Send::Kill { node, .. }
            | Send::Renew { node, .. }
            | Send::Forget { node, .. } => Some(node),
        }
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Runs {
    queue: String,
    kill_grace_ms: u64,
    build: BuildLaunches,
    jobs: BTreeMap<JobId, JobRun>,
    agents: BTreeMap<String, Agent>,
    /// Ended jobs' nodes, until the core forgets them (for `Forget`).
    finished: BTreeMap<JobId, Vec<String>>,
    ended: Vec<(JobId, JobEnd)>,
    /// The event counter.
    seq: u64,
    /// An address request is in flight, or when the last one was sent.
    asking: bool,
    asked_ms: Option<u64>,
}

impl Runs {
    /// Bookkeeping for `queue`'s shard, whose jobs get `kill_grace_ms`, launched as
    /// `build` lays them out.
    pub fn new(queue: &str, kill_grace_ms: u64, build: BuildLaunches) -> Runs {
        Runs {
            queue: queue.to_owned(),
            kill_grace_ms,
            build,
            jobs: BTreeMap::new(),
            agents: BTreeMap::new(),
            finished: BTreeMap::new(),
            ended: Vec::new(),
            seq: 0,
            asking: false,
            asked_ms: None,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A job that just started: launch it on each of its nodes.
    pub fn launch(&mut self, now_ms: u64, job: Box<JobRecord>, generations: Generations) {
        let share = Share::Waiting { retry_ms: now_ms };
        self.add(now_ms, job, generations, share);
    }

    /// A job a restarted shard found running: the agents' reports say where it stands (and
    /// it is launched where they do not know it).
    pub fn watch(&mut self, now_ms: u64, job: Box<JobRecord>, generations: Generations) {
        let since = self.next_seq();
        self.add(now_ms, job, generations, Share::Unknown { since });
    }

    fn add(&mut self, now_ms: u64, job: Box<JobRecord>, generations: Generations, share: Share) {
        let shares = job
            .nodes
            .iter()
            .map(|n| (n.clone(), share.clone()))
            .collect();
        for node in &job.nodes {
            self.agents.entry(node.clone()).or_default();
        }
        self.jobs.insert(
            job.id,
            JobRun {
                job,
                generations,
                shares,
                launches: None,
                since_ms: now_ms,
                kill: None,
                failed: None,
            },
        );
    }

    /// Stop job `id` on every node: shares not launched yet end at the next tick (they are
    /// never launched, `send_launches`), the others when their agents report them gone.
    pub fn kill(&mut self, now_ms: u64, id: JobId, why: &str) {
        let Some(run) = self.jobs.get_mut(&id) else {
            return;
        };
        run.kill = Some((why.to_owned(), 0));
        let _ = now_ms;
    }

    /// The core forgot job `id`: its files go on its nodes (sent by the next tick).
    pub fn forget(&mut self, id: JobId) {
        for node in self.finished.remove(&id).unwrap_or_default() {
            if let Some(agent) = self.agents.get_mut(&node) {
                agent.forgets.insert(id);
            }
        }
    }

    /// The coordinator's answer about agents' addresses.
    pub fn addresses(&mut self, answer: Result<Vec<AgentAddress>, String>) {
        self.asking = false;
        match answer {
            Ok(addresses) => {
                for a in addresses {
                    let agent = self.agents.entry(a.node).or_default();
                    if a.address.is_some() && a.address != agent.address {
                        agent.address = a.address;
                        agent.failing_since = None;
                    }
                }
            }
            Err(why) => {
                tracing::warn!(queue = %self.queue, %why, "cannot learn where the node agents are")
            }
        }
    }

    /// The answer to a launch.
    pub fn launched(&mut self, now_ms: u64, id: JobId, node: &str, answer: Result<(), Failure>) {
        let since = self.next_seq();
        let Some(run) = self.jobs.get_mut(&id) else {
            return;
        };
        let Some(share) = run.shares.get_mut(node) else {
            return;
        };
        if *share != Share::Sending {
            return;
        }
        *share = match answer {
            Ok(()) => {
                // The agent heard from this shard just now (its lease is renewed).
                if let Some(agent) = self.agents.get_mut(node) {
                    agent.failing_since = None;
                }
                Share::Live { since }
            }
            Err(Failure::Unreachable(why)) => {
                tracing::info!(queue = %self.queue, job = %id, %node, %why, "launch unanswered; the agent's report will tell");
                if let Some(agent) = self.agents.get_mut(node) {
                    agent.failing_since.get_or_insert(now_ms);
                }
                Share::Unknown { since }
            }
            Err(Failure::Refused(r))
                if r.code == RefusalCode::Stale
                    && now_ms < run.since_ms.saturating_add(LAUNCH_RETRY_FOR_MS) =>
            {
                tracing::debug!(queue = %self.queue, job = %id, %node, refusal = %r.message, "launch refused for now; trying again");
                Share::Waiting {
                    retry_ms: now_ms.saturating_add(LAUNCH_RETRY_MS),
                }
            }
            Err(Failure::Refused(r)) => Share::Ended(JobEnd::without_status(
                EndCause::Error,
                format!("node {node}'s agent refused the launch: {}", r.message),
            )),
        };
    }

    /// Renews `node`'s lease at the next tick rather than at its renewal period: the
    /// driver's agent held the last renewal until its report changed, so the next one
    /// should be waiting there at once (protocol 14's pushed end).
    pub fn renew_soon(&mut self, node: &str) {
        if let Some(agent) = self.agents.get_mut(node) {
            agent.next_renew_ms = 0;
        }
    }

    /// The answer to a renewal sent at event `asked`.
    pub fn renewed(
        &mut self,
        now_ms: u64,
        node: &str,
        asked: u64,
        told_seen: &[JobId],
        answer: Result<AgentReport, Failure>,
    ) {
        let Some(agent) = self.agents.get_mut(node) else {
            return;
        };
        agent.renewals_out = agent.renewals_out.saturating_sub(1);
        let report = match answer {
            Ok(report) => report,
            Err(failure) => {
                if agent.failing_since.is_none() {
                    tracing::warn!(queue = %self.queue, %node, %failure, "node agent not reached");
                }
                agent.failing_since.get_or_insert(now_ms);
                return;
            }
        };
        agent.failing_since = None;
        agent.lease_ms = Some(report.lease_ms);
        for job in told_seen {
            agent.seen.remove(job);
        }
        let ours: BTreeMap<JobId, &JobOnNode> = report
            .jobs
            .iter()
            .filter(|j| j.queue == self.queue)
            .map(|j| (j.job, &j.state))
            .collect();
        for (id, run) in &mut self.jobs {
            let Some(share) = run.shares.get_mut(node) else {
                continue;
            };
            // A report speaks only for what was launched (or in doubt) before it was
            // asked for: an older report may hold an earlier run of a requeued job.
            let (Share::Unknown { since } | Share::Live { since }) = *share else {
                continue;
            };
            if since >= asked {
                continue;
            }
            *share = match (ours.get(id), &*share) {
                (Some(JobOnNode::Ended(end)), _) => Share::Ended(end.clone()),
                (Some(_), Share::Unknown { .. }) => Share::Live { since: asked },
                (Some(_), _) => continue,
                (None, Share::Unknown { .. }) => {
                    tracing::info!(queue = %self.queue, job = %id, %node, "the agent does not have the job: launching it");
                    Share::Waiting { retry_ms: now_ms }
                }
                (None, _) => Share::Ended(JobEnd::without_status(
                    EndCause::Lost,
                    format!("node {node}'s agent no longer knows the job"),
                )),
            };
        }
    }

    /// Time passes: what to send now. Ended jobs are then in [`Runs::take_ended`].
    pub fn tick(&mut self, now_ms: u64) -> Vec<Send> {
        let mut out = Vec::new();
        self.ask_addresses(now_ms, &mut out);
        self.give_up(now_ms);
        self.kill_the_rest();
        // Nodes with shares live or in doubt: only giving up changes them within a tick.
        let busy = self.busy();
        self.hush(now_ms, &busy);
        self.send_launches(now_ms, &mut out);
        self.send_kills(now_ms, &mut out);
        self.finish();
        self.renew(now_ms, &busy, &mut out);
        self.send_forgets(&mut out);
        for send in &out {
            if let Some(agent) = send.node().and_then(|node| self.agents.get_mut(node)) {
                agent.sent_ms = Some(now_ms);
            }
        }
        out
    }

    /// Whether there is nothing to watch or send: no job, no end or forget to tell an agent
    /// of, no address asked for.
    pub fn is_idle(&self) -> bool {
        self.jobs.is_empty()
            && !self.asking
            && self
                .agents
                .values()
                .all(|a| a.seen.is_empty() && a.forgets.is_empty())
    }

    /// Where `node`'s agent listens, if known.
    pub fn address_of(&self, node: &str) -> Option<SocketAddr> {
        self.agents.get(node).and_then(|a| a.address)
    }

    /// Jobs whose every share ended, with the end that speaks for the job.
    pub fn take_ended(&mut self) -> Vec<(JobId, JobEnd)> {
        std::mem::take(&mut self.ended)
    }
}
