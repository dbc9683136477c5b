//! The coordinator's move state machine: pure (no I/O, no clock), quinn-proto style.
//!
//! # What it decides
//!
//! Which queue should own each node (intent) and at which generation, every move in
//! progress, and the commands the shards need to carry the moves out. Each node of a move
//! goes
//!
//! ```text
//!   Outgoing ──(donor: no allocation left; journaled)──► Released ──(recipient ack; journaled)──► Acquired
//!      │ cancel (new generation, journaled)
//!      └──► Returning ──(donor and recipient ack; journaled)──► Returned
//! ```
//!
//! The owner changes to the recipient at move start (with a generation bump), but the node
//! is up nowhere between its release and the recipient's `Acquire`. A cancelled node goes
//! back to the donor with one more generation bump, so a late command of the cancelled move
//! is refused as stale by whichever shard sees it.
//!
//! # The drive loop
//!
//! ```text
//!   inputs:  start_move / cancel_move (admin), handle_releasing / handle_released /
//!            handle_ack (shards), shard_registered (a shard (re)connected), tick(now)
//!   outputs: poll_journal() → write, then journaled(token)   (records, in order)
//!            poll_assignment() → answer a shard's Register     (these two only once the
//!            poll_transmit() → send to the queue's shard        records before them are
//!                                                               durable)
//! ```
//!
//! Nothing is remembered about what was sent: every command a move still needs is derived
//! from its state ([`emit`]), on start, on [`MoveMachine::tick`] every
//! [`RESEND_INTERVAL_MS`](limits::RESEND_INTERVAL_MS), and for one queue on
//! [`MoveMachine::shard_registered`]. Commands are idempotent at the shards, so a duplicate
//! is harmless and a loss is repaired by the next re-send.
//!
//! A node takes part in one unfinished move at a time: a move naming a node already moving
//! is refused (cancel the first, or wait); nothing supersedes silently.
//!
//! # Recovery
//!
//! [`MoveMachine::recover`] replays the journaled [`MoveRecord`]s over the ownership the
//! coordinator had before them; what was not journaled never reached a shard. Then every
//! unfinished move's commands go out again on the first tick and on each registration.

mod emit;
pub mod limits;
mod outbox;
mod state;
#[cfg(test)]
mod tests;
mod types;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use shardsched_proto::msg::coord_shard::{IncomingNode, ReleaseState, Request, StaleNode};
use shardsched_proto::msg::shard_coord::{HeldNode, Released};
use shardsched_proto::msg::{Generation, MoveId, NodeGen};
use shardsched_resource::encode_hostlist;

use emit::Want;
use limits::{ANOMALIES_RETAINED, MOVE_NODES_MAX, MOVES_ACTIVE_MAX, RESEND_INTERVAL_MS};
use outbox::Outbox;
use state::{Move, NodeIntent, Phase, State};
pub use types::{
    JournalToken, MoveError, MoveNodeState, MoveNodeView, MoveRecord, MoveStatus, MoveView,
    NodeIntentInit, RecoverError, ShardAssignment, Transmit,
};

/// See the module documentation.
#[derive(Debug)]
pub struct MoveMachine {
    state: State,
    outbox: Outbox,
    /// Shards that claimed a generation newer than the coordinator's: a broken fence.
    anomalies: VecDeque<String>,
}

impl MoveMachine {
    /// A machine over the given nodes (owner and generation, intent) and queue definitions
    /// (queue → the nodes it may own), with no move in progress. `first_move_id` is the
    /// first id handed out (keep ids growing across journal compactions).
    pub fn new(
        nodes: impl IntoIterator<Item = NodeIntentInit>,
        definitions: impl IntoIterator<Item = (String, Vec<String>)>,
        first_move_id: u64,
    ) -> MoveMachine {
        let nodes = nodes
            .into_iter()
            .map(|n| {
                let intent = NodeIntent {
                    owner: n.owner,
                    generation: n.generation,
                    moving: None,
                };
                (n.node, intent)
            })
            .collect();
        let definitions = definitions
            .into_iter()
            .map(|(q, nodes)| (q, nodes.into_iter().collect()))
            .collect();
        MoveMachine {
            state: State {
                nodes,
                definitions,
                active: BTreeMap::new(),
                finished: VecDeque::new(),
                next_move_id: first_move_id.max(1),
            },
            outbox: Outbox::default(),
            anomalies: VecDeque::new(),
        }
    }

