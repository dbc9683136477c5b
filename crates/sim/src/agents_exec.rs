//! A shard's agents executor under the simulator: the shard core's own bookkeeping
//! ([`Runs`], the code the shard's agents task runs) fed the core's launches, kills and
//! forgets once they are durable, the agents' answers and the time; what it asks to send
//! goes over the sim network, each request to an agent on the shard's connection to it
//! (opened again when cut), unanswered after [`REQUEST_TIMEOUT_MS`] taken as unreachable
//! and its connection closed, as the driver's `Links` does (what is in flight on it is
//! dropped: a request reaches its agent within that timeout or never). Ended jobs reach
//! the core in the next batch, as the driver's commands do.

use std::collections::BTreeMap;

use shardsched_coordinator_core::core::ConnId;
use shardsched_shard_core::agents::{
    Failure, LaunchFacts, REQUEST_TIMEOUT_MS, Runs, Send, launches_on,
};
use shardsched_shard_core::{ExecAction, JobRecord, ShardCore};
use shardsched_wire::msg::agent::{JobEnd, JobNode, NodeLaunch, SignedJobspec};
use shardsched_wire::msg::shard_coord::{self, AgentAddress};
use shardsched_wire::msg::{JobId, shard_node};
use shardsched_wire::rpc::Reply;

use crate::net::{Body, Packet};

/// SIGTERM-to-SIGKILL grace a sim shard gives its jobs' tasks, ms.
pub(crate) const KILL_GRACE_MS: u64 = 3_000;
/// The variable a simulated task reads its allocation's end from (ms): it finishes its
/// work by then.
pub(crate) const SPAN_END_VAR: &str = "SIM_SPAN_END_MS";
/// How often the executor looks at its jobs while it has any (the driver's
/// `AGENTS_TICK` is 50 ms; coarser here, as renewals are due every 100–500 ms), ms.
const TICK_MS: u64 = 250;

/// A request in flight, by its id.
#[derive(Debug)]
enum Ask {
    Addresses,
    Launch {
        job: JobId,
        node: String,
    },
    Renew {
        node: String,
        asked: u64,
        seen: Vec<JobId>,
    },
    /// A kill or a forget: its answer changes nothing.
    Fire,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Executor {
    runs: Runs,
    /// Requests in flight: when each was sent, on which connection to an agent, what.
    asks: BTreeMap<u64, (u64, Option<ConnId>, Ask)>,
    /// The shard's connection to each node's agent: `(queue, node)` is its far end.
    pub(crate) conns: BTreeMap<String, ConnId>,
    /// Connections to agents closed as a request on them timed out, for the network.
    pub(crate) closed: Vec<ConnId>,
    ended: Vec<(JobId, JobEnd)>,
    next_tick: u64,
}

impl Executor {
    /// The executor of a shard whose core just started: the jobs it found running are
    /// watched (the driver's `ExecRequest::Watch`).
    pub(crate) fn watching(mut runs: Runs, core: &ShardCore, now: u64) -> Executor {
        for id in core.running_job_ids() {
            if let Some(job) = core.job(id) {
                runs.watch(now, Box::new(job.clone()), core.generations_of(job));
            }
        }
        Executor {
            runs,
            asks: BTreeMap::new(),
            conns: BTreeMap::new(),
            closed: Vec::new(),
            ended: Vec::new(),
            next_tick: now,
        }
    }

    /// When it next has work.
    pub(crate) fn next_wakeup(&self) -> Option<u64> {
        if !self.ended.is_empty() {
            return Some(0);
        }
        let expiry = self
            .asks
            .values()
            .map(|(sent, _, _)| sent + REQUEST_TIMEOUT_MS)
            .min();
        let tick = (!self.runs.is_idle()).then_some(self.next_tick);
        [expiry, tick].into_iter().flatten().min()
    }

    /// Jobs ended since the last batch, to the core.
    pub(crate) fn ended_to(&mut self, core: &mut ShardCore, now: u64) {
        for (id, end) in self.ended.drain(..) {
            core.handle_job_ended(now, id, &end);
        }
    }

    /// The coordinator's answer to an `Agents` request `id`.
    pub(crate) fn addresses(&mut self, id: u64, answer: Result<Vec<AgentAddress>, String>) {
        if matches!(self.asks.get(&id), Some((_, _, Ask::Addresses))) {
            self.asks.remove(&id);
            self.runs.addresses(answer);
        }
    }

    /// An agent's answer to request `id`.
    pub(crate) fn answer(&mut self, now: u64, id: u64, answer: Reply<shard_node::Response>) {
        let Some((_, _, ask)) = self.asks.remove(&id) else {
            return;
        };
        self.settle(now, ask, answer.map_err(Failure::Refused));
    }

    fn settle(&mut self, now: u64, ask: Ask, answer: Result<shard_node::Response, Failure>) {
        match ask {
            Ask::Addresses => self.runs.addresses(Err("unanswered".to_owned())),
            Ask::Launch { job, node } => self.runs.launched(now, job, &node, answer.map(|_| ())),
            Ask::Renew { node, asked, seen } => {
                let report = match answer {
                    Ok(shard_node::Response::Report(report)) => Ok(report),
                    Ok(other) => Err(Failure::Unreachable(format!("answered {other:?}"))),
                    Err(e) => Err(e),
                };
                self.runs.renewed(now, &node, asked, &seen, report);
            }
            Ask::Fire => {}
        }
    }

