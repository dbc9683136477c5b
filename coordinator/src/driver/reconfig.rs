//! Queue table changes from admins (`queue add|remove|update`, `reload`): the driver's
//! side of [`Core::add_queue`](crate::core::Core::add_queue) and its siblings.
//!
//! ```text
//! admin lock (one change at a time)
//!   removals: refused first, changing nothing, while the queue's shard lists jobs or the
//!             core's checks that need no shard fail (owned nodes, moves, default queue);
//!             then each queue to remove is disabled at its shard if, and only if, it still
//!             holds no job (`DisableIfIdle`, one step at the shard, so no submit slips in
//!             between); the core then takes that answer over the shard's last status
//!             report, which may be a moment old
//!   core change (pure; all or nothing)
//!   write the durable state (fsync) ─► only then: Reconfigure to each changed queue's
//!             shard (it restarts from its journal), SetQueueState off to removed shards
//! ```

use std::path::Path;
use std::time::Duration;

use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_proto::msg::{JobsQuery, Refusal, RefusalCode, UserFilter, coord_shard};
use shardsched_proto::{Error, Peer, Reply};

use super::{SHARD_COMMAND_TIMEOUT, Shared, handlers::flush, now_ms};
use crate::config::{Config, DEFAULT_CONFIG_ORIGIN};
use crate::core::{Core, Reconfig};
use crate::queue_table;

/// Serves `AddQueue`, `RemoveQueue`, `UpdateQueue` and `Reload` (the role was checked by
/// `serve`: admins only).
pub(super) async fn queue_table_request(
    shared: &Shared,
    peer: &Peer,
    request: Request,
) -> Reply<Response> {
    let _admin = shared.admin.lock().await;
    let done = match request {
        Request::AddQueue(spec) => shared.with_core(|core| {
            let def = queue_table::queue_def(core.config(), None, &spec).map_err(|e| {
                Refusal::new(RefusalCode::Invalid, format!("queue {}: {e}", spec.name))
            })?;
            core.add_queue(def)
        })?,
        Request::UpdateQueue(spec) => {
            shared.with_core(|core| core.update_queue(now_ms(), &spec))?
        }
        Request::RemoveQueue { queue, give_to } => {
            let removing = shared.with_core(|core| {
                core.check_remove_request(&queue, give_to.as_deref())?;
                Ok::<_, Refusal>(give_to.is_none() || core.owned_by(&queue).is_empty())
            })?;
            if removing {
                with_removals_held(shared, std::slice::from_ref(&queue), |core| {
                    core.remove_queue(now_ms(), &queue, None)
                })
                .await?
            } else {
                let giving = shared
                    .with_core(|core| core.remove_queue(now_ms(), &queue, give_to.as_deref()))?;
                flush(shared).await?;
                remove_after_move(shared, &queue, giving).await?
            }
        }
        Request::Reload => {
            let origin = shared.with_core(|core| core.config().origin.clone());
            let file = read_config(&origin).await?;
            let names = shared.with_core(|core| core.removed_by(&file));
            with_removals_held(shared, &names, move |core| core.reload(file)).await?
        }
        other => {
            return Err(Refusal::new(
                RefusalCode::Invalid,
                format!("not a queue table change: {other:?}"),
            ));
        }
    };
    tracing::info!(%peer, changes = ?done.changes, "queue table changed");
    // The new queue table, owners and any move (remove --give-to) are journaled before
    // anything is sent.
    flush(shared).await?;
    for command in &done.stop {
        let request = coord_shard::Request::SetQueueState {
            enabled: command.enabled,
            started: command.started,
        };
        if let Err(e) = send(shared, command.conn, &request).await {
            tracing::warn!(queue = %command.queue, error = %e, "removed queue's shard not told to stop");
        }
    }
    for command in &done.restart {
        let request = coord_shard::Request::Reconfigure(Box::new(command.config.clone()));
        match send(shared, command.conn, &request).await {
            Ok(()) => {
                tracing::info!(queue = %command.queue, "shard told to restart with its new configuration")
            }
            // Its next registration carries the new configuration anyway; a shard that
            // closed the connection as it restarted did what it was told.
            Err(e) => {
                tracing::info!(queue = %command.queue, error = %e, "shard not reached with Reconfigure; it gets the configuration when it registers")
            }
        }
    }
    Ok(Response::Reconfigured {
        changes: done.changes,
        move_id: done.move_id,
    })
}

/// How long `queue remove --give-to` waits for its move before it answers. The queue has
/// no job, so its nodes are idle and the move takes a few round trips; past this, the
/// admin is told to remove it again once the move is done.
const REMOVE_MOVE_WAIT: Duration = Duration::from_secs(10);
/// How often the wait looks at the move.
const REMOVE_MOVE_POLL: Duration = Duration::from_millis(10);

