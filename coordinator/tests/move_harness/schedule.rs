//! The schedule: admin requests, time, one random step, the observation the checker
//! gets, healing, and a whole run.

use super::*;

impl World {
    // ---- admin ----

    fn start_move(&mut self) {
        let Some(m) = &mut self.coord.machine else {
            return;
        };
        let qn = self.definitions.len();
        let from = self.rng.random_range(0..qn);
        let to = (from + self.rng.random_range(1..qn)) % qn;
        let (from, to) = (self.definitions[from].0.clone(), &self.definitions[to]);
        let candidates: Vec<String> =
            to.1.iter()
                .filter(|n| m.owner_of(n) == Some(from.as_str()) && m.moving(n).is_none())
                .cloned()
                .collect();
        if candidates.is_empty() {
            return;
        }
        let nodes: Vec<String> = candidates
            .iter()
            .filter(|_| self.rng.random_bool(0.6))
            .cloned()
            .collect();
        let nodes = if nodes.is_empty() {
            vec![candidates[0].clone()]
        } else {
            nodes
        };
        let deadline = self
            .rng
            .random_bool(0.3)
            .then(|| self.now + self.rng.random_range(1_000..15_000));
        let to = to.0.clone();
        match m.start_move(self.now, &nodes, &from, &to, deadline) {
            Ok(id) => {
                self.checker.move_started(id.0, &nodes, deadline);
                self.log(|| {
                    format!("admin: move {id:?} {nodes:?} {from} → {to}, deadline {deadline:?}")
                });
            }
            Err(e) => self.log(|| format!("admin: move refused: {e}")),
        }
        self.pump();
    }

    fn cancel_move(&mut self) {
        let Some(m) = &mut self.coord.machine else {
            return;
        };
        let active: Vec<_> = m
            .moves()
            .into_iter()
            .filter(|v| v.status == MoveStatus::Active)
            .map(|v| v.move_id)
            .collect();
        if active.is_empty() {
            return;
        }
        let id = active[self.rng.random_range(0..active.len())];
        let result = m.cancel_move(self.now, id);
        self.log(|| format!("admin: cancel {id:?} → {result:?}"));
        self.pump();
    }

    // ---- time ----

    fn advance(&mut self, ms: u64) -> Result<(), String> {
        self.now += ms;
        let now = self.now;
        for s in 0..self.shards.len() {
            self.end_jobs(s, |j| j.end_ms <= now, JobEnd::Natural)?;
        }
        if let Some(m) = &mut self.coord.machine {
            m.tick(now);
        }
        self.pump();
        Ok(())
    }

    // ---- one step, and the observation ----

    fn step(&mut self) -> Result<(), String> {
        let roll = self.rng.random_range(0..100u32);
        let faults = self.faults;
        match roll {
            0..=39 if !self.net.is_empty() => {
                let i = self.rng.random_range(0..self.net.len());
                self.deliver(i)?;
            }
            40..=44 if faults && !self.net.is_empty() => {
                let i = self.rng.random_range(0..self.net.len());
                let e = self.net.swap_remove(i);
                self.stats.drops += 1;
                self.log(|| format!("net DROP {e:?}"));
            }
            45..=48 if faults && !self.net.is_empty() => {
                let i = self.rng.random_range(0..self.net.len());
                let e = self.net[i].clone();
                self.stats.duplicates += 1;
                self.log(|| format!("net DUPLICATE {e:?}"));
                self.send(e);
            }
            49..=56 => {
                let ms = self.rng.random_range(1..3_000);
                self.advance(ms)?;
            }
            57..=66 => {
                let s = self.rng.random_range(0..self.shards.len());
                self.start_job(s);
            }
            67..=74 => self.start_move(),
            75..=76 => self.cancel_move(),
            77..=86 => self.sync(),
            87 if faults => {
                if self.coord.machine.is_some() {
                    self.crash_coordinator();
                }
            }
            88..=89 if faults => {
                let s = self.rng.random_range(0..self.shards.len());
                if self.shards[s].alive {
                    self.crash_shard(s);
                }
            }
            90..=95 => {
                if self.coord.machine.is_none() {
                    self.restart_coordinator()?;
                }
                let s = self.rng.random_range(0..self.shards.len());
                if !self.shards[s].alive {
                    self.restart_shard(s);
                }
            }
            _ => {
                let ms = self.rng.random_range(1..200);
                self.advance(ms)?;
            }
        }
        Ok(())
    }

    fn observe(&self) -> Observation {
        let shards = self
            .shards
            .iter()
            .map(|s| {
                let mut view = ShardView {
                    queue: s.queue.clone(),
                    running: s.jobs.iter().map(|j| (j.id, j.nodes.clone())).collect(),
                    ..ShardView::default()
                };
                for (n, e) in &s.journal {
                    view.generations.insert(n.clone(), e.generation.0);
                }
                if let Some(moves) = s.moves.as_ref().filter(|_| s.alive) {
                    for (n, e) in moves.entries() {
                        view.generations.insert(n.to_owned(), e.generation.0);
                        if moves.is_up(n) {
                            view.up.insert(n.to_owned());
                        }
                        if matches!(
                            e.holding,
                            Holding::Outgoing { .. } | Holding::Incoming { .. }
                        ) {
                            view.unsettled.insert(n.to_owned());
                        }
                    }
                }
                view
            })
            .collect();
        Observation {
            now: self.now,
            shards,
            durable_generation: self.durable_generation.clone(),
        }
    }

    /// No more faults: restart everything, deliver everything, let time run.
    fn heal(&mut self) -> Result<(), String> {
        self.faults = false;
        self.log(|| "HEAL".into());
        if self.coord.machine.is_none() {
            self.restart_coordinator()?;
        }
        for s in 0..self.shards.len() {
            if !self.shards[s].alive {
                self.restart_shard(s);
            }
        }
        for _ in 0..HEAL_ROUNDS_MAX {
            self.sync();
            while !self.net.is_empty() {
                self.deliver(0)?;
                self.sync();
                self.check_step()?;
            }
            let idle = self
                .coord
                .machine
                .as_ref()
                .is_some_and(MoveMachine::is_idle);
            if idle && self.coord.unsynced.is_empty() {
                return Ok(());
            }
            self.advance(RESEND_INTERVAL_MS)?;
            self.check_step()?;
        }
        Err("did not settle after healing".into())
    }

    /// The invariants of docs/ARCHITECTURE.md over what every process shows, and the
    /// coordinator's own (node table and moves), if it is up.
    fn check_step(&mut self) -> Result<(), String> {
        self.checker.check_step(&self.observe())?;
        match &self.coord.machine {
            Some(m) => m
                .invariants()
                .map_err(|e| format!("coordinator invariant: {e}")),
            None => Ok(()),
        }
    }

    pub(super) fn run(&mut self) -> Result<(), String> {
        for _ in 0..STEPS {
            self.step()?;
            self.check_step()?;
        }
        self.heal()?;
        let m = self
            .coord
            .machine
            .as_ref()
            .ok_or("coordinator down after heal")?;
        let owner: BTreeMap<String, Option<String>> = self
            .base
            .iter()
            .map(|(n, _)| (n.clone(), m.owner_of(n).map(str::to_owned)))
            .collect();
        let unfinished: Vec<u64> = m
            .moves()
            .iter()
            .filter(|v| v.status == MoveStatus::Active)
            .map(|v| v.move_id.0)
            .collect();
        if let Some(a) = m.anomalies().next() {
            return Err(format!("coordinator anomaly: {a}"));
        }
        self.checker
            .check_quiescent(&self.observe(), &owner, &unfinished)
    }
}
