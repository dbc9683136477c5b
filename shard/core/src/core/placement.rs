//! Where each node stands in the queue manager, computed from the node table in one spot
//! ([`ShardCore::refresh_node`]):
//!
//! | node table says | flags | queue manager |
//! |---|---|---|
//! | owned, confirmed | none | up |
//! | owned, confirmed | down or drained | unavailable (running jobs continue; down ends them) |
//! | owned, confirmed, a job on it outlived its allocation | — | unavailable until that job's end is reported |
//! | incoming, expected free at t | none | up, *held* until t (reservable from t, not allocatable) |
//! | anything else (outgoing, incoming without a time, not owned) | — | unavailable |
//!
//! A hold whose time passes before the `Acquire` is extended ([`INCOMING_HOLD_EXTEND_MS`]
//! at a time) in [`ShardCore::tick`]. [`ShardCore::apply_effects`] is how every change of
//! the node table reaches the journal, the transition log and the queue manager.

use std::collections::BTreeSet;

use shardsched_resource::{Status, VertexId};
use shardsched_wire::Fluid;
use shardsched_wire::msg::Generation;

use super::ShardCore;
use super::exec::EndAs;
use super::moving::{Transition, TransitionKind};
use crate::assign::MS_PER_S;
use crate::journal::{JournalRecord, NodeRecord};
use crate::limits::INCOMING_HOLD_EXTEND_MS;
use crate::nodes::{Effect, Flag};

impl ShardCore {
    /// The cluster nodes up here (owned and confirmed, flags aside), with their generations.
    pub(super) fn up_nodes(&self) -> impl Iterator<Item = (&str, Generation)> {
        self.nodes
            .up_nodes()
            .filter(|(n, _)| self.cluster.vertices.contains_key(*n))
    }

    /// The cluster nodes held in the queue manager for an incoming move, with when their
    /// hold should end (ms) and their vertices.
    pub(super) fn incoming_holds(&self) -> impl Iterator<Item = (&str, u64, VertexId)> {
        self.nodes.incoming_entries().filter_map(|(name, e)| {
            let at = e.incoming_hold_ms()?;
            let &v = self.cluster.vertices.get(name)?;
            Some((name, at, v))
        })
    }

    /// Until when (ms) the queue manager should hold node `name` for an incoming move: its
    /// expected free time, unless flagged, or still running jobs of ours (the hold is placed
    /// once they are gone).
    pub(super) fn wanted_hold_ms(&self, name: &str) -> Option<u64> {
        let at = self.nodes.get(name)?.incoming_hold_ms()?;
        (self.jobs.on(name) == 0).then_some(at)
    }

    /// A running job left `nodes`: they are counted off, and one it leaves free that an
    /// incoming move waits for is held now.
    pub(super) fn job_left(&mut self, nodes: &[String]) {
        self.jobs.uncount_on(nodes);
        for node in nodes {
            if self.wanted_hold_ms(node).is_some() {
                self.refresh_node(node, "job-end");
            }
        }
    }

    /// Whether the queue manager should let jobs use node `name` (see the module
    /// documentation): up and unflagged, or held for an incoming move.
    pub(super) fn placed_up(&self, name: &str) -> bool {
        self.allocatable(name) || self.wanted_hold_ms(name).is_some()
    }

    /// Whether new work may start on node `name`: schedulable in the node table, and no job
    /// on it still running past its allocation's span.
    fn allocatable(&self, name: &str) -> bool {
        self.nodes.is_schedulable(name) && !self.jobs.completing.contains(name)
    }

    /// Exec and agents executors: the queue manager frees a job's nodes in its calendar at
    /// the end of its allocation's span, but the job's processes end when their supervisor
    /// has killed them (its time limit counts from its own start, later than the span's, and
    /// a kill takes a grace), and the core hears of it later still. Until it does, the
    /// job's nodes are *completing*: unavailable to new work, so that two jobs never run
    /// processes on a node at once. Called by the tick before it schedules.
    pub(super) fn refresh_completing(&mut self) {
        if !self.is_exec() {
            return;
        }
        let mut completing = BTreeSet::new();
        for id in self.qm.running_past(self.now_s()) {
            if let Some(job) = self.jobs.table.get(Fluid(id)) {
                completing.extend(job.nodes.iter().cloned());
            }
        }
        if completing == self.jobs.completing {
            return;
        }
        let changed: Vec<String> = completing
            .symmetric_difference(&self.jobs.completing)
            .cloned()
            .collect();
        self.jobs.completing = completing;
        for node in changed {
            self.refresh_node(&node, "completing");
        }
    }

