//! Per-user and per-queue limits, and the allowances that keep a per-user limit over every
//! queue (docs/POLICIES.md, "Limits"): the limit table the coordinator keeps and hands to
//! every shard, the shard's allowance report, and the coordinator's grants.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::bounds;
use super::common::{Refusal, RefusalCode};
use crate::limits::{ALLOWANCE_USERS_PER_REPORT_MAX, LIMIT_VALUE_MAX, LIMITS_MAX};

/// What a limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LimitKind {
    /// Running jobs.
    MaxRunning,
    /// Nodes the running jobs asked for.
    MaxNodes,
    /// Cores the running jobs asked for.
    MaxCores,
    /// Pending jobs (checked at submit, per queue).
    MaxPending,
}

impl LimitKind {
    /// Every kind, in display order.
    pub const ALL: [LimitKind; 4] = [
        LimitKind::MaxRunning,
        LimitKind::MaxNodes,
        LimitKind::MaxCores,
        LimitKind::MaxPending,
    ];

    /// Its name in the configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::MaxRunning => "max_running",
            LimitKind::MaxNodes => "max_nodes",
            LimitKind::MaxCores => "max_cores",
            LimitKind::MaxPending => "max_pending",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Result<LimitKind, Refusal> {
        LimitKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .ok_or_else(|| {
                Refusal::new(
                    RefusalCode::Invalid,
                    format!(
                        "no limit named {:?} (limits: max_running, max_nodes, max_cores, max_pending)",
                        name.escape_debug().to_string()
                    ),
                )
            })
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whom a limit applies to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LimitScope {
    /// Every user's default (a named user's limit of the same kind wins).
    EachUser,
    /// One user, over every queue.
    User(String),
    /// One queue, all its users together.
    Queue(String),
}

impl fmt::Display for LimitScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitScope::EachUser => f.write_str("each user"),
            LimitScope::User(u) => write!(f, "user {}", u.escape_debug()),
            LimitScope::Queue(q) => write!(f, "queue {}", q.escape_debug()),
        }
    }
}

/// One limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    /// What it counts.
    pub kind: LimitKind,
    /// Whom it applies to.
    pub scope: LimitScope,
    /// The most allowed (at most [`LIMIT_VALUE_MAX`]).
    pub value: u64,
}

/// Every limit, at most one per kind and scope, sorted by (scope, kind); at most
/// [`LIMITS_MAX`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitTable {
    /// The limits.
    pub limits: Vec<Limit>,
}

/// A job's part of what a per-user limit counts: one job, the nodes and the cores it asks
/// for. Also an allowance: how much of each a shard may have in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Jobs.
    pub jobs: u64,
    /// Nodes.
    pub nodes: u64,
    /// Cores.
    pub cores: u64,
}

impl Usage {
    /// Part by part sum (saturating).
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            jobs: self.jobs.saturating_add(other.jobs),
            nodes: self.nodes.saturating_add(other.nodes),
            cores: self.cores.saturating_add(other.cores),
        }
    }

    /// Part by part difference (saturating at 0).
    pub fn minus(self, other: Usage) -> Usage {
        Usage {
            jobs: self.jobs.saturating_sub(other.jobs),
            nodes: self.nodes.saturating_sub(other.nodes),
            cores: self.cores.saturating_sub(other.cores),
        }
    }

    /// Part by part least.
    pub fn min(self, other: Usage) -> Usage {
        Usage {
            jobs: self.jobs.min(other.jobs),
            nodes: self.nodes.min(other.nodes),
            cores: self.cores.min(other.cores),
        }
    }

    /// Part by part greatest.
    pub fn max(self, other: Usage) -> Usage {
        Usage {
            jobs: self.jobs.max(other.jobs),
            nodes: self.nodes.max(other.nodes),
            cores: self.cores.max(other.cores),
        }
    }

    /// Whether every part is at most `other`'s.
    pub fn within(self, other: Usage) -> bool {
        self.jobs <= other.jobs && self.nodes <= other.nodes && self.cores <= other.cores
    }

    /// The part `kind` counts (`MaxPending`: jobs).
    pub fn part(self, kind: LimitKind) -> u64 {
        match kind {
            LimitKind::MaxRunning | LimitKind::MaxPending => self.jobs,
            LimitKind::MaxNodes => self.nodes,
            LimitKind::MaxCores => self.cores,
        }
    }

    /// Every part `u64::MAX` (no limit).
    pub const UNLIMITED: Usage = Usage {
        jobs: u64::MAX,
        nodes: u64::MAX,
        cores: u64::MAX,
    };
}

/// The parts a per-user limit counts across queues.
pub const SPANNING: [LimitKind; 3] = [
    LimitKind::MaxRunning,
    LimitKind::MaxNodes,
    LimitKind::MaxCores,
];

impl LimitTable {
    /// The limit of `kind` for `scope`, if set.
    pub fn get(&self, kind: LimitKind, scope: &LimitScope) -> Option<u64> {
        self.limits
            .iter()
            .find(|l| l.kind == kind && &l.scope == scope)
            .map(|l| l.value)
    }

    /// User `user`'s limit of `kind`: theirs, else every user's default; with its scope.
    pub fn user_limit(&self, kind: LimitKind, user: &str) -> Option<(u64, LimitScope)> {
        let own = LimitScope::User(user.to_owned());
        self.get(kind, &own).map(|v| (v, own)).or_else(|| {
            self.get(kind, &LimitScope::EachUser)
                .map(|v| (v, LimitScope::EachUser))
        })
    }

    /// `user`'s spanning limits as an allowance vector (unlimited parts `u64::MAX`), or
    /// `None` when none is set for them.
    pub fn user_spanning(&self, user: &str) -> Option<Usage> {
        spanning(|kind| self.user_limit(kind, user).map(|(v, _)| v))
    }

