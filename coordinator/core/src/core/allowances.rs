//! Limits and the coordinator's side of allowances (docs/POLICIES.md, "Limits"): the limit
//! table (configured, or as `limits set` last changed it, journaled), and for each user
//! under a per-user limit that spans queues, what each queue's shard was granted.
//!
//! The invariant kept here: for every user, the sum of what the shards were granted is at
//! most the limit (when the limit was not lowered since), and a grant is raised only by a
//! journaled grant sent after its write ([`Core::allowances_to_send`]), lowered only to
//! what the shard reported holding for the current seq.
//!
//! After each report, a user's free allowance (the limit less every grant) is handed out
//! ([`Core::balance`]): first to every connected shard short of what its jobs want (so
//! allowance one shard gave back reaches another in the same step, without waiting for
//! that shard's next report), then to shards asking ahead of need (`AllowanceReport.ahead`),
//! each taking at most half of what is still free, so others find some left. When a shard
//! is still short, the others are capped (they give back what they hold ahead of need,
//! and what passes their fair part); once none is short, the caps are lifted.

use std::collections::{BTreeMap, BTreeSet};

use shardsched_wire::limits::ALLOWANCE_USERS_PER_REPORT_MAX;
use shardsched_wire::msg::coord_shard;
use shardsched_wire::msg::quota::{
    AllowanceGrant, AllowanceReport, LimitKind, LimitScope, LimitTable, Usage,
};
use shardsched_wire::msg::{Refusal, RefusalCode};

use super::{ConnId, Core};
use crate::records::{AllowanceRecord, LimitRecord};

/// What each shard was granted of each user's allowance.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// (user, queue) → the last grant (durable).
    granted: BTreeMap<(String, String), Grant>,
    /// (user, queue) → what the shard last said it wants (observation).
    wanted: BTreeMap<(String, String), Want>,
    /// (user, queue) → the cap last decided (a hint, not durable).
    caps: BTreeMap<(String, String), Usage>,
    /// The grants changed since the last journal write.
    pub(super) dirty: bool,
    /// Grants to send once the next write is durable.
    unsent: BTreeSet<(String, String)>,
    /// Grants in the write under way.
    in_write: BTreeSet<(String, String)>,
    /// Grants durable and due to their shard.
    due: BTreeSet<(String, String)>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Grant {
    seq: u64,
    granted: Usage,
}

/// What a shard last said it wants for a user: for its jobs, and ahead of need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Want {
    wanted: Usage,
    ahead: Usage,
}

/// `user`'s entries of a map keyed by (user, queue).
fn of_user<'a, V>(
    map: &'a BTreeMap<(String, String), V>,
    user: &'a str,
) -> impl Iterator<Item = (&'a (String, String), &'a V)> {
    map.range((user.to_owned(), String::new())..)
        .take_while(move |((u, _), _)| u == user)
}

impl Ledger {
    /// The ledger the journal kept.
    pub(super) fn new(records: &[AllowanceRecord]) -> Ledger {
        let granted = records
            .iter()
            .map(|r| {
                let grant = Grant {
                    seq: r.seq,
                    granted: Usage {
                        jobs: r.jobs,
                        nodes: r.nodes,
                        cores: r.cores,
                    },
                };
                ((r.user.clone(), r.queue.clone()), grant)
            })
            .collect();
        Ledger {
            granted,
            ..Ledger::default()
        }
    }

    /// The journal's records.
    pub(super) fn records(&self) -> Vec<AllowanceRecord> {
        self.granted
            .iter()
            .map(|((user, queue), g)| AllowanceRecord {
                user: user.clone(),
                queue: queue.clone(),
                seq: g.seq,
                jobs: g.granted.jobs,
                nodes: g.granted.nodes,
                cores: g.granted.cores,
            })
            .collect()
    }

