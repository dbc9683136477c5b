//! Golden journals: files written by earlier builds, kept in `tests/golden/`, that this
//! build must still read exactly — or refuse by name.
//!
//! - `v1.redb`: a shard journal of format `shardsched-shard-journal v1` (written by
//!   [`write_golden_v1`] below): jobs completed, cancelled, failed, running and pending, a
//!   node moving out, one moving in, one drained and one down, each with its reason. It
//!   must open, decode to exactly the records listed here, re-encode to the same bytes, and
//!   restore to the same jobs and nodes.
//! - `pre-v1.redb`: a shard journal written before format v1 (records in the wire codec,
//!   no format stamp) by `shardsched up` built from main before this format existed: queue
//!   `batch` of the default cluster, one running and one completed job. It must be refused,
//!   naming the file and why, before anything is read from it.
//!
//! **When the format changes on purpose** (a record type of `shard/core/src/journal.rs`
//! changes its bytes): bump `FORMAT_VERSION`, keep the old file as `v<N>.redb` with a test
//! that it is upgraded or refused by name, and write the new one with
//! `cargo test -p shardsched-shard --test it -- --ignored golden::write_golden_v1`, then update
//! the expectations below. A test failing here without such a change means the build no
//! longer reads journals it wrote: that is the bug.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use shardsched_jobspec::Shorthand;
use shardsched_journal::format;
use shardsched_proto::msg::client_shard::{IdempotencyKey, Submit};
use shardsched_proto::msg::coord_shard::{Incoming, IncomingNode, Release};
use shardsched_proto::msg::shard_coord::Assignment;
use shardsched_proto::msg::{
    ClusterDescription, ClusterFormat, Generation, JobState, MoveId, NodeFlags, NodeGen, NodeState,
};
use shardsched_proto::{Fluid, Peer, Role};
use shardsched_shard::journal::{
    self, EndState, HoldingRecord, JOBS_TABLE, NodeRecord, RUNS_TABLE, Restored,
};
use shardsched_shard::nodes::Flag;
use shardsched_shard::{CoreOptions, ShardCore};

/// When the golden journal's jobs were submitted, ms (some time in 2027).
pub(crate) const NOW: u64 = 1_800_000_000_000;
/// n0..n3, one socket of 4 cores each.
const CLUSTER: &str = "name = \"c\"\n[[nodes]]\nhosts = \"n[0-3]\"\ncores_per_socket = 4\n";

pub(crate) fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// A copy of a golden file to open (opening a journal may write to it).
pub(crate) fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.redb");
    std::fs::copy(golden(name), &path).expect("copy the golden journal");
    (dir, path)
}

pub(crate) fn ng(node: &str, generation: u64) -> NodeGen {
    NodeGen {
        node: node.into(),
        generation: Generation(generation),
    }
}

/// What the coordinator tells the shard at (re)registration: `owned` and `incoming`, with
/// `flags`.
pub(crate) fn assignment(
    owned: Vec<NodeGen>,
    incoming: Vec<(MoveId, IncomingNode)>,
    flags: BTreeMap<String, NodeFlags>,
) -> Assignment {
    Assignment {
        limits: Default::default(),
        allowances: Vec::new(),
        fairshare: None,
        generator_id: 3,
        cluster: ClusterDescription {
            format: ClusterFormat::Spec,
            text: CLUSTER.into(),
            load_allowlist: Vec::new(),
        },
        queue: common::queue(&["n0", "n1", "n2", "n3"]),
        owned,
        incoming,
        flags,
    }
}

pub(crate) fn submit(core: &mut ShardCore, at: u64, key: u8, nodes: u64, secs: u64) -> Fluid {
    let jobspec = Shorthand {
        nodes: Some(nodes),
        duration: secs,
        command: vec![format!("app{key}")],
        ..Shorthand::default()
    }
    .to_jobspec()
    .expect("jobspec");
    let submit = Submit {
        idempotency_key: IdempotencyKey([key; 16]),
        jobspec_json: jobspec.to_json().to_string(),
        urgency: Some(key),
        array: None,
        signature: None,
    };
    core.handle_submit(at, "alice", &submit)
        .expect("accepted")
        .id
}

