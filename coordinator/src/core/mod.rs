//! The coordinator's pure core: the queue table, node ownership (intent), the shard registry
//! (observation) and the views built from them. No tokio, no sockets, no clock.
//!
//! The driver owns one [`Core`] behind a lock and calls it for every event:
//!
//! | event | method | what comes back |
//! |---|---|---|
//! | a shard registers | [`Core::register`] | its [`Assignment`](shardsched_proto::msg::shard_coord::Assignment), or a refusal, or "another connection holds the queue" (the driver probes it) |
//! | a shard reports | [`Core::status`] | stored as observation |
//! | a shard's connection ends | [`Core::disconnected`] | its queue goes offline |
//! | an admin changes a queue | [`Core::queue_admin`] (or [`Core::queue_control`]) | the command for the queue's shard, if any, and the move started by `--take` / `--release-to` |
//! | an admin moves nodes or cancels a move | [`Core::move_nodes`], [`Core::move_between`], [`Core::cancel_move`] | the move's id / the returned nodes; commands follow through [`Core::moves_to_send`] |
//! | an admin flags nodes (down, drained) | [`Core::set_node_flag`] | the shards that have the nodes now |
//! | the driver journals | [`Core::journal_take`], then [`Core::journal_done`] or [`Core::journal_failed`] | the changed records, as one delta |
//! | a client reads | [`Core::routes`], [`Core::queue_list`], [`Core::resources`], [`Core::jobs_plan`] | the answer, or the shards to ask |
//!
//! Every change a client could see bumps [`Core::epoch`]; the driver then republishes
//! [`Core::routes`].

mod admin;
mod moving;
#[cfg(test)]
mod props;
mod reconfig;
mod registry;
#[cfg(test)]
mod tests;
mod views;

use std::collections::HashMap;

use shardsched_proto::msg::client_coord::QueueAction;
use shardsched_proto::msg::{Generation, MoveId, Refusal, RefusalCode};
use shardsched_resource::encode_hostlist;

use crate::config::{self, Config};
use crate::moves::{JournalToken, MoveMachine, NodeIntentInit, RecoverError};
use crate::ownership::{self, Durable, DurableError};

pub use admin::{FlagPlan, JournalWrite, NodeFlag};
pub use moving::MoveCommand;
pub use reconfig::{Reconfig, RestartCommand};
pub use registry::{RegisterError, ShardLink};
pub use views::{JobsPlan, merge_jobs};

/// Identifies one QUIC connection (quinn's `stable_id`), so that the core can tell a shard's
/// current connection from an older one without holding the connection itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// The coordinator's state.
#[derive(Debug)]
pub struct Core {
    config: Config,
    /// Per queue (same index as `config.queues`): run-time flags and generator id.
    queues: Vec<QueueState>,
    /// Intent: owner per node (queue index), by node index.
    owner: Vec<Option<usize>>,
    /// Intent: generation per node.
    generation: Vec<Generation>,
    /// Node name → node index.
    node_index: HashMap<String, usize>,
    /// Observation: the registered shard of each queue, if connected.
    shards: Vec<Option<ShardLink>>,
    epoch: u64,
    /// Node moves: the authority on intent while they run (see [`moving`]).
    moves: MoveMachine,
    /// The durable state as last computed (nodes kept up to date by moves).
    durable: Durable,
    /// The newest move record not yet handed to the driver's journal write.
    move_pending: Option<JournalToken>,
    /// Durable records changed since the last journal write (see [`admin`]).
    dirty: admin::Dirty,
}

/// A queue's run-time state.
#[derive(Clone, Debug, PartialEq, Eq)]
struct QueueState {
    enabled: bool,
    started: bool,
    generator_id: u16,
}

/// What an admin's queue change needs the driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    /// Whether anything changed (a repeat of the current state changes nothing).
    pub changed: bool,
    /// The queue's shard to tell (`SetQueueState`), if one is connected and something changed.
    pub notify: Option<QueueCommand>,
    /// The first move started to carry the change out (`start --take`), if any.
    pub move_id: Option<MoveId>,
    /// What the admin should know beyond "done", one line each (e.g. nodes of its
    /// definition a queue started without, and how to take them).
    pub notes: Vec<String>,
}

/// `SetQueueState` for one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueCommand {
    /// The queue.
    pub queue: String,
    /// Its shard's connection.
    pub conn: ConnId,
    /// Accept submissions.
    pub enabled: bool,
    /// Schedule.
    pub started: bool,
}

