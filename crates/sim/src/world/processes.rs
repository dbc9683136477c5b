//! The world's processes: running a batch of the coordinator or of a shard (and crashing
//! it, also between its journal write and its answers), restarting them, the supervisor
//! that gives every queue a shard, the timers, and virtual time passing.

use super::*;

/// A process with work now: the coordinator (`None`) or a shard, or a node agent.
#[derive(Clone)]
enum Due {
    Process(Option<String>),
    Agent(String),
}

impl World {
    /// Whether the next batch crashes, and where.
    pub(super) fn crash_plan(&mut self) -> Crash {
        if !self.faults || !self.rng.random_bool(CRASH_IN_BATCH) {
            return Crash::No;
        }
        if self.rng.random_bool(0.5) {
            Crash::BeforeWrite
        } else {
            self.stats.crashes_after_write += 1;
            Crash::AfterWrite
        }
    }

    /// Runs one process that has work, chosen at random.
    pub(super) fn run_one_due(&mut self) -> Result<(), Violation> {
        let mut due: Vec<Option<String>> = self
            .shards
            .values()
            .filter(|s| s.due(self.now))
            .map(|s| Some(s.queue.clone()))
            .collect();
        if self.coord.due(self.now) {
            due.push(None);
        }
        let mut due: Vec<Due> = due.into_iter().map(Due::Process).collect();
        due.extend(self.agents_due().into_iter().map(Due::Agent));
        match due.choose(&mut self.rng).cloned() {
            None => self.advance(),
            Some(Due::Process(None)) => self.run_coordinator(),
            Some(Due::Process(Some(queue))) => self.run_shard(&queue),
            Some(Due::Agent(node)) => self.run_agent(&node),
        }
    }

    pub(super) fn run_coordinator(&mut self) -> Result<(), Violation> {
        if !self.coord.alive() {
            return Ok(());
        }
        let crash = self.crash_plan();
        let World {
            coord,
            net,
            next_id,
            ..
        } = self;
        let alive = |conn: ConnId| net.is_open(conn);
        let mut ids = || {
            *next_id += 1;
            *next_id
        };
        check::running(check::Running::Coordinator);
        let out = coord
            .batch(self.now, crash, &alive, &mut ids)
            .map_err(|e| broken(Invariant::I3, e))?;
        if crash != Crash::No {
            self.trace
                .line(self.now, &format!("coord CRASH in batch {crash:?}"));
            return self.crash_coordinator();
        }
        for node in &out.silent {
            self.checker.down_asked(node);
        }
        for line in &out.lines {
            if line.starts_with("coord: admin removal ") {
                if line.contains("ended: refused") {
                    self.stats.removals_refused += 1;
                } else {
                    self.stats.removals_done += 1;
                }
            } else if line.starts_with("coord: admin ") && !line.contains("refused") {
                self.stats.admin_accepted += 1;
            }
            self.trace.line(self.now, line);
        }
        self.send(out.packets);
        self.supervise()
    }

    pub(super) fn run_shard(&mut self, queue: &str) -> Result<(), Violation> {
        let crash = self.crash_plan();
        let Some(shard) = self.shards.get_mut(queue) else {
            return Ok(());
        };
        if !shard.alive {
            return Ok(());
        }
        let next_id = &mut self.next_id;
        let mut ids = || {
            *next_id += 1;
            *next_id
        };
        let net = &mut self.net;
        let mut agent_conn = |conn: Option<ConnId>| match conn {
            Some(conn) if net.is_open(conn) => conn,
            _ => net.open(queue),
        };
        check::running(check::Running::Shard);
        let out = shard
            .batch(self.now, crash, &self.options, &mut ids, &mut agent_conn)
            .map_err(|e| broken(Invariant::I4, e))?;
        if crash != Crash::No {
            self.trace
                .line(self.now, &format!("{queue} CRASH in batch {crash:?}"));
            self.crash_shard(queue);
            return Ok(());
        }
        for line in &out.lines {
            self.trace.line(self.now, line);
        }
        for (ticket, answer) in &out.answers {
            self.trace.line(
                self.now,
                &format!("{queue} answers client {ticket}: {}", describe(answer)),
            );
            if *ticket == CANCEL_TICKET {
                if let Ok(client_shard::Response::Cancelled(outcomes)) = answer {
                    for outcome in outcomes {
                        if outcome.result == client_shard::CancelResult::Cancelled {
                            self.checker.cancel_acked(outcome.id)?;
                        }
                    }
                }
                continue;
            }
            if let Some((id, queue)) = self.clients.answered(*ticket, answer)? {
                self.stats.jobs_acked += 1;
                self.checker.acked(id, &queue);
            }
        }
        for conn in out.closed {
            self.net.close(conn);
        }
        self.send(out.packets);
        if out.reconfigured_in_place {
            self.stats.reconfigured_in_place += 1;
            self.trace
                .line(self.now, &format!("{queue} reconfigured in place"));
        }
        if out.restart {
            self.stats.reconfig_restarts += 1;
            self.trace
                .line(self.now, &format!("{queue} restarts (reconfigured)"));
            self.crash_shard(queue);
            self.start_shard(queue)?;
        }
        Ok(())
    }

