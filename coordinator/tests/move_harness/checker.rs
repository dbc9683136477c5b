//! The invariants of docs/ARCHITECTURE.md, checked from the outside.
//!
//! The checker never looks inside the machines' private state: it gets an [`Observation`]
//! after every step (what each shard says is up, the jobs each shard holds, the generations
//! the coordinator has made durable) and its own ledger of what happened (jobs started and
//! how they ended, moves started with their deadlines). It knows nothing of how the
//! protocol works, only what must never be seen.

use std::collections::{BTreeMap, BTreeSet};

/// Jobs one node may hold at once in one shard.
pub const NODE_SLOTS: usize = 2;

/// One shard as seen from outside at one instant.
#[derive(Debug, Default)]
pub struct ShardView {
    /// The queue.
    pub queue: String,
    /// Nodes up (owned, allocatable unless drained) in this shard.
    pub up: BTreeSet<String>,
    /// Every node the shard has an entry for, with the generation it has seen.
    pub generations: BTreeMap<String, u64>,
    /// Nodes the shard holds as outgoing or incoming (not settled).
    pub unsettled: BTreeSet<String>,
    /// Running jobs: id → nodes (jobs survive a shard restart: they are facts).
    pub running: BTreeMap<u64, Vec<String>>,
}

/// Everything the checker sees after one step.
#[derive(Debug, Default)]
pub struct Observation {
    /// Virtual time, ms.
    pub now: u64,
    /// Every shard (up or crashed: a crashed shard has nothing up but its jobs still run).
    pub shards: Vec<ShardView>,
    /// Per node, the newest generation in the coordinator's durable journal.
    pub durable_generation: BTreeMap<String, u64>,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// Ran to its end time.
    Natural,
    /// Cancelled by a move's deadline.
    Deadline {
        /// The move.
        move_id: u64,
    },
}

/// The ledger and the checks.
#[derive(Debug, Default)]
pub struct Checker {
    /// Every job started: id → (shard index, nodes, end time).
    jobs: BTreeMap<u64, (usize, Vec<String>, u64)>,
    /// Jobs that ended, and how.
    ended: BTreeMap<u64, (JobEnd, u64)>,
    /// Moves started: id → (nodes, deadline).
    moves: BTreeMap<u64, (BTreeSet<String>, Option<u64>)>,
}

impl Checker {
    /// A job started in `shard` on `nodes`, to end at `end_ms`.
    pub fn job_started(&mut self, id: u64, shard: usize, nodes: &[String], end_ms: u64) {
        self.jobs.insert(id, (shard, nodes.to_vec(), end_ms));
    }

    /// A job ended at `now`.
    pub fn job_ended(&mut self, id: u64, how: JobEnd, now: u64) -> Result<(), String> {
        let Some((_, nodes, end_ms)) = self.jobs.get(&id) else {
            return Err(format!("job {id} ended but was never started"));
        };
        if self.ended.insert(id, (how, now)).is_some() {
            return Err(format!("job {id} ended twice"));
        }
        match how {
            JobEnd::Natural if now < *end_ms => Err(format!(
                "I5: job {id} ended at {now}, before its end {end_ms}"
            )),
            JobEnd::Natural => Ok(()),
            JobEnd::Deadline { move_id } => {
                let Some((move_nodes, deadline)) = self.moves.get(&move_id) else {
                    return Err(format!("I5: job {id} cancelled for unknown move {move_id}"));
                };
                let on_move = nodes.iter().any(|n| move_nodes.contains(n));
                match deadline {
                    Some(d) if *d <= now && on_move => Ok(()),
                    _ => Err(format!(
                        "I5: job {id} on {nodes:?} cancelled at {now} for move {move_id} \
                         (nodes {move_nodes:?}, deadline {deadline:?})"
                    )),
                }
            }
        }
    }

    /// A move was accepted by the coordinator.
    pub fn move_started(&mut self, id: u64, nodes: &[String], deadline: Option<u64>) {
        self.moves
            .insert(id, (nodes.iter().cloned().collect(), deadline));
    }

    /// The invariants that hold at every instant.
    pub fn check_step(&self, obs: &Observation) -> Result<(), String> {
        self.check_instant(obs)
            .map_err(|e| format!("at t={}: {e}", obs.now))
    }

    fn check_instant(&self, obs: &Observation) -> Result<(), String> {
        let mut up_in: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut held_by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for s in &obs.shards {
            for n in &s.up {
                up_in.entry(n).or_default().push(&s.queue);
            }
            let mut in_shard: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
            for (id, nodes) in &s.running {
                for n in nodes {
                    let jobs = in_shard.entry(n).or_default();
                    jobs.push(*id);
                    if jobs.len() > NODE_SLOTS {
                        return Err(format!(
                            "I4: node {n} over-allocated in {}: jobs {jobs:?}",
                            s.queue
                        ));
                    }
                    held_by.entry(n).or_default().push(&s.queue);
                }
            }
            for (n, g) in &s.generations {
                let durable = obs.durable_generation.get(n).copied().unwrap_or(0);
                if *g > durable {
                    return Err(format!(
                        "fence: {} has seen {n} at generation {g}, but the coordinator's journal \
                         holds only {durable}",
                        s.queue
                    ));
                }
            }
        }
        for (n, queues) in &up_in {
            if queues.len() > 1 {
                return Err(format!("I1: node {n} is up in {queues:?}"));
            }
            if let Some(holders) = held_by.get(n)
                && let Some(other) = holders.iter().find(|h| **h != queues[0])
            {
                return Err(format!(
                    "I2: node {n} is up in {} while {other} still holds an allocation on it",
                    queues[0]
                ));
            }
        }
        for (id, (shard, _, end_ms)) in &self.jobs {
            let running = obs
                .shards
                .get(*shard)
                .is_some_and(|s| s.running.contains_key(id));
            match (running, self.ended.get(id)) {
                (true, Some(_)) => return Err(format!("I4: job {id} ended but still runs")),
                (false, None) => {
                    return Err(format!(
                        "I4: job {id} (end {end_ms}) is lost: not running, never ended"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// At quiescence: every node owned by exactly one queue and up there, nothing in
    /// flight. `owner` is the coordinator's intent per node; `moves_unfinished` its moves
    /// still active.
    pub fn check_quiescent(
        &self,
        obs: &Observation,
        owner: &BTreeMap<String, Option<String>>,
        moves_unfinished: &[u64],
    ) -> Result<(), String> {
        self.check_step(obs)?;
        if !moves_unfinished.is_empty() {
            return Err(format!(
                "I3: moves still unfinished at quiescence: {moves_unfinished:?}"
            ));
        }
        for (n, q) in owner {
            let Some(q) = q else {
                return Err(format!("I3: node {n} lost its owner"));
            };
            let up: Vec<&str> = obs
                .shards
                .iter()
                .filter(|s| s.up.contains(n))
                .map(|s| s.queue.as_str())
                .collect();
            if up != [q.as_str()] {
                return Err(format!("I3: node {n} is owned by {q} but up in {up:?}"));
            }
        }
        for s in &obs.shards {
            if let Some(n) = s.unsettled.iter().next() {
                return Err(format!(
                    "I3: {} still holds {n} as outgoing or incoming",
                    s.queue
                ));
            }
        }
        Ok(())
    }
}
