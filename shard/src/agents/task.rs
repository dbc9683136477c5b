//! The agents task: takes the core task's launches, kills and forgets, keeps the
//! bookkeeping of [`Runs`], sends what it asks for (each request in a task of its own, its
//! answer coming back on a channel), and hands ended jobs to the core task.

use std::time::Duration;

use shardsched_proto::Session;
use shardsched_proto::msg::agent::AgentReport;
use shardsched_proto::msg::shard_coord::AgentAddress;
use shardsched_proto::msg::{JobId, shard_node};
use tokio::sync::{mpsc, watch};

use super::AgentsOptions;
use super::links::{Failure, Links};
use super::runs::{Runs, Send};
use crate::driver::core_task::{Command, now_ms};
use crate::driver::exec_task::{ExecRequest, deliver};

/// How often the task looks at its jobs when nothing arrives.
pub const AGENTS_TICK: Duration = Duration::from_millis(50);

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
        answer: Result<AgentReport, Failure>,
    },
}

/// Runs until the core task drops its sender (or the core task is gone).
pub(crate) async fn run(
    queue: String,
    options: AgentsOptions,
    endpoint: quinn::Endpoint,
    coordinator: watch::Receiver<Option<Session>>,
    mut requests: mpsc::Receiver<ExecRequest>,
    commands: mpsc::Sender<Command>,
) {
    let grace_ms = u64::try_from(options.kill_grace.as_millis()).unwrap_or(u64::MAX);
    let mut runs = Runs::new(&queue, grace_ms);
    let links = Links::new(endpoint, coordinator);
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    let mut ended = std::collections::VecDeque::new();
    let mut tick = tokio::time::interval(AGENTS_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut sends = Vec::new();
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else { break };
                let now = now_ms();
                match request {
                    ExecRequest::Launch(job, generations) => runs.launch(now, job, generations),
                    ExecRequest::Watch(job, generations) => runs.watch(now, job, generations),
                    ExecRequest::Kill { id, why } => runs.kill(now, id, &why),
                    ExecRequest::Forget(id) => sends.extend(runs.forget(id)),
                }
            }
            Some(answer) = heard.recv() => {
                let now = now_ms();
                match answer {
                    Heard::Addresses(answer) => runs.addresses(answer),
                    Heard::Launched { job, node, answer } => runs.launched(now, job, &node, answer),
                    Heard::Renewed { node, asked, seen, answer } => {
                        runs.renewed(now, &node, asked, &seen, answer);
                    }
                }
            }
            _ = tick.tick() => {}
        }
        sends.extend(runs.tick(now_ms()));
        for send in sends {
            tokio::spawn(carry(links.clone(), send, heard_tx.clone()));
        }
        ended.extend(runs.take_ended());
        if !deliver(&mut ended, &commands) {
            break;
        }
    }
    tracing::debug!(%queue, "agents task stopped");
}

/// Sends one request and hands its answer back.
async fn carry(links: Links, send: Send, heard: mpsc::UnboundedSender<Heard>) {
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
            let request = shard_node::Request::Renew { seen: seen.clone() };
            let answer = match links.ask(&node, addr, &request).await {
                Ok(shard_node::Response::Report(report)) => Ok(report),
                Ok(other) => Err(Failure::Unreachable(format!("answered {other:?}"))),
                Err(e) => Err(e),
            };
            Heard::Renewed {
                node,
                asked,
                seen,
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
