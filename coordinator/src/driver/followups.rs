//! The driver's waiting, done outside the core task: telling shards and answering once
//! they acknowledged, the `jobs` fan-out, dry runs, liveness probes, a removal's steps at
//! the shards (decided by the core: [`crate::core::RemovalCommand`]), and reading the
//! configuration file again. None of these touches the core;
//! those that must come back to it send an [`Event`].

use std::path::Path;
use std::sync::Arc;

use shardsched_proto::msg::client_coord::Response as ClientResponse;
use shardsched_proto::msg::{JobList, JobsQuery, Refusal, RefusalCode, UserFilter, coord_shard};
use shardsched_proto::{Error, Reply, Session};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::event::{ClientReply, Event};
use super::history;
use super::link::{self, Answer, Link, answer_of};
use super::{FANOUT_TIMEOUT, SHARD_COMMAND_TIMEOUT, SHARD_PROBE_TIMEOUT};
use crate::config::{Config, DEFAULT_CONFIG_ORIGIN};
use crate::core::{ConnId, JobsPlan, QueueCommand, RemovalCommand, RemovalStep, merge_jobs};
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
    /// `SetLimits` after `limits set`.
    Limits,
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

    /// The limits, after an admin's change: a shard that does not take them gets them at
    /// its next registration (the assignment carries them).
    pub(super) fn limits(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::Limits)
    }

    /// A removed queue's shard told to stop.
    pub(super) fn stop(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::Stop)
    }

    /// A shard told to restart with its new configuration.
    pub(super) fn restart(queue: &str, conn: ConnId, request: coord_shard::Request) -> Tell {
        Tell::new(queue, conn, request, TellKind::Restart)
    }

    /// A queue held for a removal that was refused, given its state back.
    pub(super) fn re_enable(command: &QueueCommand) -> Tell {
        Tell::new(
            &command.queue,
            command.conn,
            command.request(),
            TellKind::ReEnable,
        )
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
            (TellKind::Limits, Err(e)) => tracing::warn!(%queue, error = %e,
                "shard did not take the limits now; it gets them at its next registration"),
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

/// Carries out one step of a removal ([`RemovalStep`]) and hands its outcome back to the
/// core task. `link`: the shard's, if still connected.
pub(super) async fn removal_step(
    command: RemovalCommand,
    link: Option<Link>,
    (store, pulling): (Arc<HistoryStore>, Arc<tokio::sync::Mutex<()>>),
    events: mpsc::Sender<Event>,
) {
    let removal = command.removal;
    let Some(link) = link else {
        let gone = Refusal::new(
            RefusalCode::Unavailable,
            format!("queue {}'s shard is not connected", command.queue),
        );
        let event = match command.step {
            RemovalStep::Ask(_) => Event::RemovalAnswer {
                removal,
                answer: Err(gone),
            },
            RemovalStep::PullHistory => Event::HistoryPulled {
                removal,
                pulled: Err(gone),
            },
        };
        let _ = events.send(event).await;
        return;
    };
    let event = match command.step {
        RemovalStep::Ask(request) => Event::RemovalAnswer {
            removal,
            answer: answer_of(link.send_ordered(request)).await,
        },
        // Its finished jobs into the history before the queue goes: none can end after
        // this (it holds none now, and takes no more).
        RemovalStep::PullHistory => Event::HistoryPulled {
            removal,
            pulled: history::pull(&command.queue, link.session(), &store, &pulling).await,
        },
    };
    let _ = events.send(event).await;
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
