//! The core's side of admin changes that must outlive a restart — queue states (with a
//! reason, and `stop --release-to`), node flags (down, drained) — and the journal's
//! bookkeeping: which records changed since the last write.
//!
//! Every change lands in the core's state at once and marks its key dirty (a node's in the
//! node table itself); the driver takes the dirty records as one [`DurableDelta`]
//! ([`Core::journal_take`]), makes them durable, and only then answers the admin or sends
//! the commands that depend on them ([`Core::journal_done`]). A write that fails stops the
//! coordinator: its restart replays the journal, which never held the lost records.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_resource::encode_hostlist;
use shardsched_wire::limits::NODE_FLAGS_BYTES_MAX;
use shardsched_wire::msg::client_coord::QueueAction;
use shardsched_wire::msg::{MoveId, NodeFlags, Refusal, RefusalCode, bounds, coord_shard};

use super::{ConnId, Control, Core};
use crate::moves::{JournalToken, MovingStep, NodeFlag, StepTook};
use crate::queue_table;
use crate::records::{
    AdminQueueState, Durable, DurableDelta, NodeRecord, QueueRecord, QueueTableRecord, move_steps,
};

/// What `queue stop Q --release-to R` does.
#[derive(Debug, Default)]
struct ReleasePlan {
    /// Q's settled nodes in R's definition: moved to R.
    nodes: Vec<String>,
    /// Unfinished moves into Q whose nodes are still in their donor: cancelled.
    cancel: Vec<MoveId>,
    /// Q's settled nodes outside R's definition: Q keeps them.
    kept: Vec<String>,
}

/// Keys changed since the last [`Core::journal_take`] (nodes: the node table's list).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Dirty {
    pub(super) queues: BTreeSet<String>,
    pub(super) moves: BTreeSet<MoveId>,
    pub(super) next_move_id: bool,
    /// The run-time queue table changed.
    pub(super) queue_table: bool,
    /// The limits changed.
    pub(super) limits: bool,
    /// Kinds of move records among them (`started`, `released`, …), for failpoints.
    pub(super) steps: BTreeSet<&'static str>,
    /// The node steps their records complete, for the metrics.
    pub(super) steps_took: Vec<StepTook>,
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
    /// How long each node step it makes durable took (releases, acquisitions): the
    /// driver's `move_step` metric, one observation per node step.
    pub steps_took: Vec<StepTook>,
}

/// The shards to tell about a flag change: (queue, reason) → (connection, nodes).
pub type FlagPlan = BTreeMap<(String, String), (ConnId, Vec<String>)>;

/// The commands of a [`FlagPlan`] for `flag` set (`on`) or cleared: one per queue and
/// reason, `SetNodeState` or `SetNodeDrain`, with the queue and its connection.
pub fn flag_commands(
    plan: FlagPlan,
    flag: NodeFlag,
    on: bool,
) -> Vec<(String, ConnId, coord_shard::Request)> {
    plan.into_iter()
        .map(|((queue, reason), (conn, nodes))| {
            let request = match flag {
                NodeFlag::Down => coord_shard::Request::SetNodeState {
                    nodes,
                    down: on,
                    reason,
                },
                NodeFlag::Drained => coord_shard::Request::SetNodeDrain {
                    nodes,
                    drained: on,
                    reason,
                },
            };
            (queue, conn, request)
        })
        .collect()
}

