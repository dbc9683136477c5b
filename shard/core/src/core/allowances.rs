//! Limits (docs/POLICIES.md, "Limits"), the shard's side of the allowances that keep a
//! per-user limit over every queue: what the coordinator granted here (`held`), what the
//! shard asks for, and what it gives back. Which pending jobs are admitted under the
//! limits, and what the admitted and running jobs use, is `core/admission.rs`.
//!
//! The allowance (`held`, with the last grant's seq) is journaled (`allowance:<user>`)
//! whenever it changes: a grant applied ([`ShardCore::handle_allowances`]) is journaled
//! in the batch that uses it, and allowance returned is journaled before the status report
//! that says so ([`ShardCore::allowance_reports`]) can leave.
//!
//! **Asking ahead of need.** A shard asks for what its user's pending jobs need (`wanted`)
//! and, beyond it, for what it admitted of theirs in the last
//! [`ALLOWANCE_AHEAD_WINDOW_MS`] (`ahead`): a user submitting steadily finds allowance
//! already here, and their jobs are admitted in the tick that takes them in. It asks at
//! once ([`ShardCore::urgent_reports`]) when a job waits for allowance or when the margin
//! left falls under half of `ahead` — once per grant, so an ask the coordinator cannot
//! answer is not repeated until the next report. It gives back what passes twice that
//! margin (so a margin that grows and shrinks does not go back and forth), all of it once
//! the user stops (within two windows), and, under a coordinator's cap (another shard
//! wants what is left), everything but what its jobs need.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_wire::limits::ALLOWANCE_USERS_PER_REPORT_MAX;
use shardsched_wire::msg::JobId;
use shardsched_wire::msg::quota::{AllowanceGrant, AllowanceReport, LimitTable, Usage};

use super::ShardCore;
use super::admission::Counts;
use crate::job::LimitHold;
use crate::journal::{AllowanceRecord, JournalRecord};
use crate::limits::ALLOWANCE_AHEAD_WINDOW_MS;

/// The limits, the allowances, the admitted jobs and what they use.
#[derive(Debug, Default)]
pub(super) struct Quota {
    /// Every limit, as the coordinator last said.
    pub(super) limits: LimitTable,
    /// Per user under a per-user limit: the allowance held here.
    shares: BTreeMap<String, Share>,
    /// Pending jobs under a limit that the queue manager may consider (counted in use).
    pub(super) admitted: BTreeSet<JobId>,
    /// Why each held job waits, as the last admission pass found.
    pub(super) blocked: HashMap<JobId, LimitHold>,
    /// Per user and for the queue: pending jobs, and what the running and admitted jobs
    /// use — the one count, kept as jobs come and go (`core/admission.rs`).
    pub(super) counts: Counts,
    /// Per user under a per-user limit, as of the last admission pass: what their jobs
    /// would use with every pending one admitted (at most the limit).
    pub(super) wanted: BTreeMap<String, Usage>,
    /// Bumped whenever a status report should leave at once.
    urgent: u64,
}

/// A user's allowance here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Share {
    /// The last grant applied (0: none).
    seq: u64,
    /// What may be in use (durable).
    held: Usage,
    /// What the coordinator asks the shard to keep at most (a hint): while it is set,
    /// the shard keeps no allowance ahead of need.
    cap: Usage,
    /// What was admitted under the limit in the window that began at `window_ms`, and in
    /// the window before it.
    admitted: Usage,
    admitted_before: Usage,
    window_ms: u64,
    /// The grant (its seq) held when the shard last asked at once: one ask per grant.
    asked_at: Option<u64>,
}

impl Default for Share {
    fn default() -> Self {
        Share {
            seq: 0,
            held: Usage::default(),
            cap: Usage::UNLIMITED,
            admitted: Usage::default(),
            admitted_before: Usage::default(),
            window_ms: 0,
            asked_at: None,
        }
    }
}

