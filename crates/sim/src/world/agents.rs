//! The world's node agents (seeds whose shards launch through agents): their batches,
//! crashes and restarts, their registrations, their tasks ending, partitions that cut
//! an agent off from everyone for a while, and a machine that dies for good.

use super::*;

impl World {
    pub(super) fn run_agent(&mut self, node: &str) -> Result<(), Violation> {
        let crash = self.crash_plan();
        let World {
            agents,
            rng,
            next_id,
            ..
        } = self;
        let Some(agent) = agents.get_mut(node).filter(|a| a.alive) else {
            return Ok(());
        };
        let mut ids = || {
            *next_id += 1;
            *next_id
        };
        // Most tasks stop at SIGTERM; some ignore it for a while (SIGKILL at the grace).
        let mut ignores_term = |grace: u64| {
            if rng.random_bool(0.3) {
                rng.random_range(0..=grace)
            } else {
                0
            }
        };
        check::running(check::Running::Agent);
        let out = agent.batch(self.now, crash, &mut ignores_term, &mut ids);
        if let Some(why) = out.unfenced {
            return Err(broken(Invariant::I1, why));
        }
        if crash != Crash::No {
            self.trace
                .line(self.now, &format!("{node} agent CRASH in batch {crash:?}"));
            self.crash_agent(node);
            return Ok(());
        }
        for line in &out.lines {
            if line.contains(" spawns ") {
                self.stats.tasks_spawned += 1;
            }
            self.trace.line(self.now, line);
        }
        self.send(out.packets);
        Ok(())
    }

    /// The agent of `node` dies (its tasks live on): its connections close.
    pub(super) fn crash_agent(&mut self, node: &str) {
        if !self.agents.get(node).is_some_and(|a| a.alive) {
            return;
        }
        self.stats.agent_crashes += 1;
        // One crash in eight (by its draw) keeps the agent away twenty times as long, up to
        // a minute: past its shards' leases (15 s), which its tasks' supervisors then
        // enforce, and past the point where its shards give its tasks up.
        let delay = self.rng.random_range(RESTART_DELAY_MS);
        let delay = if delay.is_multiple_of(8) {
            delay * 20
        } else {
            delay
        };
        self.take_agent_down(node);
        if let Some(agent) = self.agents.get_mut(node) {
            agent.restart_at = Some(self.now + delay);
        }
        let back = self.reachable_again.entry(node.to_owned()).or_default();
        *back = (*back).max(self.now + delay);
    }

    /// `node`'s machine dies for good: its agent and its tasks are gone (no end file is
    /// written, nobody hears of them again) and the agent never restarts. The coordinator
    /// marks the node down once the agent is silent past the heartbeat timeout, which ends
    /// its jobs (failed, or requeued if they allow it); its shards take its tasks as gone
    /// once their lease has surely run out.
    pub(super) fn machine_dies(&mut self, node: &str) {
        self.trace.line(self.now, &format!("{node} machine DIES"));
        self.stats.machines_died += 1;
        self.take_agent_down(node);
        if let Some(agent) = self.agents.get_mut(node) {
            agent.restart_at = None;
            agent.tasks.clear();
        }
        self.partitions.remove(node);
        let back = self.reachable_again.entry(node.to_owned()).or_default();
        *back = (*back).max(self.now);
        self.dead.insert(node.to_owned());
    }

    /// Stops `node`'s agent process, if it runs, and closes its connections (the
    /// coordinator notices late).
    fn take_agent_down(&mut self, node: &str) {
        let Some(agent) = self.agents.get_mut(node).filter(|a| a.alive) else {
            return;
        };
        let coordinator = agent.crash();
        if let Some(conn) = coordinator {
            self.net.close(conn);
            let at = self.now + self.rng.random_range(NOTICE_DELAY_MS);
            self.notices.push((at, Notice::CoordClosed(conn)));
        }
        for conn in self.links_to(node) {
            self.net.close(conn);
        }
    }

