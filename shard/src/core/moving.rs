//! Node moves, drains and dry runs in the core: [`ShardMoves`] decides, this applies.
//!
//! Every coordinator command about a node goes through the move machine, which answers and
//! lists [`Effect`]s; [`ShardCore::apply_effects`] turns them into journal records and
//! scheduler changes, and [`ShardCore::refresh_node`] derives each node's place in the
//! queue manager from the machine's word and the admin flags, in one spot:
//!
//! | machine says | flags | queue manager |
//! |---|---|---|
//! | owned, confirmed | none | up |
//! | owned, confirmed | down or drained | unavailable (running jobs continue; down ends them) |
//! | incoming, expected free at t | none | up, *held* until t (reservable from t, not allocatable) |
//! | anything else (outgoing, incoming without a time, not owned) | — | unavailable |
//!
//! A hold whose time passes before the `Acquire` is extended ([`INCOMING_HOLD_EXTEND_MS`]
//! at a time) in [`ShardCore::tick`]. When an outgoing node's last allocation goes (job
//! end, cancel, kill after a node failure, requeue), [`ShardCore::settle_moves`] releases
//! it: the entry is journaled, a `released` [`Transition`] is queued, and the
//! `Released` report waits in [`ShardCore::take_released`] for the driver, which sends it
//! once the batch is durable.
//!
//! Transitions ([`ShardCore::take_transitions`]) say when a node becomes usable by this
//! shard (`up`: owned and confirmed) or stops being usable (`down`), and when a donor let
//! go of it (`released`); the driver appends them to `transitions.log`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_proto::msg::coord_shard::IncomingNode;
use shardsched_proto::msg::coord_shard::{
    Acquire, CancelJobs, Incoming, Reclaim, Release, Response, Withdraw,
};
use shardsched_proto::msg::shard_coord::Released;
use shardsched_proto::msg::{Generation, JobId, MoveId, NodeFlags, NodeGen};

use super::ShardCore;
use super::exec::EndAs;
use crate::assign::MS_PER_S;
use crate::journal::JournalRecord;
use crate::limits::INCOMING_HOLD_EXTEND_MS;
use crate::moves::{Effect, Holding};

/// What happened to a node, for the transition log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransitionKind {
    /// The shard may allocate on it from now on (logged before it is used).
    Up,
    /// The shard no longer allocates on it (logged after it stopped).
    Down,
    /// The donor's last allocation on the outgoing node is gone (logged before `Released`
    /// is sent).
    Released,
}

impl TransitionKind {
    /// The word in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionKind::Up => "up",
            TransitionKind::Down => "down",
            TransitionKind::Released => "released",
        }
    }
}

/// One line of the transition log, without its timestamp (the driver adds it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The node.
    pub node: String,
    /// Up, down or released.
    pub kind: TransitionKind,
    /// The node's generation in this shard.
    pub generation: Generation,
    /// Why: `acquire`, `release`, `reclaim`, `withdraw`, `assignment`, `restart`, `job-end`.
    pub why: &'static str,
}

impl ShardCore {
    /// The donor's side of a move (see [`crate::moves::ShardMoves::handle_release`]).
    pub fn handle_release(&mut self, now_ms: u64, release: &Release) -> Response {
        self.observe(now_ms);
        let names: Vec<&str> = release.nodes.iter().map(|n| n.node.as_str()).collect();
        let jobs = self.jobs_on(&names);
        let (response, effects) = self
            .moves
            .handle_release(release, &|n: &str| jobs.get(n).cloned().unwrap_or_default());
        self.apply_effects(effects, "release", true);
        response
    }

    /// The recipient learns of nodes coming: reservable from their expected free time.
    pub fn handle_incoming(&mut self, now_ms: u64, incoming: &Incoming) -> Response {
        self.observe(now_ms);
        let (response, effects) = self.moves.handle_incoming(incoming);
        self.apply_effects(effects, "incoming", false);
        response
    }

