//! Unit tests of the node table, one per command, plus a property test: any sequence of
//! commands, repeated and reordered, never moves a node's generation backwards, never
//! leaves a node both up and unowned, and reports exactly the up/down transitions.

use proptest::prelude::*;
use shardsched_wire::fluid::Fluid;
use shardsched_wire::msg::coord_shard::{
    Acquire, CancelJobs, FreeAt, Incoming, IncomingNode, Reclaim, Release, Response, StaleNode,
    Withdraw,
};
use shardsched_wire::msg::shard_coord::Released;
use shardsched_wire::msg::{Generation, JobId, MoveId, NodeGen};

use super::*;

fn ng(node: &str, g: u64) -> NodeGen {
    NodeGen {
        node: node.into(),
        generation: Generation(g),
    }
}

fn owning(nodes: &[&str]) -> NodeTable {
    let mut m = NodeTable::new();
    let owned: Vec<NodeGen> = nodes.iter().map(|n| ng(n, 1)).collect();
    m.apply_assignment(&owned, &[]);
    m
}

fn no_jobs(_: &str) -> Vec<(JobId, u64)> {
    Vec::new()
}

#[test]
fn release_of_an_idle_node_is_immediate() {
    let mut m = owning(&["n0"]);
    assert!(m.is_up("n0"));
    let release = Release {
        move_id: MoveId(1),
        nodes: vec![ng("n0", 2)],
    };
    let (resp, effects) = m.handle_release(&release, &no_jobs);
    let Response::Releasing { nodes, stale } = resp else {
        panic!("wrong answer kind");
    };
    assert!(stale.is_empty());
    assert_eq!(nodes[0].free, FreeAt::Now);
    assert!(!m.is_up("n0"));
    assert!(
        matches!(effects[0], Effect::Persist(..)),
        "journal before answering"
    );
    assert_eq!(
        effects[1],
        Effect::WentDown {
            node: "n0".into(),
            generation: Generation(2)
        }
    );
    assert_eq!(effects[2], Effect::TakeDown("n0".into()));
    // A repeat gets the same answer and changes nothing.
    let (again, effects) = m.handle_release(&release, &no_jobs);
    assert!(matches!(again, Response::Releasing { ref nodes, .. } if nodes[0].free == FreeAt::Now));
    assert!(effects.is_empty());
}

#[test]
fn a_busy_node_goes_outgoing_and_is_released_when_its_last_job_ends() {
    let mut m = owning(&["n0"]);
    let job = Fluid(7);
    let busy = |n: &str| {
        if n == "n0" {
            vec![(job, 500), (Fluid(8), 900)]
        } else {
            Vec::new()
        }
    };
    let release = Release {
        move_id: MoveId(3),
        nodes: vec![ng("n0", 2)],
    };
    let (resp, effects) = m.handle_release(&release, &busy);
    let Response::Releasing { nodes, .. } = resp else {
        panic!("wrong answer kind");
    };
    assert_eq!(nodes[0].free, FreeAt::Expected(900), "the last job's end");
    assert_eq!(nodes[0].jobs, vec![job, Fluid(8)]);
    assert!(matches!(effects[1], Effect::WentDown { .. }));
    assert_eq!(effects[2], Effect::StopAllocating("n0".into()));
    assert!(!m.is_schedulable("n0"));
    let one_left = |n: &str| {
        if n == "n0" {
            vec![(Fluid(8), 900)]
        } else {
            Vec::new()
        }
    };
    assert_eq!(m.allocations_gone(&["n0".into()], &one_left).0, Vec::new());
    let (released, _) = m.allocations_gone(&["n0".into()], &no_jobs);
    assert_eq!(
        released,
        vec![Released {
            move_id: MoveId(3),
            nodes: vec![ng("n0", 2)]
        }]
    );
    assert_eq!(m.entry("n0").holding, Holding::NotOwned);
    assert!(
        m.allocations_gone(&["n0".into()], &no_jobs).0.is_empty(),
        "reported once"
    );
}