    /// Rebuilds the machine after a restart: [`MoveMachine::new`] over the ownership the
    /// records start from, then every journaled record in order. Unfinished moves send
    /// their commands again at the first [`MoveMachine::tick`].
    pub fn recover(
        nodes: impl IntoIterator<Item = NodeIntentInit>,
        definitions: impl IntoIterator<Item = (String, Vec<String>)>,
        first_move_id: u64,
        records: impl IntoIterator<Item = MoveRecord>,
    ) -> Result<MoveMachine, RecoverError> {
        let mut machine = MoveMachine::new(nodes, definitions, first_move_id);
        for (index, record) in records.into_iter().enumerate() {
            machine
                .state
                .apply(&record)
                .map_err(|reason| RecoverError::Inconsistent {
                    index,
                    move_id: record.move_id(),
                    reason,
                })?;
        }
        Ok(machine)
    }

    // ---- admin inputs ----

    /// Starts moving `nodes` from queue `from` to queue `to`: every node must be owned by
    /// `from`, in `to`'s definition, and in no unfinished move. Each node gets a new
    /// generation; the record goes to the journal first, then `Release` (donor) and
    /// `Incoming` (recipient) are queued behind it. `deadline_ms`: past it, the donor is
    /// told to cancel the jobs still holding the nodes.
    pub fn start_move(
        &mut self,
        now: u64,
        nodes: &[String],
        from: &str,
        to: &str,
        deadline_ms: Option<u64>,
    ) -> Result<MoveId, MoveError> {
        let nodes: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        self.check_move(&nodes, from, to)?;
        let move_id = MoveId(self.state.next_move_id);
        let record = MoveRecord::Started {
            move_id,
            from: from.to_owned(),
            to: to.to_owned(),
            nodes: nodes
                .iter()
                .map(|&n| NodeGen {
                    node: n.to_owned(),
                    generation: next_generation(self.state.nodes.get(n).map(|i| i.generation)),
                })
                .collect(),
            started_ms: now,
            deadline_ms,
        };
        self.commit(record);
        self.send_due(move_id, now, false);
        Ok(move_id)
    }