/// Writes `tests/golden/v1.redb` (see the module documentation for when to run it).
#[test]
#[ignore = "writes the golden journal: run by hand when the format changes on purpose"]
fn write_golden_v1() {
    let path = golden("v1.redb");
    let _ = std::fs::remove_file(&path);
    let disk = journal::open(&path).expect("a fresh journal");
    let commit = |core: &mut ShardCore| {
        let batch = journal::to_batch(&core.take_journal()).expect("encode");
        disk.commit(&batch).expect("commit");
    };
    let options = CoreOptions {
        journal: true,
        retention_ms: u64::MAX,
        ..CoreOptions::default()
    };
    let first = assignment(
        vec![ng("n0", 1), ng("n1", 1), ng("n2", 1)],
        Vec::new(),
        BTreeMap::new(),
    );
    let mut core = ShardCore::new(&first, options).expect("core");
    commit(&mut core);
    let done = submit(&mut core, NOW, 1, 1, 10);
    let long = submit(&mut core, NOW, 2, 1, 3_000);
    let cancelled = submit(&mut core, NOW, 3, 1, 3_000);
    core.tick(NOW).expect("tick");
    commit(&mut core);
    let admin = Peer::new(Role::Admin, "root").expect("peer");
    core.handle_cancel(NOW + 1_000, &admin, &[cancelled]);
    core.tick(NOW + 10_000).expect("tick");
    commit(&mut core);
    assert_eq!(core.job(done).expect("done").state, JobState::Completed);
    // Four nodes wide: it waits for n3, which is on its way in.
    let pending = submit(&mut core, NOW + 20_000, 4, 4, 60);
    let failing = submit(&mut core, NOW + 20_000, 5, 1, 3_000);
    core.tick(NOW + 20_000).expect("tick");
    commit(&mut core);
    let on = |core: &ShardCore, id| core.job(id).expect("job").nodes.clone();
    assert_eq!(on(&core, long), ["n1"]);
    assert_eq!(on(&core, failing), ["n0"]);
    core.handle_incoming(
        NOW + 30_000,
        &Incoming {
            move_id: MoveId(7),
            nodes: vec![IncomingNode {
                node: ng("n3", 4),
                expected_free_ms: Some(NOW + 90_000),
            }],
        },
    );
    core.handle_release(
        NOW + 30_000,
        &Release {
            move_id: MoveId(8),
            nodes: vec![ng("n1", 2)],
        },
    );
    core.set_node_flag(
        NOW + 30_000,
        &["n2".into()],
        Flag::Drained,
        Some("new disks"),
    )
    .expect("drain");
    core.set_node_flag(NOW + 30_000, &["n0".into()], Flag::Down, Some("psu"))
        .expect("down");
    core.tick(NOW + 30_000).expect("tick");
    commit(&mut core);
    assert_eq!(core.job(failing).expect("failing").state, JobState::Failed);
    assert_eq!(core.job(pending).expect("pending").state, JobState::Pending);
    assert_eq!(core.invariants(), Ok(()));
}

/// The records `v1.redb` holds, as this build decodes them.
fn v1_restored() -> Restored {
    let (_dir, path) = copy_of("v1.redb");
    let disk = journal::open(&path).expect("a v1 journal opens");
    journal::load(&disk).expect("and reads back")
}

#[test]
fn the_golden_v1_journal_decodes_to_its_records() {
    let restored = v1_restored();
    let jobs: Vec<(u8, Option<EndState>, bool, &str)> = restored
        .jobs
        .iter()
        .map(|j| {
            (
                j.accepted.key[0],
                j.ended.as_ref().map(|e| e.state),
                j.started.is_some(),
                j.ended.as_ref().map_or("", |e| e.reason.as_str()),
            )
        })
        .collect();
    assert_eq!(
        jobs,
        [
            (1, Some(EndState::Completed), true, ""),
            (2, None, true, ""),
            (
                3,
                Some(EndState::Cancelled),
                true,
                "cancelled by admin root"
            ),
            (4, None, false, ""),
            (5, Some(EndState::Failed), true, "node n0 went down: psu"),
        ]
    );
    let first = &restored.jobs[0];
    assert_eq!(
        (
            first.accepted.owner.as_str(),
            first.accepted.urgency,
            first.accepted.submit_ms
        ),
        ("alice", 1, NOW)
    );
    let run = first.started.as_ref().expect("started");
    assert_eq!((run.start_ms, run.sim_end_ms), (NOW, NOW + 10_000));
    assert!(run.vertices.iter().any(|v| v.path == "/c0/n2"), "{run:?}");
    assert_eq!(restored.last_id, Some(Fluid(restored.jobs[4].accepted.id)));
    let node = |generation, holding, drained: Option<&str>, down: Option<&str>| NodeRecord {
        generation,
        holding,
        drained: drained.map(str::to_owned),
        down: down.map(str::to_owned),
    };
    assert_eq!(
        restored.nodes,
        [
            (
                "n0".to_owned(),
                node(1, HoldingRecord::Owned, None, Some("psu"))
            ),
            (
                "n1".to_owned(),
                node(2, HoldingRecord::Outgoing { move_id: 8 }, None, None)
            ),
            (
                "n2".to_owned(),
                node(1, HoldingRecord::Owned, Some("new disks"), None)
            ),
            (
                "n3".to_owned(),
                node(
                    4,
                    HoldingRecord::Incoming {
                        move_id: 7,
                        expected_free_ms: Some(NOW + 90_000)
                    },
                    None,
                    None
                )
            ),
        ]
    );
}

