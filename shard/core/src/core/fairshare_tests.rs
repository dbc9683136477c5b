//! Unit tests of fair-share in the shard: usage counted and batched, a batch kept until
//! the coordinator counted it, factors turned into priorities and the queue's order.

use shardsched_wire::msg::JobState;
use shardsched_wire::msg::fairshare::{FactorTable, FairShareUpdate, FairShareWeights, UserFactor};
use shardsched_wire::msg::shard_coord::FairShareAssignment;

use super::tests::{NOW, assignment, config, jobspec, owned, state, submit};
use super::{CoreOptions, ShardCore};
use crate::limits::USAGE_BATCH_INTERVAL_MS;

const WEIGHTS: FairShareWeights = FairShareWeights {
    weight: 100_000,
    urgency_weight: 1000,
};

/// Queue batch over n0 and n1, owning both, fair-share on, the coordinator having counted
/// batches up to 4.
fn core() -> ShardCore {
    let mut a = assignment(config(&["n0", "n1"]), owned(&["n0", "n1"]), Vec::new());
    a.fairshare = Some(FairShareAssignment {
        weights: WEIGHTS,
        usage_seq: 4,
    });
    ShardCore::new(&a, CoreOptions::default()).expect("core")
}

fn update(usage_seq: u64, version: u64, factors: &[(&str, u32)]) -> FairShareUpdate {
    FairShareUpdate {
        usage_seq,
        factors: (version > 0).then(|| FactorTable {
            version,
            factors: factors
                .iter()
                .map(|&(user, factor_ppm)| UserFactor {
                    user: user.into(),
                    factor_ppm,
                })
                .collect(),
        }),
    }
}

#[test]
fn usage_is_batched_numbered_above_the_coordinators_and_kept_until_counted() {
    let mut core = core();
    core.tick(NOW).expect("tick");
    // One node's four cores for the batch interval.
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(1), None, 100)))
        .expect("accepted");
    core.tick(NOW).expect("tick");
    assert_eq!(state(&core, job.id), JobState::Running);
    let due = NOW + USAGE_BATCH_INTERVAL_MS;
    core.tick(due - 1).expect("tick");
    assert_eq!(
        core.status(due - 1).usage,
        None,
        "nothing before the interval"
    );
    core.tick(due).expect("tick");
    let batch = core.status(due).usage.expect("a batch");
    assert_eq!(batch.seq, 5);
    assert_eq!(batch.users[0].user, "alice");
    assert_eq!(batch.users[0].core_ms, 4 * USAGE_BATCH_INTERVAL_MS);
    // Still in flight: sent again with every report, and nothing new is sealed.
    core.tick(due + USAGE_BATCH_INTERVAL_MS).expect("tick");
    assert_eq!(
        core.status(due + USAGE_BATCH_INTERVAL_MS).usage,
        Some(batch.clone())
    );
    // An older acknowledgement does not count for it.
    core.handle_fairshare(due, &update(4, 0, &[]));
    assert_eq!(core.status(due).usage, Some(batch));
    core.handle_fairshare(due, &update(5, 0, &[]));
    // The next batch holds what ran meanwhile, and only that.
    let later = due + 2 * USAGE_BATCH_INTERVAL_MS;
    core.tick(later).expect("tick");
    let next = core.status(later).usage.expect("the next batch");
    assert_eq!(next.seq, 6);
    assert_eq!(next.users[0].core_ms, 4 * 2 * USAGE_BATCH_INTERVAL_MS);
}

#[test]
fn a_light_users_job_overtakes_a_heavy_users_once_the_factors_arrive() {
    let mut core = core();
    // Both nodes busy, then one pending job each: heavy's first.
    for k in 0..2 {
        core.handle_submit(NOW, "filler", &submit(k, jobspec(Some(1), None, 10)))
            .expect("filler");
    }
    core.tick(NOW).expect("tick");
    let heavy = core
        .handle_submit(NOW + 1, "heavy", &submit(10, jobspec(Some(1), None, 10)))
        .expect("heavy");
    let light = core
        .handle_submit(NOW + 2, "light", &submit(11, jobspec(Some(1), None, 10)))
        .expect("light");
    core.tick(NOW + 2).expect("tick");
    let priority =
        |core: &ShardCore, id| core.job(id).expect("job").summary("batch", true).priority;
    let before = priority(&core, heavy.id).expect("shown while pending");
    assert_eq!(
        (before.base, before.fairshare),
        (16_000, 100_000),
        "factor 1 until told"
    );

    core.handle_fairshare(NOW + 3, &update(0, 7, &[("heavy", 250_000)]));
    let heavy_p = priority(&core, heavy.id).expect("pending");
    let light_p = priority(&core, light.id).expect("pending");
    assert_eq!(
        (heavy_p.total, heavy_p.factor_ppm),
        (16_000 + 25_000, 250_000)
    );
    assert_eq!(light_p.total, 116_000);
    // An older table changes nothing.
    core.handle_fairshare(NOW + 3, &update(0, 6, &[("light", 0)]));
    assert_eq!(priority(&core, light.id), Some(light_p));

    // One node frees: light's job takes it.
    core.tick(NOW + 10_000).expect("tick");
    assert_eq!(state(&core, light.id), JobState::Running);
    assert_eq!(
        state(&core, heavy.id),
        JobState::Running,
        "both nodes freed"
    );
    assert_eq!(priority(&core, light.id), None, "running jobs show none");
}

#[test]
fn off_when_unassigned_priorities_are_urgencies_and_nothing_is_sent() {
    let a = assignment(config(&["n0"]), owned(&["n0"]), Vec::new());
    let mut core = ShardCore::new(&a, CoreOptions::default()).expect("core");
    let job = core
        .handle_submit(NOW, "alice", &submit(1, jobspec(Some(1), None, 100)))
        .expect("accepted");
    core.tick(NOW + 10 * USAGE_BATCH_INTERVAL_MS).expect("tick");
    let status = core.status(NOW + 10 * USAGE_BATCH_INTERVAL_MS);
    assert_eq!((status.usage, status.factors_version), (None, 0));
    assert_eq!(core.job(job.id).expect("job").priority, None);
}
