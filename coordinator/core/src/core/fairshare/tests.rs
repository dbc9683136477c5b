use shardsched_wire::msg::fairshare::{FairShareWeights, UserUsage};

use super::*;
use crate::config::Config;
use crate::core::tests::{batch_and_debug_connected, write};
use crate::records::Durable;

const HOUR_MS: u64 = 3_600_000;

/// A core over the embedded configuration with fair-share on (half-life an hour), queues
/// batch and debug connected, its journal written.
fn core() -> (Core, Durable) {
    let mut config = Config::embedded_default().expect("default config");
    config.fairshare = Some(FairShareConfig {
        half_life_ms: HOUR_MS,
        weights: FairShareWeights {
            weight: 100_000,
            urgency_weight: 1000,
        },
    });
    batch_and_debug_connected(config)
}

fn batch(seq: u64, users: &[(&str, u64)]) -> UsageBatch {
    UsageBatch {
        seq,
        users: users
            .iter()
            .map(|&(user, core_ms)| UserUsage {
                user: user.into(),
                core_ms,
            })
            .collect(),
    }
}

fn updates(core: &mut Core) -> Vec<(ConnId, FairShareUpdate)> {
    core.fairshare_to_send()
        .into_iter()
        .map(|(conn, request)| match request {
            coord_shard::Request::FairShare(u) => (conn, u),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_batch_counts_once_and_is_acknowledged_only_once_durable() {
    let (mut core, mut durable) = core();
    let batch_q = core.queue_index("batch").expect("queue");
    core.fairshare_tick(HOUR_MS);
    core.fairshare_report(batch_q, Some(&batch(1, &[("heavy", 1000)])), 0);
    let before = updates(&mut core);
    assert!(
        before.iter().all(|(_, u)| u.usage_seq == 0),
        "no acknowledgement before the write: {before:?}"
    );
    // The same batch again (a lost answer) counts nothing more.
    core.fairshare_report(batch_q, Some(&batch(1, &[("heavy", 1000)])), 0);
    assert_eq!(core.fairshare_of("heavy").0, 1000);
    write(&mut core, &mut durable);
    let after = updates(&mut core);
    assert_eq!(after.len(), 1);
    assert_eq!((after[0].0, after[0].1.usage_seq), (ConnId(1), 1));
    let record = durable.fairshare.as_ref().expect("journaled");
    assert_eq!(record.usage[0].core_ms, 1000);
    assert_eq!(record.seqs[0].seq, 1);
    // Once durable, the repeat is answered again (its acknowledgement may have been lost).
    core.fairshare_report(batch_q, Some(&batch(1, &[("heavy", 1000)])), 0);
    assert_eq!(core.fairshare_of("heavy").0, 1000);
    assert_eq!(updates(&mut core)[0].1.usage_seq, 1);
}

#[test]
fn usage_decays_by_the_half_life_and_factors_follow_slurms() {
    let (mut core, mut durable) = core();
    let batch_q = core.queue_index("batch").expect("queue");
    let debug_q = core.queue_index("debug").expect("queue");
    core.fairshare_tick(HOUR_MS);
    core.fairshare_report(batch_q, Some(&batch(1, &[("heavy", 3_000_000)])), 0);
    core.fairshare_report(debug_q, Some(&batch(1, &[("light", 1_000_000)])), 0);
    write(&mut core, &mut durable);
    core.fairshare_tick(2 * HOUR_MS);
    assert_eq!(
        core.fairshare_of("heavy").0,
        1_500_000,
        "halved in a half-life"
    );
    // heavy: U = 3/4, S = 1/2: F = 2^-1.5; light: U = 1/4: F = 2^-0.5.
    let (heavy, light) = (core.fairshare_of("heavy").1, core.fairshare_of("light").1);
    assert!(heavy.abs_diff(353_553) <= 1, "{heavy}");
    assert!(light.abs_diff(707_106) <= 1, "{light}");
    let sent = updates(&mut core);
    assert_eq!(sent.len(), 2, "both shards get the table");
    let table = sent[0].1.factors.as_ref().expect("a table");
    assert_eq!(table.factors.len(), 2);
    // A shard that reports the table current gets nothing more.
    let version = table.version;
    core.fairshare_report(batch_q, None, version);
    core.fairshare_tick(2 * HOUR_MS + 10_000);
    assert!(updates(&mut core).is_empty(), "no material change");
}

#[test]
fn the_usage_table_outlives_a_restart_and_seqs_number_on() {
    let (mut core, mut durable) = core();
    let batch_q = core.queue_index("batch").expect("queue");
    core.fairshare_tick(HOUR_MS);
    core.fairshare_report(batch_q, Some(&batch(7, &[("heavy", 1000)])), 0);
    write(&mut core, &mut durable);
    let config = core.config().clone();
    let (again, _) = Core::new(config, &durable.reread(), 2000).expect("restarted");
    assert_eq!(again.fairshare_of("heavy").0, 1000);
    let assignment = again.fairshare_assignment("batch").expect("on");
    assert_eq!(assignment.usage_seq, 7, "the shard numbers on from here");
}

#[test]
fn off_without_the_section_sends_nothing() {
    let config = Config::embedded_default().expect("default config");
    let (mut core, _) = Core::new(config, &Durable::default(), 1000).expect("core");
    core.fairshare_tick(HOUR_MS);
    core.fairshare_report(0, Some(&batch(1, &[("heavy", 1000)])), 0);
    assert!(core.fairshare_to_send().is_empty());
    assert!(core.fairshare_assignment("batch").is_none());
    assert_eq!(core.fairshare_of("heavy").0, 0);
}