#[test]
fn older_generations_are_refused_as_stale() {
    let mut m = owning(&["n0"]);
    m.handle_reclaim(&Reclaim {
        move_id: MoveId(1),
        nodes: vec![ng("n0", 3)],
    });
    let (resp, effects) = m.handle_release(
        &Release {
            move_id: MoveId(1),
            nodes: vec![ng("n0", 2)],
        },
        &no_jobs,
    );
    assert!(effects.is_empty());
    assert_eq!(
        resp,
        Response::Releasing {
            nodes: Vec::new(),
            stale: vec![StaleNode {
                node: ng("n0", 2),
                seen: Generation(3)
            }]
        }
    );
    assert!(m.is_up("n0"));
}

#[test]
fn incoming_then_acquire_brings_the_node_up_with_its_flags() {
    let mut m = owning(&[]);
    m.set_flag("n5", Flag::Drained, Some("disks".into()));
    let incoming = Incoming {
        move_id: MoveId(2),
        nodes: vec![IncomingNode {
            node: ng("n5", 4),
            expected_free_ms: Some(1000),
        }],
    };
    let (_, effects) = m.handle_incoming(&incoming);
    assert!(effects.contains(&Effect::Reservable {
        node: "n5".into(),
        from_ms: Some(1000)
    }));
    assert!(!m.is_up("n5"));
    let acquire = Acquire {
        move_id: MoveId(2),
        nodes: vec![ng("n5", 4)],
        flags: Default::default(),
    };
    let (resp, effects) = m.handle_acquire(&acquire);
    assert_eq!(resp, Response::Ack { stale: Vec::new() });
    assert!(effects.contains(&Effect::BringUp {
        node: "n5".into(),
        drained: true,
        down: false
    }));
    assert!(effects.contains(&Effect::WentUp {
        node: "n5".into(),
        generation: Generation(4)
    }));
    assert!(m.is_up("n5") && !m.is_schedulable("n5"), "up but drained");
    assert_eq!(
        m.entry("n5").drained.as_deref(),
        Some("disks"),
        "its reason too"
    );
    // A late Incoming of the same move does not take the node back down.
    let (_, effects) = m.handle_incoming(&incoming);
    assert!(effects.is_empty());
    assert!(m.is_up("n5"));
}

#[test]
fn withdraw_forgets_an_incoming_node_and_fences_the_old_acquire() {
    let mut m = owning(&[]);
    m.handle_incoming(&Incoming {
        move_id: MoveId(2),
        nodes: vec![IncomingNode {
            node: ng("n1", 2),
            expected_free_ms: None,
        }],
    });
    m.handle_withdraw(&Withdraw {
        move_id: MoveId(2),
        nodes: vec![ng("n1", 3)],
    });
    let (resp, _) = m.handle_acquire(&Acquire {
        move_id: MoveId(2),
        nodes: vec![ng("n1", 2)],
        flags: Default::default(),
    });
    assert!(matches!(resp, Response::Ack { ref stale } if stale.len() == 1));
    assert!(!m.is_up("n1"));
}

#[test]
fn cancel_jobs_names_the_jobs_of_outgoing_nodes_only() {
    let mut m = owning(&["n0", "n1"]);
    let busy = |_: &str| vec![(Fluid(1), 100)];
    m.handle_release(
        &Release {
            move_id: MoveId(1),
            nodes: vec![ng("n0", 2)],
        },
        &busy,
    );
    let cancel = CancelJobs {
        move_id: MoveId(1),
        nodes: vec![ng("n0", 2), ng("n1", 1)],
    };
    let (_, effects) = m.handle_cancel_jobs(&cancel, &busy);
    assert_eq!(
        effects,
        vec![Effect::CancelJobs {
            node: "n0".into(),
            jobs: vec![Fluid(1)]
        }]
    );
}

