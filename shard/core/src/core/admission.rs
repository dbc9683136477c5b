//! Admission under limits (docs/POLICIES.md, "Limits"): which pending jobs a per-user or
//! per-queue limit lets the queue manager consider, and the counts it decides by.
//!
//! A pending job under a limit is **admitted** before the queue manager may see it: its
//! owner's allowance here (`held`, `core/allowances.rs`) and its queue's limits must have
//! room for it, counting the running and admitted jobs as in use. Others are held
//! ([`Hold::Limit`], decided with the other holds in `ShardCore::hold_of`), saying which
//! limit holds them. Admission runs at every tick, before scheduling
//! ([`ShardCore::admit_limited`]).
//!
//! **The counts** ([`Counts`]: per user, pending jobs and what their running and admitted
//! jobs use; the queue's total in use) are kept up to date as jobs move — accepted or
//! restored pending, admitted, started, ended, cancelled, requeued — by the hooks below,
//! called where the job side's live sets change (`submit`, `mark_running`, `ended`,
//! `requeue`, the restore). They are the only copy; `ShardCore::invariants` recounts them
//! from the live sets, so every simulator step checks them. A pass costs the jobs it may
//! admit, not the jobs running. Admitted pending jobs are not durable: they are admitted
//! afresh after a restart.

use std::collections::{BTreeMap, HashMap};

use shardsched_wire::msg::quota::{LimitKind, LimitScope, LimitTable, SPANNING, Usage};
use shardsched_wire::msg::{JobId, JobState, Refusal, RefusalCode};

use super::ShardCore;
use super::invariants::Violation;
use crate::job::{Hold, JobRecord, LimitHold, Reason};

/// Per user and for the queue: pending jobs, and what running and admitted jobs use.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    /// Users with live jobs here (an entry goes with the user's last live job).
    users: HashMap<String, UserCounts>,
    /// What every running and admitted job of the queue uses.
    queue: Usage,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct UserCounts {
    pending: u64,
    in_use: Usage,
}

impl Counts {
    /// What `user`'s running and admitted jobs use.
    pub(super) fn in_use(&self, user: &str) -> Usage {
        self.users.get(user).map(|c| c.in_use).unwrap_or_default()
    }

    /// `user`'s pending jobs.
    fn pending(&self, user: &str) -> u64 {
        self.users.get(user).map_or(0, |c| c.pending)
    }

    /// Changes `user`'s counts with `change` (the entry is made on first use, and dropped
    /// once all zero).
    fn update(&mut self, user: &str, change: impl FnOnce(&mut UserCounts)) {
        match self.users.get_mut(user) {
            Some(c) => change(c),
            None => change(self.users.entry(user.to_owned()).or_default()),
        }
        if self.users.get(user) == Some(&UserCounts::default()) {
            self.users.remove(user);
        }
    }

    fn charge(&mut self, user: &str, ask: Usage) {
        self.queue = self.queue.plus(ask);
        self.update(user, |c| c.in_use = c.in_use.plus(ask));
    }

    fn discharge(&mut self, user: &str, ask: Usage) {
        self.queue = self.queue.minus(ask);
        self.update(user, |c| c.in_use = c.in_use.minus(ask));
    }

    fn pending_changed(&mut self, user: &str, more: bool) {
        self.update(user, |c| {
            c.pending = if more {
                c.pending.saturating_add(1)
            } else {
                c.pending.saturating_sub(1)
            }
        });
    }
}

/// The first part of `ask` that does not fit between `in_use` and `room`.
fn first_over(in_use: Usage, ask: Usage, room: Usage) -> Option<LimitKind> {
    let after = in_use.plus(ask);
    SPANNING.into_iter().find(|&k| after.part(k) > room.part(k))
}

impl ShardCore {
    /// Job `id` became pending (accepted, requeued or restored): counted.
    pub(super) fn limits_pending(&mut self, id: JobId) {
        if let Some(job) = self.jobs.table.get(id) {
            self.quota.counts.pending_changed(&job.owner, true);
        }
    }

