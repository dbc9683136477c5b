//! The coordinator's pure core: the queue table, node ownership (intent), the shard registry
//! (observation) and the views built from them. No tokio, no sockets, no clock.
//!
//! The driver's core task owns the one [`Core`] (no lock: nothing else touches it) and
//! calls it once for every event:
//!
//! | event | method | what comes back |
//! |---|---|---|
//! | a shard registers | [`Core::register_shard`] ([`Core::register`], then [`Core::moves_registered`]; [`Core::register_after_probe`] once a holder of its queue was probed) | its [`Assignment`](shardsched_wire::msg::shard_coord::Assignment), or a refusal, or "another connection holds the queue" (the driver probes it) |
//! | a shard reports | [`Core::status`] | stored as observation |
//! | a shard reports released nodes / answers a move command | [`Core::moves_released`], [`Core::moves_answer`] | the move's next steps, through [`Core::moves_to_send`] |
//! | a shard's connection ends | [`Core::disconnected`] | its queue goes offline |
//! | an admin changes a queue | [`Core::queue_admin`] (or [`Core::queue_control`]) | the command for the queue's shard, if any, and the move started by `--take` / `--release-to` |
//! | an admin changes the queue table | [`Core::add_queue`], [`Core::update_queue`] | a [`Reconfig`]: the shards to stop and restart |
//! | an admin removes queues (`queue remove`, `reload`) | [`Core::begin_remove`], [`Core::begin_reload`]; the shards' answers to [`Core::removal_answer`], the history pulls to [`Core::removal_pulled`]; [`Core::removals_tick`] at the end of every batch | the steps through [`Core::removals_to_send`], the end through [`Core::removals_done`] (a [`Reconfig`], or a refusal and the queues to re-enable) |
//! | an admin moves nodes or cancels a move | [`Core::move_nodes`], [`Core::move_between`], [`Core::cancel_move`] | the move's id / the returned nodes; commands follow through [`Core::moves_to_send`] |
//! | an admin flags nodes (down, drained) | [`Core::set_node_flag`] | the shards that have the nodes now |
//! | time passes (end of every batch) | [`Core::moves_tick`] | re-sends and deadlines; [`Core::moves_next_wakeup`] says when next |
//! | time passes (end of every batch) | [`Core::fairshare_tick`] | usage decayed, a new factor table when it changed; [`Core::fairshare_to_send`] after the write |
//! | the driver journals (end of every batch) | [`Core::journal_take`], then [`Core::journal_done`] once durable | the changed records, as one delta |
//! | a client reads | [`Core::routes`], [`Core::queue_list`], [`Core::resources_page`], [`Core::jobs_plan`] | the answer, or the shards to ask |
//!
//! Every change a client could see bumps [`Core::epoch`]; the driver then republishes
//! [`Core::routes`].

mod admin;
mod agents;
mod allowances;
#[cfg(test)]
mod allowances_tests;
mod deps;
mod fairshare;
mod invariants;
mod moving;
#[cfg(test)]
mod props;
mod reconfig;
mod registry;
mod removals;
#[cfg(test)]
mod tests;
mod views;

use std::collections::BTreeMap;

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::client_coord::QueueAction;
use shardsched_wire::msg::{Generation, MoveId, Refusal, RefusalCode, coord_shard};

use crate::config::{self, Config};
use crate::moves::{JournalToken, MoveMachine, RecoverError};
use crate::ownership::{self, DurableError};
use crate::records::Durable;

pub use crate::moves::NodeFlag;
pub use admin::{FlagPlan, JournalWrite, flag_commands};
pub use agents::{AgentCommand, AgentFlags, UNREACHABLE_REASON};
pub use deps::{FactsPlan, settle_fact};
pub use fairshare::{FAIRSHARE_DECAY_INTERVAL_MS, FAIRSHARE_FACTOR_STEP_PPM};
pub use moving::MoveCommand;
pub use reconfig::{Reconfig, RestartCommand};
pub use registry::{RegisterError, Registering, ShardLink};
pub use removals::{
    Begun, REMOVALS_MAX, REMOVE_MOVE_WAIT_MS, RemovalCommand, RemovalDone, RemovalId, RemovalStep,
};
pub use views::{JobsPlan, merge_jobs};

