//! Fair-share, the coordinator's side (docs/POLICIES.md, "Fair-share"): every user's usage
//! over all queues, decayed with the configured half-life, and the factors computed from
//! it and sent to every shard.
//!
//! Usage arrives in batches on the shards' status reports ([`Core::fairshare_report`]),
//! each counted once: a batch whose number is not above the last counted for its queue is
//! a repeat. The usage table and the last batch number of every queue are journaled
//! together (the `fairshare` meta record), and a shard hears that its batch was counted
//! only once that write is durable: a batch is either counted and durable, or still the
//! shard's to send again. [`Core::fairshare_tick`] decays the table to `now` (at most
//! every [`FAIRSHARE_DECAY_INTERVAL_MS`]) and recomputes the factors; a material change
//! (any factor moving by [`FAIRSHARE_FACTOR_STEP_PPM`] or more) is a new table version,
//! sent to every shard whose report shows another ([`Core::fairshare_to_send`]).

mod decay;

use std::collections::{BTreeMap, BTreeSet};

use shardsched_failpoint::mutant::{self, Mutant};
use shardsched_wire::limits::{FAIRSHARE_FACTOR_ONE, FAIRSHARE_USERS_MAX};
use shardsched_wire::msg::coord_shard;
use shardsched_wire::msg::fairshare::{FactorTable, FairShareUpdate, UsageBatch, UserFactor};
use shardsched_wire::msg::shard_coord::FairShareAssignment;

use super::{ConnId, Core};
use crate::config::FairShareConfig;
use crate::records::{FairShareRecord, QueueSeqRecord, UserUsageRecord};

/// How often the usage table is decayed and the factors recomputed, ms.
pub const FAIRSHARE_DECAY_INTERVAL_MS: u64 = 1000;
/// The smallest change of a factor that is sent (0.01), parts per million.
pub const FAIRSHARE_FACTOR_STEP_PPM: u32 = 10_000;

/// Usage, batch numbers and factors.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// User → decayed usage, core-ms (at most [`FAIRSHARE_USERS_MAX`] users).
    usage: BTreeMap<String, u64>,
    /// The decay clock (`None` until the first tick starts it): its origin, the half-life
    /// it counts in, and the exponent applied to `usage` so far (Q16 half-lives).
    clock: Option<DecayClock>,
    /// Queue → the last usage batch counted.
    seqs: BTreeMap<String, u64>,
    /// Queue → the last batch counted whose write is durable (what a shard may forget).
    durable_seqs: BTreeMap<String, u64>,
    /// The seqs in the write under way.
    in_write: Option<BTreeMap<String, u64>>,
    /// The record last handed to the journal (what it holds once the write is done).
    written: Option<FairShareRecord>,
    /// Usage counted since the last journal write.
    dirty: bool,
    /// The factors last published (users with a factor below 1), and their version.
    factors: BTreeMap<String, u32>,
    version: u64,
    /// Queue → the factor table version its shard last reported.
    reported: BTreeMap<String, u64>,
    /// Queues due an update.
    due: BTreeSet<String>,
    /// The last tick that decayed, ms.
    last_tick_ms: Option<u64>,
}

impl Ledger {
    /// The ledger the journal kept; factor versions start at `epoch` (the wall clock at
    /// start), so that they keep growing across restarts.
    pub(super) fn new(record: Option<&FairShareRecord>, epoch: u64) -> Ledger {
        let mut ledger = Ledger {
            version: epoch,
            written: record.cloned(),
            ..Ledger::default()
        };
        if let Some(r) = record {
            ledger.clock = Some(DecayClock {
                origin_ms: r.origin_ms,
                half_life_ms: r.half_life_ms,
                applied_q16: r.applied_q16,
            });
            ledger.usage = r
                .usage
                .iter()
                .map(|u| (u.user.clone(), u.core_ms))
                .collect();
            ledger.seqs = r.seqs.iter().map(|s| (s.queue.clone(), s.seq)).collect();
            ledger.durable_seqs = ledger.seqs.clone();
        }
        ledger
    }

    fn record(&self) -> FairShareRecord {
        let clock = self.clock.unwrap_or(DecayClock {
            origin_ms: 0,
            half_life_ms: 0,
            applied_q16: 0,
        });
        FairShareRecord {
            origin_ms: clock.origin_ms,
            half_life_ms: clock.half_life_ms,
            applied_q16: clock.applied_q16,
            usage: self
                .usage
                .iter()
                .map(|(user, &core_ms)| UserUsageRecord {
                    user: user.clone(),
                    core_ms,
                })
                .collect(),
            seqs: self
                .seqs
                .iter()
                .map(|(queue, &seq)| QueueSeqRecord {
                    queue: queue.clone(),
                    seq,
                })
                .collect(),
        }
    }

