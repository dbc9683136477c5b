//! Request handlers: shards (`shard_coord`) and clients (`client_coord`), and the commands
//! the coordinator sends shards (`coord_shard`) on their own connections.

use std::net::SocketAddr;
use std::sync::Arc;

use shardsched_proto::limits::LIST_REPLY_BYTES_MAX;
use shardsched_proto::msg::client_coord::{self, Response as ClientResponse};
use shardsched_proto::msg::shard_coord::{self, Response as ShardResponse};
use shardsched_proto::msg::{
    JobList, JobsQuery, NodeStatus, Refusal, RefusalCode, UserFilter, bounds, coord_shard,
};
use shardsched_proto::{Error, Peer, Reply, Session, failpoint, serve};
use tokio::task::JoinSet;

use super::{
    FANOUT_TIMEOUT, MOVE_PUMP_IDLE, SHARD_COMMAND_TIMEOUT, SHARD_PROBE_TIMEOUT, Shared, admin,
    lock, now_ms,
};
use crate::core::{ConnId, Core, MoveCommand, NodeFlag, QueueCommand, RegisterError, merge_jobs};

/// Serves a shard's connection until it ends, then marks its queue offline.
pub(super) async fn shard_connection(shared: Arc<Shared>, session: Session) {
    let conn = conn_id(&session);
    let remote = session.remote_address();
    let peer = session.peer().clone();
    tracing::debug!(%peer, %remote, "shard connected");
    lock(&shared.sessions).insert(conn, session.clone());
    let handler_shared = Arc::clone(&shared);
    let served = serve(session, move |peer, req: shard_coord::Request| {
        let shared = Arc::clone(&handler_shared);
        async move { shard_request(shared, conn, remote, peer, req).await }
    })
    .await;
    lock(&shared.sessions).remove(&conn);
    if let Some(queue) = shared.with_core(|core| core.disconnected(conn)) {
        match served {
            Ok(()) => tracing::info!(%queue, %remote, "shard disconnected; queue offline"),
            Err(e) => {
                tracing::warn!(%queue, %remote, error = %e, "shard connection lost; queue offline")
            }
        }
    }
}

/// Serves a user's or an admin's connection until it ends.
pub(super) async fn client_connection(shared: Arc<Shared>, session: Session) {
    let peer = session.peer().clone();
    let served = serve(session, move |peer, req: client_coord::Request| {
        let shared = Arc::clone(&shared);
        async move { client_request(shared, peer, req).await }
    })
    .await;
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "client connection ended");
    }
}

async fn shard_request(
    shared: Arc<Shared>,
    conn: ConnId,
    remote: SocketAddr,
    peer: Peer,
    req: shard_coord::Request,
) -> Reply<ShardResponse> {
    match req {
        shard_coord::Request::Register(reg) => {
            let first = shared.with_core(|core| core.register(conn, &peer.name, remote, &reg));
            let assignment = match first {
                Ok(a) => a,
                Err(RegisterError::Refused(refusal)) => {
                    tracing::warn!(%peer, %remote, %refusal, "registration refused");
                    return Err(refusal);
                }
                Err(RegisterError::Held {
                    queue,
                    conn: holder,
                }) => {
                    if holder_alive(&shared, holder).await {
                        let refusal = shared.with_core(|core| core.refuse_second_shard(&queue));
                        tracing::warn!(%peer, %remote, %refusal, "registration refused");
                        return Err(refusal);
                    }
                    tracing::info!(%queue, "the shard that held the queue does not answer; replacing it");
                    if let Some(old) = shared.session(holder) {
                        old.close();
                    }
                    let again = shared.with_core(|core| {
                        core.disconnected(holder);
                        core.register(conn, &peer.name, remote, &reg)
                    });
                    match again {
                        Ok(a) => a,
                        Err(RegisterError::Refused(refusal)) => return Err(refusal),
                        Err(RegisterError::Held { queue, .. }) => {
                            return Err(shared.with_core(|core| core.refuse_second_shard(&queue)));
                        }
                    }
                }
            };
            shared.with_core(|core| core.moves_registered(now_ms(), &reg.queue, &reg.held));
            // The assignment names generations: they must be on disk before it leaves.
            flush(&shared).await?;
            let address = shared.with_core(|core| core.shard(&reg.queue).map(|l| l.address));
            tracing::info!(
                queue = %reg.queue,
                address = ?address,
                generator_id = assignment.generator_id,
                owned = assignment.owned.len(),
                "shard registered"
            );
            Ok(ShardResponse::Registered(Box::new(assignment)))
        }
        shard_coord::Request::Status(status) => {
            shared.with_core(|core| core.status(conn, &peer.name, status))?;
            Ok(ShardResponse::Ack)
        }
        shard_coord::Request::Released(released) => {
            shared.with_core(|core| core.moves_released(now_ms(), conn, &peer.name, &released))?;
            flush(&shared).await?;
            Ok(ShardResponse::Ack)
        }
    }
}

