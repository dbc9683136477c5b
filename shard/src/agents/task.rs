//! The agents task: takes the core task's launches, kills and forgets, keeps the
//! bookkeeping of [`Runs`], sends what it asks for (each request in a task of its own, its
//! answer coming back on a channel), and hands ended jobs to the core task.
//!
//! Renewals are held by the agents until their reports change ([`Held`]): an answer that
//! brings news is followed by the next renewal at once, so a job's end reaches the core
//! task as soon as its agent sees it instead of at the next renewal period.

use std::net::SocketAddr;
use std::time::Duration;

use shardsched_proto::Session;
use shardsched_proto::msg::agent::AgentReport;
use shardsched_proto::msg::shard_coord::AgentAddress;
use shardsched_proto::msg::shard_node::OutputRequest;
use shardsched_proto::msg::{JobId, Refusal, RefusalCode, shard_node};
use tokio::sync::{mpsc, watch};

use super::AgentsOptions;
use super::links::{Failure, Links};
use super::runs::{RENEW_MAX_MS, Runs, Send};
use crate::driver::core_task::{Command, now_ms};
use crate::driver::exec_task::{ExecRequest, deliver};
use crate::driver::output::OutputAsk;

/// How often the task looks at its jobs when nothing arrives.
pub const AGENTS_TICK: Duration = Duration::from_millis(50);

/// Most messages already waiting that the task takes in before it ticks (so that a steady
/// stream cannot keep it from sending).
const DRAINED_MAX: usize = 256;

/// An answer coming back from a request in flight.
enum Heard {
    Addresses(Result<Vec<AgentAddress>, String>),
    Launched {
        job: JobId,
        node: String,
        answer: Result<(), Failure>,
    },
    Renewed {
        node: String,
        asked: u64,
        seen: Vec<JobId>,
        /// The digest the renewal named.
        since: Option<u64>,
        answer: Result<AgentReport, Failure>,
    },
}

/// What the task knows of each agent's last report, to name it in the next renewal.
#[derive(Default)]
struct Held {
    /// Per node: the digest of the last report heard and how long the agent may hold the
    /// next renewal (a quarter of its lease, at most [`RENEW_MAX_MS`]: never longer than the
    /// core's renewal period, so the lease is renewed as often as without holding).
    last: std::collections::HashMap<String, (u64, u32)>,
    /// Nodes sent a launch while a renewal was out: that renewal's report may show the job
    /// without the core taking it (a report speaks only for launches sent before it was
    /// asked for), so the next renewal is answered at once.
    launched_during: std::collections::HashSet<String>,
    /// Per node: renewals out (the core sends up to `RENEWALS_OUT_MAX` at once).
    out: std::collections::HashMap<String, usize>,
}

impl Held {
    /// The `since` and `hold_ms` of a renewal to `node`.
    fn renewal(&mut self, node: &str) -> (Option<u64>, u32) {
        *self.out.entry(node.to_owned()).or_default() += 1;
        match self.last.get(node) {
            Some(&(digest, hold_ms)) if !self.launched_during.contains(node) => {
                (Some(digest), hold_ms)
            }
            _ => (None, 0),
        }
    }

    /// A launch to `node` is sent.
    fn launching(&mut self, node: &str) {
        if self.out.get(node).is_some_and(|&n| n > 0) {
            self.launched_during.insert(node.to_owned());
        }
    }

    /// A renewal's answer; whether it brought news (then the next renewal goes at once).
    fn renewed(
        &mut self,
        node: &str,
        since: Option<u64>,
        answer: &Result<AgentReport, Failure>,
    ) -> bool {
        // A launch during any renewal still out makes each of their answers stale.
        let out = self.out.get_mut(node).map_or(0, |n| {
            *n = n.saturating_sub(1);
            *n
        });
        let stale = if out == 0 {
            self.out.remove(node);
            self.launched_during.remove(node)
        } else {
            self.launched_during.contains(node)
        };
        let Ok(report) = answer else {
            self.last.remove(node);
            return false;
        };
        let digest = report.digest();
        if stale {
            self.last.remove(node);
            return true;
        }
        let hold_ms = u32::try_from((report.lease_ms / 4).min(RENEW_MAX_MS)).unwrap_or(0);
        self.last.insert(node.to_owned(), (digest, hold_ms));
        since != Some(digest)
    }
}

/// What the agents task is given.
pub(crate) struct Inputs {
    /// The shard's queue.
    pub(crate) queue: String,
    /// The executor's settings.
    pub(crate) options: AgentsOptions,
    /// The shard's endpoint, from which agents are reached.
    pub(crate) endpoint: quinn::Endpoint,
    /// The shard's registration connection to the coordinator, while registered.
    pub(crate) coordinator: watch::Receiver<Option<Session>>,
    /// The core task's launches, kills, forgets and watches.
    pub(crate) requests: mpsc::Receiver<ExecRequest>,
    /// `job output` reads.
    pub(crate) outputs: mpsc::Receiver<OutputAsk>,
}

