//! Fair-share, the shard's side (docs/POLICIES.md, "Fair-share"): the usage its jobs make
//! (allocated cores × milliseconds), counted as they run and end and sent to the
//! coordinator in numbered batches on the status report; and the factors that come back,
//! which make a pending job's priority `urgency_weight × urgency + weight × factor`.
//!
//! A batch is sealed at most every [`USAGE_BATCH_INTERVAL_MS`] (or when it names
//! [`FAIRSHARE_USERS_MAX`] users) and rides on every report until the coordinator says it
//! counted it ([`ShardCore::handle_fairshare`]); only then is the next one sealed. The
//! numbers start above the last the coordinator counted (`Assignment.fairshare`), so a
//! restarted shard's batches are never taken for repeats. Nothing here is journaled: a
//! shard that crashes loses the usage counted since its last batch was sealed (at most an
//! interval's worth, plus the batch in flight), and never counts any twice (running jobs
//! are counted again only from the restart).

use std::collections::{BTreeMap, HashMap};

use shardsched_wire::limits::{FAIRSHARE_FACTOR_ONE, FAIRSHARE_USERS_MAX};
use shardsched_wire::msg::fairshare::{
    FairShareUpdate, FairShareWeights, JobPriority, UsageBatch, UserUsage,
};
use shardsched_wire::msg::shard_coord::FairShareAssignment;
use shardsched_wire::msg::{JobId, JobState};

use super::ShardCore;
use crate::limits::USAGE_BATCH_INTERVAL_MS;

/// Usage counted, the batch in flight, and the factors.
#[derive(Debug)]
pub(super) struct FairShare {
    weights: FairShareWeights,
    /// The next batch's number.
    next_seq: u64,
    /// The batch sent with every report until the coordinator counted it.
    in_flight: Option<UsageBatch>,
    /// Usage counted and not in a batch yet, per user, core-ms.
    counted: BTreeMap<String, u64>,
    /// Running jobs: owner, allocated cores, and the time counted up to.
    running: HashMap<JobId, Running>,
    /// When the last batch was sealed.
    sealed_ms: u64,
    /// Every user's factor below 1, as the coordinator last said, and its version.
    factors: HashMap<String, u32>,
    version: u64,
}

#[derive(Debug)]
struct Running {
    owner: String,
    cores: u64,
    counted_to_ms: u64,
}

impl Running {
    /// Its usage not counted yet at `now_ms`, core-ms.
    fn uncounted(&self, now_ms: u64) -> u64 {
        self.cores
            .saturating_mul(now_ms.saturating_sub(self.counted_to_ms))
    }
}

impl FairShare {
    /// Fair-share as the coordinator assigned it (`None`: off).
    pub(super) fn new(assigned: Option<&FairShareAssignment>) -> Option<FairShare> {
        let a = assigned?;
        Some(FairShare {
            weights: a.weights,
            next_seq: a.usage_seq.saturating_add(1),
            in_flight: None,
            counted: BTreeMap::new(),
            running: HashMap::new(),
            sealed_ms: 0,
            factors: HashMap::new(),
            version: 0,
        })
    }

    /// Adds `running`'s usage up to `until_ms`.
    fn count(counted: &mut BTreeMap<String, u64>, running: &mut Running, until_ms: u64) {
        let used = running.uncounted(until_ms);
        if used == 0 {
            return;
        }
        let v = counted.entry(running.owner.clone()).or_default();
        *v = v.saturating_add(used);
        running.counted_to_ms = until_ms;
    }

    /// `owner`'s factor, parts per million (1 when the coordinator named none).
    fn factor(&self, owner: &str) -> u32 {
        self.factors
            .get(owner)
            .copied()
            .unwrap_or(FAIRSHARE_FACTOR_ONE)
    }
}

impl ShardCore {
    /// A pending job's priority as the queue orders by it, and its parts when fair-share
    /// is on (else the urgency alone, as without fair-share).
    pub(super) fn priority_of(&self, urgency: u8, owner: &str) -> (i64, Option<JobPriority>) {
        match &self.fairshare {
            Some(fs) => {
                let p = fs.weights.priority(urgency, fs.factor(owner));
                (p.total, Some(p))
            }
            None => (i64::from(urgency), None),
        }
    }

    /// Job `id` started (or was restored running) at `start_ms` on `cores` cores: its
    /// usage counts from then.
    pub(super) fn usage_started(&mut self, id: JobId, cores: u64, start_ms: u64) {
        let Some(fs) = &mut self.fairshare else {
            return;
        };
        let Some(job) = self.jobs.table.get(id) else {
            return;
        };
        let running = Running {
            owner: job.owner.clone(),
            cores,
            counted_to_ms: start_ms,
        };
        fs.running.insert(id, running);
    }

    /// Job `id` stopped running now: its usage is counted up to now.
    pub(super) fn usage_stopped(&mut self, id: JobId) {
        let now_ms = self.now_ms;
        let Some(fs) = &mut self.fairshare else {
            return;
        };
        if let Some(mut running) = fs.running.remove(&id) {
            FairShare::count(&mut fs.counted, &mut running, now_ms);
        }
    }