    /// A journal write takes the grants decided so far.
    pub(super) fn take_for_write(&mut self) -> bool {
        self.in_write.extend(std::mem::take(&mut self.unsent));
        std::mem::take(&mut self.dirty)
    }

    /// The write is durable: its grants may go.
    pub(super) fn written(&mut self) {
        self.due.extend(std::mem::take(&mut self.in_write));
    }

    /// Whether `key`'s grant waits for a journal write (it is sent once that is durable).
    fn awaiting_write(&self, key: &(String, String)) -> bool {
        self.unsent.contains(key) || self.in_write.contains(key)
    }

    /// What `user`'s shards were granted, summed.
    fn total(&self, user: &str) -> Usage {
        of_user(&self.granted, user).fold(Usage::default(), |sum, (_, g)| sum.plus(g.granted))
    }

    /// What shard `key` was granted.
    fn granted(&self, key: &(String, String)) -> Usage {
        self.granted.get(key).map(|g| g.granted).unwrap_or_default()
    }

    /// Raises `key`'s grant towards `target`, by at most `most` and what is free of `limit`
    /// (a new seq, journaled with the next write and sent once it is durable).
    fn raise(&mut self, key: &(String, String), target: Usage, most: Usage, limit: Usage) {
        let free = limit.minus(self.total(&key.0));
        let more = target.minus(self.granted(key)).min(most).min(free);
        if more.is_zero() {
            return;
        }
        let grant = self.granted.entry(key.clone()).or_default();
        grant.granted = grant.granted.plus(more);
        grant.seq += 1;
        self.dirty = true;
        self.unsent.insert(key.clone());
    }

    /// Sets `key`'s cap; a changed one goes to the shard (with its grant, once that is
    /// durable, when one waits for the write).
    fn set_cap(&mut self, key: &(String, String), cap: Usage) {
        let before = self.caps.insert(key.clone(), cap);
        if before.unwrap_or(Usage::UNLIMITED) != cap && !self.awaiting_write(key) {
            self.due.insert(key.clone());
        }
    }
}

/// The limit table as journaled.
pub(super) fn limit_records(table: &LimitTable) -> Vec<LimitRecord> {
    table
        .limits
        .iter()
        .map(|l| {
            let (user, queue) = match &l.scope {
                LimitScope::EachUser => (None, None),
                LimitScope::User(u) => (Some(u.clone()), None),
                LimitScope::Queue(q) => (None, Some(q.clone())),
            };
            LimitRecord {
                kind: l.kind.as_str().to_owned(),
                user,
                queue,
                value: l.value,
            }
        })
        .collect()
}

/// The limit table from its journal records (a record that does not read is left out,
/// and logged).
pub(super) fn limit_table(records: &[LimitRecord]) -> LimitTable {
    let mut table = LimitTable::default();
    for r in records {
        let scope = match (&r.user, &r.queue) {
            (Some(u), _) => LimitScope::User(u.clone()),
            (None, Some(q)) => LimitScope::Queue(q.clone()),
            (None, None) => LimitScope::EachUser,
        };
        let set = LimitKind::parse(&r.kind).and_then(|k| table.set(k, scope, Some(r.value)));
        if let Err(e) = set {
            tracing::warn!(error = %e, "a journaled limit does not read; left out");
        }
    }
    table
}

impl Core {
    /// Every limit.
    pub fn limits(&self) -> &LimitTable {
        &self.limits
    }

