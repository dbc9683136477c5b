//! Limits and the coordinator's side of allowances (docs/POLICIES.md, "Limits"): the limit
//! table (configured, or as `limits set` last changed it, journaled), and for each user
//! under a per-user limit that spans queues, what each queue's shard was granted.
//!
//! The invariant kept here: for every user, the sum of what the shards were granted is at
//! most the limit (when the limit was not lowered since), and a grant is raised only by a
//! journaled grant sent after its write ([`Core::allowances_to_send`]), lowered only to
//! what the shard reported holding for the current seq.

use std::collections::{BTreeMap, BTreeSet};

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
    wanted: BTreeMap<(String, String), Usage>,
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
        self.granted
            .iter()
            .filter(|((u, _), _)| u == user)
            .fold(Usage::default(), |sum, (_, g)| sum.plus(g.granted))
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
    /// what it holds, grants more from what is free, and caps the others when it wants
    /// more than is free.
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
        for r in reports {
            let Some(limit) = self.limits.user_spanning(&r.user) else {
                continue;
            };
            let key = (r.user.clone(), queue.clone());
            self.ledger.wanted.insert(key.clone(), r.wanted);
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
            let need = r.wanted.min(limit).minus(grant.granted);
            if need == Usage::default() {
                continue;
            }
            let free = limit.minus(self.ledger.total(&r.user));
            let more = need.min(free);
            if more != Usage::default() {
                let grant = self.ledger.granted.entry(key.clone()).or_default();
                grant.granted = grant.granted.plus(more);
                grant.seq += 1;
                self.ledger.dirty = true;
                self.ledger.unsent.insert(key);
            }
            if !need.minus(more).within(Usage::default()) {
                self.cap_shares(&r.user, limit);
            }
        }
    }

    /// `user` wants more than is free: every shard holding more than its fair part (the
    /// limit split evenly among the shards that want) is asked to come down to it.
    fn cap_shares(&mut self, user: &str, limit: Usage) {
        let wanting: Vec<(String, String)> = self
            .ledger
            .wanted
            .iter()
            .filter(|((u, _), w)| u == user && **w != Usage::default())
            .map(|(k, _)| k.clone())
            .collect();
        let n = wanting.len().max(1) as u64;
        let fair = Usage {
            jobs: limit.jobs.div_ceil(n),
            nodes: limit.nodes.div_ceil(n),
            cores: limit.cores.div_ceil(n),
        };
        let keys: Vec<(String, String)> = self
            .ledger
            .granted
            .keys()
            .filter(|(u, _)| u == user)
            .cloned()
            .collect();
        for key in keys {
            let cap = if self.ledger.granted[&key].granted.within(fair) {
                Usage::UNLIMITED
            } else {
                fair
            };
            let before = self.ledger.caps.insert(key.clone(), cap);
            if before != Some(cap) && !self.ledger.unsent.contains(&key) {
                self.ledger.due.insert(key);
            }
        }
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

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use shardsched_wire::msg::shard_coord::Register;

    use super::*;
    use crate::config::Config;
    use crate::core::tests::{batch_and_debug_connected, write};
    use crate::records::Durable;

    fn jobs(n: u64) -> Usage {
        Usage {
            jobs: n,
            ..Usage::default()
        }
    }

    fn report(seq: u64, held: u64, in_use: u64, wanted: u64) -> AllowanceReport {
        AllowanceReport {
            user: "alice".into(),
            seq,
            held: jobs(held),
            in_use: jobs(in_use),
            wanted: jobs(wanted),
        }
    }

    /// A core over the embedded configuration (queues batch and debug, both connected)
    /// with `max_running 2` for alice, its journal written.
    fn core() -> (Core, Durable) {
        let config = Config::embedded_default().expect("default config");
        let (mut core, mut durable) = batch_and_debug_connected(config);
        let told = core
            .set_limit(
                LimitKind::MaxRunning,
                LimitScope::User("alice".into()),
                Some(2),
            )
            .expect("set");
        assert_eq!(told.len(), 2, "both shards are told");
        write(&mut core, &mut durable);
        (core, durable)
    }

    fn grants(core: &mut Core) -> Vec<(ConnId, Vec<AllowanceGrant>)> {
        core.allowances_to_send()
            .into_iter()
            .map(|(conn, request)| match request {
                coord_shard::Request::Allowances(g) => (conn, g),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn qi(core: &Core, queue: &str) -> usize {
        core.queue_index(queue).expect("queue")
    }

    #[test]
    fn a_grant_leaves_only_once_journaled_and_never_past_the_limit() {
        let (mut core, mut durable) = core();
        let batch = qi(&core, "batch");
        core.allowance_reports(batch, &[report(0, 0, 0, 3)]);
        assert!(grants(&mut core).is_empty(), "nothing before the write");
        write(&mut core, &mut durable);
        let sent = grants(&mut core);
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].0, sent[0].1[0].seq), (ConnId(1), 1));
        assert_eq!(sent[0].1[0].grant, jobs(2), "the whole limit, no more");
        assert_eq!(durable.allowances[0].jobs, 2, "journaled");

        // Debug wants one too: nothing is free, so batch is capped at its fair part.
        let debug = qi(&core, "debug");
        core.allowance_reports(debug, &[report(0, 0, 0, 1)]);
        write(&mut core, &mut durable);
        let sent = grants(&mut core);
        let to_batch = sent.iter().find(|(c, _)| *c == ConnId(1)).expect("a cap");
        assert_eq!(to_batch.1[0].cap.jobs, 1);
        assert_eq!(to_batch.1[0].seq, 1, "a cap is no new grant");
        assert_eq!(core.granted_total("alice"), jobs(2));

        // A stale report (older seq) changes nothing; batch's return frees one for debug.
        core.allowance_reports(batch, &[report(0, 0, 0, 0)]);
        assert_eq!(core.granted_total("alice"), jobs(2));
        core.allowance_reports(batch, &[report(1, 1, 1, 1)]);
        core.allowance_reports(debug, &[report(0, 0, 0, 1)]);
        assert_eq!(core.granted_total("alice"), jobs(2));
        write(&mut core, &mut durable);
        let sent = grants(&mut core);
        let to_debug = sent.iter().find(|(c, _)| *c == ConnId(2)).expect("a grant");
        assert_eq!((to_debug.1[0].seq, to_debug.1[0].grant), (1, jobs(1)));

        // A larger held for the current seq (a report reordered) never raises a grant.
        core.allowance_reports(batch, &[report(1, 2, 0, 0)]);
        assert_eq!(core.granted_total("alice"), jobs(2));
    }

    #[test]
    fn limits_and_grants_outlive_a_restart() {
        let (mut core, mut durable) = core();
        let batch = qi(&core, "batch");
        core.allowance_reports(batch, &[report(0, 0, 0, 1)]);
        write(&mut core, &mut durable);
        let config = Config::embedded_default().expect("default config");
        let (mut again, _) = Core::new(config, &durable, 2000).expect("restarted");
        assert_eq!(
            again.limits().user_limit(LimitKind::MaxRunning, "alice"),
            Some((2, LimitScope::User("alice".into())))
        );
        assert_eq!(again.granted_total("alice"), jobs(1));
        let register = Register {
            queue: "debug".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7002)),
            held: Vec::new(),
            last_job_id: None,
        };
        again
            .register(ConnId(2), "debug", register.listen, &register)
            .expect("registered");
        let debug = qi(&again, "debug");
        again.allowance_reports(debug, &[report(0, 0, 0, 5)]);
        assert_eq!(again.granted_total("alice"), jobs(2), "only what is free");
    }

    #[test]
    fn a_limit_for_a_queue_that_does_not_exist_is_refused() {
        let (mut core, _) = core();
        let refused = core.set_limit(
            LimitKind::MaxPending,
            LimitScope::Queue("nowhere".into()),
            Some(3),
        );
        assert!(refused.is_err());
    }
}
