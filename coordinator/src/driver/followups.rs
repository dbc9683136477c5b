//! The driver's waiting, done outside the core task: telling shards and answering once
//! they acknowledged, the `jobs` fan-out, dry runs, liveness probes, a removal's checks at
//! the shards, and reading the configuration file again. None of these touches the core;
//! those that must come back to it send an [`Event`].

use std::path::Path;
use std::sync::Arc;

use shardsched_proto::msg::client_coord::Response as ClientResponse;
use shardsched_proto::msg::{JobList, JobsQuery, Refusal, RefusalCode, UserFilter, coord_shard};
use shardsched_proto::{Error, Reply, Session};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::event::{ClientReply, Event, Held, Removal};
use super::history;
use super::link::{self, Answer, Link, answer_of};
use super::{FANOUT_TIMEOUT, SHARD_COMMAND_TIMEOUT, SHARD_PROBE_TIMEOUT};
use crate::config::{Config, DEFAULT_CONFIG_ORIGIN};
use crate::core::{ConnId, JobsPlan, merge_jobs};
use crate::history::HistoryStore;

/// One command for a shard's ordered queue, and how to log what came of it.
pub(super) struct Tell {
    pub(super) queue: String,
    pub(super) conn: ConnId,
    pub(super) request: coord_shard::Request,
    kind: TellKind,
}

/// What a [`Tell`] is for, which says how its outcome is logged.
#[derive(Clone, Copy)]
enum TellKind {
    /// `SetQueueState` after an admin's queue change.
    QueueState,
    /// `SetNodeState` / `SetNodeDrain`.
    NodeFlag,
    /// `SetQueueState` off to a removed queue's shard.
    Stop,
    /// `Reconfigure` to a shard whose configuration changed.
    Restart,
    /// `SetQueueState` back on after a refused removal.
    ReEnable,
}

impl Tell {
    /// `SetQueueState` after an admin's change: a shard that does not acknowledge still
    /// gets the state on its next registration (the assignment carries it).
    pub(super) fn queue_state(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::QueueState)
    }

    /// A node flag for the shard that has the nodes now.
    pub(super) fn node_flag(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::NodeFlag)
    }

    /// A removed queue's shard told to stop.
    pub(super) fn stop(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::Stop)
    }

    /// A shard told to restart with its new configuration.
    pub(super) fn restart(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::Restart)
    }

    /// A queue held for a removal that was refused, given its state back: `flags`, the
    /// core's `(enabled, started)` for it now.
    pub(super) fn re_enable(held: &Held, flags: (bool, bool)) -> Tell {
        let (enabled, started) = flags;
        let request = coord_shard::Request::SetQueueState { enabled, started };
        Tell::new(&held.queue, held.conn, request, TellKind::ReEnable)
    }

    fn new(queue: &str, conn: ConnId, request: coord_shard::Request, kind: TellKind) -> Tell {
        Tell {
            queue: queue.to_owned(),
            conn,
            request,
            kind,
        }
    }

    fn log(&self, answer: &Answer) {
        let queue = &self.queue;
        match (self.kind, answer) {
            (TellKind::Restart, Ok(_)) => {
                tracing::info!(%queue, "shard told to restart with its new configuration");
            }
            (_, Ok(_)) => {}
            (TellKind::QueueState, Err(e)) => {
                tracing::warn!(%queue, error = %e, "shard did not take SetQueueState");
            }
            (TellKind::NodeFlag, Err(e)) => tracing::warn!(%queue, error = %e,
                "shard did not take a node flag now; it gets it at its next registration"),
            (TellKind::Stop, Err(e)) => {
                tracing::warn!(%queue, error = %e, "removed queue's shard not told to stop");
            }
            // Its next registration carries the new configuration anyway; a shard that
            // closed the connection as it restarted did what it was told.
            (TellKind::Restart, Err(e)) => tracing::info!(%queue, error = %e,
                "shard not reached with Reconfigure; it gets the configuration when it registers"),
            (TellKind::ReEnable, Err(e)) => tracing::warn!(%queue, error = %e,
                "could not re-enable a queue after a refused removal"),
        }
    }
}

/// Waits for the answers of commands queued on shards' links (each bounded by the link's
/// timeout) and logs them: a change nobody asked for (an agent gone silent).
pub(super) async fn notify(queued: Vec<(Tell, oneshot::Receiver<Answer>)>) {
    for (tell, receiver) in queued {
        tell.log(&answer_of(receiver).await);
    }
}

/// Waits for the answers of commands queued on shards' links (each bounded by the link's
/// timeout), logs them, then answers the client: the admin hears back once the shards
/// have the change, or have been given up on (they get it at their next registration).
pub(super) async fn tell(
    queued: Vec<(Tell, oneshot::Receiver<Answer>)>,
    reply: ClientReply,
    answer: Reply<ClientResponse>,
) {
    for (tell, receiver) in queued {
        tell.log(&answer_of(receiver).await);
    }
    let _ = reply.send(answer);
}

