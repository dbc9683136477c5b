//! Fair-share (docs/POLICIES.md, "Fair-share"): the usage each shard counts and sends in
//! batches on its status report, the factors the coordinator computes from the decayed
//! usage and sends back, and the weights a shard turns them into priorities with.
//!
//! A batch carries a sequence number per shard, so that a batch sent twice (a lost
//! answer, a reconnection) is counted once; the coordinator's answer says the last batch
//! it made durable ([`FairShareUpdate::usage_seq`]). A factor table carries a version, so
//! that a shard applies only a newer one and the coordinator sends it again to a shard
//! whose report shows an older one.

use serde::{Deserialize, Serialize};

use super::bounds;
use super::common::{Refusal, RefusalCode};
use crate::limits::{FAIRSHARE_FACTOR_ONE, FAIRSHARE_USERS_MAX, FAIRSHARE_WEIGHT_MAX};

/// The weights a shard computes a pending job's priority with (`[fairshare]`):
/// `urgency_weight × urgency + weight × factor` (flux-accounting's shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairShareWeights {
    /// The fair-share part's weight: the priority a factor of 1 adds.
    pub weight: u64,
    /// What one step of urgency (0..=31) adds.
    pub urgency_weight: u64,
}

/// Usage a shard counted since its last batch: per user, allocated cores × milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageBatch {
    /// This shard's batch number: 1, 2, … (the coordinator counts a number once).
    pub seq: u64,
    /// Per user, at most [`FAIRSHARE_USERS_MAX`].
    pub users: Vec<UserUsage>,
}

/// One user's usage in a batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserUsage {
    /// The user.
    pub user: String,
    /// Allocated cores × milliseconds.
    pub core_ms: u64,
}

/// The coordinator's answer to a shard's usage and factor version (`coord_shard::FairShare`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairShareUpdate {
    /// The last of this shard's batches the coordinator counted and journaled (0: none).
    pub usage_seq: u64,
    /// The factors, when the shard's report showed an older table than the current one.
    pub factors: Option<FactorTable>,
}

/// Every user's fair-share factor that is not 1.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactorTable {
    /// Grows with every material change (from the coordinator's start time, so that it
    /// grows across its restarts too).
    pub version: u64,
    /// At most [`FAIRSHARE_USERS_MAX`]; a user not named has factor 1.
    pub factors: Vec<UserFactor>,
}

/// One user's factor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserFactor {
    /// The user.
    pub user: String,
    /// The factor in parts per million, 0..=[`FAIRSHARE_FACTOR_ONE`].
    pub factor_ppm: u32,
}

/// A pending job's priority and its parts (`JobSummary::priority`), while fair-share is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPriority {
    /// What the queue orders by: `base + fairshare`.
    pub total: i64,
    /// The urgency's part: urgency weight × urgency.
    pub base: i64,
    /// The fair-share part: weight × factor.
    pub fairshare: i64,
    /// The fair-share weight.
    pub weight: u64,
    /// The owner's factor, parts per million.
    pub factor_ppm: u32,
}

fn too_many(what: &str, n: usize) -> Result<(), Refusal> {
    if n > FAIRSHARE_USERS_MAX {
        return Err(Refusal::new(
            RefusalCode::Invalid,
            format!("{n} users' {what} in one message, more than {FAIRSHARE_USERS_MAX}"),
        ));
    }
    Ok(())
}

impl UsageBatch {
    /// Its bounds: users, their names.
    pub fn check(&self) -> Result<(), Refusal> {
        too_many("usage", self.users.len())?;
        self.users
            .iter()
            .try_for_each(|u| bounds::name("the user name", &u.user))
    }
}

impl FairShareUpdate {
    /// Its bounds: users, their names, factors at most 1.
    pub fn check(&self) -> Result<(), Refusal> {
        let Some(table) = &self.factors else {
            return Ok(());
        };
        too_many("factors", table.factors.len())?;
        table.factors.iter().try_for_each(|f| {
            bounds::name("the user name", &f.user)?;
            if f.factor_ppm > FAIRSHARE_FACTOR_ONE {
                return Err(Refusal::new(
                    RefusalCode::Invalid,
                    format!("a factor of {} ppm, more than 1", f.factor_ppm),
                ));
            }
            Ok(())
        })
    }
}

impl FairShareWeights {
    /// Its bounds: each weight at most [`FAIRSHARE_WEIGHT_MAX`].
    pub fn check(&self) -> Result<(), Refusal> {
        if self.weight > FAIRSHARE_WEIGHT_MAX || self.urgency_weight > FAIRSHARE_WEIGHT_MAX {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!("a fair-share weight above {FAIRSHARE_WEIGHT_MAX}"),
            ));
        }
        Ok(())
    }

    /// A job's priority and its parts: `urgency_weight × urgency + weight × factor`.
    pub fn priority(&self, urgency: u8, factor_ppm: u32) -> JobPriority {
        let factor = u128::from(factor_ppm.min(FAIRSHARE_FACTOR_ONE));
        let fairshare = u128::from(self.weight) * factor / u128::from(FAIRSHARE_FACTOR_ONE);
        let fairshare = i64::try_from(fairshare).unwrap_or(i64::MAX);
        let base = i64::try_from(self.urgency_weight.saturating_mul(u64::from(urgency)))
            .unwrap_or(i64::MAX);
        JobPriority {
            total: base.saturating_add(fairshare),
            base,
            fairshare,
            weight: self.weight,
            factor_ppm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_is_its_parts_summed() {
        let w = FairShareWeights {
            weight: 100_000,
            urgency_weight: 1000,
        };
        let p = w.priority(16, 534_000);
        assert_eq!((p.base, p.fairshare, p.total), (16_000, 53_400, 69_400));
        assert_eq!(
            w.priority(16, 2_000_000).fairshare,
            100_000,
            "a factor is at most 1"
        );
    }

    #[test]
    fn a_factor_above_one_is_refused() {
        let update = FairShareUpdate {
            usage_seq: 0,
            factors: Some(FactorTable {
                version: 1,
                factors: vec![UserFactor {
                    user: "alice".into(),
                    factor_ppm: FAIRSHARE_FACTOR_ONE + 1,
                }],
            }),
        };
        assert!(update.check().is_err());
    }
}
