//! The checker: the invariants of docs/ARCHITECTURE.md (I1–I5) and each core's own
//! `invariants()`, after every step; liveness once the system is healed.
//!
//! It looks at the processes as a client or an operator could: what each running shard's
//! core has up and running, what each crashed shard's journal holds (its jobs keep their
//! nodes while it is down: with the exec executor they run on), what the coordinator's
//! journal has made durable. Its ledger of what clients and admins did (acknowledged jobs,
//! cancels, nodes marked down, moves and their deadlines) says which endings are allowed.
//!
//! | invariant | checked as |
//! |---|---|
//! | I1 | no node is up in two shards |
//! | I2 | no node is up in a shard while another shard's running job holds it |
//! | I3 | no shard has seen a generation the coordinator's journal does not hold (fencing); the coordinator core's `invariants()`; after healing, every move finished and every node up in exactly its owner, nowhere half-moved, and a move past its deadline holds no job of its donor on its outgoing nodes |
//! | I4 | no node runs two jobs in one shard (jobs take whole nodes); every acknowledged job is in its shard (core or journal) until it ended, and one key is one job; a job whose cancel was acknowledged never completes nor runs again; no queue is removed (`queue remove`, `reload`) while an acknowledged job of it has not ended; each shard core's `invariants()`, and each restart's restore |
//! | I6 | a user's running jobs over every shard never pass their `max_running` (docs/POLICIES.md, "Limits"), counted from each shard's core or journal |
//! | I7 | the coordinator's fair-share usage never passes what the distinct usage batches delivered to it carried: each batch counted once (`check_usage.rs`) |
//! | I5 | a running job keeps its start and nodes until it ends, and ends only at its planned end, by its owner's cancel, by a node an admin marked down, or by a move's deadline on one of its nodes |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use shardsched_shard_core::journal::Restored;
use shardsched_shard_core::nodes::Holding;
use shardsched_shard_core::{Reason, ShardCore};
use shardsched_wire::msg::{JobId, JobState};

/// How a shard core words the end of a job cancelled by a move's deadline, up to the node.
const DEADLINE_REASON: &str = "cancelled: a move's deadline passed (node ";

/// Which invariant of docs/ARCHITECTURE.md a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Invariant {
    /// A node is up in at most one shard at any instant.
    I1,
    /// No node is up in the recipient while the donor still has an allocation on it.
    I2,
    /// No node is ever lost: each ends up owned by exactly one queue or unassigned.
    I3,
    /// No double allocation inside a shard; no accepted job is lost.
    I4,
    /// Running jobs are never disturbed (only a move's deadline ends them).
    I5,
    /// A user's running jobs over every shard never pass their `max_running` limit
    /// (docs/POLICIES.md, "Limits").
    I6,
    /// A fair-share usage batch is counted once (docs/POLICIES.md, "Fair-share").
    I7,
}

/// A broken invariant: which, and what was seen (at virtual time `at_ms`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Violation {
    /// The invariant.
    pub invariant: Invariant,
    /// What was seen.
    pub message: String,
    /// Virtual time, ms since the seed's start.
    pub at_ms: u64,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} at t+{} ms: {}",
            self.invariant, self.at_ms, self.message
        )
    }
}

/// A violation of `invariant` (its time is filled in by the world).
pub(crate) fn broken(invariant: Invariant, message: String) -> Violation {
    Violation {
        invariant,
        message,
        at_ms: 0,
    }
}

/// Which process's code runs now: a panic there is a violation of its invariants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Running {
    /// The coordinator's core (I3).
    Coordinator,
    /// A node agent's core (I1: its invariants keep one queue's work on the node).
    Agent,
    /// A shard's core (I4).
    Shard,
}

thread_local! {
    static RUNNING: std::cell::Cell<Running> = const { std::cell::Cell::new(Running::Shard) };
}

/// Marks whose code runs from now on (see [`panicked`]).
pub(crate) fn running(who: Running) {
    RUNNING.with(|r| r.set(who));
}