    /// The shards' connections to `node`'s agent.
    fn links_to(&self, node: &str) -> Vec<ConnId> {
        self.shards
            .values()
            .filter_map(|s| s.executor.as_ref()?.conns.get(node).copied())
            .collect()
    }

    /// A fault among the agents: one crashes, or is cut off from everyone for a while.
    pub(super) fn agent_fault(&mut self) -> Result<(), Violation> {
        let nodes: Vec<String> = self.agents.keys().cloned().collect();
        let Some(node) = nodes.choose(&mut self.rng).cloned() else {
            return Ok(());
        };
        if self.rng.random_bool(0.6) {
            self.trace.line(self.now, &format!("{node} agent CRASH"));
            self.crash_agent(&node);
        } else {
            let until = self.now + self.rng.random_range(PARTITION_MS);
            self.stats.partitions += 1;
            self.trace
                .line(self.now, &format!("{node} agent cut off until {until}"));
            let back = self.reachable_again.entry(node.clone()).or_default();
            *back = (*back).max(until);
            self.partitions.insert(node, until);
        }
        Ok(())
    }

    /// Whether `packet` goes to or from an agent cut off now.
    pub(super) fn cut_off(&self, packet: &Packet) -> bool {
        let conn = packet.conn;
        let node = match self.agents.values().find(|a| a.conn() == Some(conn)) {
            Some(agent) => Some(agent.node.clone()),
            None => self.agent_link(conn).map(|(_, node)| node),
        };
        node.is_some_and(|n| self.partitions.get(&n).is_some_and(|&t| t > self.now))
    }

    /// The agents' timers: partitions healed, tasks ended, restarts, registrations to
    /// start or give up.
    pub(super) fn agents_housekeeping(&mut self) -> Result<(), Violation> {
        let now = self.now;
        self.partitions.retain(|_, until| *until > now);
        let nodes: Vec<String> = self.agents.keys().cloned().collect();
        for node in nodes {
            let World {
                agents,
                net,
                next_id,
                notices,
                trace,
                stats,
                ..
            } = self;
            let Some(agent) = agents.get_mut(&node) else {
                continue;
            };
            for ended in agent.reap(now) {
                stats.tasks_overran += u64::from(ended.overran);
                stats.tasks_lease_stopped += u64::from(ended.lease_stopped);
                trace.line(now, &format!("{node} task of {} ends", ended.job));
            }
            if !agent.alive && agent.restart_at.is_some_and(|t| t <= now) {
                check::running(check::Running::Agent);
                agent.start(now);
                trace.line(now, &format!("{node} agent starts"));
                crate::check_tasks::restarted(agent)?;
            }
            if let Some(conn) = agent.registration_timed_out(now) {
                net.close(conn);
                notices.push((now, Notice::CoordClosed(conn)));
            }
            let registered = agent.register_if_due(now, || {
                *next_id += 1;
                (net.open(&node), *next_id)
            });
            if let Some(packet) = registered {
                self.trace.line(
                    now,
                    &format!("{node} agent registers on conn{}", packet.conn.0),
                );
                self.send(vec![packet]);
            }
        }
        Ok(())
    }

    /// The agents with work now.
    pub(super) fn agents_due(&self) -> Vec<String> {
        self.agents
            .values()
            .filter(|a| a.due(self.now))
            .map(|a| a.node.clone())
            .collect()
    }

    /// The earliest time an agent, a task or a partition has something due.
    pub(super) fn agents_next_due(&self) -> Option<u64> {
        let agents = self
            .agents
            .values()
            .flat_map(|a| [a.next_wakeup(), a.restart_at.filter(|_| !a.alive)]);
        let partitions = self.partitions.values().map(|&t| Some(t));
        agents.chain(partitions).flatten().min()
    }

    /// Why the agents are not settled yet (empty when they are); a dead machine's agent
    /// is not waited for.
    pub(super) fn agents_unsettled(&self) -> String {
        match self
            .agents
            .values()
            .filter(|a| !self.dead.contains(&a.node))
            .find(|a| !a.alive || !a.is_registered())
        {
            Some(agent) => format!("{}'s agent is not registered", agent.node),
            None => String::new(),
        }
    }
}