/// Whether the shard on connection `holder` still answers (any answer, even a refusal,
/// proves it is alive).
async fn holder_alive(shared: &Shared, holder: ConnId) -> bool {
    let Some(session) = shared.session(holder) else {
        return false;
    };
    if session.connection().close_reason().is_some() {
        return false;
    }
    let probe = coord_shard::Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: false,
        limit: 1,
    });
    matches!(
        tokio::time::timeout(SHARD_PROBE_TIMEOUT, session.request(&probe)).await,
        Ok(Ok(_) | Err(Error::Refused(_)))
    )
}

async fn client_request(
    shared: Arc<Shared>,
    peer: Peer,
    req: client_coord::Request,
) -> Reply<ClientResponse> {
    match req {
        client_coord::Request::Routes => {
            // The published table: no lock on the core.
            Ok(ClientResponse::Routes(
                shared.routes.load().as_ref().clone(),
            ))
        }
        client_coord::Request::Queues => Ok(ClientResponse::Queues(
            shared.with_core(|core| core.queue_list()),
        )),
        client_coord::Request::Resources { queue, start } => {
            let rows = shared.with_core(|core| core.resources(queue.as_deref()))?;
            Ok(resources_page(rows, start, LIST_REPLY_BYTES_MAX))
        }
        client_coord::Request::Jobs(query) => {
            jobs(&shared, &peer, &query).await.map(ClientResponse::Jobs)
        }
        client_coord::Request::QueueControl { queue, action } => {
            let req = client_coord::QueueAdmin {
                queue,
                action,
                reason: String::new(),
                release_to: None,
            };
            // The plain request (older clients) is answered `Done`, whatever notes.
            let control = admin::queue_change(&shared, &peer, req).await?;
            Ok(ClientResponse::Done {
                move_id: control.move_id,
            })
        }
        client_coord::Request::QueueAdmin(req) => admin::queue_admin(&shared, &peer, req).await,
        client_coord::Request::Move(req) => admin::move_nodes(&shared, &peer, req).await,
        client_coord::Request::CancelMove { move_id } => {
            admin::cancel_move(&shared, &peer, move_id).await
        }
        client_coord::Request::Moves => Ok(admin::moves(&shared)),
        client_coord::Request::MoveNodes { nodes, to } => {
            let _admin = shared.admin.lock().await;
            let move_id = shared.with_core(|core| core.move_nodes(now_ms(), &nodes, &to))?;
            tracing::info!(%peer, %to, ?move_id, "move nodes");
            flush(&shared).await?;
            Ok(ClientResponse::Done { move_id })
        }
        client_coord::Request::SetNodeState {
            nodes,
            down,
            reason,
        } => admin::node_flag(&shared, &peer, &nodes, NodeFlag::Down, down, &reason).await,
        client_coord::Request::SetNodeDrain {
            nodes,
            drained,
            reason,
        } => admin::node_flag(&shared, &peer, &nodes, NodeFlag::Drained, drained, &reason).await,
        request @ (client_coord::Request::AddQueue(_)
        | client_coord::Request::RemoveQueue { .. }
        | client_coord::Request::UpdateQueue(_)
        | client_coord::Request::Reload) => {
            super::reconfig::queue_table_request(&shared, &peer, request).await
        }
    }
}