/// The violation a panic stands for: a core's assertion (debug builds check their
/// invariants at each transition) breaks the invariants of that core.
pub(crate) fn panicked(panic: &(dyn std::any::Any + Send)) -> Violation {
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned());
    let (invariant, whose) = match RUNNING.with(std::cell::Cell::get) {
        Running::Coordinator => (Invariant::I3, "the coordinator"),
        Running::Shard => (Invariant::I4, "a shard"),
        Running::Agent => (Invariant::I1, "a node agent"),
    };
    broken(invariant, format!("{whose} panicked: {message}"))
}

/// One shard as the checker sees it.
pub(crate) enum View<'a> {
    /// Running, with its core.
    Live(&'a ShardCore),
    /// Down (or not registered yet): what its journal holds.
    Journal(Restored),
}

/// A job as a view shows it.
struct JobObs {
    id: JobId,
    owner: String,
    state: JobState,
    start_ms: Option<u64>,
    /// When it was planned to end: its allocation's span's end.
    planned_end_ms: Option<u64>,
    end_ms: Option<u64>,
    nodes: Vec<String>,
    reason: String,
}

/// What the checker remembers of a job.
#[derive(Debug, Default)]
struct Seen {
    /// Start and nodes, once seen running (or started).
    running: Option<(u64, Vec<String>)>,
    /// Seen ended.
    ended: bool,
    /// Seen completed (ran to its end).
    completed: bool,
}

/// The ledger and the checks (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Checker {
    /// Every job seen in a shard.
    jobs: BTreeMap<JobId, Seen>,
    /// Jobs acknowledged to their submitter, with their queue.
    acked: BTreeMap<JobId, String>,
    /// Jobs a client asked to cancel.
    cancels: BTreeSet<JobId>,
    /// Jobs whose cancel a shard answered `Cancelled`: they end cancelled (or as an earlier
    /// kill of theirs said: failed, cancelled by a move's deadline), never completed.
    cancels_acked: BTreeSet<JobId>,
    /// Nodes an admin asked to mark down.
    downs: BTreeSet<String>,
    /// Moves seen at the coordinator: nodes and deadline.
    moves: BTreeMap<u64, (BTreeSet<String>, Option<u64>)>,
    /// Jobs seen ended by a move's deadline.
    pub(crate) deadline_cancels: u64,
    /// What the last check of each shard found, by queue.
    shards: BTreeMap<String, Summary>,
    /// Queues removed from the coordinator's table (`queue remove`, `reload`) whose shard
    /// was stopped: none of their acknowledged jobs may still be pending or running.
    removed: BTreeSet<String>,
    /// The shards run jobs through node agents: a job's end is known when its agents
    /// report it, after its allocation's span may have passed (see [`Checker::shard`]).
    pub(crate) agents: bool,
    /// The seed's configuration sets per-user limits (`setup::MAX_RUNNING_*`) and
    /// fair-share.
    pub(crate) limits: bool,
    /// Fair-share's usage batches delivered to the coordinator (I7).
    pub(crate) usage: crate::check_usage::UsageDelivered,
}

/// What the checks across shards need of one shard, as last checked.
#[derive(Debug, Default)]
struct Summary {
    /// The shard's version then (see [`Checker::stale`]).
    version: u64,
    /// Nodes up in it.
    up: Vec<String>,
    /// Nodes its running jobs hold.
    holding: Vec<String>,
    /// Its running jobs, by owner.
    running_by_user: BTreeMap<String, u64>,
    /// The allowance (jobs) its journal holds, by user: what it would hold after a crash.
    held_by_user: BTreeMap<String, u64>,
}

impl Checker {
    /// A submit was acknowledged with `id` by `queue`'s shard.
    pub(crate) fn acked(&mut self, id: JobId, queue: &str) {
        self.acked.insert(id, queue.to_owned());
    }

    /// The jobs acknowledged so far and not seen ended, with their queue.
    pub(crate) fn live_acked(&self) -> Vec<(JobId, String)> {
        self.acked
            .iter()
            .filter(|(id, _)| !self.jobs.get(id).is_some_and(|s| s.ended))
            .map(|(id, q)| (*id, q.clone()))
            .collect()
    }

    /// A client asked to cancel `id`.
    pub(crate) fn cancel_asked(&mut self, id: JobId) {
        self.cancels.insert(id);
    }

