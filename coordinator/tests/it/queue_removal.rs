//! `queue remove` over real QUIC on 127.0.0.1, with a test shard for the queue removed:
//!
//! - right after its last job ended, the removal goes through although the shard's last
//!   status report still counts the job (it once was refused "1 running" while `queue list`
//!   already showed 0);
//! - a removal refused because the queue has jobs never disables it, not even for a moment
//!   (the shard decides both in one step: `DisableIfIdle`), and the refusal is labelled a
//!   policy decision, not `Unavailable`.

use crate::common;

use common::{Running, connect_as, serve_recorded};
use std::net::SocketAddr;
use std::path::Path;

use shardsched_coordinator::Config;
use shardsched_proto::msg::client_coord::{self, Response as ClientResponse};
use shardsched_proto::msg::shard_coord::{self, Register, ShardStatus};
use shardsched_proto::msg::{JobList, QueueStatus, Refusal, RefusalCode, RouteTable, coord_shard};
use shardsched_proto::{Error, Role, Session};
use tokio::sync::mpsc;

/// `gone` is defined over `keep`'s nodes and stopped: it owns nothing, so only its jobs can
/// stand in the way of its removal.
const CONFIG: &str = r#"
default_queue = "keep"
[queues.keep]
nodes = "node[0-3]"
[queues.gone]
nodes = "node[0-3]"
started = false
"#;

/// A test shard for `gone` that holds `live` jobs: it refuses `DisableIfIdle` while it
/// holds any, as the real shard does, and reports every command on a channel.
fn serve_gone(session: &Session, live: usize) -> mpsc::UnboundedReceiver<coord_shard::Request> {
    serve_recorded(session, move |req| match req {
        coord_shard::Request::DisableIfIdle if live > 0 => Err(Refusal::new(
            RefusalCode::Policy,
            format!("queue gone has jobs ({live} running)"),
        )),
        // What a shard holding `live` jobs would list (only the count matters).
        coord_shard::Request::Jobs(_) => Ok(coord_shard::Response::Jobs(JobList {
            jobs: Vec::new(),
            truncated: live > 0,
        })),
        _ => Ok(coord_shard::Response::Ack { stale: Vec::new() }),
    })
}

/// Registers `gone`'s shard and reports one running job: a report made just before the
/// job ended, the newest the coordinator has.
async fn register_reporting_one_running(shard: &Session) {
    let register = shard_coord::Request::Register(Register {
        queue: "gone".into(),
        listen: SocketAddr::from(([127, 0, 0, 1], 7002)),
        held: Vec::new(),
        last_job_id: None,
    });
    assert!(matches!(
        shard.request(&register).await,
        Ok(shard_coord::Response::Registered(_))
    ));
    let status = ShardStatus {
        seq: 1,
        allowances: Vec::new(),
        usage: None,
        factors_version: 0,
        time_ms: 1,
        queue: QueueStatus {
            name: "gone".into(),
            enabled: true,
            started: false,
            queue_policy: shardsched_proto::msg::QueuePolicy::Fcfs,
            match_policy: shardsched_proto::msg::MatchPolicy::First,
            nodes_defined: 4,
            nodes_owned: 0,
            nodes_up: 0,
            jobs_pending: 0,
            jobs_running: 1,
            online: true,
            definition: String::new(),
            owned: String::new(),
            reason: String::new(),
            pending_reasons: Default::default(),
        },
        nodes: Vec::new(),
        nodes_complete: true,
        nodes_gone: Vec::new(),
        waiting_on: Vec::new(),
    };
    let ack = shard
        .request(&shard_coord::Request::Status(Box::new(status)))
        .await;
    assert_eq!(ack.expect("status"), shard_coord::Response::Ack);
}

fn start(dir: &Path) -> Running {
    let config = Config::parse(CONFIG, "removal.toml", Path::new(".")).expect("config");
    common::start(dir, config)
}

fn remove_gone() -> client_coord::Request {
    client_coord::Request::RemoveQueue {
        queue: "gone".into(),
        give_to: None,
    }
}

async fn routes(client: &Session) -> RouteTable {
    match client.request(&client_coord::Request::Routes).await {
        Ok(ClientResponse::Routes(r)) => r,
        other => panic!("unexpected answer {other:?}"),
    }
}

#[tokio::test]
async fn a_queue_whose_last_job_just_ended_is_removed_despite_a_stale_report() {
    let dir = common::state_dir();
    let running = start(dir.path());
    let shard = connect_as(dir.path(), running.addr, Role::Shard, "gone").await;
    let _commands = serve_gone(&shard, 0);
    register_reporting_one_running(&shard).await;
    let root = connect_as(dir.path(), running.addr, Role::Admin, "root").await;

    let answer = root.request(&remove_gone()).await;
    assert!(
        matches!(answer, Ok(ClientResponse::Reconfigured { .. })),
        "the shard has no job now, whatever its last report said: {answer:?}"
    );
    assert!(routes(&root).await.queue("gone").is_none());
    running.stop().await;
}

#[tokio::test]
async fn a_removal_refused_for_jobs_never_disables_the_queue() {
    let dir = common::state_dir();
    let running = start(dir.path());
    let shard = connect_as(dir.path(), running.addr, Role::Shard, "gone").await;
    let mut commands = serve_gone(&shard, 1);
    register_reporting_one_running(&shard).await;
    let root = connect_as(dir.path(), running.addr, Role::Admin, "root").await;

    let refusal = match root.request(&remove_gone()).await {
        Err(Error::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(refusal.code, RefusalCode::Policy, "{refusal}");
    assert!(refusal.message.contains("has jobs"), "{refusal}");
    // Everything the shard was told: each command was answered (and so recorded) before
    // the refusal came back.
    let mut told = Vec::new();
    while let Ok(req) = commands.try_recv() {
        told.push(req);
    }
    assert!(
        !told.iter().any(|r| matches!(
            r,
            coord_shard::Request::SetQueueState { enabled: false, .. }
        )),
        "the queue was disabled: {told:?}"
    );
    let queues = match root.request(&client_coord::Request::Queues).await {
        Ok(ClientResponse::Queues(q)) => q,
        other => panic!("unexpected answer {other:?}"),
    };
    assert!(queues.iter().any(|q| q.name == "gone" && q.enabled));
    running.stop().await;
}
