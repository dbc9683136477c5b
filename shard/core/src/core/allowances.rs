//! Limits (docs/POLICIES.md, "Limits"): which pending jobs a per-user or per-queue limit
//! lets the queue manager consider, and the shard's side of the allowances that keep a
//! per-user limit over every queue.
//!
//! A pending job under a limit is **admitted** before the queue manager may see it: its
//! owner's allowance here (`held`) and its queue's limits must have room for it, counting
//! the running and admitted jobs as in use. Others are held ([`Hold::Limit`], decided with
//! the other holds in `ShardCore::hold_of`), saying which limit holds them. Admission
//! runs at every tick, before scheduling ([`ShardCore::admit_limited`]).
//!
//! The allowance (`held`, with the last grant's seq) is journaled (`allowance:<user>`)
//! whenever it changes: a grant applied ([`ShardCore::handle_allowances`]) is journaled
//! in the batch that uses it, and allowance returned (down to what is in use, what is
//! wanted and the coordinator's cap) is journaled before the status report that says so
//! ([`ShardCore::allowance_reports`]) can leave. Nothing else here is durable: admitted
//! pending jobs are admitted afresh after a restart.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_jobspec::{Jobspec, Resource};
use shardsched_wire::limits::ALLOWANCE_USERS_PER_REPORT_MAX;
use shardsched_wire::msg::quota::{
    AllowanceGrant, AllowanceReport, LimitKind, LimitScope, LimitTable, SPANNING, Usage,
};
use shardsched_wire::msg::{JobId, JobState, Refusal, RefusalCode};

use super::ShardCore;
use crate::job::{Hold, JobRecord, LimitHold};
use crate::journal::{AllowanceRecord, JournalRecord};

/// The limits, the allowances and the admitted jobs.
#[derive(Debug, Default)]
pub(super) struct Quota {
    /// Every limit, as the coordinator last said.
    limits: LimitTable,
    /// Per user under a per-user limit: the allowance held here.
    shares: BTreeMap<String, Share>,
    /// Pending jobs under a limit that the queue manager may consider.
    admitted: BTreeSet<JobId>,
    /// Why each held job waits, as the last admission pass found.
    blocked: HashMap<JobId, LimitHold>,
    /// Per user, as of the last admission pass: in use, and wanted.
    usage: BTreeMap<String, (Usage, Usage)>,
    /// What each live job under a limit asks for (read from its jobspec once).
    asks: HashMap<JobId, Usage>,
}

/// A user's allowance here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Share {
    /// The last grant applied (0: none).
    seq: u64,
    /// What may be in use (durable).
    held: Usage,
    /// What the coordinator asks the shard to keep at most (a hint).
    cap: Usage,
}

impl Default for Share {
    fn default() -> Self {
        Share {
            seq: 0,
            held: Usage::default(),
            cap: Usage::UNLIMITED,
        }
    }
}

impl Quota {
    /// The quota of a core starting with `limits` and the allowances its journal kept.
    pub(super) fn new(limits: LimitTable, restored: &[(String, AllowanceRecord)]) -> Quota {
        let shares = restored
            .iter()
            .map(|(user, r)| {
                let held = Usage {
                    jobs: r.jobs,
                    nodes: r.nodes,
                    cores: r.cores,
                };
                let share = Share {
                    seq: r.seq,
                    held,
                    ..Share::default()
                };
                (user.clone(), share)
            })
            .collect();
        Quota {
            limits,
            shares,
            ..Quota::default()
        }
    }
}

/// What `jobspec` asks for, as the limits count it: one job, its fewest nodes (1 when it
/// names none), and its fewest cores.
pub(super) fn ask_of(jobspec: &Jobspec) -> Usage {
    fn cores_in(resources: &[Resource]) -> u64 {
        resources
            .iter()
            .map(|r| {
                if r.kind == "core" {
                    r.count.min
                } else {
                    cores_in(&r.with).saturating_mul(r.count.min)
                }
            })
            .fold(0, u64::saturating_add)
    }
    Usage {
        jobs: 1,
        nodes: jobspec.nodes_requested().unwrap_or(1),
        cores: cores_in(&jobspec.resources),
    }
}

/// The first part of `ask` that does not fit between `in_use` and `room`.
fn first_over(in_use: Usage, ask: Usage, room: Usage) -> Option<LimitKind> {
    let after = in_use.plus(ask);
    SPANNING.into_iter().find(|&k| after.part(k) > room.part(k))
}

impl ShardCore {
    /// The limits changed: jobs admitted under the old ones are judged again.
    pub fn set_limits(&mut self, limits: LimitTable) {
        if self.quota.limits == limits {
            return;
        }
        self.quota.limits = limits;
        self.quota.admitted.clear();
        self.status_version += 1;
        for id in self.jobs.pending.clone() {
            self.holds_changed(id);
        }
    }

