//! The core's side of admin changes that must outlive a restart — queue states (with a
//! reason, and `stop --release-to`), node flags (down, drained) — and the journal's
//! bookkeeping: which records changed since the last write.
//!
//! Every change lands in the core's [`Durable`] state at once and marks its key dirty; the
//! driver takes the dirty records as one [`DurableDelta`] ([`Core::journal_take`]), makes
//! them durable, and only then answers the admin or sends the commands that depend on them
//! ([`Core::journal_done`]). A failed write gives the delta back ([`Core::journal_failed`]),
//! to be written with the next one.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_proto::msg::client_coord::QueueAction;
use shardsched_proto::msg::{MoveId, NodeFlags, Refusal, RefusalCode};
use shardsched_resource::encode_hostlist;

use super::{ConnId, Control, Core};
use crate::journal::{DurableDelta, NodeRecord, QueueRecord};
use crate::moves::{JournalToken, MovingStep};
use crate::ownership::{Durable, DurableQueue};

/// Keys changed since the last [`Core::journal_take`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Dirty {
    pub(super) nodes: BTreeSet<String>,
    pub(super) queues: BTreeSet<String>,
    pub(super) moves: BTreeSet<MoveId>,
    pub(super) next_move_id: bool,
    /// The run-time queue table changed.
    pub(super) queue_table: bool,
    /// Kinds of move records among them (`started`, `released`, …), for failpoints.
    pub(super) steps: BTreeSet<&'static str>,
}

/// One journal write: the records, and the newest move record they make durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalWrite {
    /// What to write.
    pub delta: DurableDelta,
    /// The move machine's token it covers, if any move record is in it.
    pub token: Option<JournalToken>,
    /// Kinds of move records it makes durable (`started`, `released`, `acquired`,
    /// `cancelled`, `returned`): the driver's failpoints `coord.move.after_journal_<kind>`.
    pub steps: BTreeSet<&'static str>,
}

/// Which admin flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeFlag {
    /// Down (failed).
    Down,
    /// Drained.
    Drained,
}

/// The shards to tell about a flag change: (queue, reason) → (connection, nodes).
pub type FlagPlan = BTreeMap<(String, String), (ConnId, Vec<String>)>;

