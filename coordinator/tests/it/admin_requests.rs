//! The admin requests over real QUIC on 127.0.0.1: queue changes with a reason that outlive
//! a restart, moves between named queues with a deadline, cancel, `Moves`, node flags
//! forwarded to the shard that has the node and carried in the registration answer, the
//! dry run asked of the donor, and users refused.

use crate::common;

use common::{Running, connect_as, releasing, serve_recorded};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use shardsched_coordinator::Config;
use shardsched_coordinator::driver::JOURNAL_FILE;
use shardsched_proto::msg::client_coord::{
    self, MoveRequest, QueueAction, QueueAdmin, Response as ClientResponse,
};
use shardsched_proto::msg::coord_shard::{self, DryRunReport, FreeAt, NodeRelease};
use shardsched_proto::msg::shard_coord::{self, Assignment, Register};
use shardsched_proto::msg::{MoveId, RefusalCode};
use shardsched_proto::{Error, Fluid, Role, Session};
use tokio::sync::mpsc;

/// A test shard: reports every command on a channel; answers `Release` with every node
/// busy until far away (so a move stays outgoing), `DryRunRelease` with a report, and
/// acknowledges the rest.
fn serve_shard(session: &Session) -> mpsc::UnboundedReceiver<coord_shard::Request> {
    serve_recorded(session, |req| {
        Ok(match req {
            coord_shard::Request::Release(release) => {
                releasing(release, FreeAt::Expected(u64::MAX / 2), &[Fluid(7)])
            }
            coord_shard::Request::DryRunRelease { nodes } => {
                coord_shard::Response::DryRun(DryRunReport {
                    nodes: nodes
                        .into_iter()
                        .map(|node| NodeRelease {
                            node,
                            free: FreeAt::Now,
                            jobs: Vec::new(),
                        })
                        .collect(),
                    all_free: FreeAt::Now,
                    stranded: vec![Fluid(9)],
                })
            }
            _ => coord_shard::Response::Ack { stale: Vec::new() },
        })
    })
}

async fn register(session: &Session, queue: &str, port: u16) -> Assignment {
    let req = shard_coord::Request::Register(Register {
        queue: queue.into(),
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        held: Vec::new(),
        last_job_id: None,
    });
    match session.request(&req).await {
        Ok(shard_coord::Response::Registered(a)) => *a,
        other => panic!("unexpected answer {other:?}"),
    }
}

