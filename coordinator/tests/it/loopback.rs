//! The real driver on 127.0.0.1: real QUIC, certificates from the coordinator's own CA, a test
//! shard built from proto, users and admins.

use crate::common;

use common::{connect_as, localhost, releasing, serve_recorded};
use std::net::SocketAddr;
use std::time::Duration;

use shardsched_coordinator::driver::{ADDRESS_FILE, JOURNAL_FILE};
use shardsched_coordinator::{Config, Coordinator, Options};
use shardsched_proto::msg::client_coord::{self, QueueAction, Response as ClientResponse};
use shardsched_proto::msg::shard_coord::{self, Assignment, Register, ShardStatus};
use shardsched_proto::msg::{
    Generation, JobList, JobState, JobSummary, JobsQuery, NodeState, NodeStatus, QueueStatus,
    RefusalCode, RouteTable, UserFilter, coord_shard,
};
use shardsched_proto::{Ca, Error, Fluid, Role, Session};
use tokio::sync::{mpsc, oneshot};

/// A test shard: answers the coordinator's commands (reporting `SetQueueState` on a
/// channel, answering `Jobs` with `jobs`).
fn serve_commands(
    session: &Session,
    jobs: Vec<JobSummary>,
) -> mpsc::UnboundedReceiver<coord_shard::Request> {
    serve_recorded(session, move |req| {
        Ok(match req {
            coord_shard::Request::Jobs(_) => coord_shard::Response::Jobs(JobList {
                jobs: jobs.clone(),
                truncated: false,
            }),
            _ => coord_shard::Response::Ack { stale: Vec::new() },
        })
    })
}

async fn register(session: &Session, queue: &str, port: u16) -> Result<Assignment, Error> {
    let req = shard_coord::Request::Register(Register {
        queue: queue.into(),
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        held: Vec::new(),
        last_job_id: None,
    });
    match session.request(&req).await? {
        shard_coord::Response::Registered(a) => Ok(*a),
        other => panic!("unexpected answer {other:?}"),
    }
}

async fn routes(client: &Session) -> RouteTable {
    match client.request(&client_coord::Request::Routes).await {
        Ok(ClientResponse::Routes(r)) => r,
        other => panic!("unexpected answer {other:?}"),
    }
}

