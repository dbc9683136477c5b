//! The coordinator's side of allowances (`core/allowances.rs`): grants, caps and their
//! journal, on a core over the embedded configuration.

use std::net::SocketAddr;

use shardsched_wire::msg::coord_shard;
use shardsched_wire::msg::quota::{AllowanceGrant, AllowanceReport, LimitKind, LimitScope, Usage};
use shardsched_wire::msg::shard_coord::Register;

use super::{ConnId, Core};
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
        ahead: Usage::default(),
    }
}

/// A core over the embedded configuration (queues batch and debug, both connected)
/// with `max_running 2` for alice, its journal written.
fn core() -> (Core, Durable) {
    core_limited(2)
}

/// The same with `max_running` `limit` for alice.
fn core_limited(limit: u64) -> (Core, Durable) {
    let config = Config::embedded_default().expect("default config");
    let (mut core, mut durable) = batch_and_debug_connected(config);
    let told = core
        .set_limit(
            LimitKind::MaxRunning,
            LimitScope::User("alice".into()),
            Some(limit),
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
    assert_eq!(core.granted_total("alice"), jobs(2), "debug's at once");
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
    // A registering shard is handed what the ledger grants its queue, and nothing else:
    // what it holds, whatever its own journal kept.
    let mut register = |conn: u64, queue: &str, port: u16| {
        let register = Register {
            queue: queue.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            held: Vec::new(),
            last_job_id: None,
        };
        again
            .register(ConnId(conn), queue, register.listen, &register)
            .expect("registered")
    };
    let batch = register(1, "batch", 7001);
    let granted: Vec<(&str, u64, Usage)> = batch
        .allowances
        .iter()
        .map(|g| (g.user.as_str(), g.seq, g.grant))
        .collect();
    assert_eq!(granted, [("alice", 1, jobs(1))]);
    let debug = register(2, "debug", 7002);
    assert_eq!(debug.allowances, [], "debug was granted nothing");
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

#[test]
fn allowance_ahead_of_need_comes_from_half_of_what_is_free_and_caps_nobody() {
    let (mut core, mut durable) = core_limited(10);
    let (batch, debug) = (qi(&core, "batch"), qi(&core, "debug"));
    let ahead = |mut r: AllowanceReport, n| {
        r.ahead = jobs(n);
        r
    };
    // Batch needs 2 and asks 4 ahead: 2, then half of the 8 left free.
    core.allowance_reports(batch, &[ahead(report(0, 0, 0, 2), 4)]);
    write(&mut core, &mut durable);
    let sent = grants(&mut core);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].1[0].grant, sent[0].1[0].cap),
        (jobs(6), Usage::UNLIMITED)
    );

    // Debug needs 1 and asks 8 ahead: 1, then half of the 3 left; batch keeps its margin.
    core.allowance_reports(debug, &[ahead(report(0, 0, 0, 1), 8)]);
    write(&mut core, &mut durable);
    let sent = grants(&mut core);
    assert_eq!(sent.len(), 1, "nothing for batch: {sent:?}");
    assert_eq!((sent[0].0, sent[0].1[0].grant), (ConnId(2), jobs(2)));
    assert_eq!(core.granted_total("alice"), jobs(8));

    // Debug now needs 5: the 2 free, and batch, holding more than it needs, is capped.
    core.allowance_reports(debug, &[report(2, 2, 2, 5)]);
    write(&mut core, &mut durable);
    let sent = grants(&mut core);
    let to_batch = sent.iter().find(|(c, _)| *c == ConnId(1)).expect("a cap");
    assert_eq!(to_batch.1[0].cap.jobs, 5);
    assert_eq!(core.granted_total("alice"), jobs(10));

    // Batch gives back down to its need: debug gets what it lacked at once, caps lifted.
    core.allowance_reports(batch, &[report(2, 2, 2, 2)]);
    write(&mut core, &mut durable);
    let sent = grants(&mut core);
    let to_debug = sent.iter().find(|(c, _)| *c == ConnId(2)).expect("a grant");
    assert_eq!(to_debug.1[0].grant, jobs(5));
    let to_batch = sent
        .iter()
        .find(|(c, _)| *c == ConnId(1))
        .expect("cap lifted");
    assert_eq!(to_batch.1[0].cap, Usage::UNLIMITED);
}
