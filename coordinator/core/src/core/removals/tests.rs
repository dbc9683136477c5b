use std::net::SocketAddr;
use std::path::Path;

use shardsched_wire::msg::shard_coord::Register;
use shardsched_wire::msg::{JobList, RefusalCode, coord_shard};

use super::*;
use crate::records::Durable;

/// Cluster of the embedded default: a (node[0-9], default) and b (node[10-19]) own their
/// nodes; c (over a and b) and d (over a) own nothing.
const FOUR_QUEUES: &str = "default_queue = \"a\"\n\
    [queues.a]\nnodes = \"node[0-9]\"\n\
    [queues.b]\nnodes = \"node[10-19]\"\n\
    [queues.c]\nnodes = \"node[0-4,10-19]\"\n\
    [queues.d]\nnodes = \"node[5-9]\"\n";

fn core(text: &str) -> Core {
    let config = Config::parse(text, "test.toml", Path::new(".")).expect("config");
    let mut core = Core::new(config, &Durable::default(), 1).expect("core").0;
    for (conn, queue) in ["a", "b", "c", "d"].iter().enumerate() {
        let register = Register {
            queue: (*queue).into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 4000 + conn as u16)),
            held: Vec::new(),
            last_job_id: None,
        };
        let remote = SocketAddr::from(([127, 0, 0, 1], 5000));
        core.register(ConnId(conn as u64), queue, remote, &register)
            .expect("registered");
    }
    core
}

/// The one step to carry out now.
fn step(core: &mut Core) -> RemovalCommand {
    let mut sent = core.removals_to_send();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(core.removals_to_send().is_empty(), "each step is sent once");
    sent.remove(0)
}

fn jobs(any: bool) -> Result<coord_shard::Response, Refusal> {
    Ok(coord_shard::Response::Jobs(JobList {
        jobs: Vec::new(),
        truncated: any,
    }))
}

fn ack() -> Result<coord_shard::Response, Refusal> {
    Ok(coord_shard::Response::Ack { stale: Vec::new() })
}

/// Asks `queue`'s shard for jobs (none), disables it and pulls its history.
fn hold(core: &mut Core, id: RemovalId, queue: &str) {
    let asked = step(core);
    assert_eq!((asked.queue.as_str(), asked.removal), (queue, id));
    assert!(matches!(
        asked.step,
        RemovalStep::Ask(coord_shard::Request::Jobs(_))
    ));
    core.removal_answer(2, id, jobs(false));
}

fn disable(core: &mut Core, id: RemovalId, queue: &str) {
    let held = step(core);
    assert_eq!(held.queue, queue);
    assert_eq!(
        held.step,
        RemovalStep::Ask(coord_shard::Request::DisableIfIdle)
    );
    core.removal_answer(3, id, ack());
    let pull = step(core);
    assert_eq!(
        (pull.queue.as_str(), pull.step),
        (queue, RemovalStep::PullHistory)
    );
    core.removal_pulled(4, id, Ok(()));
}

/// FOUR_QUEUES's file without c and d (a reload that removes them).
fn without_c_and_d() -> Config {
    Config::parse(
        "default_queue = \"a\"\n[queues.a]\nnodes = \"node[0-9]\"\n\
         [queues.b]\nnodes = \"node[10-19]\"\n",
        "test.toml",
        Path::new("."),
    )
    .expect("config")
}

fn pending(begun: Result<Begun, Refusal>) -> RemovalId {
    match begun {
        Ok(Begun::Pending(id)) => id,
        other => panic!("expected a removal under way, got {other:?}"),
    }
}

#[test]
fn a_removal_asks_disables_and_pulls_before_the_queue_goes() {
    let mut core = core(FOUR_QUEUES);
    let id = pending(core.begin_remove(1, "c", None));
    hold(&mut core, id, "c");
    assert!(core.removals_done().is_empty());
    disable(&mut core, id, "c");
    let done = core.removals_done();
    assert_eq!(done.len(), 1);
    let change = done[0].outcome.as_ref().expect("removed");
    assert_eq!(change.stop.len(), 1, "c's shard is told to stop");
    assert!(core.queue_flags("c").is_none(), "c is gone");
    assert!(core.removals_to_send().is_empty());
}

