//! Healing and liveness: no more faults, everything restarted and delivered, time runs
//! until the system is quiet (or the seed is declared stuck); then every node is up in
//! exactly its owner.
//!
//! A machine that died (its agent gone for good) is the one thing healing does not bring
//! back: its agent is not waited for ([`World::agents_unsettled`]). Its node stays down
//! (the coordinator marked it so) and up in its owner; a move of it finishes on the
//! donor's word once the agent is gone (`Core::agent_clean_of`).

use shardsched_coordinator_core::moves::MoveNodeState;
use shardsched_shard_core::agents::{LEASE_DEFAULT_MS, LOST_MARGIN_MS, REQUEST_TIMEOUT_MS};
use shardsched_shard_core::{Hold, Reason, ShardCore};
use shardsched_wire::msg::JobState;

use super::*;
use crate::agents_exec;

/// How long after a move's deadline (or the start of healing, if later) the donor's jobs on
/// its outgoing nodes may still run, virtual ms: the coordinator's re-send of `CancelJobs`
/// (2 s), a crashed donor's restart and the agents' kill grace (3 s), with room to spare.
const DEADLINE_SLACK_MS: u64 = 20_000;

/// How long after a node agent is reachable again (healing began, its cut-off ended, or it
/// restarted after a crash) a
/// shard may still not have heard from it, virtual ms: a shard that fell quiet towards the
/// agent while it failed to answer sends it nothing until its lease has surely run out (a
/// request's timeout, the lease — the sim agents' is the default one — the kill grace and
/// a margin after the last request; shard/core's `agents` module documentation), and only
/// then takes its tasks as killed.
const QUIET_AGENT_WAIT_MS: u64 =
    REQUEST_TIMEOUT_MS + LEASE_DEFAULT_MS + agents_exec::KILL_GRACE_MS + LOST_MARGIN_MS;

impl World {
    /// No more faults: everything restarted, every message delivered, time runs until the
    /// system is quiet; then liveness.
    pub(super) fn heal(&mut self) -> Result<(), Violation> {
        self.faults = false;
        self.trace.line(self.now, "heal");
        let started = self.now;
        let mut rounds = 0;
        loop {
            rounds += 1;
            self.steps += 1;
            while let Some(packet) = self.net.take(&mut self.rng) {
                self.net_deliver_quietly(packet);
            }
            self.housekeeping()?;
            self.run_all_due()?;
            self.check()?;
            self.deadlines_kept(started)?;
            if self.quiet() {
                break;
            }
            if rounds >= HEAL_ROUNDS_MAX || self.now - started > HEAL_MS_MAX {
                return Err(broken(
                    Invariant::I3,
                    format!("not settled after healing: {}", self.unsettled_reason()),
                ));
            }
            if self.net.is_empty() {
                let next = self.next_due().unwrap_or(self.now + 1_000);
                self.now = next.max(self.now + 1);
                self.housekeeping()?;
            }
        }
        self.quiescent()
    }