    /// The recipient gets the nodes: up, with the flags the coordinator gives them.
    pub fn handle_acquire(&mut self, now_ms: u64, acquire: &Acquire) -> Response {
        self.observe(now_ms);
        let nodes: Vec<&str> = acquire.nodes.iter().map(|n| n.node.as_str()).collect();
        let (response, effects) = self.moves.handle_acquire(acquire);
        self.set_flags(&nodes, &acquire.flags);
        self.apply_effects(effects, "acquire", false);
        response
    }

    /// The donor of a cancelled move gets its nodes back.
    pub fn handle_reclaim(&mut self, now_ms: u64, reclaim: &Reclaim) -> Response {
        self.observe(now_ms);
        let (response, effects) = self.moves.handle_reclaim(reclaim);
        self.apply_effects(effects, "reclaim", false);
        response
    }

    /// The recipient of a cancelled move forgets the nodes.
    pub fn handle_withdraw(&mut self, now_ms: u64, withdraw: &Withdraw) -> Response {
        self.observe(now_ms);
        let (response, effects) = self.moves.handle_withdraw(withdraw);
        self.apply_effects(effects, "withdraw", false);
        response
    }

    /// Past a move's deadline: cancel the jobs still holding its outgoing nodes (in exec
    /// mode their processes die before their resources are freed, as for any cancel).
    pub fn handle_cancel_jobs(&mut self, now_ms: u64, cancel: &CancelJobs) -> Response {
        self.observe(now_ms);
        let names: Vec<&str> = cancel.nodes.iter().map(|n| n.node.as_str()).collect();
        let jobs = self.jobs_on(&names);
        let (response, effects) = self
            .moves
            .handle_cancel_jobs(cancel, &|n: &str| jobs.get(n).cloned().unwrap_or_default());
        let why: &'static str = "cancel-jobs";
        self.apply_effects(effects, why, false);
        response
    }

    /// What the coordinator's (re)registration answer says this shard owns and receives.
    /// `flags` (when given) are the coordinator's intent for every node listed: a listed
    /// node they do not name has no flag, so a drain or a failure cleared while this shard
    /// was offline is cleared here too (and one set meanwhile is set). `None` (a test's
    /// [`ShardCore::set_owned`]) leaves the shard's flags alone.
    pub fn apply_assignment(
        &mut self,
        owned: &[NodeGen],
        incoming: &[(MoveId, IncomingNode)],
        flags: Option<&BTreeMap<String, NodeFlags>>,
    ) {
        let known = |n: &str| self.nodes.contains_key(n);
        let owned: Vec<NodeGen> = owned.iter().filter(|n| known(&n.node)).cloned().collect();
        let incoming: Vec<(MoveId, IncomingNode)> = incoming
            .iter()
            .filter(|(_, n)| known(&n.node.node))
            .cloned()
            .collect();
        if let Some(flags) = flags {
            let listed: Vec<String> = owned
                .iter()
                .map(|n| n.node.clone())
                .chain(incoming.iter().map(|(_, n)| n.node.node.clone()))
                .collect();
            let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
            self.set_flags(&listed, flags);
        }
        let effects = self.moves.apply_assignment(&owned, &incoming);
        self.apply_effects(effects, "assignment", false);
    }

    /// The transitions since the last call, oldest first.
    pub fn take_transitions(&mut self) -> Vec<Transition> {
        std::mem::take(&mut self.transitions)
    }

    /// The `Released` reports since the last call, for the coordinator (send once the
    /// batch is durable; repeat until acknowledged: they are idempotent).
    pub fn take_released(&mut self) -> Vec<Released> {
        std::mem::take(&mut self.released)
    }

    /// The move machine, for reads and checks.
    pub fn moves(&self) -> &crate::moves::ShardMoves {
        &self.moves
    }

