//! Run-time changes of the queue table: `queue add`, `queue remove`, `queue update` and
//! `reload` (docs/CONFIG.md, "Runtime changes"). Pure, like the rest of the core: each
//! change is checked whole and then applied, or refused with the reason and nothing
//! changed; what comes back tells the driver what to journal and what to send.
//!
//! ```text
//! add_queue / update_queue / remove_queue / reload
//!   → candidate configuration  → config::check (the file's rules: a run-time table is
//!                                 always a valid configuration)
//!   → ownership checks          a removed queue owns nothing and is in no move; a queue's
//!                                 definition never loses a node the queue owns (update
//!                                 --give-to moves them out first)
//!   → apply                     per-queue state remapped by name; unassigned nodes of a
//!                                 new or grown definition become the queue's (generation
//!                                 bumped); generator ids of new names are fresh, of known
//!                                 names kept (never reused for another name)
//!   → Reconfig                  driver: write durable_state() (fsync), then tell shards
//!                                 (Reconfigure: the shard restarts with its journal;
//!                                  SetQueueState off for a removed queue's shard)
//! ```
//!
//! Definitions may overlap, started queues' too. A node never changes hands between two
//! queues here: that is always a move (a removal or an update with `give_to` starts one;
//! the driver finishes the removal once the move is done), and a reload whose `owns`
//! differs from the owners now only says which moves would apply it.

mod owners;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use shardsched_proto::msg::client_coord::QueueSpec;
use shardsched_proto::msg::{MoveId, QueueConfig, Refusal, RefusalCode};
use shardsched_resource::encode_hostlist;

use super::{ConnId, Core, CoreError, QueueCommand, QueueState, ShardLink};
use crate::config::{self, Config, QueueDef};
use crate::ownership::{Durable, GENERATOR_ID_FIRST};
use crate::queue_table::{self, RuntimeQueues};
use shardsched_proto::fluid::GENERATOR_ID_MAX;

/// What a queue table change needs the driver to do, after writing
/// [`Core::durable_state`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconfig {
    /// What changed, one line each, for the admin.
    pub changes: Vec<String>,
    /// Shards whose queue configuration changed: send `Reconfigure` (they restart).
    pub restart: Vec<RestartCommand>,
    /// Shards of removed queues: told to stop scheduling and refuse submissions.
    pub stop: Vec<QueueCommand>,
    /// The move started by `remove --give-to`, if any.
    pub move_id: Option<MoveId>,
    /// Whether the durable state changed (it must be written before anything is sent).
    pub journal: bool,
}

/// `Reconfigure` for one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartCommand {
    /// The queue.
    pub queue: String,
    /// Its shard's connection.
    pub conn: ConnId,
    /// Its new configuration.
    pub config: QueueConfig,
}

impl Core {
    /// Adds a queue (`queue add`). Refused when the name is taken or a value breaks a
    /// configuration rule. Its definition may overlap other queues' (started or not): it
    /// owns the nodes of its definition that no queue owns.
    pub fn add_queue(&mut self, def: QueueDef) -> Result<Reconfig, Refusal> {
        if self.queue_index(&def.name).is_some() {
            return Err(invalid(format!("queue {} already exists", def.name)));
        }
        let mut candidate = self.config.clone();
        candidate.queues.push(def);
        candidate.queues.sort_by(|a, b| a.name.cmp(&b.name));
        self.replace_queues(candidate, false)
    }