/// The page of `rows` from `start` that fits `budget` bytes, and where the next one starts.
fn resources_page(rows: Vec<NodeStatus>, start: u32, budget: usize) -> ClientResponse {
    let skip = usize::try_from(start).unwrap_or(usize::MAX);
    let (nodes, more) = bounds::fit_rows(rows.into_iter().skip(skip), budget);
    let sent = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    ClientResponse::Resources {
        nodes,
        next: more.then(|| start.saturating_add(sent)),
    }
}

/// `jobs`: asks every shard of the plan at once, each bounded by [`FANOUT_TIMEOUT`], and
/// merges what comes back.
async fn jobs(shared: &Shared, peer: &Peer, query: &JobsQuery) -> Result<JobList, Refusal> {
    let plan = shared.with_core(|core| core.jobs_plan(peer, query))?;
    let mut asks = JoinSet::new();
    for (queue, conn) in &plan.ask {
        let session = shared.session(*conn);
        let request = coord_shard::Request::Jobs(plan.query.clone());
        let queue = queue.clone();
        asks.spawn(async move {
            let Some(session) = session else {
                return (queue, Err("not connected".to_owned()));
            };
            let answer = tokio::time::timeout(FANOUT_TIMEOUT, session.request(&request)).await;
            let result = match answer {
                Ok(Ok(coord_shard::Response::Jobs(list))) => Ok(list),
                Ok(Ok(other)) => Err(format!("unexpected answer {other:?}")),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!(
                    "no answer within {} ms",
                    FANOUT_TIMEOUT.as_millis()
                )),
            };
            (queue, result)
        });
    }
    let mut answers = Vec::with_capacity(plan.ask.len());
    let mut failed = Vec::new();
    while let Some(done) = asks.join_next().await {
        match done {
            Ok((_, Ok(list))) => answers.push(list),
            Ok((queue, Err(e))) => {
                tracing::warn!(%queue, error = %e, "shard did not answer a jobs fan-out");
                failed.push(queue);
            }
            Err(e) => {
                tracing::warn!(error = %e, "jobs fan-out task failed");
                failed.push(String::new());
            }
        }
    }
    if query.queue.is_some() && answers.is_empty() {
        return Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {}'s shard did not answer", failed.join(", ")),
        ));
    }
    Ok(merge_jobs(&plan, answers, failed.len()))
}

/// Sends `SetQueueState` to a queue's shard. A shard that does not acknowledge still gets
/// the state on its next registration (the assignment carries it), so a failure is logged,
/// not returned: the admin's change is the coordinator's intent either way.
pub(super) async fn tell_queue_state(shared: &Shared, command: &QueueCommand) {
    let Some(session) = shared.session(command.conn) else {
        return;
    };
    let request = coord_shard::Request::SetQueueState {
        enabled: command.enabled,
        started: command.started,
    };
    match tokio::time::timeout(SHARD_COMMAND_TIMEOUT, session.request(&request)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(queue = %command.queue, error = %e, "shard refused SetQueueState");
        }
        Err(_) => {
            tracing::warn!(queue = %command.queue, "shard did not acknowledge SetQueueState in time")
        }
    }
}

/// Makes every record changed so far durable (one journal batch, group-committed) and
/// wakes the move pump to send the commands that released. Returns only once everything
/// changed before the call is on disk, even if another task's write carried it (writes are
/// serialised by the journal's lock).
pub(super) async fn flush(shared: &Shared) -> Result<(), Refusal> {
    let mut journal = shared.journal.lock().await;
    let Some(write) = shared.with_core(Core::journal_take) else {
        return Ok(());
    };
    match journal.write(&write.delta).await {
        Ok(()) => {
            if !write.steps.is_empty() {
                failpoint::hit("coord.move.after_journal");
            }
            for step in &write.steps {
                failpoint::hit(format_args!("coord.move.after_journal_{step}"));
            }
            shared.with_core(|core| core.journal_done(&write));
            shared.moves_wake.notify_one();
            Ok(())
        }
        Err(e) => {
            shared.with_core(|core| core.journal_failed(write));
            tracing::error!(error = %e, "could not write the coordinator journal; changes and move commands wait");
            Err(Refusal::new(
                RefusalCode::Unavailable,
                format!("the coordinator could not write its journal: {e}"),
            ))
        }
    }
}