    /// A journal write takes the usage counted so far, if any.
    pub(super) fn take_for_write(&mut self) -> Option<FairShareRecord> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        let record = self.record();
        self.in_write = Some(self.seqs.clone());
        self.written = Some(record.clone());
        Some(record)
    }

    /// The write is durable: the batches it counted may be forgotten by their shards.
    pub(super) fn written(&mut self) {
        let Some(seqs) = self.in_write.take() else {
            return;
        };
        for (queue, seq) in seqs {
            debug_assert!(
                self.seqs.get(&queue).is_some_and(|&counted| seq <= counted),
                "{queue}: a durable batch number above the counted one"
            );
            if self.durable_seqs.get(&queue) != Some(&seq) {
                self.durable_seqs.insert(queue.clone(), seq);
                self.due.insert(queue);
            }
        }
    }

    /// What the journal holds once every write is done.
    pub(super) fn durable(&self) -> Option<FairShareRecord> {
        self.written.clone()
    }

    /// Decays every user's usage to `now_ms`, forgetting those left with none. A changed
    /// half-life restarts the clock where the old one had decayed to.
    fn decay(&mut self, now_ms: u64, half_life_ms: u64) {
        let clock = match self.clock {
            Some(c) if c.half_life_ms == half_life_ms => c,
            Some(c) => DecayClock {
                origin_ms: c
                    .origin_ms
                    .saturating_add(decay::exponent_ms(c.applied_q16, c.half_life_ms)),
                half_life_ms,
                applied_q16: 0,
            },
            None => DecayClock {
                origin_ms: now_ms,
                half_life_ms,
                applied_q16: 0,
            },
        };
        let total = decay::exponent_q16(now_ms.saturating_sub(clock.origin_ms), half_life_ms);
        let x = total.saturating_sub(clock.applied_q16);
        for value in self.usage.values_mut() {
            *value = decay::decayed(*value, x);
        }
        self.usage.retain(|_, v| *v > 0);
        self.clock = Some(DecayClock {
            applied_q16: clock.applied_q16.max(total),
            ..clock
        });
    }

    /// Keeps the [`FAIRSHARE_USERS_MAX`] users with the most usage.
    fn bound_users(&mut self) {
        if self.usage.len() <= FAIRSHARE_USERS_MAX {
            return;
        }
        let mut by_usage: Vec<(u64, String)> =
            self.usage.iter().map(|(u, &v)| (v, u.clone())).collect();
        by_usage.sort_unstable();
        let excess = self.usage.len() - FAIRSHARE_USERS_MAX;
        for (_, user) in by_usage.into_iter().take(excess) {
            self.usage.remove(&user);
        }
    }

    /// Every user's factor below 1, from the usage now.
    fn computed_factors(&self) -> BTreeMap<String, u32> {
        let total = self.usage.values().fold(0u64, |a, &b| a.saturating_add(b));
        let users = self.usage.len() as u64;
        self.usage
            .iter()
            .map(|(user, &usage)| (user.clone(), decay::factor_ppm(usage, total, users)))
            .filter(|&(_, f)| f < FAIRSHARE_FACTOR_ONE)
            .collect()
    }

    /// The factor table as sent.
    fn table(&self) -> FactorTable {
        FactorTable {
            version: self.version,
            factors: self
                .factors
                .iter()
                .map(|(user, &factor_ppm)| UserFactor {
                    user: user.clone(),
                    factor_ppm,
                })
                .collect(),
        }
    }
}

/// When usage started decaying, and how much it has (see [`decay::exponent_q16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DecayClock {
    origin_ms: u64,
    half_life_ms: u64,
    applied_q16: u64,
}

/// Whether `new` differs from `old` by a step or more for any user (absent: 1).
fn materially_changed(old: &BTreeMap<String, u32>, new: &BTreeMap<String, u32>) -> bool {
    let users: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    users.into_iter().any(|u| {
        let a = old.get(u).copied().unwrap_or(FAIRSHARE_FACTOR_ONE);
        let b = new.get(u).copied().unwrap_or(FAIRSHARE_FACTOR_ONE);
        a.abs_diff(b) >= FAIRSHARE_FACTOR_STEP_PPM
    })
}