    /// Counts a crash while a move is unfinished.
    pub(super) fn count_mid_move(&mut self) {
        let moving = self
            .coord
            .core
            .as_ref()
            .is_some_and(|core| core.moves().iter().any(|m| m.status == MoveStatus::Active));
        if moving {
            self.stats.crashes_mid_move += 1;
        }
    }

    pub(super) fn crash_coordinator(&mut self) -> Result<(), Violation> {
        self.stats.coordinator_crashes += 1;
        self.count_mid_move();
        self.coord.crash();
        for conn in self.net.open_conns() {
            if self.agent_link(conn).is_some() {
                continue;
            }
            self.net.close(conn);
            let at = self.now + self.rng.random_range(NOTICE_DELAY_MS);
            self.notices.push((at, Notice::ShardLost(conn)));
        }
        self.coord.restart_at = Some(self.now + self.rng.random_range(RESTART_DELAY_MS));
        Ok(())
    }

    pub(super) fn crash_shard(&mut self, queue: &str) {
        if !self.shards.contains_key(queue) {
            return;
        }
        self.stats.shard_crashes += 1;
        self.count_mid_move();
        let Some(shard) = self.shards.get_mut(queue) else {
            return;
        };
        let links = shard.executor.as_ref().map(|e| e.conns.clone());
        for conn in links.into_iter().flat_map(|l| l.into_values()) {
            self.net.close(conn);
        }
        if let Some(conn) = shard.crash() {
            self.net.close(conn);
            let at = self.now + self.rng.random_range(NOTICE_DELAY_MS);
            self.notices.push((at, Notice::CoordClosed(conn)));
        }
        shard.restart_at = Some(self.now + self.rng.random_range(RESTART_DELAY_MS));
    }

    pub(super) fn start_shard(&mut self, queue: &str) -> Result<(), Violation> {
        let port = 10_000 + u16::try_from(self.shards.len()).unwrap_or(0);
        let shard = self
            .shards
            .entry(queue.to_owned())
            .or_insert_with(|| ShardProcess::new(queue, port, MemJournal::default()));
        shard
            .start(self.now)
            .map_err(|e| broken(Invariant::I4, e))?;
        self.checker.queue_added(queue);
        self.trace.line(self.now, &format!("{queue} starts"));
        Ok(())
    }

    /// As `up` does: a shard for every queue of the coordinator's table, none for a
    /// queue it no longer has.
    pub(super) fn supervise(&mut self) -> Result<(), Violation> {
        let Some(core) = &self.coord.core else {
            return Ok(());
        };
        let queues: BTreeSet<String> = core
            .config()
            .queues
            .iter()
            .map(|q| q.name.clone())
            .collect();
        for queue in &queues {
            let running = self
                .shards
                .get(queue)
                .is_some_and(|s| s.alive || s.restart_at.is_some());
            if !running {
                self.start_shard(queue)?;
            }
        }
        let gone: Vec<String> = self
            .shards
            .keys()
            .filter(|q| !queues.contains(*q))
            .cloned()
            .collect();
        for queue in gone {
            if let Some(shard) = self.shards.get_mut(&queue)
                && (shard.alive || shard.restart_at.is_some())
            {
                if let Some(conn) = shard.crash() {
                    self.net.close(conn);
                    self.notices.push((self.now, Notice::CoordClosed(conn)));
                }
                shard.restart_at = None;
                self.checker.queue_removed(&queue);
                self.stats.queues_removed += 1;
                self.trace
                    .line(self.now, &format!("{queue} stopped (removed)"));
            }
        }
        Ok(())
    }

