//! Job dependencies (docs/POLICIES.md): a pending job with `after`, `afterok`,
//! `afternotok`, `afterany` or `singleton` conditions is held out of the queue manager's
//! order ([`Hold::Dependency`], decided with the other holds in `ShardCore::hold_of`) until
//! every condition is met.
//!
//! A condition is settled by a [`Fact`] about its target job, and facts are final, so
//! settling is idempotent: the same fact twice, or facts out of order, change nothing more.
//! Targets in this queue are read from the job table at every tick; targets elsewhere (or
//! ended and forgotten here) are what [`ShardCore::dependency_questions`] lists — the
//! status report carries them to the coordinator — and their facts come back as the
//! coordinator's `Facts` command ([`ShardCore::handle_job_facts`]). Nothing about a
//! dependency is journaled: it is in the jobspec, so a restored pending job gets its
//! conditions back unsettled and asks again (the answers are the same facts).
//!
//! A condition that can never be met leaves the job pending, saying why, or cancels it
//! under `dependency-policy = cancel`.

use std::collections::{BTreeSet, HashMap};

use shardsched_jobspec::{DependencyPolicy, Jobspec, Scheme};
use shardsched_wire::limits::DEPENDENCY_TARGETS_PER_ASK_MAX;
use shardsched_wire::msg::deps::{Fact, JobFact};
use shardsched_wire::msg::{JobId, JobState, Refusal, RefusalCode};

use super::ShardCore;
use crate::job::{Hold, JobRecord, Never};

/// A pending job's dependencies, while any is not met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Waiting {
    conditions: Vec<Condition>,
    policy: DependencyPolicy,
}

/// One condition and how far it is settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Condition {
    scheme: Scheme,
    /// The job it names (`None`: `singleton`).
    target: Option<JobId>,
    state: Settled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    Open,
    Met,
    Never(Never),
}

/// What `fact` about its target makes of a condition of `scheme` (`Open`: not yet).
fn evaluate(scheme: Scheme, fact: Fact) -> Settled {
    use JobState::{Cancelled, Completed, Failed};
    match (scheme, fact) {
        (_, Fact::NotFound) => Settled::Never(Never::NotFound),
        (_, Fact::NoQueue) => Settled::Never(Never::NoQueue),
        (_, Fact::Unknown | Fact::Pending) => Settled::Open,
        (Scheme::After, Fact::Running | Fact::Ended { started: true, .. }) => Settled::Met,
        (Scheme::After, Fact::Ended { started: false, .. }) => Settled::Never(Never::NotStarted),
        (_, Fact::Running) => Settled::Open,
        (Scheme::AfterAny, Fact::Ended { .. }) => Settled::Met,
        (Scheme::AfterOk, Fact::Ended { state, .. }) => match state {
            Completed => Settled::Met,
            Cancelled => Settled::Never(Never::Cancelled),
            _ => Settled::Never(Never::Failed),
        },
        (Scheme::AfterNotOk, Fact::Ended { state, .. }) => match state {
            Failed | Cancelled => Settled::Met,
            _ => Settled::Never(Never::Completed),
        },
        (Scheme::BeginTime | Scheme::Singleton, Fact::Ended { .. }) => Settled::Open,
    }
}

impl Waiting {
    /// The hold it puts on its job: the first condition never met, else the first open.
    fn hold(&self) -> Option<Hold> {
        let never = self.conditions.iter().find_map(|c| match c.state {
            Settled::Never(why) => Some(Hold::DependencyNever(c.target, why)),
            _ => None,
        });
        never.or_else(|| {
            self.conditions
                .iter()
                .find(|c| c.state == Settled::Open)
                .map(|c| Hold::Dependency(c.target))
        })
    }
}

impl ShardCore {
    /// The dependencies `jobspec` asks for, read at submit: a job id that is not a FLUID,
    /// or a job of this queue it never issued, is refused. `None`: it has none.
    pub(super) fn read_dependencies(&self, jobspec: &Jobspec) -> Result<Option<Waiting>, Refusal> {
        let deps = jobspec.attributes.job_dependencies();
        if deps.is_empty() {
            return Ok(None);
        }
        let mut conditions = Vec::with_capacity(deps.len());
        for dep in deps {
            let target = if dep.scheme.names_a_job() {
                let id: JobId = dep.value.parse().map_err(|_| {
                    Refusal::new(
                        RefusalCode::Invalid,
                        format!(
                            "dependency {}:{}: not a job id",
                            dep.scheme,
                            dep.value.escape_debug()
                        ),
                    )
                })?;
                if self.is_own(id) && self.ids.last.is_none_or(|last| id > last) {
                    return Err(Refusal::new(
                        RefusalCode::NotFound,
                        format!(
                            "dependency {}:{id}: no job {id} in queue {}",
                            dep.scheme, self.queue
                        ),
                    ));
                }
                Some(id)
            } else {
                None
            };
            conditions.push(Condition {
                scheme: dep.scheme,
                target,
                state: Settled::Open,
            });
        }
        Ok(Some(Waiting {
            conditions,
            policy: jobspec.attributes.dependency_policy(),
        }))
    }