    /// Changes a queue's definition, policies or limits (`queue update`): the fields of
    /// `spec` that are set. Its shard, if connected, is told to restart with the new
    /// configuration when it differs. A new definition may not leave out nodes the queue
    /// owns, unless `spec.give_to` names a queue to move them to first (one move, started
    /// at `now_ms`; the queue's shard keeps them outgoing until their jobs end).
    pub fn update_queue(&mut self, now_ms: u64, spec: &QueueSpec) -> Result<Reconfig, Refusal> {
        let qi = self
            .queue_index(&spec.name)
            .ok_or_else(|| self.no_such_queue(&spec.name))?;
        let base = &self.config.queues[qi];
        let def = queue_table::queue_def(&self.config, Some(base), spec)
            .map_err(|e| invalid(format!("queue {}: {e}", spec.name)))?;
        let lost: Vec<String> = self
            .owned_indices(qi)
            .filter(|n| def.definition.binary_search(n).is_err())
            .map(|n| self.config.cluster.nodes[n].name.clone())
            .collect();
        let mut candidate = self.config.clone();
        candidate.queues[qi] = def;
        let mut moved = None;
        if let (Some(to), false) = (&spec.give_to, lost.is_empty()) {
            config::check(&candidate).map_err(invalid)?;
            self.check_move(&lost, &spec.name, to)?;
            let move_id = self.start_moves(now_ms, &[(spec.name.clone(), lost.clone())], to)?;
            moved = Some((move_id, to.clone()));
        }
        let mut out = self.replace_queues(candidate, false)?;
        if let Some((move_id, to)) = moved {
            out.changes.insert(
                0,
                format!(
                    "queue {}: {} move to {to}{} (each once its jobs end)",
                    spec.name,
                    encode_hostlist(&lost),
                    move_id
                        .map(|m| format!(" in move {}", m.0))
                        .unwrap_or_default()
                ),
            );
            out.move_id = move_id;
        }
        Ok(out)
    }

    /// Removes a queue (`queue remove`). Refused while its shard reports jobs (or is not
    /// connected, so that nobody can tell), while it owns nodes, is in a move, or is the
    /// default queue. With `give_to`, a queue that owns nodes has them moved there (one
    /// move, started at `now_ms`; they are idle, having no job) and the queue stays: the
    /// driver removes it once [`Core::move_finished`] says the move is done.
    pub fn remove_queue(
        &mut self,
        now_ms: u64,
        queue: &str,
        give_to: Option<&str>,
    ) -> Result<Reconfig, Refusal> {
        let qi = self.check_remove_request(queue, give_to)?;
        self.check_no_jobs(qi)?;
        let owned = self.owned_by(queue);
        if let (Some(to), false) = (give_to, owned.is_empty()) {
            if self.moves.queue_in_move(queue) {
                return Err(policy(format!(
                    "queue {queue} is in an unfinished move: wait for it (queue moves) or cancel it"
                )));
            }
            let move_id = self.start_moves(now_ms, &[(queue.to_owned(), owned.clone())], to)?;
            return Ok(Reconfig {
                changes: vec![format!(
                    "queue {queue}: its nodes {} move to {to}{}",
                    encode_hostlist(&owned),
                    move_id
                        .map(|m| format!(" (move {})", m.0))
                        .unwrap_or_default()
                )],
                move_id,
                journal: true,
                ..Reconfig::default()
            });
        }
        let mut candidate = self.config.clone();
        candidate.queues.remove(qi);
        self.replace_queues(candidate, false)
    }

    /// Makes `file` (the configuration file, read again) authoritative: queues it lacks are
    /// removed, new ones added, the others take its definitions, policies and limits (their
    /// enabled/started flags stay as they are now). All or nothing, with the same checks as
    /// the single changes. The cluster itself cannot change without a restart.
    pub fn reload(&mut self, file: Config) -> Result<Reconfig, Refusal> {
        if file.cluster != self.config.cluster {
            return Err(invalid(format!(
                "{}: the cluster changed; a new cluster needs a coordinator restart (reload changes queues only)",
                file.origin
            )));
        }
        for (qi, q) in self.config.queues.iter().enumerate() {
            if file.queue(&q.name).is_none() {
                self.check_no_jobs(qi)?;
            }
        }
        let mut out = self.replace_queues(file, true)?;
        out.changes.extend(self.owns_not_applied());
        Ok(out)
    }