impl Core {
    /// [`Core::queue_control`] with a reason (kept with a disable) and, for a stop, a queue
    /// to hand the stopped queue's nodes to: those of its owned nodes in `release_to`'s
    /// definition move there (one move), and nodes still on their way in to it (outgoing
    /// in their donor: a `--take` not finished) go back to their donor (their move is
    /// cancelled). Refused, changing nothing, when that leaves nothing to do. The queue's
    /// new state is journaled as the admin's, so it survives restarts.
    pub fn queue_admin(
        &mut self,
        now_ms: u64,
        queue: &str,
        action: QueueAction,
        reason: &str,
        release_to: Option<&str>,
    ) -> Result<Control, Refusal> {
        bounds::reason(reason)?;
        let qi = self
            .queue_index(queue)
            .ok_or_else(|| self.no_such_queue(queue))?;
        let before = self.admin_state(qi);
        let Some(to) = release_to else {
            let control = self.queue_control(now_ms, queue, action)?;
            self.remember_queue_state(qi, reason, before);
            return Ok(control);
        };
        if action != QueueAction::Stop {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                "--release-to goes with queue stop",
            ));
        }
        let ti = self.queue_index(to).ok_or_else(|| self.no_such_queue(to))?;
        let plan = self.release_plan(qi, ti)?;
        // Checked before the stop changes anything.
        if !plan.nodes.is_empty() {
            self.moves
                .check_start(&plan.nodes, queue, to)
                .map_err(super::moving::refusal)?;
        }
        let mut control = self.queue_control(now_ms, queue, action)?;
        for move_id in plan.cancel {
            let (donor, returned) = match self.moves.move_view(move_id) {
                Some(m) => (m.from, self.cancel_move(now_ms, move_id)?),
                None => continue,
            };
            if !returned.is_empty() {
                control.notes.push(format!(
                    "{} were still on their way to {queue} (move {}): they go back to {donor}",
                    encode_hostlist(&returned),
                    move_id.0
                ));
            }
        }
        if !plan.nodes.is_empty() {
            control.move_id = self.start_moves(now_ms, &[(queue.to_owned(), plan.nodes)], to)?;
        }
        if !plan.kept.is_empty() {
            control.notes.push(format!(
                "{queue} keeps {}: not in {to}'s definition",
                encode_hostlist(&plan.kept)
            ));
        }
        self.remember_queue_state(qi, reason, before);
        Ok(control)
    }

    /// What `stop qi --release-to ti` would do; refused when it would do nothing, saying
    /// why and what to type instead.
    fn release_plan(&self, qi: usize, ti: usize) -> Result<ReleasePlan, Refusal> {
        let queue = &self.config.queues[qi].name;
        let to = &self.config.queues[ti].name;
        let mut plan = ReleasePlan::default();
        let mut arriving: Vec<(String, MoveId)> = Vec::new();
        for n in self.owned_indices(qi) {
            let name = self.config.cluster.nodes[n].name.clone();
            match self.moves.moving_node(&name) {
                None if self.config.queues[ti].definition.contains(&n) => plan.nodes.push(name),
                None => plan.kept.push(name),
                // On its way in: still outgoing in its donor.
                Some(m) if m.step == MovingStep::InDonor && m.to == queue.as_str() => {
                    if !plan.cancel.contains(&m.move_id) {
                        plan.cancel.push(m.move_id);
                    }
                }
                // Released to Q, or coming back to Q from a cancelled move: in a moment.
                Some(m) => arriving.push((name, m.move_id)),
            }
        }
        if !plan.nodes.is_empty() || !plan.cancel.is_empty() {
            return Ok(plan);
        }
        let message = if let Some((_, move_id)) = arriving.first() {
            let names: Vec<&str> = arriving.iter().map(|(n, _)| n.as_str()).collect();
            format!(
                "{} are being handed to {queue} (move {}): try again once \
                 `shardsched queue moves` shows it done",
                encode_hostlist(&names),
                move_id.0
            )
        } else if plan.kept.is_empty() {
            format!("queue {queue} owns no node: nothing to release to {to}")
        } else {
            let mut wider = self.config.queues[ti].definition.clone();
            wider.extend(self.owned_indices(qi));
            wider.sort_unstable();
            wider.dedup();
            format!(
                "none of queue {queue}'s nodes ({}) is in {to}'s definition: \
                 `shardsched queue update {to} --nodes {}` adds them",
                encode_hostlist(&plan.kept),
                encode_hostlist(&self.config.node_names(&wider))
            )
        };
        Err(Refusal::new(RefusalCode::Invalid, message))
    }

    /// A queue's disable reason (empty when none or enabled).
    pub fn queue_reason(&self, queue: &str) -> Option<&str> {
        let qi = self.queue_index(queue)?;
        self.queues[qi].admin_reason.as_deref()
    }

    /// The run-time state an admin set for queue `qi`, if any (what the journal keeps).
    pub(super) fn admin_state(&self, qi: usize) -> Option<AdminQueueState> {
        let state = &self.queues[qi];
        state.admin_reason.as_ref().map(|reason| AdminQueueState {
            enabled: state.enabled,
            started: state.started,
            reason: reason.clone(),
        })
    }

    /// Makes queue `qi`'s current state the admin's, journaled if it differs from
    /// `before` (the admin's state before the change).
    fn remember_queue_state(&mut self, qi: usize, reason: &str, before: Option<AdminQueueState>) {
        let state = &mut self.queues[qi];
        state.admin_reason = Some(if state.enabled {
            String::new()
        } else {
            reason.to_owned()
        });
        if self.admin_state(qi) != before {
            self.dirty
                .queues
                .insert(self.config.queues[qi].name.clone());
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
        self.check_known(nodes)?;
        bounds::reason(reason)?;
        if on {
            self.check_flags_bytes(nodes, flag, reason)?;
        }
        let mut plan = FlagPlan::new();
        for node in nodes {
            let mut value = on.then(|| reason.to_owned());
            let current = self.moves.nodes().get(node).and_then(|i| match flag {
                NodeFlag::Down => i.down.clone(),
                NodeFlag::Drained => i.drained.clone(),
            });
            if on && reason.is_empty() && current.is_some() {
                value = current;
            }
            self.moves.set_flag(node, flag, value.clone());
            let holder = self.flag_holder(node);
            if let Some((queue, conn)) = holder {
                plan.entry((queue, value.unwrap_or_default()))
                    .or_insert_with(|| (conn, Vec::new()))
                    .1
                    .push(node.clone());
            }
        }
        self.debug_check();
        Ok(plan)
    }

    /// Refuses a flag that would take the flags of all nodes past [`NODE_FLAGS_BYTES_MAX`]
    /// (each flagged node's name and reasons): every message and journal record that carries
    /// many nodes' flags then fits a frame, whatever the cluster's size.
    fn check_flags_bytes(
        &self,
        nodes: &[String],
        flag: NodeFlag,
        reason: &str,
    ) -> Result<(), Refusal> {
        let named: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        let total: usize = self
            .moves
            .nodes()
            .iter()
            .map(|(name, node, _)| {
                let (mut down, mut drained) = (node.down.as_deref(), node.drained.as_deref());
                if named.contains(name) {
                    match flag {
                        NodeFlag::Down => down = Some(reason),
                        NodeFlag::Drained => drained = Some(reason),
                    }
                }
                match (down, drained) {
                    (None, None) => 0,
                    (d, r) => name.len() + d.map_or(0, str::len) + r.map_or(0, str::len),
                }
            })
            .sum();
        if total <= NODE_FLAGS_BYTES_MAX {
            return Ok(());
        }
        Err(Refusal::new(
            RefusalCode::Invalid,
            format!(
                "the flags of all nodes would take {total} bytes (names and reasons), more \
                 than the {NODE_FLAGS_BYTES_MAX}-byte limit: give a shorter reason"
            ),
        ))
    }

    /// A node's admin flags (none: `None`).
    pub fn node_flags(&self, node: &str) -> Option<NodeFlags> {
        self.moves.nodes().get(node)?.flags()
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
    /// [`Core::journal_done`].
    pub fn journal_take(&mut self) -> Option<JournalWrite> {
        self.debug_check();
        let token = self.move_pending.take();
        let nodes = self.moves.take_changed_nodes();
        let dirty = std::mem::take(&mut self.dirty);
        let allowances = self.ledger.take_for_write();
        let fairshare = self.fairshare.take_for_write();
        if token.is_none()
            && nodes.is_empty()
            && dirty == Dirty::default()
            && !allowances
            && fairshare.is_none()
        {
            return None;
        }
        let mut delta = DurableDelta::default();
        for name in &dirty.queues {
            if let Some(&id) = self.generators.get(name) {
                let admin = self.queue_index(name).and_then(|qi| self.admin_state(qi));
                delta
                    .queues
                    .push((id, QueueRecord::new(name, admin.as_ref())));
            }
        }
        for name in &nodes {
            if let Some(node) = self.moves.nodes().get(name) {
                delta.nodes.push(NodeRecord::new(name, node));
            }
        }
        for &id in &dirty.moves {
            let records = self.moves.records_of(id).map(|r| move_steps(&r));
            delta.moves.push((id.0, records));
        }
        if dirty.next_move_id {
            delta.next_move_id = Some(self.moves.next_move_id());
        }
        if dirty.queue_table {
            delta.queue_table = Some(self.queue_table_record());
        }
        if dirty.limits {
            delta.limits = Some(self.limits_record());
        }
        if allowances {
            delta.allowances = Some(self.ledger.records());
        }
        delta.fairshare = fairshare;
        if mutant::active(Mutant::AckBeforeJournal) {
            // The write carries the records of the write before: what it releases (its
            // token's commands, the batch's answers) leaves before it is durable.
            delta = self.deferred.replace(delta).unwrap_or_default();
        }
        Some(JournalWrite {
            delta,
            token,
            steps: dirty.steps,
            steps_took: dirty.steps_took,
        })
    }

    /// `write` is durable: the move commands it covers may go.
    pub fn journal_done(&mut self, write: &JournalWrite) {
        self.ledger.written();
        self.fairshare.written();
        if let Some(token) = write.token {
            self.moves.journaled(token);
        }
    }

    /// Marks for the journal every queue and queue-table record that differs from `before`
    /// (for changes made to the queue table wholesale; nodes mark themselves).
    pub(super) fn journal_changes_since(&mut self, before: &Durable) {
        let delta = self.durable_state().diff(before);
        self.dirty
            .queues
            .extend(delta.queues.into_iter().map(|(_, q)| q.name));
        self.dirty.queue_table |= delta.queue_table.is_some();
    }

    /// The whole durable state now (what the journal holds once every write is done),
    /// computed from the core.
    pub fn durable_state(&self) -> Durable {
        Durable {
            generators: self.generators.clone(),
            queues: (0..self.queues.len())
                .filter_map(|qi| {
                    let admin = self.admin_state(qi)?;
                    Some((self.config.queues[qi].name.clone(), admin))
                })
                .collect(),
            nodes: self.moves.intent().into_iter().collect(),
            moves: self.moves.active_records(),
            next_move_id: self.moves.next_move_id(),
            queue_table: self.queue_table_record(),
            limits: self.limits_record(),
            allowances: self.ledger.records(),
            fairshare: self.fairshare.durable(),
        }
    }

    /// The run-time limits as the journal keeps them (`None`: the file's).
    fn limits_record(&self) -> Option<Vec<crate::records::LimitRecord>> {
        self.runtime_limits
            .then(|| super::allowances::limit_records(&self.limits))
    }

    /// The run-time queue table as the journal keeps it (`None`: the file's).
    fn queue_table_record(&self) -> Option<QueueTableRecord> {
        self.runtime_table
            .then(|| queue_table::record_of(&self.config))
    }
}