    /// A shard answered that `id` is cancelled: it must not complete (nor have completed:
    /// an answer may arrive after the end it contradicts was seen).
    pub(crate) fn cancel_acked(&mut self, id: JobId) -> Result<(), Violation> {
        self.cancels_acked.insert(id);
        if self.jobs.get(&id).is_some_and(|s| s.completed) {
            return Err(broken(
                Invariant::I4,
                format!("job {id}'s cancel was acknowledged, but it completed"),
            ));
        }
        Ok(())
    }

    /// An admin asked to mark `node` down.
    pub(crate) fn down_asked(&mut self, node: &str) {
        self.downs.insert(node.to_owned());
    }

    /// `queue`'s shard was stopped: the coordinator's table no longer has it.
    pub(crate) fn queue_removed(&mut self, queue: &str) {
        self.removed.insert(queue.to_owned());
    }

    /// `queue` has a shard again (added back under the same name).
    pub(crate) fn queue_added(&mut self, queue: &str) {
        self.removed.remove(queue);
    }

    /// Whether move `id` was seen already.
    pub(crate) fn knows_move(&self, id: u64) -> bool {
        self.moves.contains_key(&id)
    }

    /// A move the coordinator has: its nodes and deadline.
    pub(crate) fn move_seen(&mut self, id: u64, nodes: BTreeSet<String>, deadline: Option<u64>) {
        self.moves.entry(id).or_insert((nodes, deadline));
    }

    /// Whether `queue`'s shard must be checked again: its version is not the one last
    /// checked (a shard that ran no batch, started nor crashed has not changed).
    pub(crate) fn stale(&self, queue: &str, version: u64) -> bool {
        self.shards.get(queue).is_none_or(|s| s.version != version)
    }

