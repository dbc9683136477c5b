//! The journal-backed state: a restart is a reopen (same ownership, generations, queue
//! states, flags, unfinished moves); the state of earlier versions is refused by name; a
//! damaged journal refuses the start naming the file; a big move costs a few commits, not
//! one per node.

use std::path::Path;

use shardsched_proto::msg::client_coord::QueueAction;
use shardsched_proto::msg::coord_shard::{FreeAt, ReleaseState, Request, Response};
use shardsched_proto::msg::shard_coord::Register;

use shardsched_journal::format;

use super::*;
use crate::config::Config;
use crate::core::{ConnId, Core, NodeFlag};
use crate::moves::MoveStatus;

const NOW: u64 = 1_800_000_000_000;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Starts a core the way the driver does: open, build, write the start's changes.
fn start(dir: &Path, config: Config) -> (CoordJournal, Core, Origin) {
    let (mut journal, previous, origin) = CoordJournal::open(dir).expect("journal opens");
    let (core, durable) = Core::new(config, &previous, 1).expect("core");
    journal
        .write_blocking(&durable.diff(&previous))
        .expect("start written");
    (journal, core, origin)
}

/// Writes what the core changed, as the driver's flush does.
fn flush(journal: &mut CoordJournal, core: &mut Core) {
    if let Some(write) = core.journal_take() {
        journal.write_blocking(&write.delta).expect("written");
        core.journal_done(&write);
    }
}

fn register(core: &mut Core, queue: &str, conn: u64) {
    let reg = Register {
        queue: queue.into(),
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 7000 + conn as u16)),
        held: Vec::new(),
        last_job_id: None,
    };
    let remote = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
    core.register(ConnId(conn), queue, remote, &reg)
        .expect("registers");
    core.moves_registered(NOW, queue, &[]);
}

#[test]
fn a_restart_is_a_reopen_with_everything_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::embedded_default().expect("config");
    let (mut journal, mut core, origin) = start(dir.path(), config.clone());
    assert_eq!(origin, Origin::Fresh);

    core.queue_admin(NOW, "debug", QueueAction::Disable, "maintenance", None)
        .expect("disable");
    core.queue_admin(NOW, "batch", QueueAction::Stop, "", None)
        .expect("stop");
    // Two of batch's nodes move to standby, which then starts with them (nothing to take:
    // batch is stopped); a restart must not hand it batch's other nodes.
    let batch = core.owned_by("batch");
    let moved = core
        .move_nodes(NOW, &batch[..2], "standby")
        .expect("move accepted")
        .expect("a move");
    core.queue_admin(NOW, "standby", QueueAction::Start { take: false }, "", None)
        .expect("start");
    core.set_node_flag(&batch[5..6], NodeFlag::Drained, true, "bad dimm")
        .expect("drain");
    core.set_node_flag(&batch[6..7], NodeFlag::Down, true, "dead psu")
        .expect("down");
    let unowned: Vec<String> = config
        .cluster
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .filter(|n| core.owner_of(n).is_none())
        .take(1)
        .collect();
    if !unowned.is_empty() {
        core.set_node_flag(&unowned, NodeFlag::Drained, true, "spare")
            .expect("an unowned node can be flagged");
    }
    flush(&mut journal, &mut core);
    let before = core.durable_state();
    drop(journal);

    let (_journal, again, origin) = start(dir.path(), config.clone());
    assert_eq!(origin, Origin::Journal);
    assert_eq!(again.durable_state(), before);
    for node in &config.cluster.nodes {
        assert_eq!(
            again.owner_of(&node.name),
            core.owner_of(&node.name),
            "{}",
            node.name
        );
        assert_eq!(
            again.generation_of(&node.name),
            core.generation_of(&node.name),
            "{}",
            node.name
        );
        assert_eq!(again.node_flags(&node.name), core.node_flags(&node.name));
    }
    for q in ["batch", "debug", "standby"] {
        assert_eq!(again.queue_flags(q), core.queue_flags(q), "{q}");
    }
    assert_eq!(again.queue_flags("debug"), Some((false, true)));
    assert_eq!(again.queue_flags("batch").map(|f| f.1), Some(false));
    assert_eq!(again.queue_flags("standby").map(|f| f.1), Some(true));
    assert_eq!(again.queue_reason("debug"), Some("maintenance"));
    let drained = again.node_flags(&batch[5]).expect("drained kept");
    assert_eq!(drained.drained.as_deref(), Some("bad dimm"));
    let moves = again.moves();
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].move_id, moved);
    assert_eq!(moves[0].status, MoveStatus::Active);
}

