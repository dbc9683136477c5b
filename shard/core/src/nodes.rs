//! The node table: the one place a shard keeps what it knows of each node — its newest
//! generation, whose it is ([`Holding`]: owned, moving out, moving in, not this shard's), and
//! the admin flags it carries (drained, down, each with its reason). Everything else is
//! computed from it: which nodes are up, what the queue manager may use, the status report,
//! what a re-registering shard holds. Each entry is journaled whole when it changes, and a
//! restarted shard gets the table back from its journal ([`NodeTable::restore`]).
//!
//! # Per node
//!
//! ```text
//!   NotOwned ──Incoming──► Incoming{move, expected free} ──Acquire──► Owned (up)
//!   Owned ──Release──► Outgoing{move} (no new work) ──last job ends──► NotOwned (+ Released report)
//!   Outgoing ──Reclaim (cancelled move)──► Owned        Incoming ──Withdraw──► NotOwned
//! ```
//!
//! Every move command carries (move, node, generation). A generation older than the newest
//! this shard has seen for the node is refused ([`StaleNode`]); the same generation again is
//! a repeat and gets the same answer; a newer one is applied. So commands may be duplicated,
//! reordered or re-sent after any restart (see `nodes/moves.rs`).
//!
//! **Up** means owned *and* confirmed: after a restart no node is up until the coordinator's
//! assignment ([`NodeTable::apply_assignment`]) confirms what the shard owns. Drain and down
//! flags belong to the node, not to its owner: they survive every move.
//!
//! # How the core embeds it
//!
//! The table knows nothing of jobs: the core answers "which jobs hold node X and when do
//! they end" through [`NodeJobs`] (a closure works). Each input returns the wire answer and
//! a list of [`Effect`]s, in order: [`Effect::Persist`] entries go to the journal *before*
//! the answer is sent; [`Effect::WentUp`] and [`Effect::WentDown`] are the node's
//! transitions (the table sees them because it alone decides what is up); the others change
//! what the scheduler may do with a node.

mod moves;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_wire::msg::coord_shard::StaleNode;
use shardsched_wire::msg::{Generation, JobId, MoveId, NodeGen};

/// Answers "which jobs hold resources on this node, and when is each expected to end
/// (ms since the Unix epoch)". Implemented for closures.
pub trait NodeJobs {
    /// The jobs holding `node`.
    fn jobs_on(&self, node: &str) -> Vec<(JobId, u64)>;
}

impl<F: Fn(&str) -> Vec<(JobId, u64)>> NodeJobs for F {
    fn jobs_on(&self, node: &str) -> Vec<(JobId, u64)> {
        self(node)
    }
}

/// The jobs on each node, as the core gathers them for a command.
impl NodeJobs for HashMap<String, Vec<(JobId, u64)>> {
    fn jobs_on(&self, node: &str) -> Vec<(JobId, u64)> {
        self.get(node).cloned().unwrap_or_default()
    }
}

/// Whose a node is, from this shard's point of view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holding {
    /// Not this shard's (never was, released, or withdrawn).
    NotOwned,
    /// This shard's; up once the coordinator confirmed it.
    Owned,
    /// Moving out: no new work; released when its last job ends.
    Outgoing {
        /// The move.
        move_id: MoveId,
    },
    /// Moving in: reservable from the expected free time, not allocatable.
    Incoming {
        /// The move.
        move_id: MoveId,
        /// When the donor expects it free (`None`: unknown, do not reserve).
        expected_free_ms: Option<u64>,
    },
}

/// One node's entry: everything the shard knows of it, journaled whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// The newest generation seen for it.
    pub generation: Generation,
    /// Whose it is.
    pub holding: Holding,
    /// Drained by an admin, with the reason given (possibly empty); travels with the node.
    pub drained: Option<String>,
    /// Marked down (failed), with the reason given (possibly empty); travels with the node.
    pub down: Option<String>,
}

impl Default for NodeEntry {
    fn default() -> Self {
        NodeEntry {
            generation: Generation(0),
            holding: Holding::NotOwned,
            drained: None,
            down: None,
        }
    }
}