/// The move pump: writes move records, sends the commands they released, and ticks the
/// move machine for re-sends and deadlines. Woken by every move event; runs until aborted.
pub(super) async fn move_pump(shared: Arc<Shared>) {
    loop {
        // A failed write is logged by `flush_moves` and retried on the next wake-up.
        let _ = flush(&shared).await;
        for command in shared.with_core(Core::moves_to_send) {
            tokio::spawn(send_move_command(Arc::clone(&shared), command));
        }
        let wake = shared.with_core(|core| core.moves_next_wakeup());
        let sleep = wake.map_or(MOVE_PUMP_IDLE, |at| {
            std::time::Duration::from_millis(at.saturating_sub(now_ms()))
        });
        tokio::select! {
            () = shared.moves_wake.notified() => {}
            () = tokio::time::sleep(sleep) => {
                shared.with_core(|core| core.moves_tick(now_ms()));
            }
        }
    }
}

/// Sends one move command and hands the answer to the core. A command that gets no answer
/// is not retried here: the move machine sends it again (re-send interval, registration).
async fn send_move_command(shared: Arc<Shared>, command: MoveCommand) {
    let Some(session) = shared.session(command.conn) else {
        return;
    };
    let step = match &command.request {
        coord_shard::Request::Release(_) => "release",
        coord_shard::Request::Incoming(_) => "incoming",
        coord_shard::Request::Acquire(_) => "acquire",
        coord_shard::Request::Reclaim(_) => "reclaim",
        coord_shard::Request::Withdraw(_) => "withdraw",
        coord_shard::Request::CancelJobs(_) => "cancel_jobs",
        _ => "other",
    };
    failpoint::hit(format_args!("coord.move.before_send_{step}"));
    let answer =
        tokio::time::timeout(SHARD_COMMAND_TIMEOUT, session.request(&command.request)).await;
    match answer {
        Ok(Ok(response)) => {
            failpoint::hit(format_args!("coord.move.after_answer_{step}"));
            shared.with_core(|core| {
                core.moves_answer(now_ms(), &command.queue, &command.request, &response);
            });
            shared.moves_wake.notify_one();
        }
        Ok(Err(e)) => {
            tracing::debug!(queue = %command.queue, error = %e, "shard did not take a move command");
        }
        Err(_) => {
            tracing::debug!(queue = %command.queue, "shard did not answer a move command in time")
        }
    }
}

fn conn_id(session: &Session) -> ConnId {
    ConnId(session.connection().stable_id() as u64)
}

#[cfg(test)]
mod tests {
    use shardsched_proto::msg::{Generation, NodeState};

    use super::*;

    #[test]
    fn a_resource_list_longer_than_a_reply_comes_in_pages_that_cover_it_once() {
        let rows: Vec<NodeStatus> = (0..50)
            .map(|i| NodeStatus {
                name: format!("node{i:02}"),
                queue: Some("batch".into()),
                state: NodeState::Drained,
                generation: Generation(1),
                jobs_running: 0,
                reason: Some("r".repeat(200)),
            })
            .collect();
        let budget = 10 * shardsched_proto::codec::encoded_len(&rows[0]);
        let (mut seen, mut start, mut pages) = (Vec::new(), 0, 0);
        loop {
            let ClientResponse::Resources { nodes, next } =
                resources_page(rows.clone(), start, budget)
            else {
                panic!("not a resources answer");
            };
            pages += 1;
            assert!(shardsched_proto::codec::encoded_len(&nodes) <= budget + 8);
            seen.extend(nodes);
            match next {
                Some(next) => start = next,
                None => break,
            }
        }
        assert_eq!(seen, rows);
        assert_eq!(pages, 5);
    }
}