#[test]
fn a_restarted_shard_brings_nothing_up_until_the_assignment() {
    let mut before = owning(&["n0", "n1"]);
    let busy = |n: &str| {
        if n == "n1" {
            vec![(Fluid(1), 100)]
        } else {
            Vec::new()
        }
    };
    before.handle_release(
        &Release {
            move_id: MoveId(1),
            nodes: vec![ng("n1", 2)],
        },
        &busy,
    );
    let entries: Vec<(String, NodeEntry)> = before
        .entries()
        .map(|(n, e)| (n.to_owned(), e.clone()))
        .collect();
    let mut m = NodeTable::restore(entries);
    assert!(!m.is_up("n0"));
    let effects = m.apply_assignment(&[ng("n0", 1)], &[]);
    assert!(m.is_up("n0"));
    let ups: Vec<&Effect> = effects
        .iter()
        .filter(|e| matches!(e, Effect::WentUp { .. } | Effect::WentDown { .. }))
        .collect();
    assert_eq!(
        ups,
        [&Effect::WentUp {
            node: "n0".into(),
            generation: Generation(1)
        }],
        "confirmed: up once, and nothing else moved"
    );
    assert_eq!(
        m.entry("n1").holding,
        Holding::Outgoing { move_id: MoveId(1) },
        "still outgoing: the coordinator re-sends its Release"
    );
    // An owned node the assignment no longer lists goes down.
    let effects = m.apply_assignment(&[], &[]);
    assert!(!m.is_up("n0"));
    assert!(effects.contains(&Effect::WentDown {
        node: "n0".into(),
        generation: Generation(1)
    }));
}

#[derive(Clone, Debug)]
enum Cmd {
    Release(u64),
    Incoming(u64),
    Acquire(u64),
    Reclaim(u64),
    Withdraw(u64),
    Gone,
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        (1u64..6).prop_map(Cmd::Release),
        (1u64..6).prop_map(Cmd::Incoming),
        (1u64..6).prop_map(Cmd::Acquire),
        (1u64..6).prop_map(Cmd::Reclaim),
        (1u64..6).prop_map(Cmd::Withdraw),
        Just(Cmd::Gone),
    ]
}

proptest! {
    #[test]
    fn generations_never_go_back_and_stale_commands_change_nothing(
        cmds in proptest::collection::vec(cmd(), 0..40),
        busy in any::<bool>(),
    ) {
        let mut m = owning(&["n"]);
        let jobs = move |_: &str| if busy { vec![(Fluid(1), 10)] } else { Vec::new() };
        for c in cmds {
            let before = m.entry("n");
            let was_up = m.is_up("n");
            let id = MoveId(1);
            let (response, effects) = match c {
                Cmd::Release(g) => m.handle_release(&Release { move_id: id, nodes: vec![ng("n", g)] }, &jobs),
                Cmd::Incoming(g) => m.handle_incoming(&Incoming { move_id: id, nodes: vec![IncomingNode { node: ng("n", g), expected_free_ms: None }] }),
                Cmd::Acquire(g) => m.handle_acquire(&Acquire { move_id: id, nodes: vec![ng("n", g)], flags: Default::default() }),
                Cmd::Reclaim(g) => m.handle_reclaim(&Reclaim { move_id: id, nodes: vec![ng("n", g)] }),
                Cmd::Withdraw(g) => m.handle_withdraw(&Withdraw { move_id: id, nodes: vec![ng("n", g)] }),
                Cmd::Gone => {
                    let (_, effects) = m.allocations_gone(&["n".into()], &no_jobs);
                    (Response::Ack { stale: Vec::new() }, effects)
                }
            };
            let after = m.entry("n");
            prop_assert!(after.generation >= before.generation);
            let refused = match &response {
                Response::Releasing { stale, .. } | Response::Ack { stale } => !stale.is_empty(),
                Response::Jobs(_)
                | Response::History(_)
                | Response::DryRun(_)
                | Response::JobFacts(_) => false,
            };
            if refused {
                prop_assert_eq!(&after, &before, "a stale command changed the node");
            }
            prop_assert_eq!(m.is_up("n"), after.holding == Holding::Owned);
            prop_assert_eq!(
                m.incoming_entries().map(|(n, _)| n).collect::<Vec<_>>(),
                if after.is_incoming() { vec!["n"] } else { Vec::new() },
                "the incoming index follows the entry"
            );
            let went_up = effects.iter().any(|e| matches!(e, Effect::WentUp { .. }));
            let went_down = effects.iter().any(|e| matches!(e, Effect::WentDown { .. }));
            prop_assert_eq!((went_up, went_down), (!was_up && m.is_up("n"), was_up && !m.is_up("n")));
            let persisted = effects.iter().any(|e| matches!(e, Effect::Persist(..)));
            prop_assert_eq!(persisted, after != before, "journaled exactly when it changed");
        }
    }
}
