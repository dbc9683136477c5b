//! The agent registry: registration and the owner an agent is told, liveness (down after
//! the heartbeat timeout, back with `return_to_service`), owners sent at `Acquire`, and a
//! release taken only on the agent's word.

use std::net::SocketAddr;
use std::path::Path;

use shardsched_wire::Fluid;
use shardsched_wire::msg::agent::{AgentReport, JobOnNode, JobReport, NodeOwner, OwnerChange};
use shardsched_wire::msg::coord_shard::{FreeAt, Release, ReleaseState, Request, Response};
use shardsched_wire::msg::shard_coord::Register;
use shardsched_wire::msg::{Generation, MoveId, NodeGen, RefusalCode, coord_node, node_coord};

use super::UNREACHABLE_REASON;
use crate::config::Config;
use crate::core::{AgentFlags, ConnId, Core, NodeFlag};
use crate::records::Durable;

const NOW: u64 = 1_800_000_000_000;
const TIMEOUT: u64 = 4_000;

fn core(extra: &str) -> Core {
    let text = format!(
        "default_queue = \"a\"\n\
         [cluster.inline]\nname = \"t\"\n[[cluster.inline.nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 2\n\
         [queues.a]\nnodes = \"n[0-3]\"\n\
         [queues.b]\nnodes = \"n[0-3]\"\nstarted = false\n\
         [agents]\nheartbeat_timeout = \"4s\"\n{extra}"
    );
    let config = Config::parse(&text, "test.toml", Path::new(".")).expect("config");
    Core::new(config, &Durable::default(), 1).expect("core").0
}

fn listen(i: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 1, i], 5000))
}

fn report(node: &str, jobs: Vec<JobReport>) -> AgentReport {
    AgentReport {
        node: node.to_owned(),
        owner: None,
        unhealthy: None,
        lease_ms: TIMEOUT / 2,
        jobs,
    }
}

fn running(queue: &str) -> JobReport {
    JobReport {
        job: Fluid(9),
        queue: queue.to_owned(),
        generation: Generation(1),
        state: JobOnNode::Running { supervisor_pid: 1 },
    }
}

fn register_shard(core: &mut Core, queue: &str, conn: u64) {
    let reg = Register {
        queue: queue.into(),
        listen: SocketAddr::from(([127, 0, 0, 1], 7000 + conn as u16)),
        held: Vec::new(),
        last_job_id: None,
    };
    core.register(
        ConnId(conn),
        queue,
        SocketAddr::from(([127, 0, 0, 1], 1)),
        &reg,
    )
    .expect("registers");
    core.moves_registered(NOW, queue, &[]);
}