/// `jobs`: asks every shard of the plan at once, each bounded by [`FANOUT_TIMEOUT`], and
/// merges what comes back.
pub(super) async fn jobs(
    plan: JobsPlan,
    sessions: Vec<(String, Option<Session>)>,
    only_one_queue: bool,
    reply: ClientReply,
) {
    let mut asks = JoinSet::new();
    for (queue, session) in sessions {
        let request = coord_shard::Request::Jobs(plan.query.clone());
        asks.spawn(async move {
            let Some(session) = session else {
                return (queue, Err("not connected".to_owned()));
            };
            let result = match link::ask(&session, &request, FANOUT_TIMEOUT).await {
                Ok(coord_shard::Response::Jobs(list)) => Ok(list),
                Ok(other) => Err(format!("unexpected answer {other:?}")),
                Err(refusal) => Err(refusal.message),
            };
            (queue, result)
        });
    }
    let mut answers: Vec<JobList> = Vec::with_capacity(plan.ask.len());
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
    let answer = if only_one_queue && answers.is_empty() {
        Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {}'s shard did not answer", failed.join(", ")),
        ))
    } else {
        Ok(ClientResponse::Jobs(merge_jobs(
            &plan,
            answers,
            failed.len(),
        )))
    };
    let _ = reply.send(answer);
}

/// `queue move --dry-run`: asks the donor what releasing the nodes would do.
pub(super) async fn dry_run(
    from: String,
    session: Session,
    nodes: Vec<String>,
    reply: ClientReply,
) {
    let ask = coord_shard::Request::DryRunRelease { nodes };
    let answer = match link::ask(&session, &ask, SHARD_COMMAND_TIMEOUT).await {
        Ok(coord_shard::Response::DryRun(report)) => Ok(ClientResponse::DryRun(report)),
        Ok(other) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {from}'s shard answered the dry run with {other:?}"),
        )),
        Err(r) => Err(Refusal::new(
            r.code,
            format!("queue {from}'s shard: {}", r.message),
        )),
    };
    let _ = reply.send(answer);
}

/// Whether the shard on `session` still answers (any answer, even a refusal, proves it is
/// alive).
pub(super) async fn alive(session: Session) -> bool {
    if session.connection().close_reason().is_some() {
        return false;
    }
    let probe = coord_shard::Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: false,
        limit: 1,
        states: Vec::new(),
        name: None,
    });
    matches!(
        tokio::time::timeout(SHARD_PROBE_TIMEOUT, session.request(&probe)).await,
        Ok(Ok(_) | Err(Error::Refused(_)))
    )
}

/// One queue a removal takes away, as the core saw it when the removal arrived.
pub(super) struct HoldStep {
    pub(super) queue: String,
    /// Its shard, if connected.
    pub(super) link: Option<(ConnId, Link)>,
    /// The core's checks that need no shard (owned nodes, moves).
    pub(super) removable: Result<(), Refusal>,
}

/// How many live jobs the removal check asks a shard for (any is too many).
const LIVE_JOBS_ASKED: u32 = 1;

/// A removal's checks at the shards: each queue to remove is refused while its shard holds
/// a pending or running job (asked of the shard, not read from a report) or the core's
/// checks fail; then each is disabled at its shard if, and only if, it still holds no job
/// (`DisableIfIdle`, one step at the shard, so no submit slips in between). Reports back
/// which were disabled. A disabled queue's finished jobs are pulled into the history store
/// then, so they outlive it.
pub(super) async fn hold_removals(
    steps: Vec<HoldStep>,
    removal: Removal,
    (store, pulling): (Arc<HistoryStore>, Arc<tokio::sync::Mutex<()>>),
    events: mpsc::Sender<Event>,
) {
    let mut held = Vec::new();
    let outcome = async {
        for step in &steps {
            if let Some((_, link)) = &step.link {
                refuse_if_jobs(&step.queue, link).await?;
            }
            step.removable.clone()?;
        }
        for step in &steps {
            // Offline: the core refuses the removal.
            let Some((conn, link)) = &step.link else {
                continue;
            };
            answer_of(link.send_ordered(coord_shard::Request::DisableIfIdle)).await?;
            held.push(Held {
                queue: step.queue.clone(),
                conn: *conn,
            });
            // Its finished jobs into the history before the queue goes: none can end
            // after this (it holds none now, and takes no more).
            history::pull(&step.queue, link.session(), &store, &pulling).await?;
        }
        Ok(())
    }
    .await;
    let _ = events
        .send(Event::RemovalsHeld {
            removal,
            held,
            outcome,
        })
        .await;
}

/// Refuses while `queue`'s shard holds a pending or running job. Read-only.
async fn refuse_if_jobs(queue: &str, link: &Link) -> Result<(), Refusal> {
    let query = coord_shard::Request::Jobs(JobsQuery {
        queue: None,
        user: UserFilter::All,
        include_inactive: false,
        limit: LIVE_JOBS_ASKED,
        states: Vec::new(),
        name: None,
    });
    match answer_of(link.send_ordered(query)).await? {
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

/// Reads the configuration file again (the embedded default when it started with none)
/// and hands it to the core task.
pub(super) async fn read_config(
    origin: String,
    peer: shardsched_proto::Peer,
    reply: ClientReply,
    events: mpsc::Sender<Event>,
) {
    let read = tokio::task::spawn_blocking(move || {
        if origin == DEFAULT_CONFIG_ORIGIN {
            Config::embedded_default()
        } else {
            Config::from_file(Path::new(&origin))
        }
    })
    .await;
    let file = match read {
        Ok(Ok(config)) => Ok(config),
        Ok(Err(e)) => Err(Refusal::new(RefusalCode::Invalid, format!("reload: {e}"))),
        Err(e) => Err(Refusal::new(
            RefusalCode::Unavailable,
            format!("reload: {e}"),
        )),
    };
    let _ = events.send(Event::ConfigRead { peer, file, reply }).await;
}