    /// Job `id` started (or was restored running; `was_pending` when it left the pending
    /// set for it): in use from now, if its admission had not counted it already.
    pub(super) fn limits_started(&mut self, id: JobId, was_pending: bool) {
        let Some(job) = self.jobs.table.get(id) else {
            return;
        };
        if was_pending {
            self.quota.counts.pending_changed(&job.owner, false);
        }
        if !self.quota.admitted.remove(&id) {
            self.quota.counts.charge(&job.owner, job.limit_ask());
        }
    }

    /// Job `id` left the live sets it was in (`was_running`, `was_pending`): it ended, or
    /// its run was requeued (which counts it pending again after this).
    pub(super) fn limits_stopped(&mut self, id: JobId, was_running: bool, was_pending: bool) {
        let admitted = self.quota.admitted.remove(&id);
        let Some(job) = self.jobs.table.get(id) else {
            return;
        };
        if was_pending {
            self.quota.counts.pending_changed(&job.owner, false);
        }
        if was_running || admitted {
            self.quota.counts.discharge(&job.owner, job.limit_ask());
        }
    }

    /// Every admitted job goes back to being judged (the limits changed, or the queue
    /// stopped): no longer in use.
    pub(super) fn unadmit_all(&mut self) {
        for id in std::mem::take(&mut self.quota.admitted) {
            if let Some(job) = self.jobs.table.get(id) {
                self.quota.counts.discharge(&job.owner, job.limit_ask());
            }
            self.sync_hold(id);
        }
    }

    /// The limits changed: jobs admitted under the old ones are judged again.
    pub fn set_limits(&mut self, limits: LimitTable) {
        if self.quota.limits == limits {
            return;
        }
        self.quota.limits = limits;
        self.unadmit_all();
        self.status_version += 1;
        for id in self.jobs.pending.clone() {
            self.holds_changed(id);
        }
    }

    /// The limit that holds pending `job`, if any (`ShardCore::hold_of`'s last word).
    pub(super) fn limit_hold(&self, job: &JobRecord) -> Option<Hold> {
        if self.quota.admitted.contains(&job.id) {
            return None;
        }
        if let Some(&blocked) = self.quota.blocked.get(&job.id) {
            return Some(Hold::Limit(blocked));
        }
        let per_user = SPANNING.into_iter().find_map(|k| {
            self.quota
                .limits
                .user_limit(k, &job.owner)
                .map(|(v, _)| (k, v))
        });
        if let Some((kind, value)) = per_user {
            return Some(Hold::Limit(LimitHold {
                kind,
                value,
                per_user: true,
            }));
        }
        let queue = LimitScope::Queue(self.queue.to_string());
        SPANNING.into_iter().find_map(|kind| {
            self.quota.limits.get(kind, &queue).map(|value| {
                Hold::Limit(LimitHold {
                    kind,
                    value,
                    per_user: false,
                })
            })
        })
    }

    /// Refuses a submit of `count` jobs that would pass a `max_pending` limit: the queue's
    /// (all users), or the owner's (their pending jobs in this queue).
    pub(super) fn check_max_pending(&self, owner: &str, count: u64) -> Result<(), Refusal> {
        let queue = LimitScope::Queue(self.queue.to_string());
        let queue_limit = self.quota.limits.get(LimitKind::MaxPending, &queue);
        if let Some(limit) = queue_limit
            && (self.jobs.pending.len() as u64).saturating_add(count) > limit
        {
            return Err(Refusal::new(
                RefusalCode::Policy,
                format!("limit: max_pending {limit} for queue {}", self.queue),
            ));
        }
        if let Some((limit, _)) = self.quota.limits.user_limit(LimitKind::MaxPending, owner)
            && self.quota.counts.pending(owner).saturating_add(count) > limit
        {
            return Err(Refusal::new(
                RefusalCode::Policy,
                format!("limit: max_pending {limit} for user {owner}"),
            ));
        }
        Ok(())
    }

