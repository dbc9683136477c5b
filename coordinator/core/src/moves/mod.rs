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
//! from its state (`emit.rs`), on start, on [`MoveMachine::tick`] every
//! `limits::RESEND_INTERVAL_MS`, and for one queue on
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

mod answers;
mod emit;
mod invariants;
pub mod limits;
mod nodes;
mod outbox;
mod reconfig;
mod state;
#[cfg(test)]
mod tests;
mod types;
mod view;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::coord_shard::Request;
use shardsched_wire::msg::{Generation, MoveId, NodeGen};

use emit::Want;
use limits::{ANOMALIES_RETAINED, MOVE_NODES_MAX, MOVES_ACTIVE_MAX, RESEND_INTERVAL_MS};
pub use nodes::{NodeFlag, NodeIntent, NodeTable};
use outbox::Outbox;
use state::{Move, Phase, State};
pub use types::{
    JournalToken, MoveError, MoveNodeState, MoveNodeView, MoveRecord, MoveStatus, MoveView,
    MovingNode, MovingStep, RecoverError, ShardAssignment, StepTook, Transmit,
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
    /// A machine over the given nodes (name and intent, in the order the node table keeps)
    /// and queue definitions (queue → the nodes it may own), with no move in progress.
    /// `first_move_id` is the first id handed out (keep ids growing across journal
    /// compactions).
    pub fn new(
        nodes: impl IntoIterator<Item = (String, NodeIntent)>,
        definitions: impl IntoIterator<Item = (String, Vec<String>)>,
        first_move_id: u64,
    ) -> MoveMachine {
        let nodes = NodeTable::new(nodes);
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
                now_ms: 0,
            },
            outbox: Outbox::default(),
            anomalies: VecDeque::new(),
        }
    }

    /// Rebuilds the machine after a restart: [`MoveMachine::new`] over the ownership the
    /// records start from, then every journaled record in order. Unfinished moves send
    /// their commands again at the first [`MoveMachine::tick`].
    pub fn recover(
        nodes: impl IntoIterator<Item = (String, NodeIntent)>,
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
        self.state.now_ms = now;
        let move_id = MoveId(self.state.next_move_id);
        let record = MoveRecord::Started {
            move_id,
            from: from.to_owned(),
            to: to.to_owned(),
            nodes: nodes
                .iter()
                .map(|&n| NodeGen {
                    node: n.to_owned(),
                    generation: next_generation(self.state.nodes.generation(n)),
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
    /// way to the recipient, and so do nodes the donor's definition no longer has (an
    /// `update --give-to` took them out of it): they have nowhere to go back to. Returns
    /// the returned nodes (none when every node was already released or the move was
    /// cancelled before).
    pub fn cancel_move(&mut self, now: u64, move_id: MoveId) -> Result<Vec<String>, MoveError> {
        self.state.now_ms = now;
        let mv = self
            .state
            .active
            .get(&move_id)
            .ok_or(MoveError::NoSuchMove(move_id.0))?;
        let donor = self.state.definitions.get(&mv.from);
        let nodes: Vec<NodeGen> = mv
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n.phase, Phase::Outgoing { .. }))
            .filter(|(name, _)| donor.is_some_and(|d| d.contains(*name)))
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

    /// Time passes: moves whose re-send is due send their unacknowledged commands again,
    /// and moves past their deadline tell the donor to cancel the jobs holding their nodes.
    pub fn tick(&mut self, now: u64) {
        self.state.now_ms = now;
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

    /// The next command whose records are durable. An `Acquire` carries the nodes' admin
    /// flags as they are now: the recipient brings each node up with them.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let mut transmit = self.outbox.poll_transmit()?;
        if let Request::Acquire(acquire) = &mut transmit.request {
            acquire.flags = acquire
                .nodes
                .iter()
                .filter_map(|ng| {
                    let flags = self.state.nodes.get(&ng.node)?.flags()?;
                    Some((ng.node.clone(), flags))
                })
                .collect();
        }
        Some(transmit)
    }

    /// The next registration answer whose records are durable (the driver answers the
    /// shard's `Register` with it, then sends that shard's commands).
    pub fn poll_assignment(&mut self) -> Option<ShardAssignment> {
        self.outbox.poll_assignment()
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
            .filter(|n| !self.state.nodes.contains(n))
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
                nodes: hostlist(not_owned.iter().copied()),
                owners: self.owners_of(&not_owned),
            });
        }
        let definition = self.state.definitions.get(to);
        let outside: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| !definition.is_some_and(|d| d.contains(*n)))
            .collect();
        if !outside.is_empty() {
            let wider = definition
                .into_iter()
                .flatten()
                .map(String::as_str)
                .chain(outside.iter().copied());
            return Err(MoveError::NotInDefinition {
                queue: to.to_owned(),
                nodes: hostlist(outside.iter().copied()),
                wider: hostlist(wider),
            });
        }
        let moving: Vec<(&str, MoveId)> = nodes
            .iter()
            .filter_map(|n| self.moving(n).map(|id| (*n, id)))
            .collect();
        if let Some(&(_, id)) = moving.first() {
            return Err(MoveError::AlreadyMoving {
                nodes: hostlist(moving.iter().map(|(n, _)| *n)),
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

    /// Who owns `nodes` (none of them the donor), for a refusal: `debug owns node0;
    /// node5 is unassigned`.
    fn owners_of(&self, nodes: &[&str]) -> String {
        let mut by_owner: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
        for &n in nodes {
            by_owner.entry(self.owner_of(n)).or_default().push(n);
        }
        by_owner
            .into_iter()
            .map(|(owner, names)| {
                let hosts = hostlist(names);
                match owner {
                    Some(q) => format!("{q} owns {hosts}"),
                    None => format!("{hosts} unassigned"),
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
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

    fn anomaly(&mut self, text: String) {
        if self.anomalies.len() >= ANOMALIES_RETAINED {
            self.anomalies.pop_front();
        }
        self.anomalies.push_back(text);
    }
}

/// Node names as a hostlist in natural order (`node[2,10]`, not `node[10,2]`).
fn hostlist<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.into_iter().collect();
    shardsched_resource::sort_hosts(&mut names);
    names.dedup();
    encode_hostlist(&names)
}

fn deadline_passed(mv: &Move, now: u64) -> bool {
    !mv.cancelled && mv.deadline_ms.is_some_and(|d| now >= d)
}

fn next_generation(current: Option<Generation>) -> Generation {
    Generation(current.map_or(1, |g| g.0.saturating_add(1)))
}