impl NodeEntry {
    /// Whether a flag keeps it out of scheduling (drained or down).
    pub fn flagged(&self) -> bool {
        self.drained.is_some() || self.down.is_some()
    }

    /// Whether this shard holds it: owned, or moving out with jobs still on it.
    pub fn is_held(&self) -> bool {
        matches!(self.holding, Holding::Owned | Holding::Outgoing { .. })
    }

    /// Whether it is on its way here (a move's recipient, before `Acquire`).
    pub fn is_incoming(&self) -> bool {
        matches!(self.holding, Holding::Incoming { .. })
    }

    /// When the queue manager should hold it for an incoming move: its expected free time,
    /// unless a flag keeps it out of scheduling or the time is unknown.
    pub fn incoming_hold_ms(&self) -> Option<u64> {
        match self.holding {
            Holding::Incoming {
                expected_free_ms: Some(t),
                ..
            } if !self.flagged() => Some(t),
            _ => None,
        }
    }
}

/// The admin flags a node carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// Drained: no new work, running jobs continue.
    Drained,
    /// Down (failed): no new work, running jobs end.
    Down,
}

/// What the core must do after an input, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Journal this entry before answering.
    Persist(String, NodeEntry),
    /// The node became usable by this shard (owned and confirmed), at this generation.
    WentUp {
        /// The node.
        node: String,
        /// Its generation.
        generation: Generation,
    },
    /// The node stopped being usable by this shard, at this generation.
    WentDown {
        /// The node.
        node: String,
        /// Its generation.
        generation: Generation,
    },
    /// Stop allocating on the node now (it is outgoing); replan reservations there.
    StopAllocating(String),
    /// The node is this shard's: allocatable unless `drained` or `down`.
    BringUp {
        /// The node.
        node: String,
        /// Keep it out of scheduling: drained.
        drained: bool,
        /// Keep it out of scheduling: down.
        down: bool,
    },
    /// The node is not this shard's: not allocatable, not reservable.
    TakeDown(String),
    /// The node is coming: reservable from this time (`None`: do not reserve yet).
    Reservable {
        /// The node.
        node: String,
        /// From when.
        from_ms: Option<u64>,
    },
    /// Cancel these jobs (a move's deadline passed): the node is released when they end.
    CancelJobs {
        /// The node.
        node: String,
        /// The jobs holding it.
        jobs: Vec<JobId>,
    },
}

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct NodeTable {
    nodes: BTreeMap<String, NodeEntry>,
    /// The nodes whose entry is `Holding::Incoming`, kept by [`NodeTable::update`] (and
    /// [`NodeTable::restore`]) beside the entries: the core walks the incoming nodes at every
    /// batch (their holds and when the next ends), and that walk must follow the nodes
    /// moving here, not the whole definition (16,384 entries in a queue defined over a
    /// 16k-node cluster).
    incoming: BTreeSet<String>,
    /// The coordinator confirmed ownership since the last (re)start.
    confirmed: bool,
}

impl NodeTable {
    /// A fresh shard: owns nothing until the coordinator's assignment.
    pub fn new() -> NodeTable {
        NodeTable::default()
    }

    /// A restarted shard, from its journaled entries: nothing is up until
    /// [`NodeTable::apply_assignment`].
    pub fn restore(entries: impl IntoIterator<Item = (String, NodeEntry)>) -> NodeTable {
        let nodes: BTreeMap<String, NodeEntry> = entries.into_iter().collect();
        let incoming = nodes
            .iter()
            .filter(|(_, e)| e.is_incoming())
            .map(|(n, _)| n.clone())
            .collect();
        NodeTable {
            nodes,
            incoming,
            confirmed: false,
        }
    }

    /// A node's entry (a default `NotOwned` entry at generation 0 when never heard of).
    pub fn entry(&self, node: &str) -> NodeEntry {
        self.nodes.get(node).cloned().unwrap_or_default()
    }

    /// A node's entry, if the table has one.
    pub fn get(&self, node: &str) -> Option<&NodeEntry> {
        self.nodes.get(node)
    }