fn refused(result: Result<impl std::fmt::Debug, Error>) -> shardsched_proto::msg::Refusal {
    match result {
        Err(Error::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn job(id: u64, owner: &str) -> JobSummary {
    JobSummary {
        id: Fluid(id),
        queue: "batch".into(),
        owner: owner.into(),
        name: "sleep".into(),
        state: JobState::Running,
        urgency: 16,
        nodes: vec!["node0".into()],
        nodes_requested: Some(1),
        submit_ms: id,
        start_ms: Some(id),
        end_ms: None,
        duration_ms: 60_000,
        reason: String::new(),
        reserved_ms: None,
        array: None,
        begin_ms: None,
        priority: None,
    }
}

#[tokio::test]
async fn shards_register_and_clients_read_over_real_quic() {
    let dir = common::state_dir();
    let config = Config::embedded_default().expect("config");
    let options = Options {
        listen: localhost(),
        state_dir: dir.path().to_owned(),
    };
    let coordinator = Coordinator::bind(config, &options).expect("bind");
    let addr = coordinator.local_addr();
    let written = std::fs::read_to_string(dir.path().join(ADDRESS_FILE)).expect("address file");
    assert_eq!(written, format!("{addr}\n"));
    assert!(dir.path().join(JOURNAL_FILE).exists());
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(coordinator.run(async move {
        let _ = stopped.await;
    }));

    // A shard registers and gets its assignment.
    let shard = connect_as(dir.path(), addr, Role::Shard, "batch").await;
    let mut commands = serve_commands(&shard, vec![job(10, "alice"), job(30, "alice")]);
    let assignment = register(&shard, "batch", 7001).await.expect("registered");
    assert_eq!(assignment.generator_id, 1);
    assert_eq!(assignment.owned.len(), 112);
    assert_eq!(assignment.owned[0].generation, Generation(1));
    assert_eq!(assignment.queue.queue_policy.as_str(), "easy");
    let status = ShardStatus {
        seq: 1,
        allowances: Vec::new(),
        usage: None,
        factors_version: 0,
        time_ms: 1,
        queue: QueueStatus {
            name: "batch".into(),
            enabled: true,
            started: true,
            queue_policy: shardsched_proto::msg::QueuePolicy::Easy,
            match_policy: shardsched_proto::msg::MatchPolicy::First,
            nodes_defined: 112,
            nodes_owned: 112,
            nodes_up: 1,
            jobs_pending: 0,
            jobs_running: 2,
            online: true,
            definition: String::new(),
            owned: String::new(),
            reason: String::new(),
            pending_reasons: Default::default(),
        },
        nodes: vec![NodeStatus {
            name: "node0".into(),
            queue: Some("batch".into()),
            state: NodeState::Up,
            generation: Generation(1),
            jobs_running: 2,
            reason: None,
            usage: Default::default(),
        }],
        nodes_complete: true,
        nodes_gone: Vec::new(),
        waiting_on: Vec::new(),
    };
    let ack = shard
        .request(&shard_coord::Request::Status(Box::new(status)))
        .await
        .expect("status");
    assert_eq!(ack, shard_coord::Response::Ack);

    // A user reads routes, queues, resources and jobs.
    let alice = connect_as(dir.path(), addr, Role::User, "alice").await;
    let table = routes(&alice).await;
    assert_eq!(table.default_queue.as_deref(), Some("batch"));
    assert_eq!(table.routes.len(), 1);
    assert_eq!(table.routes[0].queue, "batch");
    assert_eq!(
        table.routes[0].address,
        SocketAddr::from(([127, 0, 0, 1], 7001))
    );
    assert_eq!(table.routes[0].generator_id, 1);

    let queues = match alice.request(&client_coord::Request::Queues).await {
        Ok(ClientResponse::Queues(q)) => q,
        other => panic!("unexpected answer {other:?}"),
    };
    let names: Vec<(&str, bool)> = queues
        .iter()
        .map(|q| (q.name.as_str(), q.started))
        .collect();
    assert_eq!(
        names,
        [("batch", true), ("debug", false), ("standby", false)],
        "debug is offline"
    );
    assert_eq!((queues[0].nodes_up, queues[0].jobs_running), (1, 2));

    let nodes = match alice
        .request(&client_coord::Request::Resources {
            queue: None,
            start: 0,
        })
        .await
    {
        Ok(ClientResponse::Resources { nodes, next: None }) => nodes,
        other => panic!("unexpected answer {other:?}"),
    };
    assert_eq!(nodes.len(), 128);
    assert_eq!((nodes[0].state, nodes[0].jobs_running), (NodeState::Up, 2));
    assert_eq!(nodes[127].queue.as_deref(), Some("debug"));
    assert_eq!(nodes[127].state, NodeState::Down);

    let query = JobsQuery {
        queue: None,
        user: UserFilter::Mine,
        include_inactive: true,
        limit: 0,
        states: Vec::new(),
        name: None,
    };
    let list = match alice.request(&client_coord::Request::Jobs(query)).await {
        Ok(ClientResponse::Jobs(l)) => l,
        other => panic!("unexpected answer {other:?}"),
    };
    let ids: Vec<u64> = list.jobs.iter().map(|j| j.id.0).collect();
    assert_eq!(ids, [30, 10], "newest first");
    assert!(list.truncated, "debug and standby could not be asked");
    match commands.recv().await {
        Some(coord_shard::Request::Jobs(q)) => {
            assert_eq!(
                q.user,
                UserFilter::Named("alice".into()),
                "'mine' is alice, not the coordinator"
            );
        }
        other => panic!("expected a jobs fan-out, got {other:?}"),
    }

    // A user may not change queues; the refusal says why.
    let r = refused(
        alice
            .request(&client_coord::Request::QueueControl {
                queue: "batch".into(),
                action: QueueAction::Stop,
            })
            .await,
    );
    assert_eq!(r.code, RefusalCode::Forbidden);
    assert_eq!(
        r.message,
        "user alice may not change queues (role user lacks the authority)"
    );

    // An admin may, and the shard hears of it.
    let root = connect_as(dir.path(), addr, Role::Admin, "root").await;
    // standby is defined over batch's nodes and owns none: starting it needs a move.
    let r = refused(
        root.request(&client_coord::Request::QueueControl {
            queue: "standby".into(),
            action: QueueAction::Start { take: false },
        })
        .await,
    );
    assert!(r.message.contains("would start owning no node"), "{r}");
    let done = root
        .request(&client_coord::Request::QueueControl {
            queue: "batch".into(),
            action: QueueAction::Stop,
        })
        .await
        .expect("stop");
    assert_eq!(done, ClientResponse::Done { move_id: None });
    assert_eq!(
        commands.recv().await,
        Some(coord_shard::Request::SetQueueState {
            enabled: true,
            started: false
        })
    );
    assert!(routes(&alice).await.epoch > table.epoch);

    // A second live shard for batch is refused; a shard may only register its own queue.
    let twin = connect_as(dir.path(), addr, Role::Shard, "batch").await;
    let r = refused(register(&twin, "batch", 7002).await);
    assert_eq!(r.code, RefusalCode::Unavailable);
    assert!(
        r.message
            .contains("queue batch already has a live shard (at 127.0.0.1:7001)"),
        "{r}"
    );
    let r = refused(register(&twin, "debug", 7002).await);
    assert_eq!(r.code, RefusalCode::Forbidden);
    // A user cannot register: its connection serves client requests only, so a shard's
    // request does not even decode there.
    let as_user = alice
        .request(&shard_coord::Request::Register(Register {
            queue: "debug".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7003)),
            held: Vec::new(),
            last_job_id: None,
        }))
        .await;
    assert!(
        matches!(as_user, Err(Error::StreamReset { .. })),
        "{as_user:?}"
    );

    // The shard goes away: its route goes with it.
    shard.close();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !routes(&alice).await.routes.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "route still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queues = match alice.request(&client_coord::Request::Queues).await {
        Ok(ClientResponse::Queues(q)) => q,
        other => panic!("unexpected answer {other:?}"),
    };
    assert!(!queues[0].started);

    // Now the twin may take the queue.
    let _twin_commands = serve_commands(&twin, Vec::new());
    let again = register(&twin, "batch", 7002).await.expect("registered");
    assert!(
        !again.queue.started,
        "the admin's stop is the coordinator's intent"
    );

    let _ = stop.send(());
    running.await.expect("task").expect("clean shutdown");
    assert!(
        !dir.path().join(ADDRESS_FILE).exists(),
        "address file removed"
    );
}