/// Every value of `v1.redb` re-encodes to the bytes on file: the encoding of v1 records
/// has not changed (a change that still decodes would slip past the test above).
#[test]
fn the_golden_v1_journal_reencodes_to_the_same_bytes() {
    let (_dir, path) = copy_of("v1.redb");
    let disk = journal::open(&path).expect("opens");
    for (table, rows) in [
        (JOBS_TABLE, disk.scan(JOBS_TABLE).expect("jobs")),
        (RUNS_TABLE, disk.scan(RUNS_TABLE).expect("runs")),
    ] {
        assert!(!rows.is_empty(), "{table}");
        for (key, bytes) in rows {
            let again = match table {
                JOBS_TABLE => {
                    format::encode(&format::decode::<journal::AcceptedJob>(&bytes).expect("decode"))
                }
                _ => {
                    format::encode(&format::decode::<journal::StartedJob>(&bytes).expect("decode"))
                }
            };
            assert_eq!(again.expect("encode"), bytes, "{table} {key}");
        }
    }
    for (key, bytes) in disk.scan(journal::ENDS_TABLE).expect("ends") {
        let end: journal::EndedJob = format::decode(&bytes).expect("decode");
        assert_eq!(format::encode(&end).expect("encode"), bytes, "ends {key}");
    }
    let metas = disk.metas().expect("metas");
    for (name, bytes) in &metas {
        let again = if name.starts_with(journal::NODE_META_PREFIX) {
            format::encode(&format::decode::<NodeRecord>(bytes).expect("decode"))
        } else if name == journal::LAST_ID_META {
            format::encode(&format::decode::<u64>(bytes).expect("decode"))
        } else {
            assert_eq!(name, format::FORMAT_META);
            // Opening it upgraded it: v2 and v3 only added tables.
            assert_eq!(
                bytes,
                &format::stamp_value("shard", journal::FORMAT_VERSION)
            );
            continue;
        };
        assert_eq!(&again.expect("encode"), bytes, "meta {name}");
    }
}

#[test]
fn the_golden_v1_journal_restores_its_jobs_and_nodes() {
    let restored = v1_restored();
    // The coordinator's view: n0 and n2 owned with their flags, n3 on its way in (n1 is
    // the recipient's now: its job still runs here until it ends).
    let mut flags = BTreeMap::new();
    flags.insert(
        "n0".to_owned(),
        NodeFlags {
            down: Some("psu".into()),
            drained: None,
        },
    );
    flags.insert(
        "n2".to_owned(),
        NodeFlags {
            down: None,
            drained: Some("new disks".into()),
        },
    );
    let incoming = vec![(
        MoveId(7),
        IncomingNode {
            node: ng("n3", 4),
            expected_free_ms: Some(NOW + 90_000),
        },
    )];
    let again = assignment(vec![ng("n0", 1), ng("n2", 1)], incoming, flags);
    let options = CoreOptions {
        journal: true,
        retention_ms: u64::MAX,
        ..CoreOptions::default()
    };
    let (core, summary) =
        ShardCore::restored(&again, options, NOW + 40_000, &restored).expect("restored");
    assert_eq!(
        (summary.pending, summary.running, summary.finished),
        (1, 1, 3)
    );
    let states: Vec<(u8, JobState, Vec<String>)> = {
        let mut jobs: Vec<_> = core
            .jobs()
            .map(|j| (j.key.0[0], j.state, j.nodes.clone()))
            .collect();
        jobs.sort_by_key(|(key, _, _)| *key);
        jobs
    };
    assert_eq!(
        states,
        [
            (1, JobState::Completed, vec!["n2".to_owned()]),
            (2, JobState::Running, vec!["n1".to_owned()]),
            (3, JobState::Cancelled, vec!["n0".to_owned()]),
            (4, JobState::Pending, Vec::new()),
            (5, JobState::Failed, vec!["n0".to_owned()]),
        ]
    );
    let status = core.status(NOW + 40_000);
    let nodes: Vec<(&str, NodeState, Option<&str>)> = status
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.state, n.reason.as_deref()))
        .collect();
    assert_eq!(
        nodes,
        [
            ("n0", NodeState::Down, Some("psu")),
            ("n2", NodeState::Drained, Some("new disks")),
            ("n1", NodeState::Outgoing, None),
            ("n3", NodeState::Incoming, None),
        ]
    );
    assert_eq!(core.invariants(), Ok(()));
}

#[test]
fn a_journal_written_before_v1_is_refused_by_name() {
    let (dir, path) = copy_of("pre-v1.redb");
    let refused = journal::open(&path).expect_err("a pre-v1 journal must not be read");
    let text = refused.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("written before journal format v1"), "{text}");
    assert!(
        text.contains(&format!(
            "shard journal format v{}",
            journal::FORMAT_VERSION
        )),
        "{text}"
    );
    assert!(refused.is_unreadable(), "a restart would fail the same way");
    // The shard refuses it at start, before contacting anyone, with exit status 65.
    let e = shardsched_shard::driver::open_journal(dir.path()).expect_err("refused at start");
    assert!(e.journal_unreadable(), "{e}");
    assert!(
        e.to_string().contains("written before journal format v1"),
        "{e}"
    );
}
