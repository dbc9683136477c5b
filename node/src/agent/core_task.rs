//! The core task: the one owner of the [`AgentCore`]. It takes every event in turn, ticks
//! the core, hands its actions to the executor task, persists the leases, and answers the
//! shards' renewals, holding each until the report it would carry changes (protocol 14).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use shardsched_node_core::{Action, AgentCore};
use shardsched_process::files::{read_json, read_range, write_atomic};
use shardsched_process::plan::now_ms;
use shardsched_proto::msg::shard_node::{OutputChunk, OutputRequest};
use shardsched_proto::msg::{JobId, Refusal, RefusalCode, shard_node};
use tokio::sync::{Notify, mpsc, oneshot};

use super::{Event, ExecInput, IDLE_WAKE, refusal};
use crate::layout::{LEASE_DEADLINES_FILE, LEASES_FILE, job_dir, output_file, plan_path};
use crate::plan::Plan;

/// A shard's renewal whose answer waits for the agent's report to change (protocol 14).
struct HeldRenewal {
    /// The digest of the report the shard has.
    since: u64,
    /// When to answer anyway, ms.
    until_ms: u64,
    reply: oneshot::Sender<Result<shard_node::Response, Refusal>>,
}

/// Most events taken in at once, before the core ticks (so that a steady stream cannot
/// keep it from acting on them).
const EVENTS_BATCH_MAX: usize = 64;

/// The one task that owns the core.
pub(super) async fn core_task(
    mut core: AgentCore,
    mut leases: BTreeMap<String, u64>,
    mut events: mpsc::Receiver<Event>,
    exec: mpsc::UnboundedSender<ExecInput>,
    state_dir: PathBuf,
    heartbeat_now: Arc<Notify>,
) {
    let mut held: Vec<HeldRenewal> = Vec::new();
    loop {
        let wake_at = held
            .iter()
            .map(|h| h.until_ms)
            .chain(core.next_wake_ms())
            .min();
        let wake = wake_at
            .map(|at| Duration::from_millis(at.saturating_sub(now_ms())))
            .unwrap_or(IDLE_WAKE);
        let event = tokio::select! {
            event = events.recv() => match event {
                Some(event) => Some(event),
                None => return,
            },
            () = tokio::time::sleep(wake) => None,
        };
        let now = now_ms();
        if let Some(event) = event {
            let before = core.unhealthy().map(str::to_owned);
            held.extend(handle(&mut core, now, event, &state_dir));
            // Every event already waiting, before one tick and one look at the held
            // renewals for all of them (each look builds the report: the whole table).
            for _ in 1..EVENTS_BATCH_MAX {
                let Ok(event) = events.try_recv() else { break };
                held.extend(handle(&mut core, now, event, &state_dir));
            }
            if core.unhealthy() != before.as_deref() {
                tracing::warn!(unhealthy = ?core.unhealthy(), "the node's health changed; telling the coordinator");
                heartbeat_now.notify_one();
            }
        }
        core.tick(now);
        for action in core.take_actions() {
            match action {
                Action::PersistLease { queue, heard_ms } => {
                    leases.insert(queue, heard_ms);
                    persist_leases(&state_dir, &leases, core.lease_ms());
                }
                Action::Spawn { queue, launch } => {
                    let lease_deadline_ms = core
                        .lease_deadline_ms(&queue)
                        .unwrap_or_else(|| now.saturating_add(core.lease_ms()));
                    let _ = exec.send(ExecInput::Spawn {
                        queue,
                        launch,
                        lease_deadline_ms,
                    });
                }
                action => {
                    let _ = exec.send(ExecInput::Action(action));
                }
            }
        }
        answer_held(&core, now, &mut held);
    }
}