    /// The coordinator handed the queue `names`. Its graph holds its definition and what it
    /// had been handed when it was built; a node outside it (the definition changed and the
    /// reconfiguration's restart has not happened yet) is logged, and used once the shard
    /// restarts: the node table keeps it, and the new graph holds every node the table does.
    pub(super) fn warn_outside_graph<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        for name in names {
            if !self.cluster.vertices.contains_key(name) {
                tracing::warn!(node = %name, "handed a node outside this shard's graph; it is used once the shard restarts");
            }
        }
    }

    /// Incoming nodes whose hold ended before their `Acquire` are held further on.
    pub(super) fn extend_holds(&mut self) {
        let now_s = self.now_s();
        let due: Vec<String> = self
            .incoming_holds()
            .filter(|&(_, _, v)| self.qm.hold_end(v).is_none_or(|end| end <= now_s))
            .map(|(n, _, _)| n.to_owned())
            .collect();
        for name in due {
            self.refresh_node(&name, "incoming");
        }
    }

    /// When the next hold ends, ms (the core must wake then to extend it).
    pub(super) fn next_hold_end_ms(&self) -> Option<u64> {
        self.incoming_holds()
            .filter_map(|(_, _, v)| self.qm.hold_end(v))
            .min()
            .map(|s| u64::try_from(s).unwrap_or(0).saturating_mul(MS_PER_S))
    }

    /// Applies what the node table decided: entries to the journal, transitions to the log
    /// (`releasing`: a node taken down is `released` too), nodes to their place in the
    /// queue manager, jobs cancelled past a move's deadline.
    pub(super) fn apply_effects(
        &mut self,
        effects: Vec<Effect>,
        why: &'static str,
        releasing: bool,
    ) {
        for effect in effects {
            match effect {
                Effect::Persist(name, _) => {
                    // The entry as it is now: effects of one command may be applied after
                    // a later change of the same node (an Acquire's flags), and the last
                    // record written must be the table's.
                    let entry = NodeRecord::from(&self.nodes.entry(&name));
                    self.journal(JournalRecord::Node(name, entry));
                }
                Effect::WentUp { node, generation } => {
                    self.refresh_node(&node, why);
                    self.transition(node, TransitionKind::Up, generation, why);
                }
                Effect::WentDown { node, generation } => {
                    self.refresh_node(&node, why);
                    self.transition(node, TransitionKind::Down, generation, why);
                }
                Effect::TakeDown(name) => {
                    self.refresh_node(&name, why);
                    if releasing {
                        let generation = self.nodes.entry(&name).generation;
                        self.transition(name, TransitionKind::Released, generation, why);
                    }
                }
                Effect::StopAllocating(name)
                | Effect::BringUp { node: name, .. }
                | Effect::Reservable { node: name, .. } => self.refresh_node(&name, why),
                Effect::CancelJobs { node, jobs } => {
                    for id in jobs {
                        if self.jobs.running.contains_key(&id) {
                            let reason =
                                format!("cancelled: a move's deadline passed (node {node})");
                            self.end_running(id, EndAs::Cancelled(reason));
                        }
                    }
                }
            }
        }
        self.status_version += 1;
    }

    /// Sets or clears `flag` on node `name` (see `NodeTable::set_flag`) and puts the node
    /// where it now belongs; `why` names the request. Returns whether the flag changed.
    pub(super) fn flag_node(
        &mut self,
        name: &str,
        flag: Flag,
        value: Option<String>,
        why: &'static str,
    ) -> bool {
        let effects = self.nodes.set_flag(name, flag, value);
        let changed = !effects.is_empty();
        self.apply_effects(effects, why, false);
        self.refresh_node(name, why);
        changed
    }

    /// Queues a line of the transition log (only for nodes of the cluster).
    fn transition(
        &mut self,
        node: String,
        kind: TransitionKind,
        generation: Generation,
        why: &'static str,
    ) {
        if self.cluster.vertices.contains_key(&node) {
            self.outbox.transitions.push(Transition {
                node,
                kind,
                generation,
                why,
            });
        }
    }

    /// Puts node `name` where the module documentation's table says.
    pub(super) fn refresh_node(&mut self, name: &str, why: &'static str) {
        let Some(&v) = self.cluster.vertices.get(name) else {
            return;
        };
        let result = match self.wanted_hold_ms(name) {
            Some(t) => {
                let now_s = self.now_s();
                let wanted = i64::try_from(t.div_ceil(MS_PER_S)).unwrap_or(i64::MAX);
                let extend = i64::try_from(INCOMING_HOLD_EXTEND_MS / MS_PER_S).unwrap_or(1);
                let until = if wanted > now_s {
                    wanted
                } else {
                    now_s.saturating_add(extend)
                };
                // Kept when it already ends at the expected time, or (that time passed)
                // later than now; set again otherwise.
                match self.qm.hold_end(v) {
                    Some(end) if end > now_s && (end == wanted || wanted <= now_s) => Ok(()),
                    _ => self.qm.hold_node(v, now_s, until),
                }
            }
            None => {
                let schedulable = self.allocatable(name);
                self.qm
                    .release_hold(v)
                    .and_then(|_| self.qm.set_availability(v, schedulable))
            }
        };
        match result {
            Ok(()) => debug_assert_eq!(
                self.qm.matcher().graph.status(v) == Status::Up,
                self.placed_up(name),
                "{name} ({why}): the queue manager's availability is not the node table's"
            ),
            Err(e) => {
                tracing::error!(node = %name, error = %e, "cannot update the node in the queue manager")
            }
        }
        self.status_version += 1;
    }
}
