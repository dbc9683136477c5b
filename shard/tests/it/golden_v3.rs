//! The golden journal of format v3 (`tests/golden/v3.redb`, written by [`write_golden_v3`]):
//! v3 added the `kills` table, a running job's kill request journaled before it is
//! answered. An exec-executor shard with three running jobs: one whose cancel was
//! acknowledged, one whose node was marked down, one left alone; none of their processes
//! had ended when the journal was taken. It must open, decode to exactly those kill
//! records, re-encode them to the same bytes, and restore to the same jobs with the two
//! kills asked for again, each ending as its request said.
//!
//! `v1.redb` (golden.rs) keeps checking that older journals are upgraded. When the format
//! changes on purpose, see golden.rs.

use crate::golden::{NOW, assignment, copy_of, golden, ng, submit};

use std::collections::BTreeMap;
use std::path::PathBuf;

use shardsched_journal::format;
use shardsched_proto::msg::{JobState, NodeFlags};
use shardsched_proto::{Fluid, Peer, Role};
use shardsched_shard::exec::{EndCause, JobEnd};
use shardsched_shard::journal::{self, KILLS_TABLE, KillPlan, KillRecord};
use shardsched_shard::nodes::Flag;
use shardsched_shard::{CoreExecutor, CoreOptions, ExecAction, ShardCore};

fn options() -> CoreOptions {
    CoreOptions {
        journal: true,
        retention_ms: u64::MAX,
        executor: CoreExecutor::Exec {
            jobs_dir: PathBuf::from("/state/jobs"),
        },
        ..CoreOptions::default()
    }
}

/// n0..n3 owned at generation 1, `down` marked down (reason `psu`).
fn owning_all(down: Option<&str>) -> shardsched_proto::msg::shard_coord::Assignment {
    let flags: BTreeMap<String, NodeFlags> = down
        .map(|n| {
            let flags = NodeFlags {
                down: Some("psu".into()),
                drained: None,
            };
            (n.to_owned(), flags)
        })
        .into_iter()
        .collect();
    let owned = ["n0", "n1", "n2", "n3"].map(|n| ng(n, 1)).to_vec();
    assignment(owned, Vec::new(), flags)
}

/// Writes `tests/golden/v3.redb` (run by hand when the format changes on purpose).
#[test]
#[ignore = "writes the golden journal: run by hand when the format changes on purpose"]
fn write_golden_v3() {
    let path = golden("v3.redb");
    let _ = std::fs::remove_file(&path);
    let disk = journal::open(&path).expect("a fresh journal");
    let commit = |core: &mut ShardCore| {
        let batch = journal::to_batch(&core.take_journal()).expect("encode");
        disk.commit(&batch).expect("commit");
    };
    let mut core = ShardCore::new(&owning_all(None), options()).expect("core");
    commit(&mut core);
    let (cancelled, failing, running) = (
        submit(&mut core, NOW, 1, 1, 3_000),
        submit(&mut core, NOW, 2, 1, 3_000),
        submit(&mut core, NOW, 3, 1, 3_000),
    );
    core.tick(NOW).expect("tick");
    commit(&mut core);
    let admin = Peer::new(Role::Admin, "root").expect("peer");
    core.handle_cancel(NOW + 1_000, &admin, &[cancelled]);
    let node = core.job(failing).expect("job").nodes[0].clone();
    core.set_node_flag(NOW + 1_000, &[node], Flag::Down, Some("psu"))
        .expect("down");
    core.tick(NOW + 1_000).expect("tick");
    commit(&mut core);
    for id in [cancelled, failing, running] {
        assert_eq!(core.job(id).expect("job").state, JobState::Running);
    }
}

#[test]
fn the_golden_v3_journal_reads_back_its_kill_requests_and_restores_them() {
    let (_dir, path) = copy_of("v3.redb");
    let disk = journal::open(&path).expect("a v3 journal opens");
    for (key, bytes) in disk.scan(KILLS_TABLE).expect("kills") {
        let kill: KillRecord = format::decode(&bytes).expect("decode");
        assert_eq!(format::encode(&kill).expect("encode"), bytes, "kills {key}");
    }
    let restored = journal::load(&disk).expect("reads back");
    let jobs: Vec<(u8, bool, Option<KillPlan>)> = restored
        .jobs
        .iter()
        .map(|j| {
            let kill = j.kill.as_ref().map(|k| k.plan.clone());
            (
                j.accepted.key[0],
                j.started.is_some() && j.ended.is_none(),
                kill,
            )
        })
        .collect();
    let down = restored.nodes.iter().find(|(_, n)| n.down.is_some());
    let (down, _) = down.expect("a node down");
    assert_eq!(
        jobs,
        [
            (
                1,
                true,
                Some(KillPlan::Cancel {
                    reason: "cancelled by admin root".into()
                })
            ),
            (
                2,
                true,
                Some(KillPlan::Fail {
                    exception: Some("node-down".into()),
                    reason: format!("node {down} went down: psu"),
                })
            ),
            (3, true, None),
        ]
    );
    let kill = restored.jobs[0].kill.as_ref().expect("kill");
    assert_eq!(kill.requested_ms, NOW + 1_000);

    // A restart asks for both kills again; however the processes end, the jobs end as
    // their requests said.
    let (mut core, summary) = ShardCore::restored(
        &owning_all(Some(down.as_str())),
        options(),
        NOW + 2_000,
        &restored,
    )
    .expect("restored");
    assert_eq!(summary.running, 3);
    let ids: Vec<Fluid> = restored.jobs.iter().map(|j| Fluid(j.id)).collect();
    let mut killed: Vec<Fluid> = core
        .take_exec_actions()
        .into_iter()
        .filter_map(|a| match a {
            ExecAction::Kill { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    killed.dedup();
    assert_eq!(killed, [ids[0], ids[1]]);
    let exited = JobEnd {
        cause: EndCause::Completed,
        exit_code: Some(0),
        signal: None,
        note: String::new(),
    };
    for &id in &ids {
        core.handle_job_ended(NOW + 3_000, id, &exited);
    }
    core.tick(NOW + 3_000).expect("tick");
    let ended: Vec<(JobState, String)> = ids
        .iter()
        .map(|&id| {
            let job = core.job(id).expect("job");
            (
                job.state,
                core.handle_job_info(id).expect("info").summary.reason,
            )
        })
        .collect();
    assert_eq!(
        ended,
        [
            (JobState::Cancelled, "cancelled by admin root".to_owned()),
            (JobState::Failed, format!("node {down} went down: psu")),
            (JobState::Completed, String::new()),
        ]
    );
    assert_eq!(core.invariants(), Ok(()));
}