#[test]
fn a_removal_refused_for_jobs_disables_nothing() {
    let mut core = core(FOUR_QUEUES);
    let id = pending(core.begin_remove(1, "c", None));
    step(&mut core);
    core.removal_answer(2, id, jobs(true));
    let done = core.removals_done();
    let refusal = done[0].outcome.as_ref().expect_err("refused");
    assert_eq!(refusal.code, RefusalCode::Policy);
    assert!(refusal.message.contains("has jobs"), "{refusal}");
    assert!(done[0].re_enable.is_empty(), "nothing was disabled");
    assert!(
        core.removals_to_send().is_empty(),
        "no DisableIfIdle follows"
    );
    assert!(core.queue_flags("c").is_some());
}

#[test]
fn a_reload_refused_after_holding_one_queue_gives_it_its_state_back() {
    let mut core = core(FOUR_QUEUES);
    let file = without_c_and_d();
    let id = core.begin_reload(1, file).expect("begun");
    hold(&mut core, id, "c");
    hold(&mut core, id, "d");
    disable(&mut core, id, "c");
    // d took a job between its check and its disable: its shard refuses.
    step(&mut core);
    let busy = Refusal::new(RefusalCode::Policy, "queue d has jobs");
    core.removal_answer(5, id, Err(busy));
    let done = core.removals_done();
    assert!(done[0].outcome.is_err());
    let back: Vec<(&str, ConnId, bool)> = done[0]
        .re_enable
        .iter()
        .map(|c| (c.queue.as_str(), c.conn, c.enabled))
        .collect();
    assert_eq!(back, [("c", ConnId(2), true)]);
    assert!(core.queue_flags("c").is_some() && core.queue_flags("d").is_some());
}

#[test]
fn a_held_shard_that_disconnects_refuses_the_removal() {
    let mut core = core(FOUR_QUEUES);
    let id = pending(core.begin_remove(1, "c", None));
    hold(&mut core, id, "c");
    step(&mut core);
    core.removal_answer(3, id, ack());
    // Restarted, it would take its queue state (enabled) from its registration.
    core.disconnected(ConnId(2));
    let done = core.removals_done();
    let refusal = done[0].outcome.as_ref().expect_err("refused");
    assert_eq!(refusal.code, RefusalCode::Unavailable);
    assert!(done[0].re_enable.is_empty(), "its connection is gone");
    assert!(core.queue_flags("c").is_some());
    // The history pull's late outcome changes nothing.
    core.removal_pulled(4, id, Ok(()));
    assert!(core.removals_done().is_empty());
}

#[test]
fn remove_give_to_waits_for_its_move_and_gives_up_past_the_wait() {
    let mut core = core(FOUR_QUEUES);
    let id = pending(core.begin_remove(1, "b", Some("c")));
    assert_eq!(core.removals_next_wakeup(), Some(1 + REMOVE_MOVE_WAIT_MS));
    assert!(
        core.removals_to_send().is_empty(),
        "nothing asked before the move"
    );
    core.removals_tick(REMOVE_MOVE_WAIT_MS);
    assert!(core.removals_done().is_empty());
    core.removals_tick(1 + REMOVE_MOVE_WAIT_MS);
    let done = core.removals_done();
    assert_eq!(done[0].removal, id);
    let change = done[0].outcome.as_ref().expect("answered");
    assert!(
        change.changes.iter().any(|c| c.contains("is not done yet")),
        "{change:?}"
    );
    assert!(core.queue_flags("b").is_some(), "b stays until asked again");
}

#[test]
fn a_shard_that_registers_during_the_removal_of_its_queue_refuses_it() {
    let mut core = core(FOUR_QUEUES);
    // d's shard is restarting as the reload begins: d is not asked, nor held.
    core.disconnected(ConnId(3));
    let file = without_c_and_d();
    let id = core.begin_reload(1, file).expect("begun");
    hold(&mut core, id, "c");
    // It registers again (and may take jobs) before the removal ends.
    let register = Register {
        queue: "d".into(),
        listen: SocketAddr::from(([127, 0, 0, 1], 4009)),
        held: Vec::new(),
        last_job_id: None,
    };
    let remote = SocketAddr::from(([127, 0, 0, 1], 5000));
    core.register(ConnId(9), "d", remote, &register)
        .expect("registered");
    disable(&mut core, id, "c");
    let done = core.removals_done();
    let refusal = done[0].outcome.as_ref().expect_err("refused");
    assert_eq!(refusal.code, RefusalCode::Unavailable);
    assert!(refusal.message.contains("queue d"), "{refusal}");
    assert!(core.queue_flags("d").is_some(), "d is kept");
}