#[test]
fn flags_go_to_the_owner_in_its_assignment_and_with_a_moved_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::embedded_default().expect("config");
    let (mut journal, mut core, _) = start(dir.path(), config);
    let batch = core.owned_by("batch");
    core.set_node_flag(&batch[..1], NodeFlag::Drained, true, "r")
        .expect("drain");
    flush(&mut journal, &mut core);
    let reg = Register {
        queue: "batch".into(),
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 7001)),
        held: Vec::new(),
        last_job_id: None,
    };
    let remote = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
    let assignment = core
        .register(ConnId(1), "batch", remote, &reg)
        .expect("registers");
    assert_eq!(
        assignment
            .flags
            .get(&batch[0])
            .and_then(|f| f.drained.as_deref()),
        Some("r")
    );
    core.moves_registered(NOW, "batch", &[]);
    register(&mut core, "standby", 2);
    flush(&mut journal, &mut core);
    core.moves_to_send();
    core.move_nodes(NOW, &batch[..1], "standby")
        .expect("move accepted");
    flush(&mut journal, &mut core);
    let release = core
        .moves_to_send()
        .into_iter()
        .find(|c| matches!(c.request, Request::Release(_)))
        .expect("release");
    let Request::Release(r) = &release.request else {
        unreachable!()
    };
    let answer = Response::Releasing {
        nodes: r
            .nodes
            .iter()
            .map(|ng| ReleaseState {
                node: ng.clone(),
                free: FreeAt::Now,
                jobs: Vec::new(),
            })
            .collect(),
        stale: Vec::new(),
    };
    core.moves_answer(NOW, "batch", &release.request, &answer);
    flush(&mut journal, &mut core);
    let acquire = core
        .moves_to_send()
        .into_iter()
        .find_map(|c| match c.request {
            Request::Acquire(a) => Some(a),
            _ => None,
        })
        .expect("acquire once the release is journaled");
    assert_eq!(
        acquire
            .flags
            .get(&batch[0])
            .and_then(|f| f.drained.as_deref()),
        Some("r"),
        "the drain travels with the node"
    );
}

#[test]
fn the_state_file_of_the_versions_before_the_journal_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let legacy = dir.path().join(LEGACY_STATE_FILE);
    std::fs::write(&legacy, "format = 1\n").expect("write toml");
    let err = CoordJournal::open(dir.path()).expect_err("refused");
    assert!(err.is_unreadable(), "a restart would fail the same way");
    let text = err.to_string();
    assert!(text.contains(&legacy.display().to_string()), "{text}");
    assert!(text.contains("before the coordinator journal"), "{text}");
    assert!(legacy.exists(), "nothing is lost");
}

/// A journal of an earlier shardsched: records in the wire's encoding, with no stamp (or
/// with the numeric one the coordinator wrote then).
#[test]
fn a_journal_written_before_format_v1_is_refused_by_name() {
    for numeric_stamp in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(JOURNAL_FILE);
        let old = Journal::open(&path).expect("open");
        old.put(
            crate::records::NODES_TABLE,
            0,
            b"\x05node0\x01\x05batch\x02",
        )
        .expect("an old record");
        if numeric_stamp {
            let mut b = Batch::new();
            b.put_meta(FORMAT_META, 1u32.to_le_bytes());
            old.commit(&b).expect("old stamp");
        }
        drop(old);
        let err = CoordJournal::open(dir.path()).expect_err("refused");
        assert!(err.is_unreadable(), "a restart would fail the same way");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(
            text.contains("written before journal format v1"),
            "numeric stamp {numeric_stamp}: {text}"
        );
    }
}

#[test]
fn a_journal_of_another_kind_or_a_newer_format_is_refused_by_name() {
    for (stamp, expected) in [
        (
            format::stamp_value("shard", 1),
            "a shard journal, not a coordinator one",
        ),
        (
            format::stamp_value(JOURNAL_KIND, JOURNAL_VERSION + 1),
            "written by a newer shardsched",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path().join(JOURNAL_FILE)).expect("open");
        let mut b = Batch::new();
        b.put_meta(FORMAT_META, stamp);
        journal.commit(&b).expect("stamp");
        drop(journal);
        let err = CoordJournal::open(dir.path())
            .expect_err("refused")
            .to_string();
        assert!(err.contains(expected), "{err}");
    }
}