    /// Queue `queue`'s own limits of what running jobs use, as an allowance vector
    /// (unlimited parts `u64::MAX`), or `None` when it has none.
    pub fn queue_spanning(&self, queue: &str) -> Option<Usage> {
        let scope = LimitScope::Queue(queue.to_owned());
        spanning(|kind| self.get(kind, &scope))
    }

    /// Whether any per-user spanning limit is set (every user has one when a default is).
    pub fn has_spanning(&self) -> bool {
        self.limits
            .iter()
            .any(|l| SPANNING.contains(&l.kind) && !matches!(l.scope, LimitScope::Queue(_)))
    }

    /// Sets (`Some`) or removes (`None`) the limit of `kind` for `scope`, keeping the
    /// table sorted; refused past [`LIMITS_MAX`] entries or [`LIMIT_VALUE_MAX`].
    pub fn set(
        &mut self,
        kind: LimitKind,
        scope: LimitScope,
        value: Option<u64>,
    ) -> Result<(), Refusal> {
        check_scope(&scope)?;
        let at = self
            .limits
            .iter()
            .position(|l| l.kind == kind && l.scope == scope);
        match (value, at) {
            (None, Some(i)) => {
                self.limits.remove(i);
            }
            (None, None) => {}
            (Some(value), _) if value > LIMIT_VALUE_MAX => {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!("{kind} {value} is more than the largest limit, {LIMIT_VALUE_MAX}"),
                ));
            }
            (Some(value), Some(i)) => self.limits[i].value = value,
            (Some(_), None) if self.limits.len() >= LIMITS_MAX => {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!("at most {LIMITS_MAX} limits may be set"),
                ));
            }
            (Some(value), None) => {
                self.limits.push(Limit { kind, scope, value });
                self.limits
                    .sort_by(|a, b| (&a.scope, a.kind).cmp(&(&b.scope, b.kind)));
            }
        }
        Ok(())
    }

    /// The table's bounds (a peer's table, or one read from disk).
    pub fn check(&self) -> Result<(), Refusal> {
        if self.limits.len() > LIMITS_MAX {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!("{} limits, more than {LIMITS_MAX}", self.limits.len()),
            ));
        }
        for l in &self.limits {
            check_scope(&l.scope)?;
            if l.value > LIMIT_VALUE_MAX {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!("{} {} is more than {LIMIT_VALUE_MAX}", l.kind, l.value),
                ));
            }
        }
        Ok(())
    }
}

/// The limits `limit_of` finds for the [`SPANNING`] kinds, as an allowance vector
/// (unlimited parts `u64::MAX`), or `None` when it finds none.
fn spanning(limit_of: impl Fn(LimitKind) -> Option<u64>) -> Option<Usage> {
    let mut limit = Usage::UNLIMITED;
    let mut any = false;
    for kind in SPANNING {
        if let Some(v) = limit_of(kind) {
            any = true;
            match kind {
                LimitKind::MaxNodes => limit.nodes = v,
                LimitKind::MaxCores => limit.cores = v,
                _ => limit.jobs = v,
            }
        }
    }
    any.then_some(limit)
}

fn check_scope(scope: &LimitScope) -> Result<(), Refusal> {
    match scope {
        LimitScope::EachUser => Ok(()),
        LimitScope::User(u) if u.is_empty() => {
            Err(Refusal::new(RefusalCode::Invalid, "empty user name"))
        }
        LimitScope::Queue(q) if q.is_empty() => {
            Err(Refusal::new(RefusalCode::Invalid, "empty queue name"))
        }
        LimitScope::User(u) => bounds::name("the user name", u),
        LimitScope::Queue(q) => bounds::name("the queue name", q),
    }
}

/// A shard's word on one user's allowance, in its status report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceReport {
    /// The user.
    pub user: String,
    /// The last grant's sequence number the shard applied (0: none).
    pub seq: u64,
    /// What the shard holds (durable in its journal before this report left).
    pub held: Usage,
    /// What its admitted and running jobs use.
    pub in_use: Usage,
    /// What it would use with every pending job of the user admitted.
    pub wanted: Usage,
    /// What it would hold beyond `wanted` to admit the user's next jobs without asking:
    /// what it admitted of theirs lately (protocol 16). Granted only from what no shard
    /// needs; never a reason to cap another shard.
    pub ahead: Usage,
}

impl Usage {
    /// Whether every part is 0.
    pub fn is_zero(self) -> bool {
        self == Usage::default()
    }

    /// Part by part half (rounded down).
    pub fn half(self) -> Usage {
        Usage {
            jobs: self.jobs / 2,
            nodes: self.nodes / 2,
            cores: self.cores / 2,
        }
    }
}

/// The coordinator's word on one user's allowance for one shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceGrant {
    /// The user.
    pub user: String,
    /// The grant's sequence number (the shard applies only a newer one).
    pub seq: u64,
    /// The allowance the shard may hold from this seq on (durable at the coordinator).
    pub grant: Usage,
    /// The most the shard should keep as its jobs end (a hint, not journaled).
    pub cap: Usage,
}

/// Allowance reports or grants: at most [`ALLOWANCE_USERS_PER_REPORT_MAX`] users, each
/// name bounded.
pub fn check_users<'a>(users: impl ExactSizeIterator<Item = &'a str>) -> Result<(), Refusal> {
    if users.len() > ALLOWANCE_USERS_PER_REPORT_MAX {
        return Err(Refusal::new(
            RefusalCode::Invalid,
            format!("more than {ALLOWANCE_USERS_PER_REPORT_MAX} users' allowances in one message"),
        ));
    }
    for u in users {
        bounds::name("the user name", u)?;
    }
    Ok(())
}