    /// A restart: the running jobs restored count from `now_ms` only (what they used
    /// before was counted by the last run, or lost with its unsent batch).
    pub(super) fn usage_restarted(&mut self, now_ms: u64) {
        if let Some(fs) = &mut self.fairshare {
            for running in fs.running.values_mut() {
                running.counted_to_ms = running.counted_to_ms.max(now_ms);
            }
        }
    }

    /// Seals the usage counted into a batch when none is in flight and an interval has
    /// passed (or the users reached the bound): run at every tick.
    pub(super) fn seal_usage(&mut self) {
        let now_ms = self.now_ms;
        let Some(fs) = &mut self.fairshare else {
            return;
        };
        let due = now_ms >= fs.sealed_ms.saturating_add(USAGE_BATCH_INTERVAL_MS)
            || fs.counted.len() >= FAIRSHARE_USERS_MAX;
        if fs.in_flight.is_some() || !due {
            return;
        }
        for running in fs.running.values_mut() {
            FairShare::count(&mut fs.counted, running, now_ms);
        }
        fs.sealed_ms = now_ms;
        if fs.counted.is_empty() {
            return;
        }
        let mut users = Vec::new();
        while users.len() < FAIRSHARE_USERS_MAX {
            let Some((user, core_ms)) = fs.counted.pop_first() else {
                break;
            };
            users.push(UserUsage { user, core_ms });
        }
        fs.in_flight = Some(UsageBatch {
            seq: fs.next_seq,
            users,
        });
        fs.next_seq += 1;
        self.status_version += 1;
    }

    /// The status report's fair-share part: the batch in flight and the factor version.
    pub(super) fn usage_report(&self) -> (Option<UsageBatch>, u64) {
        match &self.fairshare {
            Some(fs) => (fs.in_flight.clone(), fs.version),
            None => (None, 0),
        }
    }

    /// The coordinator's answer: a batch it counted is done with; a newer factor table
    /// replaces the old, and every pending job takes its new priority.
    pub fn handle_fairshare(&mut self, now_ms: u64, update: &FairShareUpdate) {
        self.observe(now_ms);
        let Some(fs) = &mut self.fairshare else {
            return;
        };
        if fs
            .in_flight
            .as_ref()
            .is_some_and(|b| b.seq <= update.usage_seq)
        {
            fs.in_flight = None;
        }
        fs.next_seq = fs.next_seq.max(update.usage_seq.saturating_add(1));
        debug_assert!(
            fs.in_flight.as_ref().is_none_or(|b| b.seq < fs.next_seq),
            "the batch in flight is numbered at or above the next one"
        );
        let Some(table) = &update.factors else {
            return;
        };
        if table.version <= fs.version {
            return;
        }
        fs.version = table.version;
        fs.factors = table
            .factors
            .iter()
            .map(|f| (f.user.clone(), f.factor_ppm.min(FAIRSHARE_FACTOR_ONE)))
            .collect();
        self.status_version += 1;
        self.reprioritise();
    }

    /// The coordinator's assignment at a re-registration: fair-share turned on or off,
    /// new weights, or batch numbers to start above.
    pub(super) fn reassign_fairshare(&mut self, assigned: Option<&FairShareAssignment>) {
        match (&mut self.fairshare, assigned) {
            (Some(fs), Some(a)) => {
                fs.next_seq = fs.next_seq.max(a.usage_seq.saturating_add(1));
                if fs.weights == a.weights {
                    return;
                }
                fs.weights = a.weights;
            }
            (None, None) => return,
            (_, assigned) => self.fairshare = FairShare::new(assigned),
        }
        self.reprioritise();
    }

    /// Gives every pending job its priority as the factors and weights say now (held ones
    /// too: a held job keeps its place in the queue manager, and should come back at the
    /// priority it would have; running jobs are left alone).
    fn reprioritise(&mut self) {
        let pending: Vec<JobId> = self.jobs.pending.iter().copied().collect();
        for id in pending {
            let Some(job) = self.jobs.table.get(id) else {
                continue;
            };
            if job.state != JobState::Pending {
                continue;
            }
            let (total, parts) = self.priority_of(job.urgency, &job.owner);
            if job.priority == parts {
                continue;
            }
            if let Err(e) = self.qm.set_priority(id.0, total) {
                tracing::error!(job = %id, error = %e, "queue manager lost a pending job");
                continue;
            }
            if let Some(job) = self.jobs.table.get_mut(id) {
                job.priority = parts;
            }
        }
    }

    /// What each user's running jobs here have used and not yet sent, core-ms (for
    /// checks and tests): counted, in flight and running up to now.
    pub fn usage_unsent(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let Some(fs) = &self.fairshare else {
            return out;
        };
        let in_flight = fs.in_flight.iter().flat_map(|b| &b.users);
        for u in in_flight {
            *out.entry(u.user.clone()).or_default() += u.core_ms;
        }
        for (user, core_ms) in &fs.counted {
            *out.entry(user.clone()).or_default() += core_ms;
        }
        for r in fs.running.values() {
            *out.entry(r.owner.clone()).or_default() += r.uncounted(self.now_ms);
        }
        out
    }
}