/// The second half of `queue remove Q --give-to R`: `giving` started the move of Q's nodes
/// (journaled); once it is done, Q is removed as a plain `queue remove` would. The answer
/// says both, or, if the move is not done in [`REMOVE_MOVE_WAIT`], what to type later.
async fn remove_after_move(
    shared: &Shared,
    queue: &str,
    mut giving: Reconfig,
) -> Result<Reconfig, Refusal> {
    let Some(move_id) = giving.move_id else {
        return Ok(giving);
    };
    let deadline = tokio::time::Instant::now() + REMOVE_MOVE_WAIT;
    while !shared.with_core(|core| core.move_finished(move_id)) {
        if tokio::time::Instant::now() >= deadline {
            giving.changes.push(format!(
                "move {} is not done yet: `shardsched queue remove {queue}` removes the queue \
                 once `shardsched queue moves` shows it completed",
                move_id.0
            ));
            return Ok(giving);
        }
        tokio::time::sleep(REMOVE_MOVE_POLL).await;
    }
    let removed = with_removals_held(shared, &[queue.to_owned()], |core| {
        core.remove_queue(now_ms(), queue, None)
    })
    .await?;
    giving.changes.extend(removed.changes);
    giving.restart = removed.restart;
    giving.stop = removed.stop;
    giving.journal |= removed.journal;
    Ok(giving)
}

/// Runs `change` with the shards of `removing` disabled, each only if it holds no job;
/// re-enables them when the change is refused after all. A queue that has jobs (asked of
/// its shard, not read from a report), owns nodes or is in a move is refused before
/// anything is disabled.
async fn with_removals_held(
    shared: &Shared,
    removing: &[String],
    change: impl FnOnce(&mut Core) -> Result<Reconfig, Refusal>,
) -> Result<Reconfig, Refusal> {
    for queue in removing {
        if let Some(conn) = shared.with_core(|core| core.shard(queue).map(|l| l.conn)) {
            refuse_if_jobs(shared, queue, conn).await?;
        }
        shared.with_core(|core| core.check_removable(queue))?;
    }
    let mut held = Vec::new();
    let mut refused = None;
    for queue in removing {
        let Some((conn, flags)) =
            shared.with_core(|core| Some((core.shard(queue)?.conn, core.queue_flags(queue)?)))
        else {
            continue; // Offline: the core refuses.
        };
        match ask_shard(shared, conn, &coord_shard::Request::DisableIfIdle).await {
            Ok(_) => {
                shared.with_core(|core| core.saw_idle(queue));
                held.push((queue.clone(), conn, flags));
            }
            Err(refusal) => {
                refused = Some(refusal);
                break;
            }
        }
    }
    let result = match refused {
        Some(refusal) => Err(refusal),
        None => shared.with_core(change),
    };
    if result.is_err() {
        for (queue, conn, (enabled, started)) in held {
            let back = coord_shard::Request::SetQueueState { enabled, started };
            if let Err(e) = send(shared, conn, &back).await {
                tracing::warn!(%queue, error = %e, "could not re-enable a queue after a refused removal");
            }
        }
    }
    result
}

/// How many live jobs the removal check asks a shard for (any is too many).
const LIVE_JOBS_ASKED: u32 = 1;

/// Refuses while `queue`'s shard holds a pending or running job. Read-only: the removal
/// then disables the queue only if it is still idle (`DisableIfIdle`).
async fn refuse_if_jobs(
    shared: &Shared,
    queue: &str,
    conn: crate::core::ConnId,
) -> Result<(), Refusal> {
    let query = coord_shard::Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: false,
        limit: LIVE_JOBS_ASKED,
    });
    match ask_shard(shared, conn, &query).await? {
        coord_shard::Response::Jobs(list) if list.jobs.is_empty() && !list.truncated => Ok(()),
        coord_shard::Response::Jobs(_) => Err(Refusal::new(
            RefusalCode::Policy,
            format!(
                "queue {queue} has jobs (pending or running): cancel them or wait for them to \
                 end (jobs cannot move between queues)"
            ),
        )),
        other => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {queue}'s shard answered a job list with {other:?}"),
        )),
    }
}

/// Sends one command to a shard's connection and waits (bounded) for its answer. A shard's
/// refusal comes back as it is (its code and message); anything else is `Unavailable`.
async fn ask_shard(
    shared: &Shared,
    conn: crate::core::ConnId,
    request: &coord_shard::Request,
) -> Result<coord_shard::Response, Refusal> {
    let session = shared.session(conn).ok_or_else(|| {
        Refusal::new(RefusalCode::Unavailable, "a queue's shard is not connected")
    })?;
    match tokio::time::timeout(SHARD_COMMAND_TIMEOUT, session.request(request)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(Error::Refused(r))) => Err(r),
        Ok(Err(e)) => Err(Refusal::new(RefusalCode::Unavailable, e.to_string())),
        Err(_) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!(
                "a queue's shard did not answer within {} s",
                SHARD_COMMAND_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// [`ask_shard`] where only whether it worked matters (for the log).
async fn send(
    shared: &Shared,
    conn: crate::core::ConnId,
    request: &coord_shard::Request,
) -> Result<(), String> {
    ask_shard(shared, conn, request)
        .await
        .map(drop)
        .map_err(|r| r.message)
}

/// The configuration file read again (the embedded default when it started with none).
async fn read_config(origin: &str) -> Result<Config, Refusal> {
    let origin = origin.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        if origin == DEFAULT_CONFIG_ORIGIN {
            Config::embedded_default()
        } else {
            Config::from_file(Path::new(&origin))
        }
    })
    .await;
    match read {
        Ok(Ok(config)) => Ok(config),
        Ok(Err(e)) => Err(Refusal::new(RefusalCode::Invalid, format!("reload: {e}"))),
        Err(e) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("reload: {e}"),
        )),
    }
}
