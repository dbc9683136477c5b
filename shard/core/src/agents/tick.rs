//! [`Runs::tick`]'s parts: where agents are, giving up on what cannot end by an agent's
//! word, falling quiet towards failing agents, launches, kills, finished jobs, renewals,
//! forgets.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use shardsched_wire::limits::AGENT_JOBS_MAX;
use shardsched_wire::msg::JobId;
use shardsched_wire::msg::agent::{EndCause, JobEnd};

use super::{
    ADDRESSES_RETRY_MS, KILL_RESEND_MS, LAUNCH_RETRY_FOR_MS, LOST_MARGIN_MS, LaunchFacts,
    QUIET_AFTER_LEASE_DIVISOR, RENEW_FIRST_MS, RENEW_MAX_MS, RENEWALS_OUT_MAX, REQUEST_TIMEOUT_MS,
    Runs, Send, Share,
};

impl Runs {
    pub(super) fn ask_addresses(&mut self, now_ms: u64, out: &mut Vec<Send>) {
        if self.asking {
            return;
        }
        // Only a node whose agent's address is not known, or whose agent is failing, can be
        // wanted (every share's node has an entry: `add`); with none, the walk over every
        // job's shares below, at each tick, finds nothing (most ticks of a busy shard).
        if self
            .agents
            .values()
            .all(|a| a.address.is_some() && a.failing_since.is_none())
        {
            return;
        }
        // A node never asked about is asked about at once (a job's first launch there
        // waits for it); the others, already asked about, at most every
        // ADDRESSES_RETRY_MS.
        let retry_due = self
            .asked_ms
            .is_none_or(|at| now_ms >= at.saturating_add(ADDRESSES_RETRY_MS));
        let never_asked = |a: &super::Agent| a.address.is_none() && !a.address_asked;
        if !retry_due && !self.agents.values().any(never_asked) {
            return;
        }
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        for run in self.jobs.values() {
            let waiting = run
                .shares
                .values()
                .any(|s| matches!(s, Share::Waiting { .. }));
            for (node, share) in &run.shares {
                let agent = self.agents.get(node);
                if !retry_due && !agent.is_none_or(never_asked) {
                    continue;
                }
                let unknown = agent.is_none_or(|a| a.address.is_none());
                let failing = agent.is_some_and(|a| a.failing_since.is_some());
                // A share in doubt or live needs its agent's report (a restarted shard
                // watches its running jobs without knowing where their agents are); a
                // launch needs every node's agent.
                let ended = matches!(share, Share::Ended(_));
                if (unknown && (waiting || !ended)) || (failing && !ended) {
                    wanted.insert(node.clone());
                }
            }
        }
        for node in &wanted {
            self.agents.entry(node.clone()).or_default().address_asked = true;
        }
        if !wanted.is_empty() {
            self.asking = true;
            if retry_due {
                self.asked_ms = Some(now_ms);
            }
            out.push(Send::Addresses(wanted.into_iter().collect()));
        }
    }

    pub(super) fn send_launches(&mut self, now_ms: u64, out: &mut Vec<Send>) {
        for (id, run) in &mut self.jobs {
            // A job being stopped is never launched: a share that came back to waiting
            // after the kill (the agent's report says it never had the job) ends as the
            // kill's shares not sent yet did.
            if let Some((why, _)) = &run.kill {
                for share in run.shares.values_mut() {
                    if matches!(share, Share::Waiting { .. }) {
                        *share = Share::Ended(JobEnd::without_status(EndCause::Cancelled, why));
                    }
                }
                continue;
            }
            let due = run
                .shares
                .values()
                .any(|s| matches!(s, Share::Waiting { retry_ms } if *retry_ms <= now_ms));
            if !due {
                continue;
            }
            if run.launches.is_none() {
                let addresses: Option<BTreeMap<String, SocketAddr>> = run
                    .job
                    .nodes
                    .iter()
                    .map(|n| Some((n.clone(), self.agents.get(n)?.address?)))
                    .collect();
                let Some(agents) = addresses else {
                    continue;
                };
                let facts = LaunchFacts {
                    queue: &self.queue,
                    generations: &run.generations,
                    agents: &agents,
                    kill_grace_ms: self.kill_grace_ms,
                };
                match (self.build)(&run.job, &facts) {
                    Ok(launches) => {
                        let by_node = launches
                            .into_iter()
                            .map(|l| (l.this_node().map(|n| n.node.clone()).unwrap_or_default(), l))
                            .collect();
                        run.launches = Some(by_node);
                    }
                    Err(why) => {
                        tracing::warn!(queue = %self.queue, job = %id, %why, "cannot launch");
                        for share in run.shares.values_mut() {
                            if matches!(share, Share::Waiting { .. }) {
                                *share = Share::Ended(JobEnd::without_status(
                                    EndCause::Error,
                                    why.clone(),
                                ));
                            }
                        }
                        continue;
                    }
                }
            }
            let Some(launches) = &run.launches else {
                continue;
            };
            for (node, share) in &mut run.shares {
                let Share::Waiting { retry_ms } = share else {
                    continue;
                };
                let agent = self.agents.get(node);
                // An earlier run of this job (requeued) ended on the node: the agent is
                // told first that its end is recorded, so that word cannot reach it after
                // this run's launch and hide this run's end.
                if agent.is_some_and(|a| a.seen.contains(id) || a.quiet) {
                    continue;
                }
                let addr = agent.and_then(|a| a.address);
                let (Some(launch), Some(addr), true) =
                    (launches.get(node), addr, *retry_ms <= now_ms)
                else {
                    continue;
                };
                // The launch as built, with the node's address as known now.
                *share = Share::Sending;
                out.push(Send::Launch {
                    node: node.clone(),
                    addr,
                    launch: Box::new(launch.clone()),
                });
            }
        }
    }