    /// Sets or removes a limit (an admin's `limits set`; journaled with the next write).
    /// Returns the commands telling every connected shard.
    pub fn set_limit(
        &mut self,
        kind: LimitKind,
        scope: LimitScope,
        value: Option<u64>,
    ) -> Result<Vec<(ConnId, coord_shard::Request)>, Refusal> {
        if let LimitScope::Queue(q) = &scope
            && self.queue_index(q).is_none()
        {
            return Err(self.no_such_queue(q));
        }
        if kind == LimitKind::MaxPending
            && matches!(scope, LimitScope::EachUser)
            && value == Some(0)
        {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                "max_pending 0 for every user would refuse every submit",
            ));
        }
        self.limits.set(kind, scope, value)?;
        self.runtime_limits = true;
        self.dirty.limits = true;
        Ok(self.limits_commands())
    }

    /// `SetLimits` for every connected shard.
    fn limits_commands(&self) -> Vec<(ConnId, coord_shard::Request)> {
        self.shards
            .iter()
            .flatten()
            .map(|link| {
                (
                    link.conn,
                    coord_shard::Request::SetLimits(self.limits.clone()),
                )
            })
            .collect()
    }

    /// A shard's allowance reports (its status report's): lowers what it was granted to
    /// what it holds, then hands out each user's free allowance ([`Core::balance`]).
    pub(super) fn allowance_reports(&mut self, qi: usize, reports: &[AllowanceReport]) {
        let queue = self.config.queues[qi].name.clone();
        // A removed queue's shard is gone, and its grants with it.
        let configured: BTreeSet<String> =
            self.config.queues.iter().map(|q| q.name.clone()).collect();
        let before = self.ledger.granted.len();
        self.ledger
            .granted
            .retain(|(_, q), _| configured.contains(q));
        self.ledger
            .wanted
            .retain(|(_, q), _| configured.contains(q));
        self.ledger.dirty |= self.ledger.granted.len() != before;
        // A grant the shard does not mention was lost before its journal kept it (or never
        // reached it): send it again, so that it is applied, and returned if unused.
        let mentioned: BTreeSet<&str> = reports.iter().map(|r| r.user.as_str()).collect();
        let forgotten: Vec<(String, String)> = self
            .ledger
            .granted
            .iter()
            .filter(|((u, q), g)| {
                *q == queue && !mentioned.contains(u.as_str()) && g.granted != Usage::default()
            })
            .map(|(k, _)| k.clone())
            .filter(|k| !self.ledger.awaiting_write(k))
            .collect();
        self.ledger.due.extend(forgotten);
        let mut users = Vec::new();
        for r in reports {
            let Some(limit) = self.limits.user_spanning(&r.user) else {
                continue;
            };
            let key = (r.user.clone(), queue.clone());
            let want = Want {
                wanted: r.wanted,
                ahead: r.ahead,
            };
            self.ledger.wanted.insert(key.clone(), want);
            let grant = self.ledger.granted.entry(key.clone()).or_default();
            if r.seq < grant.seq {
                // The shard has not seen the last grant: send it again once durable.
                if !self.ledger.awaiting_write(&key) {
                    self.ledger.due.insert(key);
                }
                continue;
            }
            if r.seq > grant.seq {
                // Only a journal that lost a grant could say less than its shard: take
                // the shard's word.
                tracing::warn!(user = %r.user, queue, "a shard holds a grant newer than the journal's");
                *grant = Grant {
                    seq: r.seq,
                    granted: r.held,
                };
                self.ledger.dirty = true;
            }
            let lowered = grant.granted.min(r.held);
            if lowered != grant.granted {
                grant.granted = lowered;
                self.ledger.dirty = true;
            }
            users.push((r.user.clone(), limit));
        }
        for (user, limit) in users {
            self.balance(&user, limit);
        }
    }

    /// Hands out what is free of `user`'s allowance (see the module documentation): to the
    /// connected shards short of what their jobs want; then, while one is still short, caps
    /// the others; once none is, lifts the caps and gives to those asking ahead.
    fn balance(&mut self, user: &str, limit: Usage) {
        let wants: Vec<((String, String), Want)> = of_user(&self.ledger.wanted, user)
            .filter(|((_, q), _)| {
                self.queue_index(q)
                    .is_some_and(|qi| self.shards[qi].is_some())
            })
            .map(|(k, w)| (k.clone(), *w))
            .collect();
        for (key, want) in &wants {
            self.ledger
                .raise(key, want.wanted.min(limit), Usage::UNLIMITED, limit);
        }
        let short = wants
            .iter()
            .any(|(key, want)| !want.wanted.min(limit).within(self.ledger.granted(key)));
        if short {
            self.cap_shares(user, limit);
            return;
        }
        for (key, want) in &wants {
            let half_free = limit.minus(self.ledger.total(user)).half();
            let target = want.wanted.plus(want.ahead).min(limit);
            self.ledger.raise(key, target, half_free, limit);
        }
        let keys: Vec<(String, String)> = of_user(&self.ledger.caps, user)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.ledger.set_cap(&key, Usage::UNLIMITED);
        }
    }

    /// `user` wants more than is free: every shard holding more than its fair part (the
    /// limit split evenly among the shards that want), or more than its jobs want, is
    /// asked to come down.
    fn cap_shares(&mut self, user: &str, limit: Usage) {
        let n = of_user(&self.ledger.wanted, user)
            .filter(|(_, w)| !w.wanted.is_zero())
            .count()
            .max(1) as u64;
        let fair = Usage {
            jobs: limit.jobs.div_ceil(n),
            nodes: limit.nodes.div_ceil(n),
            cores: limit.cores.div_ceil(n),
        };
        let keys: Vec<(String, String)> = of_user(&self.ledger.granted, user)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let granted = self.ledger.granted(&key);
            let wanted = self.ledger.wanted.get(&key).map(|w| w.wanted);
            let ahead = wanted.is_some_and(|w| !granted.within(w));
            let cap = if granted.within(fair) && !ahead {
                Usage::UNLIMITED
            } else {
                fair
            };
            self.ledger.set_cap(&key, cap);
        }
    }

    /// Every grant of the ledger to `queue`, for its shard's registration
    /// (`Assignment.allowances`): the shard holds these and nothing else from then on. At
    /// most [`ALLOWANCE_USERS_PER_REPORT_MAX`] users: a grant left out is held by no shard
    /// and still counted here, so the limit holds; the shard's next report lowers it.
    pub(super) fn allowances_of(&self, queue: &str) -> Vec<AllowanceGrant> {
        self.ledger
            .granted
            .iter()
            .filter(|((_, q), _)| q == queue)
            .take(ALLOWANCE_USERS_PER_REPORT_MAX)
            .map(|(key, grant)| AllowanceGrant {
                user: key.0.clone(),
                seq: grant.seq,
                grant: grant.granted,
                cap: self
                    .ledger
                    .caps
                    .get(key)
                    .copied()
                    .unwrap_or(Usage::UNLIMITED),
            })
            .collect()
    }

    /// The grants durable and due, as one `Allowances` command per connected shard.
    pub fn allowances_to_send(&mut self) -> Vec<(ConnId, coord_shard::Request)> {
        let due = std::mem::take(&mut self.ledger.due);
        let mut by_queue: BTreeMap<String, Vec<AllowanceGrant>> = BTreeMap::new();
        for (user, queue) in due {
            let key = (user, queue);
            let Some(grant) = self.ledger.granted.get(&key) else {
                continue;
            };
            let cap = self
                .ledger
                .caps
                .get(&key)
                .copied()
                .unwrap_or(Usage::UNLIMITED);
            let (user, queue) = key;
            by_queue.entry(queue).or_default().push(AllowanceGrant {
                user,
                seq: grant.seq,
                grant: grant.granted,
                cap,
            });
        }
        by_queue
            .into_iter()
            .filter_map(|(queue, grants)| {
                let qi = self.queue_index(&queue)?;
                let link = self.shards[qi].as_ref()?;
                Some((link.conn, coord_shard::Request::Allowances(grants)))
            })
            .collect()
    }

    /// What every shard was granted of `user`'s allowance, summed (for checks).
    pub fn granted_total(&self, user: &str) -> Usage {
        self.ledger.total(user)
    }
}