    /// Every entry, by name: for the journal, the status report and checks.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &NodeEntry)> {
        self.nodes.iter().map(|(n, e)| (n.as_str(), e))
    }

    /// The entries of the nodes incoming here (a move's recipient, before `Acquire`), by
    /// name: as [`NodeTable::entries`] filtered, in the nodes moving here.
    pub fn incoming_entries(&self) -> impl Iterator<Item = (&str, &NodeEntry)> {
        self.incoming
            .iter()
            .filter_map(|n| Some((n.as_str(), self.nodes.get(n)?)))
    }

    /// Whether the coordinator confirmed ownership since the last (re)start.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed
    }

    /// Whether the node is up here: owned and confirmed (drain and down flags aside).
    pub fn is_up(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|e| self.up(e))
    }

    /// Whether new work may start on the node: up, not drained, not down.
    pub fn is_schedulable(&self, node: &str) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|e| self.up(e) && !e.flagged())
    }

    /// The nodes up here, with their generations, by name.
    pub fn up_nodes(&self) -> impl Iterator<Item = (&str, Generation)> {
        self.entries()
            .filter(|(_, e)| self.up(e))
            .map(|(n, e)| (n, e.generation))
    }

    /// The nodes marked down, with their reasons, by name (whoever owns them).
    pub fn down_nodes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries()
            .filter_map(|(n, e)| e.down.as_deref().map(|r| (n, r)))
    }

    /// The nodes drained, with their reasons, by name (whoever owns them).
    pub fn drained_nodes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries()
            .filter_map(|(n, e)| e.drained.as_deref().map(|r| (n, r)))
    }

    /// Sets `flag` on a node with its reason (`Some`) or clears it (`None`): an admin's
    /// request, or the coordinator's word; the flag travels with the node.
    pub fn set_flag(&mut self, node: &str, flag: Flag, value: Option<String>) -> Vec<Effect> {
        let mut effects = Vec::new();
        let changed = self.update(node, &mut effects, |e| match flag {
            Flag::Drained => e.drained = value,
            Flag::Down => e.down = value,
        });
        if changed && self.is_up(node) {
            let entry = self.entry(node);
            effects.push(bring_up(node, &entry));
        }
        effects
    }

    fn up(&self, entry: &NodeEntry) -> bool {
        self.confirmed && entry.holding == Holding::Owned
    }

    /// Changes `node`'s entry with `change`. If that changed it, the new entry is persisted
    /// and, if it went up or down here, the transition follows. Returns whether it changed.
    /// The one place an entry changes, so that none changes unjournaled and no generation
    /// goes back.
    fn update(
        &mut self,
        node: &str,
        effects: &mut Vec<Effect>,
        change: impl FnOnce(&mut NodeEntry),
    ) -> bool {
        let confirmed = self.confirmed;
        let entry = self.nodes.entry(node.to_owned()).or_default();
        let before = entry.clone();
        change(entry);
        if *entry == before {
            return false;
        }
        debug_assert!(
            entry.generation >= before.generation,
            "{node}: generation {} went back to {}",
            before.generation.0,
            entry.generation.0
        );
        effects.push(Effect::Persist(node.to_owned(), entry.clone()));
        let was_up = confirmed && before.holding == Holding::Owned;
        let up = confirmed && entry.holding == Holding::Owned;
        let generation = entry.generation;
        let incoming = entry.is_incoming();
        let node = node.to_owned();
        if incoming != before.is_incoming() {
            if incoming {
                self.incoming.insert(node.clone());
            } else {
                self.incoming.remove(&node);
            }
        }
        match (was_up, up) {
            (false, true) => effects.push(Effect::WentUp { node, generation }),
            (true, false) => effects.push(Effect::WentDown { node, generation }),
            _ => {}
        }
        true
    }
}

fn bring_up(node: &str, entry: &NodeEntry) -> Effect {
    Effect::BringUp {
        node: node.to_owned(),
        drained: entry.drained.is_some(),
        down: entry.down.is_some(),
    }
}

/// A command about a generation older than the newest seen is refused.
fn refuse_older(ng: &NodeGen, entry: &NodeEntry) -> Option<StaleNode> {
    if mutant::active(Mutant::NoGenerationCheck) {
        return None;
    }
    (ng.generation < entry.generation).then(|| StaleNode {
        node: ng.clone(),
        seen: entry.generation,
    })
}

#[cfg(test)]
mod tests;