/// Writes the persisted renewals, and the deadlines the jobs' supervisors watch.
fn persist_leases(state_dir: &Path, leases: &BTreeMap<String, u64>, lease_ms: u64) {
    let deadlines: BTreeMap<&String, u64> = leases
        .iter()
        .map(|(queue, heard)| (queue, heard.saturating_add(lease_ms)))
        .collect();
    for (file, bytes) in [
        (LEASES_FILE, serde_json::to_vec(leases)),
        (LEASE_DEADLINES_FILE, serde_json::to_vec(&deadlines)),
    ] {
        let written = bytes.map_err(|e| e.to_string()).and_then(|bytes| {
            write_atomic(&state_dir.join(file), &bytes).map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            tracing::warn!(file, error = %e, "cannot persist the lease renewals");
        }
    }
}

/// Answers the held renewals whose shard's report is no longer the agent's, or whose hold
/// ran out (and forgets those whose shard stopped waiting).
fn answer_held(core: &AgentCore, now: u64, held: &mut Vec<HeldRenewal>) {
    held.retain(|h| !h.reply.is_closed());
    if held.is_empty() {
        return;
    }
    let report = core.report();
    let digest = report.digest();
    let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(held)
        .into_iter()
        .partition(|h| h.since != digest || now >= h.until_ms);
    *held = waiting;
    for h in due {
        let _ = h
            .reply
            .send(Ok(shard_node::Response::Report(report.clone())));
    }
}

/// Handles one event; a renewal to hold comes back.
fn handle(
    core: &mut AgentCore,
    now: u64,
    event: Event,
    state_dir: &std::path::Path,
) -> Option<HeldRenewal> {
    match event {
        Event::Shard {
            from,
            request,
            reply,
        } => {
            let answer = match request {
                shard_node::Request::Launch(launch) => core
                    .handle_launch(now, &from, launch)
                    .map(|()| shard_node::Response::Launched)
                    .map_err(|e| refusal(e, RefusalCode::Stale)),
                shard_node::Request::Kill { job, why } => core
                    .handle_kill(now, &from, job, &why)
                    .map(|()| shard_node::Response::Killing)
                    .map_err(|e| refusal(e, RefusalCode::Forbidden)),
                shard_node::Request::Renew {
                    seen,
                    since,
                    hold_ms,
                } => {
                    let report = core.handle_renew(now, &from, &seen);
                    if let Some(since) = since
                        && hold_ms > 0
                        && report.digest() == since
                    {
                        return Some(HeldRenewal {
                            since,
                            until_ms: now.saturating_add(u64::from(hold_ms)),
                            reply,
                        });
                    }
                    Ok(shard_node::Response::Report(report))
                }
                shard_node::Request::Forget { jobs } => {
                    core.handle_forget(now, &from, &jobs);
                    Ok(shard_node::Response::Forgotten)
                }
                shard_node::Request::Output(req) => output(core, &from, state_dir, &req),
            };
            let _ = reply.send(answer);
        }
        Event::Owner {
            owner,
            change,
            reply,
        } => {
            let _ = reply.send(core.handle_owner(now, owner, change));
        }
        Event::Registered {
            heartbeat_timeout_ms,
        } => core.set_heartbeat_timeout(heartbeat_timeout_ms),
        Event::Report(reply) => {
            let _ = reply.send(core.report());
        }
        Event::Spawned { job, pid } => core.handle_spawned(now, job, pid),
        Event::Ended { job, end } => core.handle_ended(now, job, end),
        Event::Health(unhealthy) => core.set_health(unhealthy),
    }
    None
}

/// Part of a task's output, for the shard that launched the job.
fn output(
    core: &AgentCore,
    from: &str,
    state_dir: &std::path::Path,
    req: &OutputRequest,
) -> Result<shard_node::Response, Refusal> {
    match core.launcher(req.job) {
        Some(queue) if queue == from => {}
        Some(_) => {
            return Err(refusal(
                "the job is another queue's",
                RefusalCode::Forbidden,
            ));
        }
        None => return Err(refusal("no such job on this node", RefusalCode::NotFound)),
    }
    let ended = core.job(req.job).is_some_and(|s| !s.is_live());
    let (path, owner) = output_source(state_dir, req.job, req.rank, req.stderr);
    let bytes = read_range(&path, req.offset, req.max_bytes, owner)
        .map_err(|e| refusal(e, RefusalCode::Internal))?;
    let complete = ended && (bytes.len() as u64) < u64::from(req.max_bytes);
    Ok(shard_node::Response::Output(OutputChunk {
        bytes,
        complete,
    }))
}

/// Where a task's output is, and the uid that must own it (the agent may be root; the
/// job's user controls its directory and any path its jobspec named).
///
/// The plan is read from the agent's own `plans/` (never from the job's directory, which the
/// job can rewrite). Output the jobspec sent to a file of its own is read from there, as a
/// file of the job's user; else the task's file in the job's directory, as a file of the
/// directory's owner (the job's user; the agent's own user for jobs run without a user
/// switch). A job of an earlier agent, whose plan is in its directory, is served its
/// tasks' files only.
fn output_source(state_dir: &Path, job: JobId, rank: u32, stderr: bool) -> (PathBuf, Option<u32>) {
    use std::os::unix::fs::MetadataExt;
    let plan = read_json::<Plan>(&plan_path(state_dir, job)).ok().flatten();
    let user = plan.as_ref().and_then(|p| p.run_as.as_ref().map(|u| u.uid));
    let named = plan.and_then(|p| if stderr { p.stderr } else { p.stdout });
    if let Some(path) = named {
        return (path, user);
    }
    let dir = job_dir(state_dir, job);
    let owner = user.or_else(|| std::fs::symlink_metadata(&dir).ok().map(|m| m.uid()));
    (output_file(&dir, rank, stderr), owner)
}