fn owner(answer: &node_coord::Response) -> Option<NodeOwner> {
    match answer {
        node_coord::Response::Registered { owner, .. } => owner.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_agent_registers_for_its_own_node_and_learns_its_owner() {
    let mut core = core("");
    let refused = core
        .agent_register(NOW, ConnId(10), "n1", listen(1), report("n0", Vec::new()))
        .expect_err("another node");
    assert_eq!(refused.code, RefusalCode::Forbidden);
    let refused = core
        .agent_register(NOW, ConnId(10), "n9", listen(1), report("n9", Vec::new()))
        .expect_err("not a node");
    assert_eq!(refused.code, RefusalCode::NotFound);
    let (answer, back) = core
        .agent_register(NOW, ConnId(10), "n0", listen(1), report("n0", Vec::new()))
        .expect("registers");
    assert_eq!(back, AgentFlags::default());
    assert_eq!(
        owner(&answer),
        Some(NodeOwner {
            queue: "a".into(),
            generation: Generation(1)
        })
    );
    let node_coord::Response::Registered {
        heartbeat_interval_ms,
        heartbeat_timeout_ms,
        ..
    } = answer
    else {
        unreachable!()
    };
    assert_eq!(
        (heartbeat_interval_ms, heartbeat_timeout_ms),
        (TIMEOUT / 3, TIMEOUT)
    );
    let addresses = core.agent_addresses(&["n0".into(), "n1".into()]);
    assert_eq!(addresses[0].address, Some(listen(1)));
    assert_eq!(addresses[1].address, None);
}

#[test]
fn a_silent_agent_marks_its_node_down_and_return_to_service_brings_it_back() {
    for return_to_service in [false, true] {
        let extra = format!("return_to_service = {return_to_service}\n");
        let mut core = core(&extra);
        register_shard(&mut core, "a", 1);
        core.agent_register(NOW, ConnId(10), "n0", listen(1), report("n0", Vec::new()))
            .expect("registers");
        core.agent_heartbeat(NOW + 1_000, ConnId(10), "n0", report("n0", Vec::new()))
            .expect("heartbeat");
        assert_eq!(core.agents_next_wakeup(), Some(NOW + 1_000 + TIMEOUT));
        assert!(
            core.agents_tick(NOW + TIMEOUT).is_empty(),
            "heard a second ago"
        );
        let down = core.agents_tick(NOW + 1_000 + TIMEOUT);
        let ((queue, reason), (conn, nodes)) = down.into_iter().next().expect("down");
        assert_eq!(
            (queue.as_str(), conn, nodes),
            ("a", ConnId(1), vec!["n0".to_owned()])
        );
        assert!(reason.starts_with(UNREACHABLE_REASON), "{reason}");
        assert!(reason.ends_with('Z'), "a UTC time: {reason}");
        assert!(core.agents_tick(NOW + 60_000).is_empty(), "marked once");
        let refused = core
            .check_agents_heard(NOW + 60_000, &["n0".into()])
            .expect_err("resource up while silent");
        assert!(refused.message.contains("n0 (last heard"), "{refused}");
        core.agent_disconnected(ConnId(10));
        let (_, back) = core
            .agent_register(
                NOW + 70_000,
                ConnId(11),
                "n0",
                listen(1),
                report("n0", Vec::new()),
            )
            .expect("registers again");
        let flags = core.node_flags("n0");
        if return_to_service {
            assert_eq!(back.up.len(), 1, "the shard is told the node is up");
            assert!(flags.is_none(), "{flags:?}");
        } else {
            assert!(back.up.is_empty());
            assert!(
                flags.and_then(|f| f.down).is_some(),
                "down until resource up"
            );
        }
    }
}

#[test]
fn with_agents_required_a_node_whose_agent_never_came_is_down() {
    let mut core = core("required = true\n");
    core.agent_register(NOW, ConnId(10), "n0", listen(1), report("n0", Vec::new()))
        .expect("registers");
    assert!(
        core.agents_tick(NOW).is_empty(),
        "the first tick starts the clock"
    );
    core.agent_heartbeat(NOW + 1, ConnId(10), "n0", report("n0", Vec::new()))
        .expect("heartbeat");
    let down = core.agents_tick(NOW + TIMEOUT);
    assert!(down.is_empty(), "no shard to tell, but the flags are set");
    for node in ["n1", "n2", "n3"] {
        let flags = core.node_flags(node).expect("flagged");
        assert!(flags.down.expect("down").starts_with(UNREACHABLE_REASON));
    }
    assert!(core.node_flags("n0").is_none(), "its agent was heard since");
}

/// Queues a and b registered, n0's agent (on connection 10) running a job of a, and n0
/// moving from a to b: the release the coordinator sends a for the move, and a's answer
/// that n0 is free.
fn n0_moving_with_a_job_of_a(core: &mut Core) -> (Request, Response) {
    register_shard(core, "a", 1);
    core.queue_control(
        NOW,
        "b",
        shardsched_wire::msg::client_coord::QueueAction::Start { take: false },
    )
    .expect_err("b would own nothing");
    register_shard(core, "b", 2);
    core.agent_register(
        NOW,
        ConnId(10),
        "n0",
        listen(1),
        report("n0", vec![running("a")]),
    )
    .expect("registers");
    let move_id = core
        .move_between(NOW, &["n0".into()], "a", "b", None)
        .expect("move");
    let n0 = NodeGen {
        node: "n0".into(),
        generation: Generation(2),
    };
    let release = Request::Release(Release {
        move_id,
        nodes: vec![n0.clone()],
    });
    let free = Response::Releasing {
        nodes: vec![ReleaseState {
            node: n0,
            free: FreeAt::Now,
            jobs: Vec::new(),
        }],
        stale: Vec::new(),
    };
    (release, free)
}

#[test]
fn an_acquire_tells_the_agent_its_new_owner_and_a_release_waits_for_the_agents_word() {
    let mut core = core("");
    let (release, free) = n0_moving_with_a_job_of_a(&mut core);
    let (answer, _) = core
        .agent_register(
            NOW,
            ConnId(11),
            "n0",
            listen(1),
            report("n0", vec![running("a")]),
        )
        .expect("registers again mid-move");
    assert_eq!(owner(&answer), None, "mid-move: keeps the owner it knows");
    let write = core.journal_take().expect("the move is journaled");
    core.journal_done(&write);
    core.moves_to_send();
    // The donor says n0 is free, but its agent still runs a's job: not released.
    core.moves_answer(NOW, "a", &release, &free);
    if let Some(write) = core.journal_take() {
        core.journal_done(&write);
    }
    assert!(
        !core
            .moves_to_send()
            .iter()
            .any(|c| matches!(c.request, Request::Acquire(_))),
        "no acquire before the agent reports the node clean"
    );
    assert!(core.agents_to_send().is_empty());
    core.agent_heartbeat(NOW + 1, ConnId(11), "n0", report("n0", Vec::new()))
        .expect("clean now");
    core.moves_answer(NOW + 2, "a", &release, &free);
    let write = core.journal_take().expect("the release is journaled");
    core.journal_done(&write);
    let sent = core.moves_to_send();
    assert!(
        sent.iter()
            .any(|c| matches!(c.request, Request::Acquire(_)))
    );
    let owners = core.agents_to_send();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].conn, ConnId(11));
    assert_eq!(
        owners[0].request,
        coord_node::Request::Owner {
            owner: NodeOwner {
                queue: "b".into(),
                generation: Generation(2)
            },
            change: OwnerChange::Acquired,
        }
    );
    let _ = MoveId(0);
}

