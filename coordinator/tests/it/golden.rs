//! Golden journals: `tests/golden/coordinator-v1.redb` is a coordinator journal of format
//! v1, written by [`scenario`] and kept in the repository. Every build must open it and read
//! back exactly the state the scenario builds today; a change to a record type that changes
//! its bytes fails here, and must come with a new format version (and a new golden file
//! beside this one, the old one kept to test its upgrade or its refusal).
//!
//! Regenerate (only when the format deliberately changes, with `JOURNAL_VERSION` bumped):
//! `cargo test -p shardsched-coordinator --test it golden:: -- --ignored`.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use shardsched_coordinator::config::Config;
use shardsched_coordinator::core::{ConnId, Core, NodeFlag};
use shardsched_coordinator::journal::{CoordJournal, JOURNAL_FILE, Origin};
use shardsched_coordinator::moves::MoveStatus;
use shardsched_coordinator::records::{Durable, JOURNAL_VERSION, MoveStepRecord};
use shardsched_proto::msg::client_coord::{QueueAction, QueueSpec};
use shardsched_proto::msg::coord_shard::{FreeAt, ReleaseState, Request, Response};
use shardsched_proto::msg::shard_coord::Register;
use shardsched_proto::msg::{Generation, MoveId};

/// The clock of the scenario, ms since the Unix epoch (fixed: the file must not change
/// when regenerated without a format change).
const NOW: u64 = 1_800_000_000_000;

fn golden(version: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("coordinator-v{version}.redb"))
}

/// A coordinator's life, written to the journal in `dir`: an admin's queue state with a
/// reason, node flags, a queue added at run time, a finished move, and a move left
/// unfinished (one node released, one still busy in its donor). Returns the state the
/// journal holds at the end.
fn scenario(dir: &Path) -> Durable {
    let config = Config::embedded_default().unwrap();
    let (mut journal, previous, origin) = CoordJournal::open(dir).unwrap();
    assert_eq!(origin, Origin::Fresh);
    let (mut core, durable) = Core::new(config, &previous, 1).unwrap();
    journal.write_blocking(&durable.diff(&previous)).unwrap();
    let mut flush = |core: &mut Core| {
        if let Some(write) = core.journal_take() {
            journal.write_blocking(&write.delta).unwrap();
            core.journal_done(&write);
        }
    };
    core.queue_admin(NOW, "debug", QueueAction::Disable, "maintenance", None)
        .unwrap();
    core.set_node_flag(&["node5".into()], NodeFlag::Drained, true, "bad dimm")
        .unwrap();
    core.set_node_flag(&["node6".into()], NodeFlag::Down, true, "dead psu")
        .unwrap();
    let spec = QueueSpec {
        name: "gpu".into(),
        nodes: Some("node[120-127]".into()),
        stopped: true,
        ..QueueSpec::default()
    };
    let def = shardsched_coordinator::queue_table::queue_def(core.config(), None, &spec).unwrap();
    core.add_queue(def).unwrap();
    for (conn, queue) in [(1, "batch"), (2, "debug")] {
        let register = Register {
            queue: queue.into(),
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 7000 + conn as u16)),
            held: Vec::new(),
            last_job_id: None,
        };
        let remote = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
        core.register(ConnId(conn), queue, remote, &register)
            .unwrap();
        core.moves_registered(NOW, queue, &[]);
    }
    flush(&mut core);
    core.moves_to_send();

    // Move 1 finishes: both nodes idle.
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    core.move_between(NOW, &names(&["node96", "node97"]), "batch", "debug", None)
        .unwrap();
    flush(&mut core);
    while core.moves().iter().any(|m| m.status == MoveStatus::Active) {
        answer_all(&mut core, |_| FreeAt::Now);
        flush(&mut core);
    }
    // Move 2 stays unfinished: node99 is released, node98 busy until NOW + 1 h.
    core.move_between(NOW, &names(&["node98", "node99"]), "batch", "debug", None)
        .unwrap();
    flush(&mut core);
    answer_all(&mut core, |node| match node {
        "node99" => FreeAt::Now,
        _ => FreeAt::Expected(NOW + 3_600_000),
    });
    flush(&mut core);
    core.durable_state()
}

/// Answers every command the core sends: releases as `free` says, everything else acked.
fn answer_all(core: &mut Core, free: impl Fn(&str) -> FreeAt) {
    for c in core.moves_to_send() {
        let answer = match &c.request {
            Request::Release(r) => Response::Releasing {
                nodes: r
                    .nodes
                    .iter()
                    .map(|ng| ReleaseState {
                        node: ng.clone(),
                        free: free(&ng.node),
                        jobs: Vec::new(),
                    })
                    .collect(),
                stale: Vec::new(),
            },
            _ => Response::Ack { stale: Vec::new() },
        };
        core.moves_answer(NOW, &c.queue, &c.request, &answer);
    }
}

#[test]
#[ignore = "writes the golden journal: run when the format deliberately changes"]
fn regenerate_golden_journal() {
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path());
    let to = golden(JOURNAL_VERSION);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(dir.path().join(JOURNAL_FILE), &to).unwrap();
    println!("wrote {}", to.display());
}

#[test]
fn the_golden_v1_journal_opens_and_reads_back_the_scenarios_state() {
    // Opened in a copy: opening may write (a fresh stamp, redb's own bookkeeping).
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(golden(1), dir.path().join(JOURNAL_FILE)).unwrap();
    let (_journal, read, origin) = CoordJournal::open(dir.path()).unwrap();
    assert_eq!(origin, Origin::Journal);

    // The facts the scenario wrote, spelled out (so that a scenario changed along with
    // the decoder cannot hide a change of the bytes)...
    assert_eq!(read.generators.get("gpu"), Some(&4));
    let debug = read.queues.get("debug").unwrap();
    assert_eq!(
        (debug.enabled, debug.reason.as_str()),
        (false, "maintenance")
    );
    assert_eq!(read.nodes["node5"].drained.as_deref(), Some("bad dimm"));
    assert_eq!(read.nodes["node6"].down.as_deref(), Some("dead psu"));
    let node96 = &read.nodes["node96"];
    assert_eq!(node96.owner.as_deref(), Some("debug"));
    assert_eq!((node96.generation, node96.kept), (Generation(2), true));
    assert_eq!(read.next_move_id, 3);
    let table = read.queue_table.as_ref().unwrap();
    assert!(
        table
            .queues
            .iter()
            .any(|q| q.name == "gpu" && q.nodes == "node[120-127]")
    );
    let steps: Vec<MoveStepRecord> = read.moves.iter().map(MoveStepRecord::from).collect();
    assert!(matches!(
        steps.as_slice(),
        [MoveStepRecord::Started { move_id: 2, .. }, MoveStepRecord::Released(2, released)]
            if released == &[("node99".to_owned(), 2)]
    ));

    // ... and everything, as the scenario builds it today.
    let today = tempfile::tempdir().unwrap();
    assert_eq!(read, scenario(today.path()));

    // A core starts from it, the unfinished move resumed.
    let (core, _) = Core::new(Config::embedded_default().unwrap(), &read, 1).unwrap();
    assert_eq!(core.invariants(), Ok(()));
    let moves = core.moves();
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].move_id, MoveId(2));
    assert_eq!(core.owner_of("node98"), Some("debug"));
}
