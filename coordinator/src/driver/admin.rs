//! Admin requests beyond the basic queue control: queue changes with a reason or a
//! `--release-to`, moves between named queues (with a deadline, or a dry run), cancelling
//! a move, listing moves, and node flags (down, drained).
//!
//! Each one changes the core, makes the change durable ([`flush`]), and only then answers
//! or tells a shard. A flag reaches the shard that has the node now (forwarded here) and any
//! later owner (in its registration's `Assignment` and in a move's `Acquire`).

use std::sync::Arc;

use shardsched_proto::msg::client_coord::{
    MoveInfo, MoveNodeInfo, MoveRequest, QueueAdmin, Response as ClientResponse,
};
use shardsched_proto::msg::{MoveId, Refusal, RefusalCode, bounds, coord_shard};
use shardsched_proto::{Error, Peer, Reply};

use super::handlers::{flush, tell_queue_state};
use super::{SHARD_COMMAND_TIMEOUT, Shared, now_ms};
use crate::core::{Control, FlagPlan, NodeFlag};
use crate::moves::limits::MOVE_VIEW_NODE_ROWS_MAX;
use crate::moves::{MoveNodeState, MoveStatus, MoveView};

/// `queue enable|disable|start|stop` with a reason or `--release-to`. Answered `Done`, or
/// `Reconfigured` with what the admin should know beyond it (nodes a queue started
/// without, moves cancelled by a stop) when there is any.
pub(super) async fn queue_admin(
    shared: &Shared,
    peer: &Peer,
    req: QueueAdmin,
) -> Reply<ClientResponse> {
    let control = queue_change(shared, peer, req).await?;
    Ok(if control.notes.is_empty() {
        ClientResponse::Done {
            move_id: control.move_id,
        }
    } else {
        ClientResponse::Reconfigured {
            changes: control.notes,
            move_id: control.move_id,
        }
    })
}

/// Carries out a queue change: core, journal, then the queue's shard.
pub(super) async fn queue_change(
    shared: &Shared,
    peer: &Peer,
    req: QueueAdmin,
) -> Result<Control, Refusal> {
    let _admin = shared.admin.lock().await;
    let control = shared.with_core(|core| {
        core.queue_admin(
            now_ms(),
            &req.queue,
            req.action,
            &req.reason,
            req.release_to.as_deref(),
        )
    })?;
    tracing::info!(%peer, queue = %req.queue, action = ?req.action, reason = %req.reason,
        release_to = ?req.release_to, changed = control.changed, move_id = ?control.move_id, "queue control");
    flush(shared).await?;
    if let Some(command) = &control.notify {
        tell_queue_state(shared, command).await;
    }
    Ok(control)
}

/// `queue move HOSTLIST --from A --to B [--deadline D] [--dry-run]`.
pub(super) async fn move_nodes(
    shared: &Shared,
    peer: &Peer,
    req: MoveRequest,
) -> Reply<ClientResponse> {
    if req.dry_run {
        return dry_run(shared, &req).await;
    }
    let _admin = shared.admin.lock().await;
    let now = now_ms();
    let deadline = req.deadline_ms.map(|d| now.saturating_add(d));
    let move_id = shared
        .with_core(|core| core.move_between(now, &req.nodes, &req.from, &req.to, deadline))?;
    tracing::info!(%peer, from = %req.from, to = %req.to, nodes = req.nodes.len(), move_id = move_id.0, ?deadline, "move");
    flush(shared).await?;
    Ok(ClientResponse::Done {
        move_id: Some(move_id),
    })
}

/// `--dry-run`: checks the move as if it were to start, then asks the donor what
/// releasing the nodes would do. Nothing changes anywhere.
async fn dry_run(shared: &Shared, req: &MoveRequest) -> Reply<ClientResponse> {
    let conn = shared.with_core(|core| {
        core.check_move(&req.nodes, &req.from, &req.to)?;
        core.shard(&req.from).map(|l| l.conn).ok_or_else(|| {
            Refusal::new(
                RefusalCode::Unavailable,
                format!(
                    "queue {}'s shard is not connected: it cannot say when the nodes would be free",
                    req.from
                ),
            )
        })
    })?;
    let session = shared.session(conn).ok_or_else(|| {
        Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {}'s shard is not connected", req.from),
        )
    })?;
    let ask = coord_shard::Request::DryRunRelease {
        nodes: req.nodes.clone(),
    };
    match tokio::time::timeout(SHARD_COMMAND_TIMEOUT, session.request(&ask)).await {
        Ok(Ok(coord_shard::Response::DryRun(report))) => Ok(ClientResponse::DryRun(report)),
        Ok(Ok(other)) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!(
                "queue {}'s shard answered the dry run with {other:?}",
                req.from
            ),
        )),
        Ok(Err(Error::Refused(r))) => Err(Refusal::new(
            r.code,
            format!("queue {}'s shard: {}", req.from, r.message),
        )),
        Ok(Err(e)) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {}'s shard: {e}", req.from),
        )),
        Err(_) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!(
                "queue {}'s shard did not answer the dry run in time",
                req.from
            ),
        )),
    }
}