/// Runs until the core task drops its sender (or the core task is gone).
pub(crate) async fn run(inputs: Inputs, commands: mpsc::Sender<Command>) {
    let Inputs {
        queue,
        options,
        endpoint,
        coordinator,
        mut requests,
        mut outputs,
    } = inputs;
    let grace_ms = u64::try_from(options.kill_grace.as_millis()).unwrap_or(u64::MAX);
    let mut runs = Runs::new(&queue, grace_ms, super::launch::node_launches);
    let links = Links::new(endpoint, coordinator);
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    let mut held = Held::default();
    let mut ended = std::collections::VecDeque::new();
    let mut tick = tokio::time::interval(AGENTS_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else { break };
                take_request(&mut runs, request);
            }
            Some(ask) = outputs.recv() => {
                let addr = super::launch::node_of_task(&ask.job, ask.query.task)
                    .map(|node| { let addr = runs.address_of(&node); (node, addr) });
                tokio::spawn(read_output(links.clone(), ask, addr));
            }
            Some(answer) = heard.recv() => take_answer(&mut runs, &mut held, answer),
            // An idle shard (no job on an agent, nothing to tell one) does not wake for it.
            _ = tick.tick(), if !runs.is_idle() => {}
        }
        // Everything else already waiting, before one tick for all of it: a tick looks at
        // every running job, so one per message would cost the shard O(jobs) each time.
        for _ in 0..DRAINED_MAX {
            if let Ok(request) = requests.try_recv() {
                take_request(&mut runs, request);
            } else if let Ok(answer) = heard.try_recv() {
                take_answer(&mut runs, &mut held, answer);
            } else {
                break;
            }
        }
        for send in runs.tick(now_ms()) {
            let since_hold = match &send {
                Send::Renew { node, .. } => held.renewal(node),
                Send::Launch { node, .. } => {
                    held.launching(node);
                    (None, 0)
                }
                _ => (None, 0),
            };
            tokio::spawn(carry(links.clone(), send, since_hold, heard_tx.clone()));
        }
        ended.extend(runs.take_ended());
        if !deliver(&mut ended, &commands) {
            break;
        }
    }
    tracing::debug!(%queue, "agents task stopped");
}

/// One request of the core task (what it makes the task send leaves at the next tick).
fn take_request(runs: &mut Runs, request: ExecRequest) {
    let now = now_ms();
    match request {
        ExecRequest::Launch(job, generations) => runs.launch(now, job, generations),
        ExecRequest::Watch(job, generations) => runs.watch(now, job, generations),
        ExecRequest::Kill { id, why } => runs.kill(now, id, &why),
        ExecRequest::Forget(id) => runs.forget(id),
    }
}

/// One answer from a request in flight.
fn take_answer(runs: &mut Runs, held: &mut Held, answer: Heard) {
    let now = now_ms();
    match answer {
        Heard::Addresses(answer) => runs.addresses(answer),
        Heard::Launched { job, node, answer } => runs.launched(now, job, &node, answer),
        Heard::Renewed {
            node,
            asked,
            seen,
            since,
            answer,
        } => {
            let news = held.renewed(&node, since, &answer);
            runs.renewed(now, &node, asked, &seen, answer);
            if news {
                runs.renew_soon(&node);
            }
        }
    }
}

/// Sends one request and hands its answer back; a renewal names `since` and `hold_ms`.
async fn carry(
    links: Links,
    send: Send,
    (since, hold_ms): (Option<u64>, u32),
    heard: mpsc::UnboundedSender<Heard>,
) {
    let back = match send {
        Send::Addresses(nodes) => Heard::Addresses(links.addresses(nodes).await),
        Send::Launch { node, addr, launch } => {
            let job = launch.job;
            let answer = links
                .ask(&node, addr, &shard_node::Request::Launch(launch))
                .await
                .map(|_| ());
            Heard::Launched { job, node, answer }
        }
        Send::Renew {
            node,
            addr,
            seen,
            asked,
        } => {
            let request = shard_node::Request::Renew {
                seen: seen.clone(),
                since,
                hold_ms,
            };
            let answer = match links.ask(&node, addr, &request).await {
                Ok(shard_node::Response::Report(report)) => Ok(report),
                Ok(other) => Err(Failure::Unreachable(format!("answered {other:?}"))),
                Err(e) => Err(e),
            };
            Heard::Renewed {
                node,
                asked,
                seen,
                since,
                answer,
            }
        }
        Send::Kill {
            node,
            addr,
            job,
            why,
        } => {
            if let Err(e) = links
                .ask(&node, addr, &shard_node::Request::Kill { job, why })
                .await
            {
                tracing::info!(%job, %node, error = %e, "kill not delivered; sent again later");
            }
            return;
        }
        Send::Forget { node, addr, jobs } => {
            if let Err(e) = links
                .ask(&node, addr, &shard_node::Request::Forget { jobs })
                .await
            {
                tracing::debug!(%node, error = %e, "forget not delivered");
            }
            return;
        }
    };
    let _ = heard.send(back);
}