    /// The coordinator's grants: a newer one replaces what is held (journaled with the
    /// batch that may use it); its cap counts from its seq on.
    pub fn handle_allowances(&mut self, now_ms: u64, grants: &[AllowanceGrant]) {
        self.observe(now_ms);
        for g in grants {
            let share = self.quota.shares.entry(g.user.clone()).or_default();
            if g.seq > share.seq {
                share.seq = g.seq;
                share.held = g.grant;
                let record = allowance_record(share);
                self.journal(JournalRecord::Allowance(g.user.clone(), record));
                self.status_version += 1;
            }
            if let Some(share) = self.quota.shares.get_mut(&g.user)
                && g.seq >= share.seq
            {
                share.cap = g.cap;
            }
        }
    }

    /// What `user`'s running and admitted jobs here use, as of the last admission pass
    /// (for checks).
    pub fn limit_in_use(&self, user: &str) -> Usage {
        self.quota.usage.get(user).map(|u| u.0).unwrap_or_default()
    }

    /// The status report's allowances: every user with a share or with jobs wanting one.
    pub(super) fn allowance_reports(&self) -> Vec<AllowanceReport> {
        let users: BTreeSet<&String> = self
            .quota
            .shares
            .keys()
            .chain(self.quota.usage.keys())
            .collect();
        users
            .into_iter()
            .filter(|u| self.quota.limits.user_spanning(u).is_some())
            .take(ALLOWANCE_USERS_PER_REPORT_MAX)
            .map(|user| {
                let share = self.quota.shares.get(user).copied().unwrap_or_default();
                let (in_use, wanted) = self.quota.usage.get(user).copied().unwrap_or_default();
                AllowanceReport {
                    user: user.clone(),
                    seq: share.seq,
                    held: share.held,
                    in_use,
                    wanted,
                }
            })
            .collect()
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
        let user_limit = self.quota.limits.user_limit(LimitKind::MaxPending, owner);
        if queue_limit.is_none() && user_limit.is_none() {
            return Ok(());
        }
        let pending = self.jobs.pending.len() as u64;
        if let Some(limit) = queue_limit
            && pending.saturating_add(count) > limit
        {
            return Err(Refusal::new(
                RefusalCode::Policy,
                format!("limit: max_pending {limit} for queue {}", self.queue),
            ));
        }
        if let Some((limit, _)) = user_limit {
            let own = self
                .jobs
                .pending
                .iter()
                .filter(|&&id| self.jobs.table.get(id).is_some_and(|j| j.owner == owner))
                .count() as u64;
            if own.saturating_add(count) > limit {
                return Err(Refusal::new(
                    RefusalCode::Policy,
                    format!("limit: max_pending {limit} for user {owner}"),
                ));
            }
        }
        Ok(())
    }