#[tokio::test]
async fn a_silent_holder_is_replaced_by_a_restarted_shard() {
    let dir = common::state_dir();
    let config = Config::embedded_default().expect("config");
    let options = Options {
        listen: localhost(),
        state_dir: dir.path().to_owned(),
    };
    let coordinator = Coordinator::bind(config, &options).expect("bind");
    let addr = coordinator.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(coordinator.run(async move {
        let _ = stopped.await;
    }));

    // The first shard registers but never answers commands (a hung or vanished process
    // whose connection has not timed out yet).
    let hung = connect_as(dir.path(), addr, Role::Shard, "debug").await;
    register(&hung, "debug", 7101).await.expect("registered");
    let fresh = connect_as(dir.path(), addr, Role::Shard, "debug").await;
    let _commands = serve_commands(&fresh, Vec::new());
    let a = register(&fresh, "debug", 7102)
        .await
        .expect("replaces the silent one");
    assert_eq!(a.generator_id, 2);
    let user = connect_as(dir.path(), addr, Role::User, "bob").await;
    let table = routes(&user).await;
    assert_eq!(table.routes.len(), 1);
    assert_eq!(table.routes[0].address.port(), 7102);

    let _ = stop.send(());
    running.await.expect("task").expect("clean shutdown");

    // A restart on the same state dir keeps the CA and the generator ids.
    let config = Config::embedded_default().expect("config");
    let coordinator = Coordinator::bind(config, &options).expect("bind again");
    assert_eq!(coordinator.routes().routes.len(), 0);
    drop(coordinator);
    let ca_again = Ca::load(dir.path()).expect("same CA");
    assert!(!ca_again.cert_pem().is_empty());
}

/// A test shard that takes part in moves: it answers `Release` with every node free now,
/// acknowledges everything else, and reports each command on a channel.
fn serve_moves(session: &Session) -> mpsc::UnboundedReceiver<coord_shard::Request> {
    serve_recorded(session, |req| {
        Ok(match req {
            coord_shard::Request::Release(release) => {
                releasing(release, coord_shard::FreeAt::Now, &[])
            }
            _ => coord_shard::Response::Ack { stale: Vec::new() },
        })
    })
}