    /// Cancels a move: its nodes not yet released go back to the donor, each with a new
    /// generation (journaled first), and the donor is told to take them back up (`Reclaim`)
    /// while the recipient forgets them (`Withdraw`). Nodes already released stay on their
    /// way to the recipient. Returns the returned nodes (none when every node was already
    /// released or the move was cancelled before).
    pub fn cancel_move(&mut self, now: u64, move_id: MoveId) -> Result<Vec<String>, MoveError> {
        let mv = self
            .state
            .active
            .get(&move_id)
            .ok_or(MoveError::NoSuchMove(move_id.0))?;
        let nodes: Vec<NodeGen> = mv
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n.phase, Phase::Outgoing { .. }))
            .map(|(name, n)| NodeGen {
                node: name.clone(),
                generation: next_generation(Some(n.generation)),
            })
            .collect();
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        if !self.outbox.has_room() {
            return Err(MoveError::Busy("journal queue full".into()));
        }
        let names = nodes.iter().map(|n| n.node.clone()).collect();
        self.commit(MoveRecord::Cancelled { move_id, nodes });
        self.send_due(move_id, now, false);
        Ok(names)
    }

    // ---- shard inputs ----

    /// The donor's answer to a `Release`: nodes free now are released (journaled, then
    /// `Acquire` to the recipient); for the others the expected free time is passed on to
    /// the recipient (`Incoming`). Answers about another generation, or from a shard that
    /// is not the move's donor, are ignored.
    pub fn handle_releasing(
        &mut self,
        now: u64,
        queue: &str,
        nodes: &[ReleaseState],
        stale: &[StaleNode],
    ) {
        self.note_stale(queue, stale);
        let mut free_now: BTreeMap<MoveId, Vec<NodeGen>> = BTreeMap::new();
        let mut updated: BTreeSet<MoveId> = BTreeSet::new();
        for answer in nodes {
            let Some((move_id, node)) = self.outgoing_node(queue, &answer.node, Side::Donor) else {
                continue;
            };
            match answer.free {
                shardsched_proto::msg::coord_shard::FreeAt::Now => {
                    free_now
                        .entry(move_id)
                        .or_default()
                        .push(answer.node.clone());
                }
                shardsched_proto::msg::coord_shard::FreeAt::Expected(t) => {
                    if let Phase::Outgoing {
                        answered,
                        expected_free_ms,
                        jobs,
                        ..
                    } = &mut node.phase
                    {
                        *answered = true;
                        *expected_free_ms = Some(t);
                        jobs.clone_from(&answer.jobs);
                    }
                    updated.insert(move_id);
                }
            }
        }
        for (move_id, nodes) in free_now {
            self.release(move_id, nodes);
            updated.insert(move_id);
        }
        for move_id in updated {
            self.send_only(move_id, now, |r| {
                matches!(r, Request::Incoming(_) | Request::Acquire(_))
            });
        }
    }

    /// A donor's report that nodes became free after its `Releasing` answer.
    pub fn handle_released(&mut self, now: u64, queue: &str, released: &Released) {
        let nodes: Vec<NodeGen> = released
            .nodes
            .iter()
            .filter(|ng| {
                self.outgoing_node(queue, ng, Side::Donor)
                    .is_some_and(|(id, _)| id == released.move_id)
            })
            .cloned()
            .collect();
        if nodes.is_empty() {
            return;
        }
        self.release(released.move_id, nodes);
        self.send_only(released.move_id, now, |r| matches!(r, Request::Acquire(_)));
    }

    /// A shard acknowledged a command (`Incoming`, `Acquire`, `Reclaim`, `Withdraw`,
    /// `CancelJobs`); `stale` lists the nodes it refused as older than one it has seen.
    pub fn handle_ack(&mut self, _now: u64, queue: &str, request: &Request, stale: &[StaleNode]) {
        self.note_stale(queue, stale);
        let refused: HashSet<&NodeGen> = stale.iter().map(|s| &s.node).collect();
        match request {
            Request::Incoming(incoming) => {
                for inc in incoming.nodes.iter().filter(|n| !refused.contains(&n.node)) {
                    if let Some((_, node)) = self.outgoing_node(queue, &inc.node, Side::Recipient)
                        && let Phase::Outgoing { incoming_acked, .. } = &mut node.phase
                    {
                        *incoming_acked = Some(inc.expected_free_ms);
                    }
                }
            }
            Request::CancelJobs(cancel) => {
                for ng in cancel.nodes.iter().filter(|n| !refused.contains(n)) {
                    if let Some((_, node)) = self.outgoing_node(queue, ng, Side::Donor)
                        && let Phase::Outgoing { cancel_acked, .. } = &mut node.phase
                    {
                        *cancel_acked = true;
                    }
                }
            }
            Request::Acquire(acquire) => {
                let nodes = self.in_phase(
                    acquire.move_id,
                    queue,
                    Side::Recipient,
                    &acquire.nodes,
                    &refused,
                    |p| matches!(p, Phase::Released).then_some(true),
                );
                if !nodes.is_empty() && self.outbox.has_room() {
                    self.commit(MoveRecord::Acquired {
                        move_id: acquire.move_id,
                        nodes,
                    });
                }
            }
            Request::Reclaim(r) => self.returned(r.move_id, queue, Side::Donor, &r.nodes, &refused),
            Request::Withdraw(w) => {
                self.returned(w.move_id, queue, Side::Recipient, &w.nodes, &refused);
            }
            Request::Release(_) | Request::SetQueueState { .. } | Request::Jobs(_) => {}
        }
    }

    /// A queue's shard (re)registered: its [`ShardAssignment`] is queued (see
    /// [`MoveMachine::poll_assignment`]), then everything unacknowledged for it goes out
    /// again, including a fresh `Release` for every node still outgoing from it. `held` is
    /// what the shard remembers; a generation newer than the coordinator's is recorded as
    /// an anomaly.
    pub fn shard_registered(&mut self, now: u64, queue: &str, held: &[HeldNode]) {
        self.outbox.assign(ShardAssignment {
            queue: queue.to_owned(),
            owned: self.owned_for(queue),
            incoming: self.incoming_for(queue),
        });
        for h in held {
            if let Some(intent) = self.state.nodes.get(&h.node.node)
                && h.node.generation > intent.generation
            {
                self.anomaly(format!(
                    "shard {queue} holds {} at generation {}, newer than the coordinator's {}",
                    h.node.node, h.node.generation.0, intent.generation.0
                ));
            }
        }
        let ids: Vec<MoveId> = self
            .state
            .active
            .values()
            .filter(|m| m.from == queue || m.to == queue)
            .map(|m| m.id)
            .collect();
        for id in ids {
            if let Some(mv) = self.state.active.get(&id) {
                let want = Want {
                    force_release: true,
                    only_queue: Some(queue),
                };
                for t in emit::commands(mv, now, want) {
                    self.outbox.send(t);
                }
            }
        }
    }

    /// Time passes: moves whose re-send is due send their unacknowledged commands again,
    /// and moves past their deadline tell the donor to cancel the jobs holding their nodes.
    pub fn tick(&mut self, now: u64) {
        let due: Vec<MoveId> = self
            .state
            .active
            .values()
            .filter(|m| now >= m.next_resend_ms || (deadline_passed(m, now) && !m.deadline_fired))
            .map(|m| m.id)
            .collect();
        for id in due {
            self.send_due(id, now, false);
        }
    }

    /// When [`MoveMachine::tick`] next has something to do, if anything is in progress.
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        self.state
            .active
            .values()
            .map(|m| match m.deadline_ms {
                Some(d) if !m.deadline_fired && !m.cancelled => d.min(m.next_resend_ms),
                _ => m.next_resend_ms,
            })
            .min()
    }

    // ---- outputs ----

    /// The next record to make durable, with its token.
    pub fn poll_journal(&mut self) -> Option<(JournalToken, MoveRecord)> {
        self.outbox.poll_journal()
    }

    /// Every record up to `token` is durable.
    pub fn journaled(&mut self, token: JournalToken) {
        self.outbox.journaled(token);
    }

    /// The next command whose records are durable.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.poll_transmit()
    }

    /// The next registration answer whose records are durable (the driver answers the
    /// shard's `Register` with it, then sends that shard's commands).
    pub fn poll_assignment(&mut self) -> Option<ShardAssignment> {
        self.outbox.poll_assignment()
    }

    // ---- reads ----

    /// A node's owner (intent).
    pub fn owner_of(&self, node: &str) -> Option<&str> {
        self.state.nodes.get(node)?.owner.as_deref()
    }

    /// A node's generation (intent).
    pub fn generation_of(&self, node: &str) -> Option<Generation> {
        self.state.nodes.get(node).map(|n| n.generation)
    }

    /// The unfinished move a node is in.
    pub fn moving(&self, node: &str) -> Option<MoveId> {
        self.state.nodes.get(node)?.moving
    }

    /// The nodes `queue`'s shard may have up: those it owns that are in no move, released
    /// to it, or returned to it. (A node still outgoing to `queue` is in
    /// [`MoveMachine::incoming_for`] instead.) This is the intent *now*, possibly not yet
    /// durable: a shard must be told through [`MoveMachine::poll_assignment`].
    pub fn owned_for(&self, queue: &str) -> Vec<NodeGen> {
        self.state
            .nodes
            .iter()
            .filter(|(name, n)| {
                n.owner.as_deref() == Some(queue)
                    && !n.moving.is_some_and(|id| {
                        self.state.active.get(&id).is_some_and(|m| {
                            m.to == queue
                                && m.nodes
                                    .get(*name)
                                    .is_some_and(|mn| matches!(mn.phase, Phase::Outgoing { .. }))
                        })
                    })
            })
            .map(|(name, n)| NodeGen {
                node: name.clone(),
                generation: n.generation,
            })
            .collect()
    }

    /// Nodes on their way to `queue` and not yet released (intent now; see
    /// [`MoveMachine::owned_for`]).
    pub fn incoming_for(&self, queue: &str) -> Vec<(MoveId, IncomingNode)> {
        let mut out = Vec::new();
        for mv in self.state.active.values().filter(|m| m.to == queue) {
            for (name, n) in &mv.nodes {
                if let Phase::Outgoing {
                    expected_free_ms, ..
                } = n.phase
                {
                    let node = NodeGen {
                        node: name.clone(),
                        generation: n.generation,
                    };
                    out.push((
                        mv.id,
                        IncomingNode {
                            node,
                            expected_free_ms,
                        },
                    ));
                }
            }
        }
        out
    }

    /// Every unfinished move, then the finished ones still remembered, oldest first.
    pub fn moves(&self) -> Vec<MoveView> {
        self.state
            .active
            .values()
            .chain(self.state.finished.iter())
            .map(Move::view)
            .collect()
    }

    /// One move, unfinished or remembered.
    pub fn move_view(&self, move_id: MoveId) -> Option<MoveView> {
        self.state
            .active
            .get(&move_id)
            .or_else(|| self.state.finished.iter().find(|m| m.id == move_id))
            .map(Move::view)
    }

    /// The journal, compacted: the records that rebuild every unfinished move over the
    /// current intent (see [`MoveMachine::intent`]). Finished moves need no record: their
    /// effect is in the intent. `recover(intent(), defs, next_move_id(), active_records())`
    /// rebuilds this machine's intent and unfinished moves.
    pub fn active_records(&self) -> Vec<MoveRecord> {
        self.state
            .active
            .values()
            .flat_map(state::Move::records)
            .collect()
    }

    /// Every node's intent (owner and generation), in name order.
    pub fn intent(&self) -> Vec<NodeIntentInit> {
        self.state
            .nodes
            .iter()
            .map(|(name, n)| NodeIntentInit {
                node: name.clone(),
                owner: n.owner.clone(),
                generation: n.generation,
            })
            .collect()
    }

    /// The id the next move will get.
    pub fn next_move_id(&self) -> u64 {
        self.state.next_move_id
    }

    /// Whether [`MoveMachine::start_move`] would accept this move now (nothing changes).
    pub fn check_start(&self, nodes: &[String], from: &str, to: &str) -> Result<(), MoveError> {
        let nodes: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
        self.check_move(&nodes, from, to)
    }

    /// Whether any move is unfinished.
    pub fn is_idle(&self) -> bool {
        self.state.active.is_empty()
    }

    /// Broken fences seen (a shard claiming a generation newer than the coordinator's).
    pub fn anomalies(&self) -> impl Iterator<Item = &str> {
        self.anomalies.iter().map(String::as_str)
    }

    // ---- internals ----

    fn check_move(&self, nodes: &BTreeSet<&str>, from: &str, to: &str) -> Result<(), MoveError> {
        if from == to {
            return Err(MoveError::SameQueue(from.to_owned()));
        }
        for q in [from, to] {
            if !self.state.definitions.contains_key(q) {
                return Err(MoveError::NoSuchQueue(q.to_owned()));
            }
        }
        if nodes.is_empty() {
            return Err(MoveError::NoNodes);
        }
        if nodes.len() > MOVE_NODES_MAX {
            return Err(MoveError::TooManyNodes {
                count: nodes.len(),
                max: MOVE_NODES_MAX,
            });
        }
        let unknown: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| !self.state.nodes.contains_key(*n))
            .collect();
        if !unknown.is_empty() {
            return Err(MoveError::NoSuchNode(encode_hostlist(&unknown)));
        }
        let not_owned: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| self.owner_of(n) != Some(from))
            .collect();
        if !not_owned.is_empty() {
            return Err(MoveError::NotOwned {
                queue: from.to_owned(),
                nodes: encode_hostlist(&not_owned),
            });
        }
        let definition = self.state.definitions.get(to);
        let outside: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| !definition.is_some_and(|d| d.contains(*n)))
            .collect();
        if !outside.is_empty() {
            return Err(MoveError::NotInDefinition {
                queue: to.to_owned(),
                nodes: encode_hostlist(&outside),
            });
        }
        let moving: Vec<(&str, MoveId)> = nodes
            .iter()
            .filter_map(|n| self.moving(n).map(|id| (*n, id)))
            .collect();
        if let Some(&(_, id)) = moving.first() {
            let names: Vec<&str> = moving.iter().map(|(n, _)| *n).collect();
            return Err(MoveError::AlreadyMoving {
                nodes: encode_hostlist(&names),
                move_id: id.0,
            });
        }
        if self.state.active.len() >= MOVES_ACTIVE_MAX {
            return Err(MoveError::Busy(format!("{MOVES_ACTIVE_MAX} moves")));
        }
        if !self.outbox.has_room() {
            return Err(MoveError::Busy("journal queue full".into()));
        }
        Ok(())
    }

    /// Applies a record the machine built and queues it for the journal.
    fn commit(&mut self, record: MoveRecord) {
        match self.state.apply(&record) {
            Ok(()) => {
                self.outbox.record(record);
            }
            // Records built here always fit; if one did not, nothing changed and nothing
            // is journaled.
            Err(reason) => self.anomaly(format!("internal: {reason}")),
        }
    }

    /// Journals the release of `nodes` (still outgoing in `move_id`).
    fn release(&mut self, move_id: MoveId, nodes: Vec<NodeGen>) {
        if self.outbox.has_room() {
            self.commit(MoveRecord::Released { move_id, nodes });
        }
    }

    /// Marks nodes of a cancelled move acknowledged by one side; journals those now
    /// acknowledged by both.
    fn returned(
        &mut self,
        move_id: MoveId,
        queue: &str,
        side: Side,
        nodes: &[NodeGen],
        refused: &HashSet<&NodeGen>,
    ) {
        let done = self.in_phase(move_id, queue, side, nodes, refused, |p| match p {
            Phase::Returning {
                reclaim_acked,
                withdraw_acked,
            } => {
                match side {
                    Side::Donor => *reclaim_acked = true,
                    Side::Recipient => *withdraw_acked = true,
                }
                Some(*reclaim_acked && *withdraw_acked)
            }
            _ => None,
        });
        if !done.is_empty() && self.outbox.has_room() {
            self.commit(MoveRecord::Returned {
                move_id,
                nodes: done,
            });
        }
    }

    /// For each of `nodes` in move `move_id` whose side is `queue` and whose generation
    /// matches, calls `visit` on its phase; returns the nodes for which it said `Some(true)`.
    fn in_phase(
        &mut self,
        move_id: MoveId,
        queue: &str,
        side: Side,
        nodes: &[NodeGen],
        refused: &HashSet<&NodeGen>,
        mut visit: impl FnMut(&mut Phase) -> Option<bool>,
    ) -> Vec<NodeGen> {
        let Some(mv) = self.state.active.get_mut(&move_id) else {
            return Vec::new();
        };
        if side.queue(mv) != queue {
            return Vec::new();
        }
        nodes
            .iter()
            .filter(|ng| !refused.contains(ng))
            .filter(|ng| {
                mv.nodes.get_mut(&ng.node).is_some_and(|n| {
                    n.generation == ng.generation && visit(&mut n.phase) == Some(true)
                })
            })
            .cloned()
            .collect()
    }

    /// The move node for `ng` if it is outgoing in its node's current move, at `ng`'s
    /// generation, and `queue` is that move's `side`.
    fn outgoing_node(
        &mut self,
        queue: &str,
        ng: &NodeGen,
        side: Side,
    ) -> Option<(MoveId, &mut state::MoveNode)> {
        let id = self.state.nodes.get(&ng.node)?.moving?;
        let mv = self.state.active.get_mut(&id)?;
        if side.queue(mv) != queue {
            return None;
        }
        let node = mv.nodes.get_mut(&ng.node)?;
        (node.generation == ng.generation && matches!(node.phase, Phase::Outgoing { .. }))
            .then_some((id, node))
    }

    /// Sends every command `move_id` needs now and schedules the next re-send.
    fn send_due(&mut self, move_id: MoveId, now: u64, force_release: bool) {
        let Some(mv) = self.state.active.get_mut(&move_id) else {
            return;
        };
        let want = Want {
            force_release,
            only_queue: None,
        };
        let commands = emit::commands(mv, now, want);
        mv.next_resend_ms = now.saturating_add(RESEND_INTERVAL_MS);
        mv.deadline_fired |= deadline_passed(mv, now);
        for t in commands {
            self.outbox.send(t);
        }
    }

    /// Sends the commands of `move_id` that `keep` selects (a reaction to an answer, which
    /// should not wait for the next re-send).
    fn send_only(&mut self, move_id: MoveId, now: u64, keep: impl Fn(&Request) -> bool) {
        let Some(mv) = self.state.active.get(&move_id) else {
            return;
        };
        let want = Want {
            force_release: false,
            only_queue: None,
        };
        for t in emit::commands(mv, now, want) {
            if keep(&t.request) {
                self.outbox.send(t);
            }
        }
    }

    fn note_stale(&mut self, queue: &str, stale: &[StaleNode]) {
        for s in stale {
            if let Some(intent) = self.state.nodes.get(&s.node.node)
                && s.seen > intent.generation
            {
                self.anomaly(format!(
                    "shard {queue} has seen {} at generation {}, newer than the coordinator's {}",
                    s.node.node, s.seen.0, intent.generation.0
                ));
            }
        }
    }

    fn anomaly(&mut self, text: String) {
        if self.anomalies.len() >= ANOMALIES_RETAINED {
            self.anomalies.pop_front();
        }
        self.anomalies.push_back(text);
    }
}

/// Which end of a move a shard is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Donor,
    Recipient,
}

impl Side {
    fn queue(self, mv: &Move) -> &str {
        match self {
            Side::Donor => &mv.from,
            Side::Recipient => &mv.to,
        }
    }
}

fn deadline_passed(mv: &Move, now: u64) -> bool {
    !mv.cancelled && mv.deadline_ms.is_some_and(|d| now >= d)
}

fn next_generation(current: Option<Generation>) -> Generation {
    Generation(current.map_or(1, |g| g.0.saturating_add(1)))
}