    /// The queues a change to `candidate` would remove (for the driver's live job check).
    pub fn removed_by(&self, candidate: &Config) -> Vec<String> {
        self.config
            .queues
            .iter()
            .filter(|q| candidate.queue(&q.name).is_none())
            .map(|q| q.name.clone())
            .collect()
    }

    /// A queue's configuration as its shard gets it.
    pub fn queue_config(&self, queue: &str) -> Option<QueueConfig> {
        self.queue_index(queue).map(|qi| self.queue_config_at(qi))
    }

    fn queue_config_at(&self, qi: usize) -> QueueConfig {
        let q = &self.config.queues[qi];
        let state = &self.queues[qi];
        QueueConfig {
            name: q.name.clone(),
            queue_policy: q.policy.as_str().to_owned(),
            match_policy: q.match_policy.as_str().to_owned(),
            queue_depth: q.queue_depth,
            reservation_depth: q.reservation_depth,
            default_duration_ms: q.default_duration_ms,
            max_duration_ms: q.max_duration_ms,
            definition: self.config.node_names(&q.definition),
            enabled: state.enabled,
            started: state.started,
        }
    }

    /// The checks of [`Core::remove_queue`] that need no shard: the queues exist, `give_to`
    /// is another queue, `queue` is not the default. Pure (the driver asks first too);
    /// returns `queue`'s index.
    pub fn check_remove_request(
        &self,
        queue: &str,
        give_to: Option<&str>,
    ) -> Result<usize, Refusal> {
        let qi = self
            .queue_index(queue)
            .ok_or_else(|| self.no_such_queue(queue))?;
        if let Some(to) = give_to {
            if to == queue {
                return Err(invalid(format!(
                    "queue {queue} cannot give its nodes to itself"
                )));
            }
            self.queue_index(to).ok_or_else(|| self.no_such_queue(to))?;
        }
        if self.config.default_queue == queue {
            return Err(invalid(format!(
                "queue {queue} is the default queue; it cannot be removed (reload a configuration with another default_queue)"
            )));
        }
        Ok(qi)
    }

    /// Whether `queue` may go as far as its nodes and moves are concerned: it owns nothing
    /// and is in no unfinished move. Pure: the driver asks before it disables the queue's
    /// shard, so that a removal refused for this never disables the queue.
    pub fn check_removable(&self, queue: &str) -> Result<(), Refusal> {
        let qi = self
            .queue_index(queue)
            .ok_or_else(|| self.no_such_queue(queue))?;
        let owned: Vec<usize> = self.owned_indices(qi).collect();
        if !owned.is_empty() {
            return Err(policy(format!(
                "queue {queue} owns {}: move them to another queue first (queue remove --give-to Q)",
                encode_hostlist(&self.config.node_names(&owned))
            )));
        }
        if self.moves.queue_in_move(queue) {
            return Err(policy(format!(
                "queue {queue} is in an unfinished move: wait for it or cancel it"
            )));
        }
        Ok(())
    }

    /// The driver has just seen `queue`'s shard hold no job, and disabled it so that none
    /// can come (`DisableIfIdle`): fresher than the shard's last status report, which may
    /// still count a job that ended a moment ago.
    pub fn saw_idle(&mut self, queue: &str) {
        let report = self
            .queue_index(queue)
            .and_then(|qi| self.shards[qi].as_mut())
            .and_then(|link| link.report.as_mut());
        if let Some(report) = report {
            report.queue.jobs_pending = 0;
            report.queue.jobs_running = 0;
        }
    }

    /// Refused while the queue's shard reports jobs, or is not connected.
    fn check_no_jobs(&self, qi: usize) -> Result<(), Refusal> {
        let name = &self.config.queues[qi].name;
        let Some(link) = &self.shards[qi] else {
            return Err(Refusal::new(
                RefusalCode::Unavailable,
                format!(
                    "queue {name}'s shard is not connected, so nobody can tell whether it has \
                     jobs; start its shard, then remove the queue"
                ),
            ));
        };
        if let Some(report) = &link.report {
            let (pending, running) = (report.queue.jobs_pending, report.queue.jobs_running);
            if pending + running > 0 {
                return Err(policy(format!(
                    "queue {name} has jobs ({pending} pending, {running} running): cancel them or \
                     wait for them to end (jobs cannot move between queues)"
                )));
            }
        }
        Ok(())
    }