    /// The admission pass (see the module documentation): admits pending jobs under limits
    /// while there is room, in urgency then submission order, says why the others wait,
    /// then settles the allowances (gives back, asks ahead).
    pub(super) fn admit_limited(&mut self) {
        // A stopped queue starts nothing: it admits nothing, and its admitted jobs give
        // their allowance back.
        let started = self.config.started;
        if !started {
            self.unadmit_all();
        }
        self.quota.blocked.clear();
        let queue_room = self.quota.limits.queue_spanning(&self.queue);
        if queue_room.is_none() && !self.quota.active() {
            self.quota.wanted.clear();
            return;
        }
        // Candidates: pending, not admitted, and held by nothing but a limit.
        let mut candidates: Vec<(u8, JobId)> = Vec::new();
        for &id in self.jobs.pending.iter().filter(|_| started) {
            if self.quota.admitted.contains(&id) {
                continue;
            }
            let Some(job) = self.jobs.table.get(id) else {
                continue;
            };
            if job.state == JobState::Pending && !self.hold_besides_limit(job) {
                candidates.push((job.urgency, id));
            }
        }
        candidates.sort_unstable_by_key(|&(urgency, id)| (std::cmp::Reverse(urgency), id));
        // What each limited user would use: in use, plus every candidate of theirs.
        let quota = &mut self.quota;
        let mut wanted: BTreeMap<String, Usage> = quota
            .counts
            .users
            .iter()
            .filter(|(user, _)| quota.limits.user_spanning(user).is_some())
            .map(|(user, c)| (user.clone(), c.in_use))
            .collect();
        let now_ms = self.now_ms;
        let mut changed = Vec::new();
        for (_, id) in candidates {
            let Some(job) = self.jobs.table.get(id) else {
                continue;
            };
            let (owner, ask) = (job.owner.as_str(), job.limit_ask());
            let user_limit = quota.limits.user_spanning(owner);
            let mut blocked = None;
            if let Some(limit) = user_limit {
                if let Some(w) = wanted.get_mut(owner) {
                    *w = w.plus(ask).min(limit);
                }
                if let Some(kind) = first_over(quota.counts.in_use(owner), ask, quota.held(owner)) {
                    blocked = Some(LimitHold {
                        kind,
                        value: limit.part(kind),
                        per_user: true,
                    });
                }
            }
            if let Some(room) = queue_room
                && blocked.is_none()
                && let Some(kind) = first_over(quota.counts.queue, ask, room)
            {
                blocked = Some(LimitHold {
                    kind,
                    value: room.part(kind),
                    per_user: false,
                });
            }
            match blocked {
                Some(hold) => {
                    quota.blocked.insert(id, hold);
                    if job.reason != Reason::Held(Hold::Limit(hold)) {
                        changed.push(id);
                    }
                }
                None => {
                    quota.counts.charge(owner, ask);
                    quota.admitted.insert(id);
                    if user_limit.is_some() {
                        quota.note_admitted(owner, ask, now_ms);
                    }
                    changed.push(id);
                }
            }
        }
        if wanted != quota.wanted {
            quota.wanted = wanted;
            self.status_version += 1;
        }
        for id in changed {
            self.sync_hold(id);
        }
        self.settle_allowances();
    }

    /// Whether a hold other than a limit's holds `job`.
    fn hold_besides_limit(&self, job: &JobRecord) -> bool {
        !matches!(self.hold_of(job), None | Some(Hold::Limit(_)))
    }

    /// The counts recounted from the live sets match the counts kept (see the module
    /// documentation); every admitted job is pending.
    pub(super) fn limits_invariants(&self) -> Result<(), Violation> {
        let mut recount = Counts::default();
        for &id in &self.jobs.pending {
            if let Some(job) = self.jobs.table.get(id) {
                recount.pending_changed(&job.owner, true);
            }
        }
        for &id in self.jobs.running.keys().chain(&self.quota.admitted) {
            if let Some(job) = self.jobs.table.get(id) {
                recount.charge(&job.owner, job.limit_ask());
            }
        }
        if let Some(id) = self
            .quota
            .admitted
            .iter()
            .find(|id| !self.jobs.pending.contains(id))
        {
            return Err(Violation(format!("{id} is admitted but not pending")));
        }
        if recount != self.quota.counts {
            return Err(Violation(format!(
                "the limits' counts {:?} are not the live jobs' {recount:?}",
                self.quota.counts
            )));
        }
        Ok(())
    }
}
