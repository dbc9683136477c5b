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
//!                                 (Reconfigure, with the nodes granted: a new definition
//!                                  is applied in place, any other change restarts the
//!                                  shard with its journal; SetQueueState off for a
//!                                  removed queue's shard)
//! ```
//!
//! Definitions may overlap, started queues' too. A node never changes hands between two
//! queues here: that is always a move (a removal or an update with `give_to` starts one;
//! the removal goes on once the move is done: removals.rs), and a reload whose `owns`
//! differs from the owners now only says which moves would apply it.

mod apply;
mod owners;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::client_coord::QueueSpec;
use shardsched_wire::msg::{MoveId, QueueConfig, Refusal, RefusalCode, coord_shard};

use super::{ConnId, Core, CoreError, QueueCommand};
use crate::config::{self, Config, QueueDef};
use crate::queue_table;
use crate::records::Durable;

/// What a queue table change needs the driver to do, after writing
/// [`Core::durable_state`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconfig {
    /// What changed, one line each, for the admin.
    pub changes: Vec<String>,
    /// Shards whose queue configuration changed: send `Reconfigure` (they apply a new
    /// definition in place, and restart for any other change).
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
    /// Its new configuration, and the nodes the change granted it.
    pub change: coord_shard::Reconfigure,
}

impl RestartCommand {
    /// The command itself: `Reconfigure` with the queue's new configuration.
    pub fn request(&self) -> coord_shard::Request {
        coord_shard::Request::Reconfigure(Box::new(self.change.clone()))
    }
}

impl Core {
    /// `queue add` as an admin asks it: the spec checked against the configuration
    /// ([`queue_table::queue_def`]), then [`Core::add_queue`].
    pub fn add_queue_spec(&mut self, spec: &QueueSpec) -> Result<Reconfig, Refusal> {
        let def = queue_table::queue_def(&self.config, None, spec)
            .map_err(|e| invalid(format!("queue {}: {e}", spec.name)))?;
        self.add_queue(def)
    }

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
    /// `spec` that are set. Its shard, if connected, is sent the new configuration when it
    /// differs (it applies it in place, or restarts for a new match policy or durations). A new definition may not leave out nodes the queue
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
    /// move, started at `now_ms`; they are idle, having no job) and the queue stays: its
    /// removal ([`Core::begin_remove`]) removes it once [`Core::move_finished`] says the
    /// move is done.
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
    /// the single changes. The cluster itself cannot change without a restart, nor do
    /// `[agents]` and `[fairshare]` (they take effect at the next start: the shards hold
    /// fair-share's weights from their registration).
    pub fn reload(&mut self, mut file: Config) -> Result<Reconfig, Refusal> {
        file.agents = self.config.agents.clone();
        file.fairshare = self.config.fairshare;
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

    /// The queues a change to `candidate` would remove (a reload's removal checks them).
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

    pub(super) fn queue_config_at(&self, qi: usize) -> QueueConfig {
        let q = &self.config.queues[qi];
        let (enabled, started) = self.queues[qi].flags();
        QueueConfig {
            name: q.name.clone(),
            queue_policy: q.policy,
            match_policy: q.match_policy,
            queue_depth: q.queue_depth,
            reservation_depth: q.reservation_depth,
            default_duration_ms: q.default_duration_ms,
            max_duration_ms: q.max_duration_ms,
            definition: self.config.node_names(&q.definition),
            enabled,
            started,
            array_elements_max: self.config.array_elements_max,
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
    /// and is in no unfinished move. Pure: a removal asks before it disables the queue's
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

    /// A removal has just seen `queue`'s shard hold no job, and disabled it so that none
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
}

/// The configuration the coordinator runs with: the file's, or, when the previous run
/// changed the queue table at run time, that table over the file's cluster.
pub(super) fn effective_config(file: Config, previous: &Durable) -> Result<Config, CoreError> {
    let Some(table) = &previous.queue_table else {
        return Ok(file);
    };
    let config = queue_table::apply_to(table, &file).map_err(|e| {
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

pub(super) fn invalid(message: String) -> Refusal {
    Refusal::new(RefusalCode::Invalid, message)
}

/// A rule refuses the change in the present state (jobs, owned nodes, moves).
pub(super) fn policy(message: String) -> Refusal {
    Refusal::new(RefusalCode::Policy, message)
}