    /// Checks `candidate` against the rules of the module documentation and applies it.
    /// `from_file`: it is the configuration file (reload), which becomes authoritative.
    fn replace_queues(
        &mut self,
        mut candidate: Config,
        from_file: bool,
    ) -> Result<Reconfig, Refusal> {
        // A file's errors name the file; a run-time change's are about the change itself.
        config::check(&candidate).map_err(|e| match from_file {
            true => invalid(format!("{}: {e}", candidate.origin)),
            false => invalid(e),
        })?;
        if !from_file {
            candidate.origin = self.config.origin.clone();
        }
        // Removed queues own nothing and are in no move.
        for q in &self.config.queues {
            if candidate.queue(&q.name).is_none() {
                self.check_removable(&q.name)?;
            }
        }
        // A definition never loses a node its queue owns.
        for new in &candidate.queues {
            let Some(qi) = self.queue_index(&new.name) else {
                continue;
            };
            let lost: Vec<usize> = self
                .owned_indices(qi)
                .filter(|n| new.definition.binary_search(n).is_err())
                .collect();
            if !lost.is_empty() {
                let hosts = encode_hostlist(&self.config.node_names(&lost));
                return Err(policy(format!(
                    "queue {}: its definition would lose {hosts}, which it owns: move them \
                     first (`shardsched queue move {hosts} --from {} --to QUEUE`), or give \
                     `--give-to QUEUE` to move them as part of the update",
                    new.name, new.name
                )));
            }
        }
        // Generator ids: kept per name forever, fresh for a name never seen.
        let mut generators = self.durable.generators.clone();
        for q in &candidate.queues {
            if generators.contains_key(&q.name) {
                continue;
            }
            let id = generators
                .values()
                .max()
                .map_or(Some(GENERATOR_ID_FIRST), |m| m.checked_add(1))
                .filter(|&id| id <= GENERATOR_ID_MAX)
                .ok_or_else(|| policy(format!("no generator id left for queue {}", q.name)))?;
            generators.insert(q.name.clone(), id);
        }

        // Checked: apply.
        let before: Vec<(String, Option<QueueConfig>)> = (0..self.config.queues.len())
            .map(|qi| {
                (
                    self.config.queues[qi].name.clone(),
                    Some(self.queue_config_at(qi)),
                )
            })
            .collect();
        let durable_before = self.durable.clone();
        let mut out = Reconfig::default();
        let mut queues = Vec::with_capacity(candidate.queues.len());
        let mut shards = Vec::with_capacity(candidate.queues.len());
        for q in &candidate.queues {
            match self.queue_index(&q.name) {
                Some(old) => {
                    queues.push(self.queues[old].clone());
                    shards.push(self.shards[old].take());
                }
                None => {
                    queues.push(QueueState {
                        enabled: q.enabled,
                        started: q.started,
                        generator_id: generators
                            .get(&q.name)
                            .copied()
                            .unwrap_or(GENERATOR_ID_FIRST),
                    });
                    shards.push(None);
                    out.changes.push(format!(
                        "added queue {} ({} nodes, {}{})",
                        q.name,
                        q.definition.len(),
                        q.policy,
                        if q.started { "" } else { ", stopped" }
                    ));
                }
            }
        }
        for (qi, old) in self.config.queues.iter().enumerate() {
            if candidate.queue(&old.name).is_some() {
                continue;
            }
            self.moves.set_definition(&old.name, None);
            out.changes.push(format!("removed queue {}", old.name));
            if let Some(ShardLink { conn, .. }) = self.shards[qi].take() {
                out.stop.push(QueueCommand {
                    queue: old.name.clone(),
                    conn,
                    enabled: false,
                    started: false,
                });
            }
        }
        // Owners by name, remapped to the new indices.
        let owner_names: Vec<Option<String>> = self
            .owner
            .iter()
            .map(|o| o.map(|qi| self.config.queues[qi].name.clone()))
            .collect();
        self.config = candidate;
        self.queues = queues;
        self.shards = shards;
        self.owner = owner_names
            .iter()
            .map(|o| o.as_deref().and_then(|name| self.queue_index(name)))
            .collect();
        self.durable.generators = generators;
        // Unassigned nodes of new or grown definitions become their queue's: those an
        // `owns` names first, then the rest by queue name.
        for qi in 0..self.config.queues.len() {
            let name = self.config.queues[qi].name.clone();
            self.moves.set_definition(
                &name,
                Some(self.config.node_names(&self.config.queues[qi].definition)),
            );
        }
        let mut gained: Vec<Vec<String>> = vec![Vec::new(); self.config.queues.len()];
        for owns_pass in [true, false] {
            for (qi, taken) in gained.iter_mut().enumerate() {
                let q = &self.config.queues[qi];
                let nodes = if owns_pass { &q.owns } else { &q.definition };
                for n in nodes.clone() {
                    taken.extend(self.take_unowned(qi, n));
                }
            }
        }
        for (qi, gained) in gained.into_iter().enumerate() {
            if !gained.is_empty() {
                out.changes.push(format!(
                    "queue {} owns {} now",
                    self.config.queues[qi].name,
                    encode_hostlist(&gained)
                ));
            }
        }
        // Shards whose configuration changed restart with the new one.
        for (name, old) in before {
            let Some(qi) = self.queue_index(&name) else {
                continue;
            };
            let new = self.queue_config_at(qi);
            if old.as_ref() == Some(&new) {
                continue;
            }
            out.changes
                .push(format!("queue {name}: configuration changed"));
            if let Some(link) = &self.shards[qi] {
                out.changes.push(format!(
                    "queue {name}: its shard restarts to apply it (no job is lost)"
                ));
                out.restart.push(RestartCommand {
                    queue: name,
                    conn: link.conn,
                    config: new,
                });
            }
        }
        // Every owner stands as an admin's decision (like a move's): a restart keeps it as
        // long as its queue defines the node, instead of recomputing owners from the start
        // rules, which could give a node of a stopped queue to a started one added later.
        for (n, owner) in self.owner.iter().enumerate() {
            if owner.is_some()
                && let Some(entry) = self
                    .durable
                    .nodes
                    .get_mut(&self.config.cluster.nodes[n].name)
            {
                entry.moved = true;
            }
        }
        self.durable.queue_table = (!from_file).then(|| RuntimeQueues::of(&self.config));
        out.journal = self.durable != durable_before;
        self.journal_changes_since(&durable_before);
        if out.changes.is_empty() {
            out.changes.push("nothing changed".into());
        }
        self.bump();
        Ok(out)
    }
}

/// The configuration the coordinator runs with: the file's, or, when the previous run
/// changed the queue table at run time, that table over the file's cluster.
pub(super) fn effective_config(file: Config, previous: &Durable) -> Result<Config, CoreError> {
    let Some(table) = &previous.queue_table else {
        return Ok(file);
    };
    let config = table.apply_to(&file).map_err(|e| {
        CoreError::Config(format!(
            "the coordinator state's run-time queue table does not fit {}: {e} \
             (remove its queue_table to start from the file)",
            file.origin
        ))
    })?;
    config::check(&config).map_err(|e| {
        CoreError::Config(format!("the coordinator state's run-time queue table: {e}"))
    })?;
    Ok(config)
}

fn invalid(message: String) -> Refusal {
    Refusal::new(RefusalCode::Invalid, message)
}

/// A rule refuses the change in the present state (jobs, owned nodes, moves).
fn policy(message: String) -> Refusal {
    Refusal::new(RefusalCode::Policy, message)
}