/// Identifies one QUIC connection (quinn's `stable_id`), so that the core can tell a shard's
/// current connection from an older one without holding the connection itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// The coordinator's state. Every fact has one home (see the crate documentation):
/// nodes are in the move machine's node table, queues' run-time state here, observations
/// in the shard registry; everything else is computed from them when asked.
#[derive(Debug)]
pub struct Core {
    config: Config,
    /// Per queue (same index as `config.queues`): run-time flags.
    queues: Vec<QueueState>,
    /// Queue name → generator id, for every queue ever configured (an id is never reused).
    generators: BTreeMap<String, u16>,
    /// The queue table was changed at run time: the journal keeps it over the file's.
    runtime_table: bool,
    /// Observation: the registered shard of each queue, if connected.
    shards: Vec<Option<ShardLink>>,
    epoch: u64,
    /// Node moves, and the node table: every node's owner, generation, flags and move.
    moves: MoveMachine,
    /// The newest move record not yet handed to the driver's journal write.
    move_pending: Option<JournalToken>,
    /// Queue and move records changed since the last journal write (nodes: the node
    /// table's own list; see [`admin`]).
    dirty: admin::Dirty,
    /// Records held back one write by the mutant `ack-before-journal` (always empty
    /// otherwise; docs/SIM.md).
    deferred: Option<crate::records::DurableDelta>,
    /// Observation: the node agents that registered, and `Owner` messages for them.
    agents: agents::Agents,
    /// `queue remove` and `reload` under way (not durable: see [`removals`]).
    removals: removals::Removals,
    /// Every limit: the file's `[limits]`, or as `limits set` left them.
    limits: shardsched_wire::msg::quota::LimitTable,
    /// The limits were changed at run time: the journal keeps them over the file's.
    runtime_limits: bool,
    /// The allowances granted under per-user limits ([`allowances`]).
    ledger: allowances::Ledger,
    /// Fair-share's usage and factors ([`fairshare`]).
    fairshare: fairshare::Ledger,
}

/// A queue's run-time state.
#[derive(Clone, Debug, PartialEq, Eq)]
struct QueueState {
    enabled: bool,
    started: bool,
    /// Set by an admin (journaled, kept across restarts), with the disable reason (empty
    /// when enabled or none was given); `None`: as configured.
    admin_reason: Option<String>,
}

impl QueueState {
    fn flags(&self) -> (bool, bool) {
        (self.enabled, self.started)
    }
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

impl QueueCommand {
    /// The command itself.
    pub fn request(&self) -> coord_shard::Request {
        coord_shard::Request::SetQueueState {
            enabled: self.enabled,
            started: self.started,
        }
    }
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
        let queues = config
            .queues
            .iter()
            .map(|q| match previous.queues.get(&q.name) {
                Some(admin) => QueueState {
                    enabled: admin.enabled,
                    started: admin.started,
                    admin_reason: Some(admin.reason.clone()),
                },
                None => QueueState {
                    enabled: q.enabled,
                    started: q.started,
                    admin_reason: None,
                },
            })
            .collect();
        let owners = ownership::assign_owners(&config);
        let start = ownership::reconcile(&config, owners, previous)?;
        let definitions: Vec<(String, Vec<String>)> = config
            .queues
            .iter()
            .map(|q| (q.name.clone(), config.node_names(&q.definition)))
            .collect();
        let mut moves = MoveMachine::recover(
            start.nodes,
            definitions,
            previous.next_move_id,
            previous.moves.clone(),
        )?;
        // The start's changes are written whole, as the diff with `previous`.
        moves.take_changed_nodes();
        let shards = vec![None; config.queues.len()];
        let limits = match &previous.limits {
            Some(records) => allowances::limit_table(records),
            None => config.limits.clone(),
        };
        let core = Core {
            limits,
            runtime_limits: previous.limits.is_some(),
            ledger: allowances::Ledger::new(&previous.allowances),
            fairshare: fairshare::Ledger::new(previous.fairshare.as_ref(), epoch),
            runtime_table: previous.queue_table.is_some(),
            config,
            queues,
            generators: start.generators,
            shards,
            epoch,
            moves,
            move_pending: None,
            dirty: admin::Dirty::default(),
            deferred: None,
            agents: agents::Agents::default(),
            removals: removals::Removals::default(),
        };
        core.debug_check();
        let durable = core.durable_state();
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
        self.moves.owner_of(node)
    }