    /// Once healing began, a move's deadline cancels the donor's jobs on its nodes still
    /// outgoing within [`DEADLINE_SLACK_MS`] of the deadline (or of the healing, if later):
    /// no job of the donor runs on such a node past that (see [`Self::deadline_due`] for
    /// node agents). A move that was cancelled has no deadline any more (the coordinator
    /// sends no `CancelJobs` for it): the nodes it could not give back run their jobs to
    /// their end.
    fn deadlines_kept(&self, healing_since: u64) -> Result<(), Violation> {
        let Some(core) = self.coord.core.as_ref() else {
            return Ok(());
        };
        for m in core.moves() {
            let Some(deadline) = m.deadline_ms.filter(|_| m.status == MoveStatus::Active) else {
                continue;
            };
            let cancelled = m
                .nodes
                .iter()
                .any(|n| matches!(n.state, MoveNodeState::Returning | MoveNodeState::Returned));
            if cancelled || self.now < deadline.max(healing_since) + DEADLINE_SLACK_MS {
                continue;
            }
            let Some(donor) = self
                .shards
                .get(&m.from)
                .filter(|s| s.alive)
                .and_then(|s| s.core.as_ref())
            else {
                continue;
            };
            let outgoing = m
                .nodes
                .iter()
                .filter(|n| matches!(n.state, MoveNodeState::Outgoing { .. }));
            for node in outgoing {
                let late = donor.jobs().find(|j| {
                    j.state == JobState::Running
                        && j.nodes.contains(&node.node)
                        && self.now >= self.deadline_due(deadline, healing_since, &j.nodes)
                });
                if let Some(job) = late {
                    return Err(broken(
                        Invariant::I3,
                        format!(
                            "move {}'s deadline {deadline} passed (healing since \
                             {healing_since}), and job {} still runs on {} in {}",
                            m.move_id.0, job.id, node.node, m.from
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// When a job on `nodes` that a move's deadline cancels must have ended.
    ///
    /// Through node agents, the donor takes the job's tasks as gone only on their agents'
    /// word or once their lease has surely run out; and a donor that fell quiet towards an
    /// agent that failed to answer (dropped messages, cut connections, a cut-off) waits out
    /// that lease even when the agent is reachable again, as it cannot tell. So the job
    /// ends within [`QUIET_AGENT_WAIT_MS`] and [`DEADLINE_SLACK_MS`] of the start of
    /// healing, or of the end of the last cut-off or crash of its nodes' agents if later
    /// (cut-offs and an agent's restart after a long crash outlast the start of healing).
    fn deadline_due(&self, deadline: u64, healing_since: u64, nodes: &[String]) -> u64 {
        let due = deadline.max(healing_since) + DEADLINE_SLACK_MS;
        if self.agents.is_empty() {
            return due;
        }
        let reachable = nodes
            .iter()
            .filter_map(|n| self.reachable_again.get(n))
            .fold(healing_since, |at, &back| at.max(back));
        due.max(reachable + QUIET_AGENT_WAIT_MS + DEADLINE_SLACK_MS)
    }

    pub(super) fn net_deliver_quietly(&mut self, packet: Packet) {
        self.route(packet);
    }

    /// Why the system is not quiet yet (empty when it is).
    pub(super) fn unsettled_reason(&self) -> String {
        let Some(core) = &self.coord.core else {
            return "the coordinator is down".to_owned();
        };
        let active: Vec<u64> = core
            .moves()
            .iter()
            .filter(|m| m.status == MoveStatus::Active)
            .map(|m| m.move_id.0)
            .collect();
        if !active.is_empty() {
            return format!("moves {active:?} unfinished");
        }
        for q in &core.config().queues {
            let Some(shard) = self.shards.get(&q.name) else {
                return format!("no shard for {}", q.name);
            };
            let Some(shard_core) = shard.core.as_ref().filter(|_| shard.alive) else {
                return format!("{}'s shard has no core", q.name);
            };
            if !shard.is_registered() {
                return format!("{}'s shard is not registered", q.name);
            }
            let half = check::unsettled(shard_core);
            if !half.is_empty() {
                return format!("{} holds {half:?} half-moved", q.name);
            }
            if shard.reporting_released() {
                return format!("{} has Released reports unacknowledged", q.name);
            }
        }
        let limits = self.limits_unsettled();
        if !limits.is_empty() {
            return limits;
        }
        let agents = self.agents_unsettled();
        if !agents.is_empty() {
            return agents;
        }
        if !self.net.is_empty() {
            return "messages in flight".to_owned();
        }
        String::new()
    }

    /// Liveness of per-user limits: a user whose jobs are held by their limit somewhere
    /// while their running and admitted jobs over every shard use less than it (an
    /// allowance stranded, or not yet moved where it is wanted).
    fn limits_unsettled(&self) -> String {
        if !self.checker.limits {
            return String::new();
        }
        let cores: Vec<&ShardCore> = self
            .shards
            .values()
            .filter(|s| s.alive)
            .filter_map(|s| s.core.as_ref())
            .collect();
        // A stopped queue starts nothing and holds no allowance: its jobs wait for it.
        for core in cores.iter().filter(|c| c.config().started) {
            for job in core.jobs() {
                let Reason::Held(Hold::Limit(hold)) = &job.reason else {
                    continue;
                };
                if !hold.per_user || job.state != JobState::Pending {
                    continue;
                }
                let in_use: u64 = cores.iter().map(|c| c.limit_in_use(&job.owner).jobs).sum();
                if in_use < hold.value {
                    return format!(
                        "{}'s job {} waits on max_running {} while {} of it is in use",
                        job.owner, job.id, hold.value, in_use
                    );
                }
            }
        }
        String::new()
    }

    pub(super) fn quiet(&self) -> bool {
        self.unsettled_reason().is_empty()
    }

    /// Liveness once quiet: every node up in exactly its owner (and nowhere when it has
    /// none).
    pub(super) fn quiescent(&mut self) -> Result<(), Violation> {
        let Some(core) = &self.coord.core else {
            return Err(broken(Invariant::I3, "the coordinator is down".to_owned()));
        };
        for node in &self.setup.nodes {
            let owner = core.owner_of(node);
            let up: Vec<&str> = self
                .shards
                .values()
                .filter(|s| s.alive)
                .filter(|s| s.core.as_ref().is_some_and(|c| c.nodes().is_up(node)))
                .map(|s| s.queue.as_str())
                .collect();
            let expected: Vec<&str> = owner.into_iter().collect();
            if up != expected {
                return Err(broken(
                    Invariant::I3,
                    format!("after healing, {node} is owned by {owner:?} but up in {up:?}"),
                ));
            }
        }
        self.trace.line(self.now, "quiet");
        Ok(())
    }
}