impl Core {
    /// [`Core::queue_control`] with a reason (kept with a disable) and, for a stop, a queue
    /// to hand the stopped queue's nodes to: those of its owned nodes in `release_to`'s
    /// definition move there (one move; refused if there are none). The queue's new state
    /// is journaled as the admin's, so it survives restarts.
    pub fn queue_admin(
        &mut self,
        now_ms: u64,
        queue: &str,
        action: QueueAction,
        reason: &str,
        release_to: Option<&str>,
    ) -> Result<Control, Refusal> {
        let qi = self
            .queue_index(queue)
            .ok_or_else(|| self.no_such_queue(queue))?;
        if let Some(to) = release_to {
            if action != QueueAction::Stop {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    "--release-to goes with queue stop",
                ));
            }
            let ti = self.queue_index(to).ok_or_else(|| self.no_such_queue(to))?;
            let nodes: Vec<String> = self
                .owned_indices(qi)
                .filter(|n| self.config.queues[ti].definition.contains(n))
                .map(|n| self.config.cluster.nodes[n].name.clone())
                .filter(|n| self.moves.moving(n).is_none())
                .collect();
            if nodes.is_empty() {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!(
                        "queue {queue} owns no node of queue {to}'s definition: nothing to release to it"
                    ),
                ));
            }
            // Checked before the stop changes anything.
            self.moves
                .check_start(&nodes, queue, to)
                .map_err(super::moving::refusal)?;
            let mut control = self.queue_control(now_ms, queue, action)?;
            control.move_id = self.start_moves(now_ms, &[(queue.to_owned(), nodes)], to)?;
            self.remember_queue_state(qi, reason);
            return Ok(control);
        }
        let control = self.queue_control(now_ms, queue, action)?;
        self.remember_queue_state(qi, reason);
        Ok(control)
    }

    /// A queue's disable reason (empty when none or enabled).
    pub fn queue_reason(&self, queue: &str) -> Option<&str> {
        self.durable.queues.get(queue).map(|q| q.reason.as_str())
    }

    /// Journals queue `qi`'s current state as the admin's.
    fn remember_queue_state(&mut self, qi: usize, reason: &str) {
        let state = &self.queues[qi];
        let name = self.config.queues[qi].name.clone();
        let record = DurableQueue {
            enabled: state.enabled,
            started: state.started,
            reason: if state.enabled {
                String::new()
            } else {
                reason.to_owned()
            },
        };
        if self.durable.queues.get(&name) != Some(&record) {
            self.durable.queues.insert(name.clone(), record);
            self.dirty.queues.insert(name);
        }
    }

    /// Sets or clears a flag on nodes (all must be nodes of the cluster; unassigned nodes
    /// may be flagged too). The flag is the coordinator's, journaled with the node: it goes
    /// to whichever shard owns the node, now and at every registration and move. Returns
    /// the connected shards to tell now: each node's owner, or — for a node still outgoing
    /// in a move — the donor that still has it.
    ///
    /// Setting a flag again without a reason keeps the reason the node has: `resource drain
    /// node[0-7]` after `resource drain node3 --reason "bad dimm"` must not erase why node3
    /// was drained. (flux-core refuses such a drain without `--force`; keeping the reason
    /// loses nothing and needs no flag. A new reason replaces the old one.)
    pub fn set_node_flag(
        &mut self,
        nodes: &[String],
        flag: NodeFlag,
        on: bool,
        reason: &str,
    ) -> Result<FlagPlan, Refusal> {
        let unknown: Vec<&str> = nodes
            .iter()
            .filter(|n| !self.node_index.contains_key(n.as_str()))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(Refusal::new(
                RefusalCode::NotFound,
                format!("no node {} in the cluster", encode_hostlist(&unknown)),
            ));
        }
        let mut plan = FlagPlan::new();
        for node in nodes {
            let mut value = on.then(|| reason.to_owned());
            if let Some(entry) = self.durable.nodes.get_mut(node) {
                let slot = match flag {
                    NodeFlag::Down => &mut entry.down,
                    NodeFlag::Drained => &mut entry.drained,
                };
                if on && reason.is_empty() && slot.is_some() {
                    value.clone_from(slot);
                }
                if *slot != value {
                    *slot = value.clone();
                    self.dirty.nodes.insert(node.clone());
                }
            }
            let holder = self.flag_holder(node);
            if let Some((queue, conn)) = holder {
                plan.entry((queue, value.unwrap_or_default()))
                    .or_insert_with(|| (conn, Vec::new()))
                    .1
                    .push(node.clone());
            }
        }
        Ok(plan)
    }

    /// A node's admin flags (none: `None`).
    pub fn node_flags(&self, node: &str) -> Option<NodeFlags> {
        self.durable.nodes.get(node).and_then(|n| n.flags())
    }

    /// The flags of those of `nodes` that have any.
    pub(super) fn flags_of<'a>(
        &self,
        nodes: impl IntoIterator<Item = &'a str>,
    ) -> BTreeMap<String, NodeFlags> {
        nodes
            .into_iter()
            .filter_map(|n| self.node_flags(n).map(|f| (n.to_owned(), f)))
            .collect()
    }

    /// The connected shard that has `node` up or on its way out: the donor while the node
    /// is outgoing in a move, else its owner.
    fn flag_holder(&self, node: &str) -> Option<(String, ConnId)> {
        let queue = match self.moves.moving_node(node) {
            Some(m) if m.step == MovingStep::InDonor => m.from.to_owned(),
            _ => self.owner_of(node)?.to_owned(),
        };
        let conn = self.shard(&queue)?.conn;
        Some((queue, conn))
    }

    /// The records changed since the last call, if any: the driver writes them, then calls
    /// [`Core::journal_done`] (or [`Core::journal_failed`]).
    pub fn journal_take(&mut self) -> Option<JournalWrite> {
        let token = self.move_pending.take();
        let dirty = std::mem::take(&mut self.dirty);
        if token.is_none() && dirty == Dirty::default() {
            return None;
        }
        let mut delta = DurableDelta::default();
        for name in &dirty.queues {
            if let Some(&id) = self.durable.generators.get(name) {
                delta.queues.push((
                    id,
                    QueueRecord {
                        name: name.clone(),
                        state: self.durable.queues.get(name).cloned(),
                    },
                ));
            }
        }
        for name in &dirty.nodes {
            if let Some(node) = self.durable.nodes.get(name) {
                delta.nodes.push(NodeRecord::new(name, node));
            }
        }
        for &id in &dirty.moves {
            delta.moves.push((id, self.moves.records_of(id)));
        }
        if dirty.next_move_id {
            delta.next_move_id = Some(self.moves.next_move_id());
        }
        if dirty.queue_table {
            delta.queue_table = Some(self.durable.queue_table.clone());
        }
        Some(JournalWrite {
            delta,
            token,
            steps: dirty.steps,
        })
    }

    /// `write` is durable: the move commands it covers may go.
    pub fn journal_done(&mut self, write: &JournalWrite) {
        if let Some(token) = write.token {
            self.moves.journaled(token);
        }
    }

    /// Writing `write` failed: its records are offered again with the next
    /// [`Core::journal_take`] (and the move commands behind them wait until then).
    pub fn journal_failed(&mut self, write: JournalWrite) {
        if let Some(token) = write.token {
            self.move_pending = Some(self.move_pending.map_or(token, |t| t.max(token)));
        }
        for (_, q) in write.delta.queues {
            self.dirty.queues.insert(q.name);
        }
        for n in write.delta.nodes {
            self.dirty.nodes.insert(n.name);
        }
        for (id, _) in write.delta.moves {
            self.dirty.moves.insert(id);
        }
        self.dirty.next_move_id |= write.delta.next_move_id.is_some();
        self.dirty.queue_table |= write.delta.queue_table.is_some();
        self.dirty.steps.extend(write.steps);
    }

    /// Marks for the journal every queue, node and queue-table record that differs from
    /// `before` (for changes made to the durable state wholesale, such as a queue table
    /// change).
    pub(super) fn journal_changes_since(&mut self, before: &Durable) {
        let delta = self.durable.diff(before);
        self.dirty
            .queues
            .extend(delta.queues.into_iter().map(|(_, q)| q.name));
        self.dirty
            .nodes
            .extend(delta.nodes.into_iter().map(|n| n.name));
        self.dirty.queue_table |= delta.queue_table.is_some();
    }

    /// The whole durable state now (what the journal holds once every write is done).
    pub fn durable_state(&self) -> Durable {
        let mut durable = self.durable.clone();
        durable.moves = self.moves.active_records();
        durable.next_move_id = self.moves.next_move_id();
        durable
    }
}