    /// A node's generation (intent), by name.
    pub fn generation_of(&self, node: &str) -> Option<Generation> {
        self.moves.generation_of(node)
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
        self.generators.get(queue).copied()
    }

    /// A queue's run-time flags `(enabled, started)` (intent).
    pub fn queue_flags(&self, queue: &str) -> Option<(bool, bool)> {
        self.queue_index(queue).map(|qi| self.queues[qi].flags())
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
        let before = self.queues[qi].flags();
        let mut move_id = None;
        let mut notes = Vec::new();
        match action {
            QueueAction::Enable => self.queues[qi].enabled = true,
            QueueAction::Disable => self.queues[qi].enabled = false,
            QueueAction::Stop => self.queues[qi].started = false,
            QueueAction::Start { take } => {
                if !before.1 {
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
        let (enabled, started) = self.queues[qi].flags();
        let changed = (enabled, started) != before;
        let notify = match (&self.shards[qi], changed) {
            (Some(link), true) => Some(QueueCommand {
                queue: queue.to_owned(),
                conn: link.conn,
                enabled,
                started,
            }),
            _ => None,
        };
        if changed {
            self.bump();
        }
        self.debug_check();
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
        let mut by_owner: Vec<(String, bool, Vec<String>)> = self
            .owned_elsewhere(qi, &self.config.queues[qi].definition)
            .into_iter()
            .map(|(other, nodes)| {
                let name = self.config.queues[other].name.clone();
                (name, self.queues[other].started, nodes)
            })
            .collect();
        by_owner.sort_by(|a, b| a.0.cmp(&b.0));
        by_owner
    }

    /// Those of `nodes` (indices) that another queue than `qi` owns, grouped by that queue
    /// (its index) in the order first met, each group in the order given.
    fn owned_elsewhere(&self, qi: usize, nodes: &[usize]) -> Vec<(usize, Vec<String>)> {
        let queue = self.config.queues[qi].name.as_str();
        let mut by_owner: Vec<(usize, Vec<String>)> = Vec::new();
        for &n in nodes {
            let Some((name, intent)) = self.moves.nodes().at(n) else {
                continue;
            };
            let Some(other) = intent
                .owner
                .as_deref()
                .filter(|&o| o != queue)
                .and_then(|o| self.queue_index(o))
            else {
                continue;
            };
            match by_owner.iter_mut().find(|(o, _)| *o == other) {
                Some((_, list)) => list.push(name.to_owned()),
                None => by_owner.push((other, vec![name.to_owned()])),
            }
        }
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
        self.moves.nodes().owned_by(&self.config.queues[qi].name)
    }

    /// Refuses `nodes` unless every one is a node of the cluster, naming those that are not.
    fn check_known(&self, nodes: &[String]) -> Result<(), Refusal> {
        let unknown: Vec<&str> = nodes
            .iter()
            .filter(|n| !self.moves.nodes().contains(n))
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(Refusal::new(
            RefusalCode::NotFound,
            format!("no node {} in the cluster", encode_hostlist(&unknown)),
        ))
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