impl Core {
    fn fairshare_config(&self) -> Option<FairShareConfig> {
        self.config.fairshare
    }

    /// What a registering shard of `queue` starts fair-share with (`None`: off).
    pub(super) fn fairshare_assignment(&self, queue: &str) -> Option<FairShareAssignment> {
        let config = self.fairshare_config()?;
        Some(FairShareAssignment {
            weights: config.weights,
            usage_seq: self.fairshare.seqs.get(queue).copied().unwrap_or(0),
        })
    }

    /// A shard's status report's fair-share part: counts a new batch, and marks the shard
    /// due an update when its batch was counted already or its factors are not current.
    pub(super) fn fairshare_report(
        &mut self,
        qi: usize,
        batch: Option<&UsageBatch>,
        factors_version: u64,
    ) {
        if self.fairshare_config().is_none() {
            return;
        }
        let queue = self.config.queues[qi].name.clone();
        let ledger = &mut self.fairshare;
        ledger.reported.insert(queue.clone(), factors_version);
        let counted = ledger.seqs.get(&queue).copied().unwrap_or(0);
        let durable = ledger.durable_seqs.get(&queue).copied().unwrap_or(0);
        match batch {
            Some(batch) if batch.seq > counted || mutant::active(Mutant::UsageRecounted) => {
                for u in &batch.users {
                    let v = ledger.usage.entry(u.user.clone()).or_default();
                    *v = v.saturating_add(u.core_ms);
                }
                ledger.bound_users();
                ledger.seqs.insert(queue.clone(), batch.seq);
                ledger.dirty = true;
            }
            // Counted and durable: its acknowledgement was lost; send it again.
            Some(batch) if batch.seq <= durable => {
                ledger.due.insert(queue.clone());
            }
            // Counted, not durable yet: the write's end sends the acknowledgement.
            Some(_) | None => {}
        }
        if factors_version != ledger.version {
            ledger.due.insert(queue);
        }
    }

    /// Time passes: decays the usage (at most every [`FAIRSHARE_DECAY_INTERVAL_MS`]) and
    /// publishes a new factor table when it changed materially.
    pub fn fairshare_tick(&mut self, now_ms: u64) {
        let Some(config) = self.fairshare_config() else {
            return;
        };
        let ledger = &mut self.fairshare;
        if ledger
            .last_tick_ms
            .is_some_and(|t| now_ms < t.saturating_add(FAIRSHARE_DECAY_INTERVAL_MS))
        {
            return;
        }
        ledger.last_tick_ms = Some(now_ms);
        ledger.decay(now_ms, config.half_life_ms);
        let factors = ledger.computed_factors();
        if materially_changed(&ledger.factors, &factors) {
            ledger.factors = factors;
            ledger.version += 1;
            let stale: Vec<String> = ledger
                .reported
                .iter()
                .filter(|&(_, &v)| v != ledger.version)
                .map(|(q, _)| q.clone())
                .collect();
            ledger.due.extend(stale);
        }
    }

    /// The updates due, one `FairShare` command per connected shard: the last batch of
    /// its that is durable, and the factor table when its report showed another.
    pub fn fairshare_to_send(&mut self) -> Vec<(ConnId, coord_shard::Request)> {
        let due = std::mem::take(&mut self.fairshare.due);
        due.into_iter()
            .filter_map(|queue| {
                let qi = self.queue_index(&queue)?;
                let link = self.shards[qi].as_ref()?;
                let ledger = &self.fairshare;
                let current = ledger.reported.get(&queue) == Some(&ledger.version);
                let update = FairShareUpdate {
                    usage_seq: ledger.durable_seqs.get(&queue).copied().unwrap_or(0),
                    factors: (!current).then(|| ledger.table()),
                };
                Some((link.conn, coord_shard::Request::FairShare(update)))
            })
            .collect()
    }

    /// Every user's decayed usage summed, core-ms (for checks: the simulator's I7).
    pub fn fairshare_total(&self) -> u64 {
        self.fairshare
            .usage
            .values()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// `user`'s decayed usage, core-ms, and factor, parts per million (for checks and
    /// tests).
    pub fn fairshare_of(&self, user: &str) -> (u64, u32) {
        let ledger = &self.fairshare;
        let usage = ledger.usage.get(user).copied().unwrap_or(0);
        let factor = ledger
            .factors
            .get(user)
            .copied()
            .unwrap_or(FAIRSHARE_FACTOR_ONE);
        (usage, factor)
    }
}

#[cfg(test)]
mod tests;