#[test]
fn an_agent_that_reports_its_node_unfit_has_it_drained_with_its_reason() {
    let mut core = core("");
    register_shard(&mut core, "a", 1);
    core.agent_register(NOW, ConnId(10), "n0", listen(1), report("n0", Vec::new()))
        .expect("registers");
    let mut unfit = report("n0", Vec::new());
    unfit.unhealthy = Some("health check failed: /sbin/check (exit status: 1): disk full".into());
    let flags = core
        .agent_heartbeat(NOW + 1, ConnId(10), "n0", unfit.clone())
        .expect("heartbeat");
    let ((queue, reason), (_, nodes)) = flags.drained.into_iter().next().expect("drained");
    assert_eq!((queue.as_str(), nodes), ("a", vec!["n0".to_owned()]));
    assert!(reason.ends_with("disk full"), "{reason}");
    let again = core
        .agent_heartbeat(NOW + 2, ConnId(10), "n0", unfit.clone())
        .expect("heartbeat");
    assert!(again.drained.is_empty(), "drained once");
    // An admin's undrain holds while the agent repeats the same reason.
    core.set_node_flag(&["n0".to_owned()], NodeFlag::Drained, false, "")
        .expect("undrain");
    let repeated = core
        .agent_heartbeat(NOW + 3, ConnId(10), "n0", unfit.clone())
        .expect("heartbeat");
    assert!(repeated.drained.is_empty(), "the undrain holds");
    assert!(core.node_flags("n0").and_then(|f| f.drained).is_none());
    // Fit, then unfit again: drained again, and it stays drained while fit.
    core.agent_heartbeat(NOW + 4, ConnId(10), "n0", report("n0", Vec::new()))
        .expect("heartbeat");
    let relapse = core
        .agent_heartbeat(NOW + 5, ConnId(10), "n0", unfit)
        .expect("heartbeat");
    assert_eq!(relapse.drained.len(), 1, "a new failure drains again");
    core.agent_heartbeat(NOW + 6, ConnId(10), "n0", report("n0", Vec::new()))
        .expect("heartbeat");
    assert!(core.node_flags("n0").and_then(|f| f.drained).is_some());
}

/// A dead machine's node leaves its move: once its agent is gone (disconnected, and its
/// node marked down for its silence), the donor's word that the node is free is taken.
#[test]
fn a_release_is_taken_on_the_donors_word_once_the_agent_is_gone() {
    let mut core = core("");
    let (release, free) = n0_moving_with_a_job_of_a(&mut core);
    let write = core.journal_take().expect("the move is journaled");
    core.journal_done(&write);
    core.moves_to_send();
    let acquired = |core: &mut Core| {
        if let Some(write) = core.journal_take() {
            core.journal_done(&write);
        }
        core.moves_to_send()
            .iter()
            .any(|c| matches!(c.request, Request::Acquire(_)))
    };
    // The machine dies: its agent's connection ends, its last report still shows a's job.
    core.agent_disconnected(ConnId(10));
    core.moves_answer(NOW + 1, "a", &release, &free);
    assert!(!acquired(&mut core), "unreachable, not yet gone: it waits");
    let down = core.agents_tick(NOW + TIMEOUT);
    assert_eq!(down.len(), 1, "marked down for its silence");
    core.moves_answer(NOW + TIMEOUT + 1, "a", &release, &free);
    assert!(acquired(&mut core), "gone: the donor's word is taken");
}

#[test]
fn an_agent_learns_its_owner_when_a_definition_change_grants_its_node() {
    let text = "default_queue = \"a\"\n\
         [cluster.inline]\nname = \"t\"\n[[cluster.inline.nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 2\n\
         [queues.a]\nnodes = \"n[0-1]\"\n";
    let config = Config::parse(text, "test.toml", Path::new(".")).expect("config");
    let mut core = Core::new(config, &Durable::default(), 1).expect("core").0;
    let (answer, _) = core
        .agent_register(NOW, ConnId(12), "n2", listen(2), report("n2", Vec::new()))
        .expect("registers");
    assert_eq!(owner(&answer), None, "no queue owns n2");
    let grow = shardsched_wire::msg::client_coord::QueueSpec {
        name: "a".into(),
        nodes: Some("n[0-3]".into()),
        ..Default::default()
    };
    core.update_queue(NOW, &grow).expect("grown");
    let generation = core.moves.generation_of("n2").expect("n2");
    let owners = core.agents_to_send();
    assert_eq!(owners.len(), 1, "n3 has no agent connected: {owners:?}");
    assert_eq!(owners[0].conn, ConnId(12));
    assert_eq!(
        owners[0].request,
        coord_node::Request::Owner {
            owner: NodeOwner {
                queue: "a".into(),
                generation,
            },
            change: OwnerChange::Granted,
        }
    );
}