    /// A job that could not start on a node, or lost it, is stopped on the others: it
    /// cannot run whole any more.
    pub(super) fn kill_the_rest(&mut self) {
        for run in self.jobs.values_mut() {
            if run.kill.is_some() {
                continue;
            }
            let failed = run.shares.iter().find_map(|(node, share)| match share {
                Share::Ended(end)
                    if matches!(
                        end.cause,
                        EndCause::Error | EndCause::Lost | EndCause::Prolog
                    ) =>
                {
                    Some((node, end))
                }
                _ => None,
            });
            if let Some((node, end)) = failed {
                run.kill = Some((format!("stopped: on {node}, {}", end.note), 0));
                run.failed = Some(end.clone());
            }
        }
    }

    pub(super) fn send_kills(&mut self, now_ms: u64, out: &mut Vec<Send>) {
        for (&id, run) in &mut self.jobs {
            let Some((why, sent_ms)) = &mut run.kill else {
                continue;
            };
            if *sent_ms != 0 && now_ms < sent_ms.saturating_add(KILL_RESEND_MS) {
                continue;
            }
            *sent_ms = now_ms.max(1);
            for (node, share) in &run.shares {
                if matches!(share, Share::Ended(_) | Share::Waiting { .. }) {
                    continue;
                }
                let agent = self.agents.get(node).filter(|a| !a.quiet);
                if let Some(addr) = agent.and_then(|a| a.address) {
                    out.push(Send::Kill {
                        node: node.clone(),
                        addr,
                        job: id,
                        why: why.clone(),
                    });
                }
            }
        }
    }