    /// Outgoing nodes whose last allocation went since the last call are released.
    pub(super) fn settle_moves(&mut self) {
        if self.freed_nodes.is_empty() {
            return;
        }
        let freed: Vec<String> = std::mem::take(&mut self.freed_nodes).into_iter().collect();
        let busy: BTreeSet<String> = freed
            .iter()
            .filter(|n| self.node_jobs.contains_key(*n))
            .cloned()
            .collect();
        let (released, effects) = self.moves.allocations_gone(&freed, &|n: &str| {
            if busy.contains(n) {
                vec![(shardsched_proto::Fluid(0), 0)]
            } else {
                Vec::new()
            }
        });
        self.apply_effects(effects, "job-end", true);
        self.released.extend(released);
    }

    /// After a restart: every outgoing node is looked at once (its jobs may have ended
    /// while the shard was down).
    pub(super) fn settle_all_outgoing(&mut self) {
        let outgoing: Vec<String> = self
            .moves
            .entries()
            .filter(|(_, e)| matches!(e.holding, Holding::Outgoing { .. }))
            .map(|(n, _)| n.to_owned())
            .collect();
        self.freed_nodes.extend(outgoing);
        self.settle_moves();
    }

    /// Incoming nodes whose hold ended before their `Acquire` are held further on.
    pub(super) fn extend_holds(&mut self) {
        let now_s = self.now_s();
        let due: Vec<String> = self
            .incoming_held
            .iter()
            .filter(|(_, v)| self.qm.hold_end(**v).is_none_or(|end| end <= now_s))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            self.refresh_node(&name, "incoming");
        }
    }

    /// When the next hold ends, ms (the core must wake then to extend it).
    pub(super) fn next_hold_end_ms(&self) -> Option<u64> {
        self.incoming_held
            .values()
            .filter_map(|v| self.qm.hold_end(*v))
            .min()
            .map(|s| u64::try_from(s).unwrap_or(0).saturating_mul(MS_PER_S))
    }

    pub(super) fn apply_effects(
        &mut self,
        effects: Vec<Effect>,
        why: &'static str,
        releasing: bool,
    ) {
        for effect in effects {
            match effect {
                Effect::Persist(name, entry) => {
                    if self.options.journal {
                        self.journal.push(JournalRecord::Node(name, entry));
                    }
                }
                Effect::TakeDown(name) => {
                    self.refresh_node(&name, why);
                    if releasing {
                        let generation = self.moves.entry(&name).generation;
                        self.transitions.push(Transition {
                            node: name,
                            kind: TransitionKind::Released,
                            generation,
                            why,
                        });
                    }
                }
                Effect::StopAllocating(name)
                | Effect::BringUp { node: name, .. }
                | Effect::Reservable { node: name, .. } => self.refresh_node(&name, why),
                Effect::CancelJobs { node, jobs } => {
                    for id in jobs {
                        if self.running.contains_key(&id) {
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

    /// Puts node `name` where the module documentation's table says, and queues its
    /// transition if it went up or down.
    pub(super) fn refresh_node(&mut self, name: &str, why: &'static str) {
        let Some(&v) = self.nodes.get(name) else {
            return;
        };
        let entry = self.moves.entry(name);
        let up = self.moves.is_up(name);
        let flagged = self.down.contains_key(name) || self.drained.contains_key(name);
        let hold_until = match entry.holding {
            Holding::Incoming {
                expected_free_ms: Some(t),
                ..
            } if !flagged => Some(t),
            _ => None,
        };
        let result = match hold_until {
            Some(t) => {
                let now_s = self.now_s();
                let wanted = i64::try_from(t.div_ceil(MS_PER_S)).unwrap_or(i64::MAX);
                let extend = i64::try_from(INCOMING_HOLD_EXTEND_MS / MS_PER_S).unwrap_or(1);
                let until = if wanted > now_s {
                    wanted
                } else {
                    now_s.saturating_add(extend)
                };
                self.incoming_held.insert(name.to_owned(), v);
                // Kept when it already ends at the expected time, or (that time passed)
                // later than now; set again otherwise.
                match self.qm.hold_end(v) {
                    Some(end) if end > now_s && (end == wanted || wanted <= now_s) => Ok(()),
                    _ => self.qm.hold_node(v, now_s, until),
                }
            }
            None => {
                self.incoming_held.remove(name);
                self.qm
                    .release_hold(v)
                    .and_then(|_| self.qm.set_availability(v, up && !flagged))
            }
        };
        if let Err(e) = result {
            tracing::error!(queue = %self.queue, node = %name, error = %e, "cannot update the node in the queue manager");
        }
        let was_up = self.owned.contains_key(name);
        if up {
            self.owned.insert(name.to_owned(), entry.generation);
        } else {
            self.owned.remove(name);
        }
        if up != was_up {
            self.owned_changed = true;
            self.transitions.push(Transition {
                node: name.to_owned(),
                kind: if up {
                    TransitionKind::Up
                } else {
                    TransitionKind::Down
                },
                generation: entry.generation,
                why,
            });
        }
        self.status_version += 1;
    }

    /// The coordinator's flags for `nodes` replace the shard's own: a node `flags` does not
    /// name has none (the coordinator's flags are the intent, both ways).
    fn set_flags(&mut self, nodes: &[&str], flags: &BTreeMap<String, NodeFlags>) {
        let (mut down_changed, mut drained_changed) = (false, false);
        for &name in nodes {
            let f = flags.get(name).cloned().unwrap_or_default();
            if self.down.get(name) != f.down.as_ref() {
                down_changed = true;
                match &f.down {
                    Some(reason) => {
                        self.down.insert(name.to_owned(), reason.clone());
                    }
                    None => {
                        self.down.remove(name);
                    }
                }
                let effects = self.moves.set_down(name, f.down.is_some());
                self.apply_effects(effects, "assignment", false);
                if f.down.is_some() {
                    self.end_jobs_on_down_node(name);
                }
            }
            if self.drained.get(name) != f.drained.as_ref() {
                drained_changed = true;
                match &f.drained {
                    Some(reason) => {
                        self.drained.insert(name.to_owned(), reason.clone());
                    }
                    None => {
                        self.drained.remove(name);
                    }
                }
                let effects = self.moves.set_drained(name, f.drained.is_some());
                self.apply_effects(effects, "assignment", false);
            }
        }
        if self.options.journal && down_changed {
            self.journal
                .push(JournalRecord::Down(flag_list(&self.down)));
        }
        if self.options.journal && drained_changed {
            self.journal
                .push(JournalRecord::Drained(flag_list(&self.drained)));
        }
    }

    /// Running jobs holding each of `names`, with their planned ends (ms): one pass over
    /// the running jobs, whatever the number of nodes asked about.
    ///
    /// A planned end is the job's start plus its duration: the timeline the queue manager
    /// reserves on, here and in the recipient of a move. (Under `--time-scale` a sim job
    /// ends earlier, as a real job may end before its time limit; the node is released
    /// then.)
    pub(super) fn jobs_on(&self, names: &[&str]) -> HashMap<String, Vec<(JobId, u64)>> {
        let wanted: BTreeSet<&str> = names.iter().copied().collect();
        let mut out: HashMap<String, Vec<(JobId, u64)>> = HashMap::new();
        if wanted.iter().all(|n| !self.node_jobs.contains_key(*n)) {
            return out;
        }
        let mut running: Vec<&JobId> = self.running.keys().collect();
        running.sort_unstable();
        for &id in running {
            let Some(job) = self.table.get(id) else {
                continue;
            };
            let end = match (job.start_ms, job.duration_ms) {
                (Some(start), d) if d > 0 => start.saturating_add(d),
                // Unlimited, or not started (cannot be: it runs).
                _ => u64::MAX,
            };
            for node in &job.nodes {
                if wanted.contains(node.as_str()) {
                    out.entry(node.clone()).or_default().push((id, end));
                }
            }
        }
        out
    }
}

/// Flags as the journal keeps them.
pub(super) fn flag_list(flags: &BTreeMap<String, String>) -> Vec<(String, String)> {
    flags.iter().map(|(n, r)| (n.clone(), r.clone())).collect()
}