/// `queue move --cancel MOVE`.
pub(super) async fn cancel_move(
    shared: &Shared,
    peer: &Peer,
    move_id: MoveId,
) -> Reply<ClientResponse> {
    let _admin = shared.admin.lock().await;
    shardsched_proto::failpoint::hit("coord.move.before_cancel");
    let returned = shared.with_core(|core| core.cancel_move(now_ms(), move_id))?;
    tracing::info!(%peer, move_id = move_id.0, returned = returned.len(), "move cancelled");
    flush(shared).await?;
    Ok(ClientResponse::Cancelled { returned })
}

/// `queue moves`: by move id. When the node rows would not fit one answer, unfinished
/// moves are kept first, then the newest finished ones.
pub(super) fn moves(shared: &Shared) -> ClientResponse {
    let views = shared.with_core(|core| core.moves());
    let mut by_priority: Vec<&MoveView> = views.iter().collect();
    by_priority.sort_by_key(|v| (v.status != MoveStatus::Active, std::cmp::Reverse(v.move_id)));
    let mut rows = 0usize;
    let mut kept = std::collections::BTreeSet::new();
    let mut truncated = false;
    for view in by_priority {
        rows = rows.saturating_add(view.nodes.len());
        if rows > MOVE_VIEW_NODE_ROWS_MAX {
            truncated = true;
            break;
        }
        kept.insert(view.move_id);
    }
    let moves: Vec<_> = views
        .into_iter()
        .filter(|v| kept.contains(&v.move_id))
        .map(move_info)
        .collect();
    let (moves, cut) = bounds::fit_reply(moves);
    ClientResponse::Moves {
        moves,
        truncated: truncated || cut,
    }
}

/// `resource drain|undrain` and `resource down|up`: journaled first, then forwarded to the
/// shards that have the nodes now. A shard that is offline gets the flag when it registers;
/// one that does not take it now is logged (it gets it at its next registration too): the
/// flag is the coordinator's intent either way.
pub(super) async fn node_flag(
    shared: &Arc<Shared>,
    peer: &Peer,
    nodes: &[String],
    flag: NodeFlag,
    on: bool,
    reason: &str,
) -> Reply<ClientResponse> {
    let _admin = shared.admin.lock().await;
    let plan: FlagPlan = shared.with_core(|core| core.set_node_flag(nodes, flag, on, reason))?;
    tracing::info!(%peer, nodes = nodes.len(), ?flag, on, %reason, "node flag");
    flush(shared).await?;
    // One request per queue and reason: a node flagged again without a reason keeps its own.
    for ((queue, reason), (conn, nodes)) in plan {
        let request = match flag {
            NodeFlag::Down => coord_shard::Request::SetNodeState {
                nodes,
                down: on,
                reason,
            },
            NodeFlag::Drained => coord_shard::Request::SetNodeDrain {
                nodes,
                drained: on,
                reason,
            },
        };
        let Some(session) = shared.session(conn) else {
            continue;
        };
        match tokio::time::timeout(SHARD_COMMAND_TIMEOUT, session.request(&request)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(%queue, error = %e, "shard did not take a node flag now; it gets it at its next registration")
            }
            Err(_) => {
                tracing::warn!(%queue, "shard did not acknowledge a node flag in time; it gets it at its next registration")
            }
        }
    }
    Ok(ClientResponse::Done { move_id: None })
}

/// A move as `queue moves` shows it.
fn move_info(view: MoveView) -> MoveInfo {
    let status = match view.status {
        MoveStatus::Active => "active",
        MoveStatus::Completed => "completed",
        MoveStatus::Cancelled => "cancelled",
    };
    let nodes = view
        .nodes
        .into_iter()
        .map(|n| {
            let (state, expected_free_ms, jobs) = match n.state {
                MoveNodeState::Outgoing {
                    expected_free_ms,
                    jobs,
                } => ("outgoing", expected_free_ms, jobs),
                MoveNodeState::Released => ("released", None, Vec::new()),
                MoveNodeState::Up => ("up", None, Vec::new()),
                MoveNodeState::Returning => ("returning", None, Vec::new()),
                MoveNodeState::Returned => ("returned", None, Vec::new()),
            };
            MoveNodeInfo {
                node: n.node,
                generation: n.generation,
                state: state.to_owned(),
                expected_free_ms,
                jobs,
                requested_ms: view.started_ms,
                released_ms: n.released_ms,
                acquired_ms: n.acquired_ms,
            }
        })
        .collect();
    MoveInfo {
        move_id: view.move_id,
        from: view.from,
        to: view.to,
        status: status.to_owned(),
        started_ms: view.started_ms,
        deadline_ms: view.deadline_ms,
        nodes,
    }
}