/// Reads a task's output on its node: the node from the job's layout, its agent's address
/// as known (else as the coordinator says).
async fn read_output(
    links: Links,
    ask: OutputAsk,
    known: Result<(String, Option<SocketAddr>), String>,
) {
    let OutputAsk { job, query, reply } = ask;
    let answer = async {
        let (node, addr) = known.map_err(|why| Refusal::new(RefusalCode::NotFound, why))?;
        let addr = match addr {
            Some(addr) => addr,
            None => links
                .addresses(vec![node.clone()])
                .await
                .ok()
                .and_then(|a| a.first().and_then(|a| a.address))
                .ok_or_else(|| {
                    Refusal::new(
                        RefusalCode::Unavailable,
                        format!("no agent is known for {node}"),
                    )
                })?,
        };
        let request = shard_node::Request::Output(OutputRequest {
            job: job.id,
            rank: query.task,
            stderr: query.stderr,
            offset: query.offset,
            max_bytes: query.max_bytes,
        });
        match links.ask(&node, addr, &request).await {
            Ok(shard_node::Response::Output(chunk)) => Ok(chunk),
            Ok(other) => Err(Refusal::new(
                RefusalCode::Internal,
                format!("{node}'s agent answered {other:?}"),
            )),
            Err(Failure::Refused(refusal)) => Err(refusal),
            Err(Failure::Unreachable(why)) => Err(Refusal::new(
                RefusalCode::Unavailable,
                format!("{node}'s agent: {why}"),
            )),
        }
    }
    .await;
    let _ = reply.send(answer);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(lease_ms: u64, unhealthy: Option<&str>) -> AgentReport {
        AgentReport {
            node: "node0".into(),
            owner: None,
            lease_ms,
            unhealthy: unhealthy.map(str::to_owned),
            jobs: Vec::new(),
        }
    }

    #[test]
    fn a_renewal_names_the_last_report_and_is_answered_at_once_after_a_launch_during_it() {
        let mut held = Held::default();
        assert_eq!(
            held.renewal("node0"),
            (None, 0),
            "no report yet: answer at once"
        );
        let first = report(8_000, None);
        assert!(
            held.renewed("node0", None, &Ok(first.clone())),
            "news: ask again at once"
        );
        // A quarter of the lease, at most the core's renewal period.
        assert_eq!(held.renewal("node0"), (Some(first.digest()), 500));
        assert!(!held.renewed("node0", Some(first.digest()), &Ok(first.clone())));

        // A launch sent while a renewal is out: its answer may show the job without the
        // core taking it, so the next renewal is answered at once.
        assert_eq!(held.renewal("node0"), (Some(first.digest()), 500));
        held.launching("node0");
        assert!(held.renewed("node0", Some(first.digest()), &Ok(first.clone())));
        assert_eq!(held.renewal("node0"), (None, 0));

        // A changed report is news; a failed renewal forgets what the agent had.
        let changed = report(8_000, Some("health check failed"));
        assert!(held.renewed("node0", None, &Ok(changed.clone())));
        assert_eq!(held.renewal("node0"), (Some(changed.digest()), 500));
        let failed = Err(Failure::Unreachable("gone".into()));
        assert!(!held.renewed("node0", Some(changed.digest()), &failed));
        assert_eq!(held.renewal("node0"), (None, 0));
        // Two renewals out (the core sends the next when due): a launch after the first
        // one's answer still makes the second's answer stale.
        let news = report(8_000, None);
        held.renewed("node0", None, &Ok(news.clone()));
        held.renewal("node0");
        held.renewal("node0");
        assert!(!held.renewed("node0", Some(news.digest()), &Ok(news.clone())));
        held.launching("node0");
        assert!(held.renewed("node0", Some(news.digest()), &Ok(news.clone())));
        assert_eq!(held.renewal("node0"), (None, 0));
        held.renewed("node0", None, &Ok(news.clone()));
        // A launch with no renewal out changes nothing.
        held.renewed("node0", None, &Ok(report(1_000, None)));
        held.launching("node0");
        assert_eq!(
            held.renewal("node0"),
            (Some(report(1_000, None).digest()), 250)
        );
    }
}