    /// Shares that cannot end by an agent's word: launches that never got through, and
    /// shares on an agent that fails to answer, or that cannot be asked at all, and was
    /// sent nothing for so long that its lease ran out and its kill grace passed (see the
    /// module documentation of [`super`]: the request timeout, the lease, the grace and a
    /// margin past the last request that left for it).
    ///
    /// An agent cannot be asked while its address is not known: a restarted shard watches
    /// a job on a node whose agent has not registered since the coordinator restarted (cut
    /// off, or gone for good). Nothing leaves for it, so its lease runs out as surely as a
    /// failing agent's; waiting for its word instead held the job, and its nodes, for as
    /// long as the agent stayed away.
    pub(super) fn give_up(&mut self, now_ms: u64) {
        for (id, run) in &mut self.jobs {
            let stuck_since = run.since_ms.saturating_add(LAUNCH_RETRY_FOR_MS);
            for (node, share) in &mut run.shares {
                match share {
                    Share::Ended(_) | Share::Sending => {}
                    Share::Waiting { .. } => {
                        if now_ms >= stuck_since {
                            *share = Share::Ended(JobEnd::without_status(
                                EndCause::Error,
                                format!("could not launch on {node}: its agent is not reachable"),
                            ));
                        }
                    }
                    Share::Unknown { .. } | Share::Live { .. } => {
                        let Some(agent) = self
                            .agents
                            .get(node)
                            .filter(|a| a.failing_since.is_some() || a.address.is_none())
                        else {
                            continue;
                        };
                        // A restarted shard's earlier run sent nothing after the watch.
                        let last = agent.sent_ms.unwrap_or(0).max(run.since_ms);
                        let gone = last
                            .saturating_add(REQUEST_TIMEOUT_MS)
                            .saturating_add(agent.lease())
                            .saturating_add(self.kill_grace_ms)
                            .saturating_add(LOST_MARGIN_MS);
                        if now_ms >= gone {
                            tracing::warn!(queue = %self.queue, job = %id, %node, "node agent unreachable past its lease: its tasks are taken as killed");
                            *share = Share::Ended(JobEnd::without_status(
                                EndCause::Lost,
                                format!(
                                    "node {node}'s agent unreachable; nothing was sent to it \
                                     since {last} ms, so its lease ran out and it killed the \
                                     job's tasks there"
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }

    /// Marks quiet each agent failing for part of its lease while it has shares live or in
    /// doubt: nothing is sent to it until they are given up or it answers.
    pub(super) fn hush(&mut self, now_ms: u64, busy: &BTreeSet<String>) {
        for (node, agent) in &mut self.agents {
            let lease = agent.lease();
            agent.quiet = busy.contains(node)
                && agent.failing_since.is_some_and(|since| {
                    now_ms >= since.saturating_add(lease / QUIET_AFTER_LEASE_DIVISOR)
                });
        }
    }

    /// Jobs whose shares all ended: to the core, and to each agent's `seen`.
    pub(super) fn finish(&mut self) {
        let done: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.shares.values().all(|s| matches!(s, Share::Ended(_))))
            .map(|(&id, _)| id)
            .collect();
        for id in done {
            let Some(run) = self.jobs.remove(&id) else {
                continue;
            };
            let worst = run
                .shares
                .into_values()
                .filter_map(|s| match s {
                    Share::Ended(end) => Some(end),
                    _ => None,
                })
                .reduce(JobEnd::worst)
                .unwrap_or_else(|| JobEnd::without_status(EndCause::Lost, "no node"));
            // A job stopped because one node failed ends as that node's failure.
            let end = run.failed.unwrap_or(worst);
            for node in &run.job.nodes {
                if let Some(agent) = self.agents.get_mut(node) {
                    agent.seen.insert(id);
                }
            }
            // A requeued job may have run on other nodes before: all get its `Forget`.
            let nodes = self.finished.entry(id).or_default();
            nodes.extend(run.job.nodes.iter().cloned());
            nodes.sort();
            nodes.dedup();
            self.ended.push((id, end));
        }
    }

    /// The nodes with a share live or in doubt (a launch in flight renews the lease
    /// itself).
    pub(super) fn busy(&self) -> BTreeSet<String> {
        let mut busy = BTreeSet::new();
        for run in self.jobs.values() {
            for (node, share) in &run.shares {
                if matches!(share, Share::Unknown { .. } | Share::Live { .. }) {
                    busy.insert(node.clone());
                }
            }
        }
        busy
    }

    pub(super) fn renew(&mut self, now_ms: u64, busy: &BTreeSet<String>, out: &mut Vec<Send>) {
        let asked = self.seq + 1;
        let mut sent = false;
        for (node, agent) in &mut self.agents {
            let wanted = busy.contains(node) || !agent.seen.is_empty();
            let Some(addr) = agent.address else { continue };
            let full = agent.renewals_out >= RENEWALS_OUT_MAX;
            if !wanted || agent.quiet || full || now_ms < agent.next_renew_ms {
                continue;
            }
            let every = agent
                .lease_ms
                .map_or(RENEW_FIRST_MS, |lease| (lease / 4).clamp(100, RENEW_MAX_MS));
            agent.renewals_out += 1;
            agent.next_renew_ms = now_ms.saturating_add(every);
            sent = true;
            out.push(Send::Renew {
                node: node.clone(),
                addr,
                seen: agent.seen.iter().copied().collect(),
                asked,
            });
        }
        if sent {
            self.seq = asked;
        }
    }

    /// Forgotten jobs' files, to each agent not quiet (at most [`AGENT_JOBS_MAX`] a
    /// request).
    pub(super) fn send_forgets(&mut self, out: &mut Vec<Send>) {
        for (node, agent) in &mut self.agents {
            let Some(addr) = agent.address else {
                // Never known (it never ran a job of ours): nothing of ours is there.
                agent.forgets.clear();
                continue;
            };
            if agent.forgets.is_empty() || agent.quiet {
                continue;
            }
            let jobs: Vec<JobId> = agent.forgets.iter().take(AGENT_JOBS_MAX).copied().collect();
            for job in &jobs {
                agent.forgets.remove(job);
            }
            out.push(Send::Forget {
                node: node.clone(),
                addr,
                jobs,
            });
        }
    }
}