#[test]
fn a_damaged_journal_refuses_to_open_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::embedded_default().expect("config");
    let (mut journal, mut core, _) = start(dir.path(), config);
    core.move_nodes(NOW, &names(&["node0"]), "standby")
        .expect("move");
    flush(&mut journal, &mut core);
    drop(journal);
    let path = dir.path().join(JOURNAL_FILE);
    let bytes = std::fs::read(&path).expect("read");

    for damage in ["truncated", "garbage"] {
        let damaged = match damage {
            "truncated" => bytes[..bytes.len() / 2].to_vec(),
            _ => vec![0x5a; bytes.len()],
        };
        std::fs::write(&path, &damaged).expect("damage");
        let err = CoordJournal::open(dir.path()).expect_err(damage);
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{damage}: {err}"
        );
    }
}

#[test]
fn a_record_that_does_not_decode_is_refused_with_table_and_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Config::embedded_default().expect("config");
    let (journal, _core, _) = start(dir.path(), config);
    journal
        .committer
        .submit_blocking({
            let mut b = Batch::new();
            b.put(crate::records::NODES_TABLE, 9_999, b"not a node".to_vec());
            b
        })
        .expect("submit")
        .wait_blocking()
        .expect("written");
    drop(journal);
    let err = CoordJournal::open(dir.path()).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("nodes") && text.contains("9999"), "{text}");
    assert!(text.contains(JOURNAL_FILE), "{text}");
}

/// A 1,024-node move: its start, the donor's answer and the recipient's acks are each one
/// commit, whatever the node count.
#[test]
fn a_big_move_is_a_few_commits() {
    let text = r#"
default_queue = "a"
[cluster.inline]
name = "big"
[[cluster.inline.nodes]]
hosts = "n[0-1023]"
sockets = 1
cores_per_socket = 1
[queues.a]
nodes = "n[0-1023]"
[queues.b]
nodes = "n[0-1023]"
started = false
"#;
    let config = Config::parse(text, "test", Path::new(".")).expect("config");
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut journal, mut core, _) = start(dir.path(), config);
    register(&mut core, "a", 1);
    register(&mut core, "b", 2);
    flush(&mut journal, &mut core);
    core.moves_to_send();
    let commits_before = journal.stats().commits;

    let nodes = core.owned_by("a");
    assert_eq!(nodes.len(), 1024);
    core.move_between(NOW, &nodes, "a", "b", None)
        .expect("move");
    flush(&mut journal, &mut core);
    for _ in 0..3 {
        let sent = core.moves_to_send();
        for c in &sent {
            let answer = match &c.request {
                Request::Release(r) => Response::Releasing {
                    nodes: r
                        .nodes
                        .iter()
                        .map(|ng| ReleaseState {
                            node: ng.clone(),
                            free: FreeAt::Now,
                            jobs: Vec::new(),
                        })
                        .collect(),
                    stale: Vec::new(),
                },
                _ => Response::Ack { stale: Vec::new() },
            };
            core.moves_answer(NOW, &c.queue, &c.request, &answer);
        }
        flush(&mut journal, &mut core);
    }
    let moves = core.moves();
    assert_eq!(moves[0].status, MoveStatus::Completed);
    let commits = journal.stats().commits - commits_before;
    assert!(commits <= 3, "{commits} commits for a 1,024-node move");
    drop(journal);
    let (_j, again, _) = start(dir.path(), core.config().clone());
    assert_eq!(again.owned_by("b").len(), 1024);
    assert!(again.moves().is_empty(), "a finished move leaves no record");
}

#[test]
fn commands_wait_for_the_write_of_their_records() {
    let config = Config::embedded_default().expect("config");
    let (mut core, _) = Core::new(config, &Durable::default(), 1).expect("core");
    register(&mut core, "batch", 1);
    register(&mut core, "standby", 2);
    if let Some(w) = core.journal_take() {
        core.journal_done(&w);
    }
    core.moves_to_send();
    core.move_nodes(NOW, &names(&["node0"]), "standby")
        .expect("move");
    let write = core.journal_take().expect("records to write");
    assert_eq!(write.steps.iter().copied().collect::<Vec<_>>(), ["started"]);
    assert_eq!(
        write.delta.nodes.len(),
        1,
        "node0's new owner and generation"
    );
    assert!(
        core.moves_to_send().is_empty(),
        "no command before its records are durable"
    );
    core.journal_done(&write);
    assert!(!core.moves_to_send().is_empty(), "durable: the commands go");
}