impl Share {
    /// Starts a new window when the current one is over (the one before is forgotten when
    /// a whole window passed without a pass).
    fn roll(&mut self, now_ms: u64) {
        let end = self.window_ms.saturating_add(ALLOWANCE_AHEAD_WINDOW_MS);
        if now_ms < end {
            return;
        }
        self.admitted_before = if now_ms < end.saturating_add(ALLOWANCE_AHEAD_WINDOW_MS) {
            self.admitted
        } else {
            Usage::default()
        };
        self.admitted = Usage::default();
        self.window_ms = now_ms;
    }

    /// What the shard would hold beyond need: its recent admissions, none under a cap.
    fn ahead(&self) -> Usage {
        if self.capped() {
            Usage::default()
        } else {
            self.admitted.max(self.admitted_before)
        }
    }

    fn capped(&self) -> bool {
        self.cap != Usage::UNLIMITED
    }

    /// What to keep of `held` when the user's jobs here use `in_use` and want `wanted`
    /// (see the module documentation).
    fn keep(&self, in_use: Usage, wanted: Usage) -> Usage {
        let need = in_use.max(wanted);
        let keep = if self.capped() {
            in_use.max(wanted.min(self.cap))
        } else {
            let ahead = self.ahead();
            if self.held.within(need.plus(ahead).plus(ahead)) {
                self.held
            } else {
                need.plus(ahead)
            }
        };
        self.held.min(keep)
    }

    /// Whether to ask the coordinator at once: a job waits for allowance, or the margin
    /// left is under half of what is asked ahead.
    fn wants_more(&self, in_use: Usage, wanted: Usage) -> bool {
        let ahead = self.ahead();
        let low = !ahead.is_zero() && !in_use.max(wanted).plus(ahead.half()).within(self.held);
        low || !wanted.within(self.held)
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

    /// Whether a per-user limit is set or an allowance held (else, without a limit of
    /// the queue's, admission has nothing to do).
    pub(super) fn active(&self) -> bool {
        self.limits.has_spanning() || !self.shares.is_empty()
    }

    /// What `user` may have in use here.
    pub(super) fn held(&self, user: &str) -> Usage {
        self.shares.get(user).map(|s| s.held).unwrap_or_default()
    }

    /// `ask` was admitted for `user` under their per-user limit at `now_ms`.
    pub(super) fn note_admitted(&mut self, user: &str, ask: Usage, now_ms: u64) {
        if let Some(share) = self.shares.get_mut(user) {
            share.roll(now_ms);
            share.admitted = share.admitted.plus(ask);
        }
    }

    pub(super) fn urgent_reports(&self) -> u64 {
        self.urgent
    }

    /// What `user`'s jobs here use, if a per-user limit spans queues for them (else they
    /// are not reported, and hold nothing).
    fn limited_use(&self, user: &str) -> Option<(Usage, Usage)> {
        self.limits.user_spanning(user)?;
        let in_use = self.counts.in_use(user);
        let wanted = self.wanted.get(user).copied().unwrap_or(in_use);
        Some((in_use, wanted))
    }
}

impl ShardCore {
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

    /// The allowances the coordinator's ledger grants this queue, as its registration
    /// said (`Assignment.allowances`): they replace what the shard held, whatever its
    /// journal kept, and are journaled with the batch. A restart finds what its journal
    /// kept, but the coordinator may have lent it elsewhere since (the queue was removed
    /// and added again with its old journal): only the ledger's word may be used. When a
    /// share shrinks, the jobs admitted under it are judged again.
    pub(super) fn assign_allowances(&mut self, grants: &[AllowanceGrant]) {
        let assigned: BTreeMap<&str, &AllowanceGrant> =
            grants.iter().map(|g| (g.user.as_str(), g)).collect();
        let users: BTreeSet<String> = self
            .quota
            .shares
            .keys()
            .cloned()
            .chain(grants.iter().map(|g| g.user.clone()))
            .collect();
        let mut shrank = false;
        for user in users {
            let before = self.quota.shares.get(&user).copied().unwrap_or_default();
            let share = match assigned.get(user.as_str()) {
                Some(g) => Share {
                    seq: g.seq,
                    held: g.grant,
                    cap: g.cap,
                    ..before
                },
                None => Share::default(),
            };
            shrank |= !before.held.within(share.held);
            if (share.seq, share.held) != (before.seq, before.held) {
                self.journal(JournalRecord::Allowance(
                    user.clone(),
                    allowance_record(&share),
                ));
                self.status_version += 1;
            }
            if assigned.contains_key(user.as_str()) {
                self.quota.shares.insert(user, share);
            } else {
                self.quota.shares.remove(&user);
            }
        }
        if shrank {
            self.unadmit_all();
        }
    }