    /// A restored pending job's dependencies, unsettled (they were checked at submit; one
    /// that no longer reads is never met).
    pub(super) fn restore_dependencies(&mut self, id: JobId, jobspec: &Jobspec) {
        let waiting = match self.read_dependencies(jobspec) {
            Ok(waiting) => waiting,
            Err(refusal) => {
                tracing::warn!(job = %id, %refusal, "a restored job's dependency no longer reads");
                Some(Waiting {
                    conditions: vec![Condition {
                        scheme: Scheme::AfterAny,
                        target: None,
                        state: Settled::Never(Never::NotFound),
                    }],
                    policy: jobspec.attributes.dependency_policy(),
                })
            }
        };
        if let Some(waiting) = waiting {
            self.jobs.deps.insert(id, waiting);
        }
    }

    /// Job `id` waits on `waiting` (a submit's or a restore's).
    pub(super) fn track_dependencies(&mut self, id: JobId, waiting: Option<&Waiting>) {
        if let Some(waiting) = waiting {
            self.jobs.deps.insert(id, waiting.clone());
        }
    }

    /// The dependency hold of pending job `job`, if it has one.
    pub(super) fn dependency_hold(&self, job: &JobRecord) -> Option<Hold> {
        self.jobs.deps.get(&job.id).and_then(Waiting::hold)
    }

