//! The core's move layer: admin requests to moves, the journal gate, registration
//! answers during a move, and restarts.

use std::net::SocketAddr;

use shardsched_wire::msg::client_coord::QueueAction;
use shardsched_wire::msg::coord_shard::{FreeAt, ReleaseState, Request, Response};
use shardsched_wire::msg::shard_coord::Register;
use shardsched_wire::msg::{Generation, MoveId, NodeGen, RefusalCode};

use crate::config::Config;
use crate::core::{ConnId, Core, MoveCommand};
use crate::moves::{MoveNodeState, MoveStatus};
use crate::records::Durable;

const NOW: u64 = 1_800_000_000_000;

fn core() -> (Core, Durable) {
    let config = Config::embedded_default().expect("default config");
    Core::new(config, &Durable::default(), 1).expect("core")
}

fn register(core: &mut Core, queue: &str, conn: u64) {
    let reg = Register {
        queue: queue.into(),
        listen: SocketAddr::from(([127, 0, 0, 1], 7000 + u16::try_from(conn).unwrap_or(0))),
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

/// Writes (pretends to) whatever is pending; returns the durable state and the commands.
fn journal(core: &mut Core) -> (Option<Durable>, Vec<MoveCommand>) {
    let written = core.journal_take().map(|write| {
        core.journal_done(&write);
        core.durable_state()
    });
    (written, core.moves_to_send())
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_move_is_journaled_before_its_commands_and_refusals_name_the_nodes() {
    let (mut core, _) = core();
    register(&mut core, "batch", 1);
    register(&mut core, "standby", 2);
    journal(&mut core);
    let id = core
        .move_nodes(NOW, &names(&["node0", "node1"]), "standby")
        .expect("accepted")
        .expect("a move");
    assert_eq!(id, MoveId(1));
    assert_eq!(
        core.owner_of("node0"),
        Some("standby"),
        "intent moves at once"
    );
    assert_eq!(core.generation_of("node0"), Some(Generation(2)));
    assert!(
        core.moves_to_send().is_empty(),
        "nothing leaves before the journal"
    );
    let (written, sent) = journal(&mut core);
    let written = written.expect("a durable state to write");
    assert_eq!(written.moves.len(), 1, "the unfinished move's record");
    let node0 = written.nodes.get("node0").expect("node0");
    assert!(node0.kept && node0.owner.as_deref() == Some("standby") && node0.generation.0 == 2);
    let kinds: Vec<(&str, ConnId)> = sent
        .iter()
        .map(|c| match c.request {
            Request::Release(_) => ("release", c.conn),
            Request::Incoming(_) => ("incoming", c.conn),
            _ => ("other", c.conn),
        })
        .collect();
    // The recipient hears of the nodes once the donor answered (moves/emit.rs).
    assert_eq!(kinds, vec![("release", ConnId(1))]);

    // Already owned by the recipient and not moving: nothing to do.
    assert_eq!(core.move_nodes(NOW, &names(&["node2"]), "batch"), Ok(None));
    let r = core
        .move_nodes(NOW, &names(&["node0"]), "batch")
        .expect_err("moving");
    assert_eq!(r.code, RefusalCode::Policy);
    assert!(r.message.contains("already moving: node0"), "{r}");
    let r = core
        .move_nodes(NOW, &names(&["node120"]), "batch")
        .expect_err("outside");
    assert_eq!(r.code, RefusalCode::Invalid);
    assert!(r.message.contains("node120"), "{r}");
}

#[test]
fn a_shard_registering_mid_move_gets_the_node_as_incoming_until_released() {
    let (mut core, _) = core();
    register(&mut core, "batch", 1);
    core.move_nodes(NOW, &names(&["node0"]), "standby")
        .expect("accepted");
    journal(&mut core);
    let reg = Register {
        queue: "standby".into(),
        listen: SocketAddr::from(([127, 0, 0, 1], 7002)),
        held: Vec::new(),
        last_job_id: None,
    };
    let a = core
        .register(
            ConnId(2),
            "standby",
            SocketAddr::from(([127, 0, 0, 1], 1)),
            &reg,
        )
        .expect("registers");
    assert!(a.owned.is_empty());
    assert_eq!(a.incoming.len(), 1);
    let batch = core
        .register(
            ConnId(1),
            "batch",
            SocketAddr::from(([127, 0, 0, 1], 1)),
            &Register {
                queue: "batch".into(),
                listen: SocketAddr::from(([127, 0, 0, 1], 7001)),
                held: Vec::new(),
                last_job_id: None,
            },
        )
        .expect("again");
    assert!(
        batch.owned.iter().all(|n| n.node != "node0"),
        "outgoing: not the donor's to bring up"
    );
    assert_eq!(batch.owned.len(), 111);
    assert_eq!(batch.owned[0].node, "node1", "cluster order");

    let release = Request::Release(shardsched_wire::msg::coord_shard::Release {
        move_id: MoveId(1),
        nodes: vec![NodeGen {
            node: "node0".into(),
            generation: Generation(2),
        }],
    });
    let answer = Response::Releasing {
        nodes: vec![ReleaseState {
            node: NodeGen {
                node: "node0".into(),
                generation: Generation(2),
            },
            free: FreeAt::Now,
            jobs: Vec::new(),
        }],
        stale: Vec::new(),
    };
    core.moves_answer(NOW, "batch", &release, &answer);
    core.moves_registered(NOW, "standby", &[]);
    let (_, sent) = journal(&mut core);
    let acquire = sent
        .iter()
        .find(|c| matches!(c.request, Request::Acquire(_)))
        .expect("acquire after the release is journaled");
    assert_eq!(acquire.conn, ConnId(2));
    core.moves_answer(
        NOW,
        "standby",
        &acquire.request,
        &Response::Ack { stale: Vec::new() },
    );
    let moves = core.moves();
    assert_eq!(moves[0].status, MoveStatus::Completed);
    assert_eq!(moves[0].nodes[0].state, MoveNodeState::Up);
}

#[test]
fn moves_outlive_restarts_finished_or_not() {
    let (mut core, _) = core();
    core.move_nodes(NOW, &names(&["node0"]), "standby")
        .expect("accepted");
    let (written, _) = journal(&mut core);
    let written = written.expect("written");
    let read = written.reread();
    assert_eq!(read, written);

    // Restart mid-move: the move resumes, the node keeps its intent.
    let config = Config::embedded_default().expect("default config");
    let (restarted, again) = Core::new(config.clone(), &read, 1).expect("restarts");
    assert_eq!(restarted.owner_of("node0"), Some("standby"));
    assert_eq!(restarted.generation_of("node0"), Some(Generation(2)));
    assert_eq!(restarted.moves().len(), 1);
    assert_eq!(restarted.moves()[0].status, MoveStatus::Active);
    assert_eq!(again.moves, read.moves);

    // A finished move's owner stays, though the configuration's rule says batch.
    let mut finished = read.clone();
    finished.moves.clear();
    let (mut restarted, _) = Core::new(config, &finished, 1).expect("restarts");
    assert_eq!(restarted.owner_of("node0"), Some("standby"));
    assert_eq!(restarted.owned_by("batch").len(), 111);
    assert!(restarted.moves().is_empty());
    assert_eq!(
        restarted
            .move_nodes(NOW, &names(&["node5"]), "standby")
            .map(|id| id.map(|m| m.0)),
        Ok(Some(2)),
        "ids keep growing"
    );
}

#[test]
fn start_take_moves_the_shared_nodes() {
    let (mut core, _) = core();
    let c = core
        .queue_control(NOW, "standby", QueueAction::Start { take: true })
        .expect("take");
    assert_eq!(c.move_id, Some(MoveId(1)));
    assert_eq!(core.queue_flags("standby"), Some((true, true)));
    assert_eq!(
        core.owned_by("standby").len(),
        112,
        "intent: all of batch's nodes"
    );
    assert_eq!(core.moves()[0].nodes.len(), 112);
    assert_eq!(core.moves()[0].from, "batch");
}

#[test]
fn resources_show_a_moving_node_in_its_donor_then_incoming_in_its_recipient() {
    use shardsched_wire::msg::NodeState;
    let (mut core, _) = core();
    register(&mut core, "batch", 1);
    register(&mut core, "standby", 2);
    journal(&mut core);
    core.move_nodes(NOW, &names(&["node0"]), "standby")
        .expect("accepted");
    let (_, sent) = journal(&mut core);
    let row = |core: &Core| {
        core.resources(None)
            .expect("rows")
            .into_iter()
            .find(|r| r.name == "node0")
            .expect("node0")
    };
    let r = row(&core);
    assert_eq!(r.queue.as_deref(), Some("batch"), "still in its donor");
    assert!(
        r.reason
            .as_deref()
            .is_some_and(|t| t.contains("moving to standby")),
        "{r:?}"
    );
    let release = sent
        .iter()
        .find(|c| matches!(c.request, Request::Release(_)))
        .expect("release");
    let answer = Response::Releasing {
        nodes: vec![ReleaseState {
            node: NodeGen {
                node: "node0".into(),
                generation: Generation(2),
            },
            free: FreeAt::Now,
            jobs: Vec::new(),
        }],
        stale: Vec::new(),
    };
    core.moves_answer(NOW, "batch", &release.request, &answer);
    journal(&mut core);
    let r = row(&core);
    assert_eq!(
        (r.state, r.queue.as_deref()),
        (NodeState::Incoming, Some("standby"))
    );
}

#[test]
fn refusals_say_what_to_type_next() {
    let (mut core, _) = core();
    // node0 is batch's and not in debug's definition (node[96-127]).
    let r = core
        .move_between(NOW, &names(&["node0"]), "batch", "debug", None)
        .expect_err("outside debug");
    assert_eq!(
        r.message,
        "node0 not in queue debug's definition: \
         `shardsched queue update debug --nodes node[0,96-127]` adds them"
    );
    let r = core
        .move_between(NOW, &names(&["node120"]), "batch", "debug", None)
        .expect_err("not batch's");
    assert!(
        r.message
            .contains("not owned by queue batch: node120 (debug owns node120)"),
        "{r}"
    );
    let id = core
        .move_between(NOW, &names(&["node97", "node96"]), "batch", "debug", None)
        .expect("overlap: a move between two running queues");
    let r = core
        .move_between(NOW, &names(&["node97"]), "debug", "batch", None)
        .expect_err("moving");
    assert!(
        r.message
            .contains(&format!("`shardsched queue move --cancel {}`", id.0)),
        "{r}"
    );
}

/// `stop Q --release-to R` while nodes are still on their way into Q (a `--take` whose
/// donor's job still runs): their move is cancelled, so they go back to their donor rather
/// than coming up later in the stopped Q; and a refusal never says Q owns nothing while it
/// owns nodes.
#[test]
fn stop_release_to_takes_back_the_nodes_still_coming_in() {
    let (mut core, _) = core();
    register(&mut core, "batch", 1);
    register(&mut core, "standby", 2);
    core.queue_control(NOW, "batch", QueueAction::Stop)
        .expect("stop");
    core.queue_control(NOW, "batch", QueueAction::Start { take: false })
        .expect("start");
    let take = core
        .queue_control(NOW, "standby", QueueAction::Start { take: true })
        .expect("take")
        .move_id
        .expect("a move");
    let (_, sent) = journal(&mut core);
    let release = sent
        .iter()
        .find_map(|c| match &c.request {
            Request::Release(r) => Some(r.clone()),
            _ => None,
        })
        .expect("release sent");
    // batch has a job on every node: all stay outgoing.
    let busy: Vec<ReleaseState> = release
        .nodes
        .iter()
        .map(|ng| ReleaseState {
            node: ng.clone(),
            free: FreeAt::Expected(NOW + 3_600_000),
            jobs: Vec::new(),
        })
        .collect();
    core.moves_answer(
        NOW,
        "batch",
        &Request::Release(release.clone()),
        &Response::Releasing {
            nodes: busy,
            stale: Vec::new(),
        },
    );
    assert_eq!(
        core.owned_by("standby").len(),
        112,
        "intent: all on their way"
    );

    // Nothing settled in standby is in debug's definition... but nodes are coming in: the
    // stop cancels their move.
    let c = core
        .queue_admin(NOW, "standby", QueueAction::Stop, "", Some("batch"))
        .expect("stop --release-to");
    assert_eq!(core.queue_flags("standby"), Some((true, false)));
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains(&format!("(move {})", take.0)) && n.contains("go back to batch")),
        "{c:?}"
    );
    assert_eq!(core.owner_of("node0"), Some("batch"));
    assert!(core.owned_by("standby").is_empty());
    assert_eq!(
        core.moves()
            .iter()
            .find(|m| m.move_id == take)
            .map(|m| m.status),
        Some(MoveStatus::Active),
        "returning until both shards acknowledge"
    );

    // A queue that owns nodes, none in the other's definition: refused, not "owns no node".
    let r = core
        .queue_admin(NOW, "debug", QueueAction::Stop, "", Some("standby"))
        .expect_err("none in standby's definition");
    assert!(!r.message.contains("owns no node"), "{r}");
    assert!(
        r.message.contains(
            "none of queue debug's nodes (node[112-127]) is in standby's definition: \
             `shardsched queue update standby --nodes node[0-127]` adds them"
        ),
        "{r}"
    );
    assert_eq!(
        core.queue_flags("debug"),
        Some((true, true)),
        "nothing changed"
    );
}

/// Drives a move of `nodes` from batch to standby to its end, the donor releasing them all at
/// once; returns the step durations each journal write carried, in order.
fn move_to_the_end(core: &mut Core, now: u64, nodes: &[String]) -> Vec<Vec<(&'static str, u64)>> {
    let mut writes = Vec::new();
    let mut write = |core: &mut Core| {
        let w = core.journal_take().expect("a write");
        core.journal_done(&w);
        writes.push(w.steps_took.iter().map(|s| (s.step, s.took_ms)).collect());
        core.moves_to_send()
    };
    core.move_nodes(now, nodes, "standby").expect("accepted");
    let sent = write(core);
    let release = sent
        .iter()
        .find(|c| matches!(c.request, Request::Release(_)))
        .expect("a release");
    let Request::Release(r) = &release.request else {
        unreachable!("matched above")
    };
    let answer = Response::Releasing {
        nodes: r
            .nodes
            .iter()
            .map(|node| ReleaseState {
                node: node.clone(),
                free: FreeAt::Now,
                jobs: Vec::new(),
            })
            .collect(),
        stale: Vec::new(),
    };
    core.moves_answer(now + 3, "batch", &release.request, &answer);
    let sent = write(core);
    for acquire in sent
        .iter()
        .filter(|c| matches!(c.request, Request::Acquire(_)))
    {
        let ack = Response::Ack { stale: Vec::new() };
        core.moves_answer(now + 5, "standby", &acquire.request, &ack);
    }
    write(core);
    writes
}

#[test]
fn a_move_counts_the_steps_of_its_own_nodes_not_of_the_moves_remembered() {
    let (mut core, _) = core();
    register(&mut core, "batch", 1);
    register(&mut core, "standby", 2);
    journal(&mut core);
    let many: Vec<String> = (0..100).map(|i| format!("node{i}")).collect();
    let writes = move_to_the_end(&mut core, NOW, &many);
    let steps = |writes: &[Vec<(&str, u64)>], step: &str| -> Vec<u64> {
        writes
            .iter()
            .flatten()
            .filter(|(s, _)| *s == step)
            .map(|&(_, took)| took)
            .collect()
    };
    assert_eq!(steps(&writes, "release"), vec![3; 100]);
    assert_eq!(steps(&writes, "acquire"), vec![2; 100]);
    assert_eq!(core.moves()[0].status, MoveStatus::Completed);

    // With the 100-node move remembered, one node's move carries one release and one
    // acquisition: what the driver counts (once durable) follows the record, not the view.
    let writes = move_to_the_end(&mut core, NOW + 10, &names(&["node100"]));
    assert_eq!(
        writes,
        vec![vec![], vec![("release", 3)], vec![("acquire", 2)]],
        "started, released, acquired"
    );
    assert_eq!(core.moves().len(), 2, "both remembered");
}