/// The next command on `rx` that `pick` selects; a hang guard, not a timing assertion.
async fn next_command<T>(
    rx: &mut mpsc::UnboundedReceiver<coord_shard::Request>,
    pick: impl Fn(coord_shard::Request) -> Option<T>,
) -> T {
    let wait = async {
        loop {
            let req = rx.recv().await.expect("the shard's channel closed");
            if let Some(found) = pick(req) {
                return found;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the command never came")
}

fn refused<T: std::fmt::Debug>(result: Result<T, Error>) -> shardsched_proto::msg::Refusal {
    match result {
        Err(Error::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn start(dir: &Path) -> Running {
    common::start(dir, Config::embedded_default().expect("config"))
}

#[tokio::test]
async fn admin_changes_are_journaled_forwarded_and_outlive_a_restart() {
    let dir = common::state_dir();
    let running = start(dir.path());
    assert!(dir.path().join(JOURNAL_FILE).exists());
    let batch = connect_as(dir.path(), running.addr, Role::Shard, "batch").await;
    let mut batch_commands = serve_shard(&batch);
    register(&batch, "batch", 7001).await;
    let debug = connect_as(dir.path(), running.addr, Role::Shard, "debug").await;
    let mut debug_commands = serve_shard(&debug);
    register(&debug, "debug", 7002).await;
    let root = connect_as(dir.path(), running.addr, Role::Admin, "root").await;
    let user = connect_as(dir.path(), running.addr, Role::User, "bob").await;

    // A user may list moves but change nothing.
    let moves = user.request(&client_coord::Request::Moves).await;
    assert_eq!(
        moves.expect("moves"),
        ClientResponse::Moves {
            moves: Vec::new(),
            truncated: false
        }
    );
    let r = refused(
        user.request(&client_coord::Request::SetNodeDrain {
            nodes: vec!["node0".into()],
            drained: true,
            reason: String::new(),
        })
        .await,
    );
    assert_eq!(r.code, RefusalCode::Forbidden);

    // Disable with a reason: the shard hears it.
    root.request(&client_coord::Request::QueueAdmin(QueueAdmin {
        queue: "debug".into(),
        action: QueueAction::Disable,
        reason: "maintenance".into(),
        release_to: None,
    }))
    .await
    .expect("disabled");
    next_command(&mut debug_commands, |r| match r {
        coord_shard::Request::SetQueueState { enabled: false, .. } => Some(()),
        _ => None,
    })
    .await;

    // Drain: forwarded to the owner; an unowned-by-anyone node is not an error.
    root.request(&client_coord::Request::SetNodeDrain {
        nodes: vec!["node1".into()],
        drained: true,
        reason: "bad dimm".into(),
    })
    .await
    .expect("drained");
    let (nodes, drained) = next_command(&mut batch_commands, |r| match r {
        coord_shard::Request::SetNodeDrain { nodes, drained, .. } => Some((nodes, drained)),
        _ => None,
    })
    .await;
    assert_eq!((nodes, drained), (vec!["node1".to_owned()], true));
    let r = refused(
        root.request(&client_coord::Request::SetNodeDrain {
            nodes: vec!["node999".into()],
            drained: true,
            reason: String::new(),
        })
        .await,
    );
    assert!(r.message.contains("node999"), "{r}");

    // A move between named queues with a deadline: the donor is asked to release, and
    // past the deadline told to cancel the jobs holding the nodes.
    let done = root
        .request(&client_coord::Request::Move(MoveRequest {
            nodes: vec!["node2".into()],
            from: "batch".into(),
            to: "standby".into(),
            deadline_ms: Some(1),
            dry_run: false,
        }))
        .await
        .expect("move accepted");
    assert_eq!(
        done,
        ClientResponse::Done {
            move_id: Some(MoveId(1))
        }
    );
    next_command(&mut batch_commands, |r| match r {
        coord_shard::Request::CancelJobs(c) => Some(c.nodes),
        _ => None,
    })
    .await;
    match root.request(&client_coord::Request::Moves).await {
        Ok(ClientResponse::Moves { moves, .. }) => {
            assert_eq!(moves.len(), 1);
            assert_eq!(moves[0].status, "active");
            assert_eq!(moves[0].nodes[0].state, "outgoing");
            assert_eq!(moves[0].nodes[0].jobs, vec![Fluid(7)]);
            assert!(moves[0].deadline_ms.is_some());
        }
        other => panic!("unexpected answer {other:?}"),
    }

    // The dry run is the donor's answer; nothing changes.
    let answer = root
        .request(&client_coord::Request::Move(MoveRequest {
            nodes: vec!["node3".into()],
            from: "batch".into(),
            to: "standby".into(),
            deadline_ms: None,
            dry_run: true,
        }))
        .await
        .expect("dry run");
    match answer {
        ClientResponse::DryRun(report) => assert_eq!(report.stranded, vec![Fluid(9)]),
        other => panic!("unexpected answer {other:?}"),
    }
    let r = refused(
        root.request(&client_coord::Request::Move(MoveRequest {
            nodes: vec!["node120".into()],
            from: "batch".into(),
            to: "standby".into(),
            deadline_ms: None,
            dry_run: true,
        }))
        .await,
    );
    assert!(r.message.contains("node120"), "{r}");

    running.stop().await;

    // Restart: the disable, the drain and the unfinished move are the journal's.
    let running = start(dir.path());
    let batch = connect_as(dir.path(), running.addr, Role::Shard, "batch").await;
    let _batch_commands = serve_shard(&batch);
    let a = register(&batch, "batch", 7001).await;
    assert_eq!(
        a.flags.get("node1").and_then(|f| f.drained.as_deref()),
        Some("bad dimm")
    );
    assert!(
        a.owned.iter().all(|n| n.node != "node2"),
        "node2 is still on its way out"
    );
    let debug = connect_as(dir.path(), running.addr, Role::Shard, "debug").await;
    let _debug_commands = serve_shard(&debug);
    let a = register(&debug, "debug", 7002).await;
    assert!(!a.queue.enabled, "the disable outlived the restart");
    let root = connect_as(dir.path(), running.addr, Role::Admin, "root").await;
    match root
        .request(&client_coord::Request::CancelMove { move_id: MoveId(1) })
        .await
    {
        Ok(ClientResponse::Cancelled { returned }) => {
            assert_eq!(returned, vec!["node2".to_owned()])
        }
        other => panic!("unexpected answer {other:?}"),
    }
    let r = refused(
        root.request(&client_coord::Request::CancelMove { move_id: MoveId(5) })
            .await,
    );
    assert_eq!(r.code, RefusalCode::NotFound);
    running.stop().await;
}