    /// Every check of an instant: `changed` holds the views of the shards that changed
    /// (by queue, with their version: see [`Checker::stale`]); the others are as last
    /// checked. `durable_generation` is the generation of a node the coordinator's journal
    /// holds (it only grows, so an unchanged shard stays within it).
    pub(crate) fn instant(
        &mut self,
        changed: &BTreeMap<String, (u64, View<'_>, BTreeMap<String, u64>)>,
        durable_generation: &dyn Fn(&str) -> u64,
    ) -> Result<(), Violation> {
        for (queue, (version, view, held)) in changed {
            let summary = self.shard(queue, view, durable_generation)?;
            self.shards.insert(
                queue.clone(),
                Summary {
                    version: *version,
                    held_by_user: held.clone(),
                    ..summary
                },
            );
            for (id, _) in self.acked.iter().filter(|(_, q)| *q == queue) {
                let seen_ended = self.jobs.get(id).is_some_and(|s| s.ended);
                if !seen_ended && !has_job(view, *id) {
                    return Err(broken(
                        Invariant::I4,
                        format!("job {id} was acknowledged by {queue} but {queue} has lost it"),
                    ));
                }
                if !seen_ended && self.removed.contains(queue) {
                    return Err(broken(
                        Invariant::I4,
                        format!(
                            "queue {queue} was removed while its acknowledged job {id} had \
                             not ended"
                        ),
                    ));
                }
            }
        }
        if self.limits {
            let all = self.shards.iter();
            let running = sum_by_user(all, |s| &s.running_by_user);
            within_max_running(running, |n, at| format!("runs {n} jobs ({at})"))?;
            // What the shards' journals hold (what they would admit by after a crash): never
            // past the limit either (a removed queue's shard is gone, with its allowance).
            let kept = self
                .shards
                .iter()
                .filter(|(q, _)| !self.removed.contains(*q));
            let held = sum_by_user(kept, |s| &s.held_by_user);
            within_max_running(held, |n, at| {
                format!("has {n} of allowance journaled by the shards ({at})")
            })?;
        }
        let mut up_in: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut held_by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (queue, summary) in &self.shards {
            for node in &summary.up {
                up_in.entry(node).or_default().push(queue);
            }
            for node in &summary.holding {
                held_by.entry(node).or_default().push(queue);
            }
        }
        for (node, queues) in &up_in {
            if queues.len() > 1 {
                return Err(broken(
                    Invariant::I1,
                    format!("{node} is up in {}", queues.join(" and ")),
                ));
            }
            let holders = held_by.get(node).map(Vec::as_slice).unwrap_or_default();
            if let Some(other) = holders.iter().find(|h| **h != queues[0]) {
                return Err(broken(
                    Invariant::I2,
                    format!(
                        "{node} is up in {} while {other} still runs a job on it",
                        queues[0]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checks of one shard's view, and what the checks across shards need of it.
    fn shard(
        &mut self,
        queue: &str,
        view: &View<'_>,
        durable_generation: &dyn Fn(&str) -> u64,
    ) -> Result<Summary, Violation> {
        let mut summary = Summary::default();
        if let View::Live(core) = view {
            core.invariants()
                .map_err(|v| broken(Invariant::I4, format!("shard {queue}'s core: {}", v.0)))?;
            summary.up = core.nodes().up_nodes().map(|(n, _)| n.to_owned()).collect();
        }
        for (node, generation) in generations(view) {
            let durable = durable_generation(node);
            if generation > durable {
                return Err(broken(
                    Invariant::I3,
                    format!(
                        "{queue} has seen {node} at generation {generation}, but the \
                         coordinator's journal holds only {durable}: a restarted \
                         coordinator could hand that generation out again"
                    ),
                ));
            }
        }
        let mut running_on: BTreeMap<String, JobId> = BTreeMap::new();
        for job in observe(view, &self.jobs, self.agents) {
            if job.state == JobState::Running {
                *summary
                    .running_by_user
                    .entry(job.owner.clone())
                    .or_default() += 1;
                // With node agents too: a job that outlives its allocation's span keeps its
                // nodes (completing) until its agents report its end.
                for node in &job.nodes {
                    if let Some(other) = running_on.insert(node.clone(), job.id) {
                        return Err(broken(
                            Invariant::I4,
                            format!("{node} runs jobs {other} and {} in {queue}", job.id),
                        ));
                    }
                }
            }
            self.job(queue, job)?;
        }
        summary.holding = running_on.into_keys().collect();
        Ok(summary)
    }

    /// What one observation of a job must agree with.
    fn job(&mut self, queue: &str, job: JobObs) -> Result<(), Violation> {
        let seen = self.jobs.entry(job.id).or_default();
        let disturbed = |what: String| {
            Err(broken(
                Invariant::I5,
                format!("job {} in {queue} {what}", job.id),
            ))
        };
        if seen.ended {
            if job.state.is_active() {
                return Err(broken(
                    Invariant::I4,
                    format!(
                        "job {} in {queue} ended, and is {:?} again",
                        job.id, job.state
                    ),
                ));
            }
            return Ok(());
        }
        if let (Some((start, nodes)), Some(now_start)) = (&seen.running, job.start_ms)
            && (*start != now_start || *nodes != job.nodes)
        {
            return disturbed(format!(
                "ran from {start} on {nodes:?}, and now from {now_start} on {:?}",
                job.nodes
            ));
        }
        match job.state {
            JobState::Pending if seen.running.is_some() => {
                disturbed("was running and is pending again".to_owned())
            }
            JobState::Pending => Ok(()),
            JobState::Running => {
                if let Some(start) = job.start_ms {
                    seen.running.get_or_insert((start, job.nodes.clone()));
                }
                Ok(())
            }
            JobState::Completed if self.cancels_acked.contains(&job.id) => Err(broken(
                Invariant::I4,
                format!(
                    "job {} in {queue} completed after its cancel was acknowledged",
                    job.id
                ),
            )),
            JobState::Completed | JobState::Failed | JobState::Cancelled => {
                seen.ended = true;
                seen.completed = job.state == JobState::Completed;
                if let Some(start) = job.start_ms {
                    seen.running.get_or_insert((start, job.nodes.clone()));
                }
                if job.reason.starts_with(DEADLINE_REASON) {
                    self.deadline_cancels += 1;
                }
                self.ending_allowed(&job).map_err(|why| {
                    broken(Invariant::I5, format!("job {} in {queue} {why}", job.id))
                })
            }
        }
    }

    /// Whether a job's end is one the module documentation allows.
    fn ending_allowed(&self, job: &JobObs) -> Result<(), String> {
        let end = job.end_ms.unwrap_or(0);
        let reason = job.reason.as_str();
        let on_node = |prefix: &str, suffix_end: char| -> Option<String> {
            let rest = reason.strip_prefix(prefix)?;
            Some(rest.split(suffix_end).next().unwrap_or(rest).to_owned())
        };
        match job.state {
            JobState::Completed => match job.planned_end_ms {
                Some(planned) if end < planned => Err(format!(
                    "completed at {end}, before its planned end {planned}"
                )),
                _ => Ok(()),
            },
            // With node agents, a job's tasks an agent killed for its shard's silence (past
            // the lease), ended so by its supervisor.
            JobState::Cancelled
                if self.agents && reason.starts_with("cancelled: lease expired") =>
            {
                Ok(())
            }
            // With node agents too, the cancel's own reason: a shard restarted since it
            // asked for the kill asks again from its journal and keeps the reason.
            JobState::Cancelled if reason.starts_with("cancelled by ") => {
                if self.cancels.contains(&job.id) {
                    Ok(())
                } else {
                    Err(format!("was {reason:?}, but nobody asked"))
                }
            }
            JobState::Cancelled => {
                let Some(node) = on_node(DEADLINE_REASON, ')') else {
                    return Err(format!("was cancelled: {reason:?}"));
                };
                let by_a_deadline = self.moves.values().any(|(nodes, deadline)| {
                    nodes.contains(&node) && deadline.is_some_and(|d| d <= end)
                });
                if by_a_deadline && job.nodes.contains(&node) {
                    Ok(())
                } else {
                    Err(format!(
                        "was cancelled at {end} for a move's deadline on {node}, which no move \
                         with a passed deadline has (its nodes: {:?})",
                        job.nodes
                    ))
                }
            }
            // A pending job its queue can no longer run (its definition changed).
            JobState::Failed if job.start_ms.is_none() && reason.starts_with("denied") => Ok(()),
            // With node agents: a job whose launch an agent refused past the retries, or
            // whose agent was unreachable past its lease (it killed the tasks itself);
            // what ran where is checked by processes (`check_tasks`).
            JobState::Failed if self.agents && reason.contains("agent") => Ok(()),
            JobState::Failed => {
                let node = on_node("node ", ' ').unwrap_or_default();
                if reason.starts_with("node ")
                    && reason.contains(" went down")
                    && self.downs.contains(&node)
                    && job.nodes.contains(&node)
                {
                    Ok(())
                } else {
                    Err(format!("failed: {reason:?} (its nodes: {:?})", job.nodes))
                }
            }
            JobState::Pending | JobState::Running => Ok(()),
        }
    }
}

/// A user's `max_running` as the simulator's configuration sets it.
fn max_running(user: &str) -> u64 {
    match user {
        "bob" => crate::setup::MAX_RUNNING_BOB,
        _ => crate::setup::MAX_RUNNING_EACH,
    }
}

/// The jobs a view shows; a job `seen` ended is shown by its state alone (all that can
/// still go wrong with it is coming back to life).
fn observe(view: &View<'_>, seen: &BTreeMap<JobId, Seen>, agents: bool) -> Vec<JobObs> {
    let ended = |id: JobId| seen.get(&id).is_some_and(|s| s.ended);
    let bare = |id, state| JobObs {
        id,
        owner: String::new(),
        state,
        start_ms: None,
        planned_end_ms: None,
        end_ms: None,
        nodes: Vec::new(),
        reason: String::new(),
    };
    match view {
        View::Live(core) => core
            .jobs()
            .map(|j| {
                if ended(j.id) {
                    bare(j.id, j.state)
                } else {
                    JobObs {
                        id: j.id,
                        owner: j.owner.clone(),
                        state: j.state,
                        start_ms: j.start_ms,
                        // The span the queue manager planned: from the second it started in.
                        planned_end_ms: j
                            .start_ms
                            .map(|s| (s / 1000 * 1000).saturating_add(j.duration_ms)),
                        end_ms: j.end_ms,
                        nodes: sorted(j.nodes.clone()),
                        reason: match &j.reason {
                            Reason::Text(text) => text.clone(),
                            Reason::None | Reason::Waiting(_) | Reason::Held(_) => String::new(),
                        },
                    }
                }
            })
            .collect(),
        View::Journal(restored) => restored
            .jobs
            .iter()
            .map(|j| {
                let started = j.started.as_ref();
                let state = match (&j.ended, started) {
                    (Some(end), _) => JobState::from(end.state),
                    (None, Some(_)) => JobState::Running,
                    (None, None) => JobState::Pending,
                };
                let id = shardsched_wire::Fluid(j.id);
                if ended(id) {
                    return bare(id, state);
                }
                JobObs {
                    id,
                    owner: j.accepted.owner.clone(),
                    state,
                    start_ms: started.map(|s| s.start_ms),
                    // An agents job's journaled end is its start plus its duration; its
                    // span, as the queue manager planned it, starts in its start's second.
                    planned_end_ms: started.map(|s| match agents {
                        true => s.sim_end_ms - s.start_ms + s.start_ms / 1000 * 1000,
                        false => s.sim_end_ms,
                    }),
                    end_ms: j.ended.as_ref().map(|e| e.end_ms),
                    nodes: started.map(allocated_nodes).unwrap_or_default(),
                    reason: j
                        .ended
                        .as_ref()
                        .map(|e| e.reason.clone())
                        .unwrap_or_default(),
                }
            })
            .collect(),
    }
}

/// The nodes of a journaled allocation (a node vertex's path ends with its name; the
/// cluster's nodes are all named `node<i>`).
fn allocated_nodes(run: &shardsched_shard_core::journal::StartedJob) -> Vec<String> {
    let nodes = run
        .vertices
        .iter()
        .filter_map(|v| v.path.rsplit('/').next())
        .filter(|last| last.starts_with("node"))
        .map(str::to_owned)
        .collect();
    sorted(nodes)
}

fn sorted(mut nodes: Vec<String>) -> Vec<String> {
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Every node a view has an entry for, with the generation it has seen.
fn generations<'a>(view: &'a View<'_>) -> Box<dyn Iterator<Item = (&'a str, u64)> + 'a> {
    match view {
        View::Live(core) => Box::new(core.nodes().entries().map(|(n, e)| (n, e.generation.0))),
        View::Journal(restored) => Box::new(
            restored
                .nodes
                .iter()
                .map(|(n, r)| (n.as_str(), r.generation)),
        ),
    }
}

/// Each user's total of `count` over `shards`, with where it is.
fn sum_by_user<'a>(
    shards: impl Iterator<Item = (&'a String, &'a Summary)>,
    count: impl Fn(&'a Summary) -> &'a BTreeMap<String, u64>,
) -> BTreeMap<&'a str, (u64, Vec<String>)> {
    let mut totals: BTreeMap<&str, (u64, Vec<String>)> = BTreeMap::new();
    for (queue, summary) in shards {
        for (user, &n) in count(summary).iter().filter(|(_, n)| **n > 0) {
            let entry = totals.entry(user).or_default();
            entry.0 += n;
            entry.1.push(format!("{n} in {queue}"));
        }
    }
    totals
}

/// Every user's total is within their `max_running`; `what` words one that is not (from
/// the total and where it is).
fn within_max_running(
    totals: BTreeMap<&str, (u64, Vec<String>)>,
    what: impl Fn(u64, &str) -> String,
) -> Result<(), Violation> {
    for (user, (n, places)) in totals {
        let limit = max_running(user);
        if n > limit {
            let what = what(n, &places.join(", "));
            return Err(broken(
                Invariant::I6,
                format!("user {user} {what}, past their max_running {limit}"),
            ));
        }
    }
    Ok(())
}

/// Whether a view has job `id`.
fn has_job(view: &View<'_>, id: JobId) -> bool {
    match view {
        View::Live(core) => core.job(id).is_some(),
        View::Journal(restored) => restored.jobs.iter().any(|j| j.accepted.id == id.0),
    }
}

/// The nodes a live shard holds half-moved (outgoing or incoming).
pub(crate) fn unsettled(core: &ShardCore) -> Vec<String> {
    core.nodes()
        .entries()
        .filter(|(_, e)| {
            matches!(
                e.holding,
                Holding::Outgoing { .. } | Holding::Incoming { .. }
            )
        })
        .map(|(n, _)| n.to_owned())
        .collect()
}