    /// After the batch's journal write: the core's launches, kills and forgets, requests
    /// timed out, one tick of [`Runs`], and what it asks to send.
    pub(crate) fn run(
        &mut self,
        core: &mut ShardCore,
        now: u64,
        coordinator: Option<ConnId>,
        net: &mut dyn FnMut(Option<ConnId>) -> ConnId,
        ids: &mut dyn FnMut() -> u64,
        packets: &mut Vec<Packet>,
    ) {
        for action in core.take_exec_actions() {
            match action {
                ExecAction::Launch(id) => {
                    if let Some(job) = core.job(id) {
                        let generations = core.generations_of(job);
                        self.runs.launch(now, Box::new(job.clone()), generations);
                    }
                }
                ExecAction::Kill { id, why } => self.runs.kill(now, id, &why),
                ExecAction::Forget(id) => self.runs.forget(id),
            }
        }
        let expired: Vec<u64> = self
            .asks
            .iter()
            .filter(|(_, (sent, _, _))| sent + REQUEST_TIMEOUT_MS <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            let Some((_, conn, ask)) = self.asks.remove(&id) else {
                continue;
            };
            // Its connection is closed, as the driver's does: what is still in flight on
            // it can no longer reach the agent (and renew its lease).
            if let Some(conn) = conn {
                self.conns.retain(|_, c| *c != conn);
                if !self.closed.contains(&conn) {
                    self.closed.push(conn);
                }
            }
            let failure = Failure::Unreachable("timed out".to_owned());
            self.settle(now, ask, Err(failure));
        }
        let sends = self.runs.tick(now);
        self.ended.extend(self.runs.take_ended());
        self.next_tick = now + TICK_MS;
        for send in sends {
            let id = ids();
            let (node, request, ask) = match send {
                Send::Addresses(nodes) => {
                    let Some(conn) = coordinator else {
                        self.runs.addresses(Err("not registered".to_owned()));
                        continue;
                    };
                    self.asks.insert(id, (now, None, Ask::Addresses));
                    packets.push(Packet {
                        conn,
                        to_coordinator: true,
                        body: Body::ShardRequest {
                            id,
                            request: shard_coord::Request::Agents { nodes },
                        },
                    });
                    continue;
                }
                Send::Launch { node, launch, .. } => {
                    let job = launch.job;
                    let ask = Ask::Launch {
                        job,
                        node: node.clone(),
                    };
                    (node, shard_node::Request::Launch(launch), ask)
                }
                Send::Kill { node, job, why, .. } => {
                    (node, shard_node::Request::Kill { job, why }, Ask::Fire)
                }
                Send::Renew {
                    node, seen, asked, ..
                } => {
                    // The simulated agents answer at once: nothing to hold.
                    let request = shard_node::Request::Renew {
                        seen: seen.clone(),
                        since: None,
                        hold_ms: 0,
                    };
                    let ask = Ask::Renew {
                        node: node.clone(),
                        asked,
                        seen,
                    };
                    (node, request, ask)
                }
                Send::Forget { node, jobs, .. } => {
                    (node, shard_node::Request::Forget { jobs }, Ask::Fire)
                }
            };
            let conn = net(self.conns.get(&node).copied());
            self.conns.insert(node, conn);
            self.asks.insert(id, (now, Some(conn), ask));
            packets.push(Packet {
                conn,
                to_coordinator: false,
                body: Body::ToAgent {
                    id,
                    from: core.queue().to_owned(),
                    request,
                },
            });
        }
    }
}

/// The end of `job`'s allocation's span, ms: the queue manager plans in whole seconds, from
/// the second the job started in.
fn span_end_ms(job: &JobRecord) -> u64 {
    let start = job.start_ms.unwrap_or(0);
    start / 1000 * 1000 + job.duration_ms
}

/// The launch of `job` on each of its nodes: one task per node, for the job's duration
/// (the simulator's stand-in for the shard's `node_launches`, which lays out a jobspec's
/// tasks and environment; what is checked here is who may start what, where).
pub(crate) fn launches(
    job: &JobRecord,
    facts: &LaunchFacts<'_>,
) -> Result<Vec<NodeLaunch>, String> {
    let signature = job
        .signature
        .as_deref()
        .ok_or("the job's submit was not signed")?;
    let nodes: Vec<JobNode> = job
        .nodes
        .iter()
        .enumerate()
        .map(|(rank, node)| {
            let agent = *facts
                .agents
                .get(node)
                .ok_or_else(|| format!("no agent is known for node {node}"))?;
            Ok(JobNode {
                node: node.clone(),
                agent,
                first_rank: u32::try_from(rank).unwrap_or(u32::MAX),
                ntasks: 1,
                cores: Vec::new(),
                gpus: Vec::new(),
            })
        })
        .collect::<Result<_, String>>()?;
    let signed = SignedJobspec::new(&job.jobspec_json, signature);
    let env = [(SPAN_END_VAR.to_owned(), span_end_ms(job).to_string())];
    let r_json = job.r_json.as_deref().unwrap_or("");
    launches_on(job, facts, &nodes, &signed, &env, r_json)
}