    /// The admission pass (see the module documentation): admits pending jobs under limits
    /// while there is room, in urgency then submission order, says why the others wait,
    /// and returns allowance no longer needed.
    pub(super) fn admit_limited(&mut self) {
        let pending = &self.jobs.pending;
        // A stopped queue starts nothing: it admits nothing, and its admitted jobs give
        // their allowance back.
        let started = self.config.started;
        let (kept, unadmitted): (BTreeSet<JobId>, BTreeSet<JobId>) =
            std::mem::take(&mut self.quota.admitted)
                .into_iter()
                .filter(|id| pending.contains(id))
                .partition(|_| started);
        self.quota.admitted = kept;
        for id in unadmitted {
            self.sync_hold(id);
        }
        let pending = &self.jobs.pending;
        self.quota.blocked.clear();
        let running = &self.jobs.running;
        self.quota
            .asks
            .retain(|id, _| pending.contains(id) || running.contains_key(id));
        let queue_scope = LimitScope::Queue(self.queue.to_string());
        let mut queue_room = Usage::UNLIMITED;
        let mut queue_limited = false;
        for kind in SPANNING {
            if let Some(v) = self.quota.limits.get(kind, &queue_scope) {
                queue_limited = true;
                match kind {
                    LimitKind::MaxNodes => queue_room.nodes = v,
                    LimitKind::MaxCores => queue_room.cores = v,
                    _ => queue_room.jobs = v,
                }
            }
        }
        if !queue_limited && !self.quota.limits.has_spanning() && self.quota.shares.is_empty() {
            self.quota.usage.clear();
            return;
        }
        // In use: running and admitted jobs, per user under a limit and in the queue.
        let mut queue_use = Usage::default();
        let mut usage: BTreeMap<String, (Usage, Usage)> = BTreeMap::new();
        let in_use: Vec<JobId> = self
            .jobs
            .running
            .keys()
            .chain(self.quota.admitted.iter())
            .copied()
            .collect();
        for id in in_use {
            let Some((owner, ask)) = self.ask(id) else {
                continue;
            };
            queue_use = queue_use.plus(ask);
            if self.quota.limits.user_spanning(&owner).is_some() {
                let entry = usage.entry(owner).or_default();
                entry.0 = entry.0.plus(ask);
                entry.1 = entry.1.plus(ask);
            }
        }
        // Candidates: pending, not admitted, under a limit, and held by nothing else.
        let mut candidates: Vec<(u8, JobId)> = Vec::new();
        for &id in &self.jobs.pending {
            if self.quota.admitted.contains(&id) {
                continue;
            }
            let Some(job) = self.jobs.table.get(id) else {
                continue;
            };
            if !started || job.state != JobState::Pending || self.hold_besides_limit(job) {
                continue;
            }
            candidates.push((job.urgency, id));
        }
        candidates.sort_unstable_by_key(|&(urgency, id)| (std::cmp::Reverse(urgency), id));
        let mut changed = Vec::new();
        for (_, id) in candidates {
            let Some((owner, ask)) = self.ask(id) else {
                continue;
            };
            let user_limit = self.quota.limits.user_spanning(&owner);
            if user_limit.is_none() && !queue_limited {
                // No limit applies (any more): let it in.
                self.quota.admitted.insert(id);
                changed.push(id);
                continue;
            }
            let mut blocked = None;
            if let Some(limit) = user_limit {
                let held = self
                    .quota
                    .shares
                    .get(&owner)
                    .copied()
                    .unwrap_or_default()
                    .held;
                let entry = usage.entry(owner.clone()).or_default();
                entry.1 = entry.1.plus(ask).min(limit);
                if let Some(kind) = first_over(entry.0, ask, held) {
                    blocked = Some(LimitHold {
                        kind,
                        value: limit.part(kind),
                        per_user: true,
                    });
                }
            }
            if blocked.is_none()
                && let Some(kind) = first_over(queue_use, ask, queue_room)
            {
                blocked = Some(LimitHold {
                    kind,
                    value: queue_room.part(kind),
                    per_user: false,
                });
            }
            match blocked {
                Some(hold) => {
                    self.quota.blocked.insert(id, hold);
                }
                None => {
                    queue_use = queue_use.plus(ask);
                    if let Some(entry) = usage.get_mut(&owner) {
                        entry.0 = entry.0.plus(ask);
                    }
                    self.quota.admitted.insert(id);
                }
            }
            changed.push(id);
        }
        for id in changed {
            self.sync_hold(id);
        }
        self.return_allowance(&usage);
        if usage != self.quota.usage {
            self.status_version += 1;
        }
        self.quota.usage = usage;
    }

    /// Lowers every share to what it still needs (never below what is in use, never above
    /// what it holds) and journals each one lowered.
    fn return_allowance(&mut self, usage: &BTreeMap<String, (Usage, Usage)>) {
        let mut lowered = Vec::new();
        for (user, share) in &mut self.quota.shares {
            let (in_use, wanted) = usage.get(user).copied().unwrap_or_default();
            let keep = share.held.min(in_use.max(wanted.min(share.cap)));
            if keep != share.held {
                share.held = keep;
                lowered.push((user.clone(), allowance_record(share)));
            }
        }
        for (user, record) in lowered {
            self.status_version += 1;
            if mutant::active(Mutant::AllowanceUnjournaled) {
                continue;
            }
            self.journal(JournalRecord::Allowance(user, record));
        }
    }

    /// Whether a hold other than a limit's holds `job`.
    fn hold_besides_limit(&self, job: &JobRecord) -> bool {
        !matches!(self.hold_of(job), None | Some(Hold::Limit(_)))
    }

    /// Job `id`'s owner and what it asks for (read from its jobspec the first time).
    fn ask(&mut self, id: JobId) -> Option<(String, Usage)> {
        let job = self.jobs.table.get(id)?;
        let ask = match self.quota.asks.get(&id) {
            Some(&ask) => ask,
            None => {
                let ask = shardsched_jobspec::parse_json(&job.jobspec_json)
                    .map(|spec| ask_of(&spec))
                    .unwrap_or(Usage {
                        jobs: 1,
                        nodes: 1,
                        cores: 0,
                    });
                self.quota.asks.insert(id, ask);
                ask
            }
        };
        Some((job.owner.clone(), ask))
    }
}

fn allowance_record(share: &Share) -> AllowanceRecord {
    AllowanceRecord {
        seq: share.seq,
        jobs: share.held.jobs,
        nodes: share.held.nodes,
        cores: share.held.cores,
    }
}