    /// The jobs the open conditions wait on (a job once per condition naming it).
    fn open_targets(&self) -> impl Iterator<Item = JobId> + '_ {
        self.jobs
            .deps
            .values()
            .flat_map(|w| &w.conditions)
            .filter(|c| c.state == Settled::Open)
            .filter_map(|c| c.target)
    }

    /// The jobs whose facts this shard needs from the coordinator: targets of open
    /// conditions that are not in this queue's table (another queue's, or ended and
    /// forgotten here), at most [`DEPENDENCY_TARGETS_PER_ASK_MAX`], lowest first.
    pub fn dependency_questions(&self) -> Vec<JobId> {
        let ids: BTreeSet<JobId> = self
            .open_targets()
            .filter(|&t| !self.is_own(t) || self.jobs.table.get(t).is_none())
            .collect();
        ids.into_iter()
            .take(DEPENDENCY_TARGETS_PER_ASK_MAX)
            .collect()
    }

    /// Facts about jobs of other queues (the coordinator's `Facts`, the answer to
    /// [`Self::dependency_questions`]): settles the conditions they decide. Repeated,
    /// reordered or stale answers change nothing more (facts are final; `Unknown` and
    /// unfinished states settle nothing that a later fact would not).
    pub fn handle_job_facts(&mut self, now_ms: u64, facts: &[JobFact]) {
        self.observe(now_ms);
        let facts: HashMap<JobId, Fact> = facts.iter().map(|f| (f.id, f.fact)).collect();
        if self.settle_dependencies(&|id| facts.get(&id).copied()) {
            self.backlog = true;
        }
    }

    /// What this shard knows of its own jobs `ids`, for the coordinator.
    pub fn job_facts(&self, ids: &[JobId]) -> Vec<JobFact> {
        self.snapshot().job_facts(ids)
    }

    /// Settles the conditions on this queue's jobs from the job table (each tick); returns
    /// whether a job was let into the queue.
    pub(super) fn settle_local_dependencies(&mut self) -> bool {
        if self.jobs.deps.is_empty() {
            return false;
        }
        // What the open conditions on this queue's own jobs read, taken from the table
        // first (the conditions are then changed in place).
        let facts: HashMap<JobId, Fact> = self
            .open_targets()
            .filter(|&t| self.is_own(t))
            .filter_map(|t| self.jobs.table.get(t).map(|j| (t, j.fact())))
            .collect();
        self.settle_dependencies(&|id| facts.get(&id).copied())
    }

    /// Settles every open condition `fact_of` can decide, and `singleton`s; then lets in
    /// the jobs whose conditions are all met, and cancels those never met under the
    /// `cancel` policy. Returns whether a job was let in.
    fn settle_dependencies(&mut self, fact_of: &dyn Fn(JobId) -> Option<Fact>) -> bool {
        let busy = self.singleton_busy();
        let mut changed = Vec::new();
        for (&id, waiting) in &mut self.jobs.deps {
            let mut touched = false;
            for c in &mut waiting.conditions {
                if c.state != Settled::Open {
                    continue;
                }
                let settled = match c.target {
                    Some(target) => {
                        fact_of(target).map_or(Settled::Open, |f| evaluate(c.scheme, f))
                    }
                    None => Settled::Open,
                };
                if settled != Settled::Open {
                    c.state = settled;
                    touched = true;
                }
            }
            if touched
                || waiting
                    .conditions
                    .iter()
                    .any(|c| c.scheme == Scheme::Singleton)
            {
                changed.push(id);
            }
        }
        let mut released = false;
        let mut busy = busy;
        for id in changed {
            released |= self.conclude(id, &mut busy);
        }
        released
    }

    /// After job `id`'s conditions changed: a `singleton` is met if no job of its owner
    /// and name runs or is eligible (`busy`); all met, the job is let in; one never met,
    /// the job is held saying why, or cancelled. Returns whether the job was let in.
    fn conclude(&mut self, id: JobId, busy: &mut BTreeSet<(String, String)>) -> bool {
        let Some(job) = self.jobs.table.get(id) else {
            self.jobs.deps.remove(&id);
            return false;
        };
        let key = (job.owner.clone(), job.name.clone());
        let Some(waiting) = self.jobs.deps.get_mut(&id) else {
            return false;
        };
        let others_open = waiting
            .conditions
            .iter()
            .any(|c| c.scheme != Scheme::Singleton && c.state != Settled::Met);
        if !others_open && !busy.contains(&key) {
            for c in &mut waiting.conditions {
                if c.scheme == Scheme::Singleton {
                    c.state = Settled::Met;
                }
            }
        }
        let all_met = waiting.conditions.iter().all(|c| c.state == Settled::Met);
        let never = waiting
            .hold()
            .filter(|h| matches!(h, Hold::DependencyNever(..)));
        let policy = waiting.policy;
        let now_ms = self.now_ms;
        if all_met {
            self.jobs.deps.remove(&id);
            busy.insert(key);
            if let Some(job) = self.jobs.table.get_mut(id) {
                job.push_event(now_ms, "dependency-satisfied", serde_json::json!({}));
            }
            self.holds_changed(id);
            return true;
        }
        if let (Some(hold), DependencyPolicy::Cancel) = (never, policy) {
            self.jobs.deps.remove(&id);
            self.cancel_pending(id, hold.text());
            return false;
        }
        self.sync_hold(id);
        false
    }

    /// Owner and name of every job that runs, or is pending and not held by a dependency:
    /// what a `singleton` waits to see gone.
    fn singleton_busy(&self) -> BTreeSet<(String, String)> {
        let waits_singleton = |id: &JobId| {
            self.jobs
                .deps
                .get(id)
                .is_some_and(|w| w.conditions.iter().any(|c| c.scheme == Scheme::Singleton))
        };
        if !self.jobs.deps.keys().any(waits_singleton) {
            return BTreeSet::new();
        }
        self.jobs
            .running
            .keys()
            .chain(
                self.jobs
                    .pending
                    .iter()
                    .filter(|id| !self.jobs.deps.contains_key(id)),
            )
            .filter_map(|&id| self.jobs.table.get(id))
            .map(|job| (job.owner.clone(), job.name.clone()))
            .collect()
    }

    /// Whether `id` was issued by this shard's generator.
    fn is_own(&self, id: JobId) -> bool {
        id.generator_id() == self.ids.generator.generator_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scheme_reads_each_fact_as_rfc_26_says() {
        use JobState::{Cancelled, Completed, Failed};
        let ended = |state, started| Fact::Ended { state, started };
        let cases = [
            (Scheme::AfterOk, ended(Completed, true), Settled::Met),
            (
                Scheme::AfterOk,
                ended(Failed, true),
                Settled::Never(Never::Failed),
            ),
            (
                Scheme::AfterOk,
                ended(Cancelled, false),
                Settled::Never(Never::Cancelled),
            ),
            (Scheme::AfterOk, Fact::Running, Settled::Open),
            (Scheme::AfterNotOk, ended(Failed, true), Settled::Met),
            (Scheme::AfterNotOk, ended(Cancelled, false), Settled::Met),
            (
                Scheme::AfterNotOk,
                ended(Completed, true),
                Settled::Never(Never::Completed),
            ),
            (Scheme::AfterAny, ended(Cancelled, false), Settled::Met),
            (Scheme::AfterAny, Fact::Pending, Settled::Open),
            (Scheme::After, Fact::Running, Settled::Met),
            (Scheme::After, ended(Completed, true), Settled::Met),
            (
                Scheme::After,
                ended(Cancelled, false),
                Settled::Never(Never::NotStarted),
            ),
            (Scheme::After, Fact::Pending, Settled::Open),
            (Scheme::AfterOk, Fact::Unknown, Settled::Open),
            (
                Scheme::AfterAny,
                Fact::NotFound,
                Settled::Never(Never::NotFound),
            ),
            (Scheme::After, Fact::NoQueue, Settled::Never(Never::NoQueue)),
        ];
        for (scheme, fact, want) in cases {
            assert_eq!(evaluate(scheme, fact), want, "{scheme} on {fact:?}");
        }
    }
}