/// The core could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The configuration breaks an invariant (only for configurations built in code; files
    /// are checked by [`Config::parse`]).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The durable state could not be combined with the configuration.
    #[error(transparent)]
    Durable(#[from] DurableError),
    /// The move journal could not be replayed.
    #[error(transparent)]
    Moves(#[from] RecoverError),
}

impl Core {
    /// Builds the core from a configuration and the durable state of the previous run
    /// ([`Durable::default`] on first start). `epoch` is the routing table's first epoch; the
    /// driver passes the wall clock in milliseconds so that epochs keep growing across
    /// restarts. Returns the durable state to write before serving.
    pub fn new(
        config: Config,
        previous: &Durable,
        epoch: u64,
    ) -> Result<(Core, Durable), CoreError> {
        let config = reconfig::effective_config(config, previous)?;
        config::check(&config).map_err(CoreError::Config)?;
        // An admin's queue state (journaled) wins over the configuration's flags, but not
        // over its ownership rules: those use the configuration's flags, so that with the
        // moved nodes kept (`reconcile`) a restart gives back the owners it had. Nodes change
        // owner only through moves.
        let admin_state: Vec<Option<&ownership::DurableQueue>> = config
            .queues
            .iter()
            .map(|q| previous.queues.get(&q.name))
            .collect();
        let owners = ownership::assign_owners(&config);
        let (own, durable) = ownership::reconcile(&config, owners, previous)?;
        let queues = config
            .queues
            .iter()
            .zip(&own.generator)
            .zip(&admin_state)
            .map(|((q, &generator_id), a)| QueueState {
                enabled: a.map_or(q.enabled, |a| a.enabled),
                started: a.map_or(q.started, |a| a.started),
                generator_id,
            })
            .collect();
        let node_index = config
            .cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let shards = vec![None; config.queues.len()];
        let intents: Vec<NodeIntentInit> = config
            .cluster
            .nodes
            .iter()
            .zip(&own.owner)
            .zip(&own.generation)
            .map(|((node, owner), &generation)| NodeIntentInit {
                node: node.name.clone(),
                owner: owner
                    .and_then(|qi| config.queues.get(qi))
                    .map(|q| q.name.clone()),
                generation,
            })
            .collect();
        let definitions: Vec<(String, Vec<String>)> = config
            .queues
            .iter()
            .map(|q| (q.name.clone(), config.node_names(&q.definition)))
            .collect();
        let moves = MoveMachine::recover(
            intents,
            definitions,
            durable.next_move_id,
            durable.moves.clone(),
        )?;
        let mut durable = durable;
        durable.moves = moves.active_records();
        durable.next_move_id = moves.next_move_id();
        let core = Core {
            config,
            queues,
            owner: own.owner,
            generation: own.generation,
            node_index,
            shards,
            epoch,
            moves,
            durable: durable.clone(),
            move_pending: None,
            dirty: admin::Dirty::default(),
        };
        Ok((core, durable))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The routing table's epoch: bumped by every change a client could see.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The owning queue of a node (intent), by name.
    pub fn owner_of(&self, node: &str) -> Option<&str> {
        let &n = self.node_index.get(node)?;
        let qi = (*self.owner.get(n)?)?;
        Some(self.config.queues.get(qi)?.name.as_str())
    }

    /// A node's generation (intent), by name.
    pub fn generation_of(&self, node: &str) -> Option<Generation> {
        self.node_index
            .get(node)
            .and_then(|&n| self.generation.get(n).copied())
    }

    /// The names of the nodes `queue` owns, in cluster order.
    pub fn owned_by(&self, queue: &str) -> Vec<String> {
        let Some(qi) = self.queue_index(queue) else {
            return Vec::new();
        };
        self.owned_indices(qi)
            .map(|n| self.config.cluster.nodes[n].name.clone())
            .collect()
    }

    /// A queue's generator id.
    pub fn generator_id(&self, queue: &str) -> Option<u16> {
        self.queue_index(queue)
            .map(|qi| self.queues[qi].generator_id)
    }

    /// A queue's run-time flags `(enabled, started)` (intent).
    pub fn queue_flags(&self, queue: &str) -> Option<(bool, bool)> {
        self.queue_index(queue)
            .map(|qi| (self.queues[qi].enabled, self.queues[qi].started))
    }

    /// Enables, disables, starts or stops a queue (an admin's request; the driver checked
    /// the role). A queue starts with the nodes it owns now; with `take`, the nodes its
    /// definition shares with other started queues are moved to it (one move per donor,
    /// started at `now_ms`). Starting is refused only when the queue would own nothing.
    pub fn queue_control(
        &mut self,
        now_ms: u64,
        queue: &str,
        action: QueueAction,
    ) -> Result<Control, Refusal> {
        let qi = self
            .queue_index(queue)
            .ok_or_else(|| self.no_such_queue(queue))?;
        let before = self.queues[qi].clone();
        let mut move_id = None;
        let mut notes = Vec::new();
        match action {
            QueueAction::Enable => self.queues[qi].enabled = true,
            QueueAction::Disable => self.queues[qi].enabled = false,
            QueueAction::Stop => self.queues[qi].started = false,
            QueueAction::Start { take } => {
                if !before.started {
                    let others = self.defined_elsewhere(qi);
                    let started: Vec<(String, Vec<String>)> = others
                        .iter()
                        .filter(|(_, started, _)| *started)
                        .map(|(q, _, nodes)| (q.clone(), nodes.clone()))
                        .collect();
                    if take && !started.is_empty() {
                        move_id = self.start_moves(now_ms, &started, queue)?;
                    } else if self.owned_indices(qi).next().is_none() {
                        return Err(self.owns_nothing(queue, &others));
                    } else {
                        notes = others
                            .iter()
                            .filter(|(_, started, _)| *started)
                            .map(|(other, _, nodes)| {
                                format!(
                                    "{queue} started without {} ({other} owns them; \
                                     `shardsched queue start {queue} --take` would move them)",
                                    encode_hostlist(nodes)
                                )
                            })
                            .collect();
                    }
                }
                self.queues[qi].started = true;
            }
        }
        let after = &self.queues[qi];
        let changed = *after != before;
        let notify = match (&self.shards[qi], changed) {
            (Some(link), true) => Some(QueueCommand {
                queue: queue.to_owned(),
                conn: link.conn,
                enabled: after.enabled,
                started: after.started,
            }),
            _ => None,
        };
        if changed {
            self.bump();
        }
        Ok(Control {
            changed,
            notify,
            move_id,
            notes,
        })
    }

    /// The nodes of `qi`'s definition owned by other queues, by owner in name order: the
    /// owner, whether it is started, and the nodes (in cluster order).
    fn defined_elsewhere(&self, qi: usize) -> Vec<(String, bool, Vec<String>)> {
        let mut by_owner: Vec<(String, bool, Vec<String>)> = Vec::new();
        for &n in &self.config.queues[qi].definition {
            let Some(other) = self.owner[n].filter(|&o| o != qi) else {
                continue;
            };
            let name = &self.config.queues[other].name;
            let node = self.config.cluster.nodes[n].name.clone();
            match by_owner.iter_mut().find(|(q, _, _)| q == name) {
                Some((_, _, nodes)) => nodes.push(node),
                None => by_owner.push((name.clone(), self.queues[other].started, vec![node])),
            }
        }
        by_owner.sort_by(|a, b| a.0.cmp(&b.0));
        by_owner
    }

    /// Why `queue` may not start: it would own nothing. Names who owns its definition and
    /// what to type.
    fn owns_nothing(&self, queue: &str, others: &[(String, bool, Vec<String>)]) -> Refusal {
        let owners: Vec<String> = others
            .iter()
            .map(|(other, _, nodes)| format!("{other} owns {}", encode_hostlist(nodes)))
            .collect();
        let hint = if others.iter().any(|(_, started, _)| *started) {
            format!("`shardsched queue start {queue} --take` moves in the started queues' nodes")
        } else if let Some((other, _, nodes)) = others.first() {
            format!(
                "`shardsched queue move {} --from {other} --to {queue}` gives it nodes first",
                encode_hostlist(nodes)
            )
        } else {
            format!(
                "no queue owns any node of its definition; `shardsched queue update {queue} --nodes …` changes it"
            )
        };
        let owners = if owners.is_empty() {
            String::new()
        } else {
            format!(" ({})", owners.join("; "))
        };
        Refusal::new(
            RefusalCode::Policy,
            format!("queue {queue} would start owning no node{owners}: {hint}"),
        )
    }

    fn queue_index(&self, queue: &str) -> Option<usize> {
        self.config.queues.iter().position(|q| q.name == queue)
    }

    fn owned_indices(&self, qi: usize) -> impl Iterator<Item = usize> + '_ {
        self.owner
            .iter()
            .enumerate()
            .filter(move |(_, o)| **o == Some(qi))
            .map(|(n, _)| n)
    }

    fn no_such_queue(&self, queue: &str) -> Refusal {
        let known: Vec<&str> = self.config.queues.iter().map(|q| q.name.as_str()).collect();
        Refusal::new(
            RefusalCode::NotFound,
            format!("no queue named {queue:?} (queues: {})", known.join(", ")),
        )
    }

    fn bump(&mut self) {
        self.epoch = self.epoch.saturating_add(1);
    }
}