/// The next command on `rx` that `pick` selects (others are skipped); a hang guard, not a
/// timing assertion.
async fn next_command<T>(
    rx: &mut mpsc::UnboundedReceiver<coord_shard::Request>,
    pick: impl Fn(coord_shard::Request) -> Option<T>,
) -> T {
    let wait = async {
        while let Some(req) = rx.recv().await {
            if let Some(t) = pick(req) {
                return t;
            }
        }
        panic!("the command channel closed");
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("the command never came")
}

#[tokio::test]
async fn an_idle_move_runs_over_real_quic_and_outlives_a_restart() {
    let dir = common::state_dir();
    let options = Options {
        listen: localhost(),
        state_dir: dir.path().to_owned(),
    };
    let config = Config::embedded_default().expect("config");
    let coordinator = Coordinator::bind(config, &options).expect("bind");
    let addr = coordinator.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(coordinator.run(async move {
        let _ = stopped.await;
    }));
    let batch = connect_as(dir.path(), addr, Role::Shard, "batch").await;
    let mut batch_commands = serve_moves(&batch);
    register(&batch, "batch", 7001)
        .await
        .expect("batch registered");
    let standby = connect_as(dir.path(), addr, Role::Shard, "standby").await;
    let mut standby_commands = serve_moves(&standby);
    let a = register(&standby, "standby", 7003)
        .await
        .expect("standby registered");
    assert!(a.owned.is_empty());

    let root = connect_as(dir.path(), addr, Role::Admin, "root").await;
    let done = root
        .request(&client_coord::Request::MoveNodes {
            nodes: vec!["node0".into(), "node1".into()],
            to: "standby".into(),
        })
        .await
        .expect("move accepted");
    assert_eq!(
        done,
        ClientResponse::Done {
            move_id: Some(shardsched_proto::msg::MoveId(1))
        }
    );
    // Accepted means journaled (the restart below reads it back); `queue moves` shows it.
    let moves = match root.request(&client_coord::Request::Moves).await {
        Ok(ClientResponse::Moves { moves, .. }) => moves,
        other => panic!("unexpected answer {other:?}"),
    };
    assert_eq!(moves.len(), 1);
    assert_eq!(
        (moves[0].from.as_str(), moves[0].to.as_str()),
        ("batch", "standby")
    );
    assert_eq!(moves[0].nodes[0].node, "node0");
    assert_eq!(moves[0].nodes[0].generation, Generation(2));
    // One move asked by its id: that move (it may have gone on meanwhile); an id never
    // given: none.
    let of = |m| client_coord::Request::MoveOf {
        move_id: shardsched_proto::msg::MoveId(m),
    };
    let names = |m: &client_coord::MoveInfo| -> Vec<String> {
        m.nodes.iter().map(|n| n.node.clone()).collect()
    };
    match root.request(&of(1)).await {
        Ok(ClientResponse::Moves {
            moves: one,
            truncated: false,
        }) => {
            assert_eq!(one.len(), 1);
            assert_eq!(
                (one[0].move_id, names(&one[0])),
                (moves[0].move_id, names(&moves[0]))
            );
        }
        other => panic!("unexpected answer {other:?}"),
    }
    match root.request(&of(7)).await {
        Ok(ClientResponse::Moves { moves: none, .. }) => assert!(none.is_empty()),
        other => panic!("unexpected answer {other:?}"),
    }

    let release = next_command(&mut batch_commands, |r| match r {
        coord_shard::Request::Release(r) => Some(r),
        _ => None,
    })
    .await;
    assert_eq!(release.nodes.len(), 2);
    assert!(release.nodes.iter().all(|n| n.generation == Generation(2)));
    let acquire = next_command(&mut standby_commands, |r| match r {
        coord_shard::Request::Acquire(a) => Some(a),
        _ => None,
    })
    .await;
    assert_eq!(acquire.nodes.len(), 2);

    // Completion is journaled once the recipient acknowledged; wait for `queue moves` to
    // say so (bounded), then restart on the same state directory.
    let mut finished = false;
    for _ in 0..300 {
        let moves = match root.request(&client_coord::Request::Moves).await {
            Ok(ClientResponse::Moves { moves, .. }) => moves,
            other => panic!("unexpected answer {other:?}"),
        };
        if moves[0].status == "completed" {
            let node = &moves[0].nodes[0];
            assert_eq!(node.state, "up");
            let (released, acquired) = (
                node.released_ms.expect("released"),
                node.acquired_ms.expect("acquired"),
            );
            assert!(
                node.requested_ms <= released && released <= acquired,
                "{node:?}"
            );
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(finished, "the move never finished");
    let _ = stop.send(());
    running.await.expect("joined").expect("ran");

    let config = Config::embedded_default().expect("config");
    let coordinator = Coordinator::bind(config, &options).expect("bind again");
    let addr = coordinator.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(coordinator.run(async move {
        let _ = stopped.await;
    }));
    let standby = connect_as(dir.path(), addr, Role::Shard, "standby").await;
    let _commands = serve_moves(&standby);
    let a = register(&standby, "standby", 7003)
        .await
        .expect("standby registered");
    let owned: Vec<(&str, u64)> = a
        .owned
        .iter()
        .map(|n| (n.node.as_str(), n.generation.0))
        .collect();
    assert_eq!(
        owned,
        vec![("node0", 2), ("node1", 2)],
        "the move outlived the restart"
    );
    let _ = stop.send(());
    running.await.expect("joined").expect("ran");
}