    /// What `user`'s running and admitted jobs here use (for checks).
    pub fn limit_in_use(&self, user: &str) -> Usage {
        self.quota.counts.in_use(user)
    }

    /// The status report's allowances: every user under a per-user limit with a share or
    /// with jobs here.
    pub(super) fn allowance_reports(&self) -> Vec<AllowanceReport> {
        let users: BTreeSet<&String> = self
            .quota
            .shares
            .keys()
            .chain(self.quota.wanted.keys())
            .collect();
        users
            .into_iter()
            .filter_map(|user| {
                let (in_use, wanted) = self.quota.limited_use(user)?;
                let share = self.quota.shares.get(user).copied().unwrap_or_default();
                Some(AllowanceReport {
                    user: user.clone(),
                    seq: share.seq,
                    held: share.held,
                    in_use,
                    wanted,
                    ahead: share.ahead(),
                })
            })
            .take(ALLOWANCE_USERS_PER_REPORT_MAX)
            .collect()
    }

    /// After an admission pass: every share gives back what it no longer needs (journaled
    /// before any report says so), and asks at once when it needs more (see the module
    /// documentation). A stopped queue keeps nothing ahead.
    pub(super) fn settle_allowances(&mut self) {
        let now_ms = self.now_ms;
        let started = self.config.started;
        let mut lowered = Vec::new();
        let mut ask = false;
        let quota = &mut self.quota;
        // A user whose jobs want allowance here and who holds none yet asks too.
        for (user, wanted) in &quota.wanted {
            if !wanted.is_zero() && !quota.shares.contains_key(user) {
                quota.shares.insert(user.clone(), Share::default());
            }
        }
        for (user, share) in &mut quota.shares {
            share.roll(now_ms);
            if !started {
                share.admitted = Usage::default();
                share.admitted_before = Usage::default();
            }
            let limited = quota.limits.user_spanning(user).is_some();
            let (in_use, wanted) = if limited {
                let in_use = quota.counts.in_use(user);
                (in_use, quota.wanted.get(user).copied().unwrap_or(in_use))
            } else {
                (Usage::default(), Usage::default())
            };
            let keep = share.keep(in_use, wanted);
            if keep != share.held {
                share.held = keep;
                lowered.push((user.clone(), allowance_record(share)));
            }
            if limited && share.wants_more(in_use, wanted) && share.asked_at != Some(share.seq) {
                share.asked_at = Some(share.seq);
                ask = true;
            }
        }
        if ask || !lowered.is_empty() {
            self.quota.urgent += 1;
            self.status_version += 1;
        }
        for (user, record) in lowered {
            if mutant::active(Mutant::AllowanceUnjournaled) {
                continue;
            }
            self.journal(JournalRecord::Allowance(user, record));
        }
    }

    /// When a share holding allowance ahead of need must look again (its window ends, and
    /// what it keeps ahead may shrink): an idle shard gives it back without any input.
    pub(super) fn allowance_wakeup_ms(&self) -> Option<u64> {
        self.quota
            .shares
            .iter()
            .filter(|(_, share)| !share.ahead().is_zero())
            .filter(|(user, share)| {
                self.quota
                    .limited_use(user)
                    .is_some_and(|(in_use, wanted)| !share.held.within(in_use.max(wanted)))
            })
            .map(|(_, share)| share.window_ms.saturating_add(ALLOWANCE_AHEAD_WINDOW_MS))
            .min()
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