    /// Timers: connections noticed gone, restarts, registrations to start or give up.
    pub(super) fn housekeeping(&mut self) -> Result<(), Violation> {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = self.notices.drain(..).partition(|(at, _)| *at <= now);
        self.notices = later;
        for (_, notice) in due {
            match notice {
                Notice::CoordClosed(conn) => self.coord.push(CoordEvent::Closed(conn)),
                Notice::ShardLost(conn) => {
                    for shard in self.shards.values_mut() {
                        shard.lost(conn, now);
                    }
                    for agent in self.agents.values_mut() {
                        agent.lost(conn, now);
                    }
                }
            }
        }
        if self.coord.restart_at.is_some_and(|t| t <= now) {
            check::running(check::Running::Coordinator);
            self.coord
                .start(now)
                .map_err(|e| broken(Invariant::I3, e))?;
            self.trace.line(now, "coord starts");
            self.supervise()?;
        }
        let restarts: Vec<String> = self
            .shards
            .values()
            .filter(|s| !s.alive && s.restart_at.is_some_and(|t| t <= now))
            .map(|s| s.queue.clone())
            .collect();
        for queue in restarts {
            self.start_shard(&queue)?;
        }
        self.agents_housekeeping()?;
        let queues: Vec<String> = self.shards.keys().cloned().collect();
        for queue in queues {
            let World {
                shards,
                net,
                next_id,
                notices,
                ..
            } = self;
            let Some(shard) = shards.get_mut(&queue) else {
                continue;
            };
            if let Some(conn) = shard.registration_timed_out(now) {
                net.close(conn);
                notices.push((now, Notice::CoordClosed(conn)));
            }
            let registered = shard.register_if_due(now, || {
                *next_id += 1;
                (net.open(&queue), *next_id)
            });
            if let Some(packet) = registered {
                self.trace
                    .line(now, &format!("{queue} registers on conn{}", packet.conn.0));
                self.send(vec![packet]);
            }
        }
        Ok(())
    }

    /// Lets time pass: to the next thing due (half the time) or by a random amount, then
    /// runs every process that has work.
    pub(super) fn advance(&mut self) -> Result<(), Violation> {
        let next = self.next_due();
        let to = match next {
            Some(t) if self.rng.random_bool(0.5) => t.max(self.now + 1),
            _ => self.now + self.rng.random_range(1..=2_000),
        };
        self.now = to;
        self.trace.line(self.now, "time");
        self.housekeeping()?;
        self.run_all_due()
    }

    /// Runs the batch of every process that has work now.
    pub(super) fn run_all_due(&mut self) -> Result<(), Violation> {
        if self.coord.due(self.now) {
            self.run_coordinator()?;
        }
        let due: Vec<String> = self
            .shards
            .values()
            .filter(|s| s.due(self.now))
            .map(|s| s.queue.clone())
            .collect();
        for queue in due {
            self.run_shard(&queue)?;
        }
        for node in self.agents_due() {
            self.run_agent(&node)?;
        }
        Ok(())
    }

    /// The earliest time something is due: a process's wakeup, a notice, a restart.
    pub(super) fn next_due(&self) -> Option<u64> {
        let shards = self
            .shards
            .values()
            .flat_map(|s| [s.next_wakeup(), s.restart_at.filter(|_| !s.alive)]);
        let notices = self.notices.iter().map(|(at, _)| Some(*at));
        [self.coord.next_wakeup(), self.coord.restart_at]
            .into_iter()
            .chain(shards)
            .chain(notices)
            .chain([self.agents_next_due()])
            .flatten()
            .min()
    }
}
