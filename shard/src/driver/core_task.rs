//! The task that owns the [`ShardCore`]: it takes requests in batches, runs one scheduling
//! pass per batch, journals what the batch changed, and — once that is durable — publishes
//! the snapshot, then answers.
//!
//! ```text
//! core task, loop:
//!   wait for a request, or the core's next wakeup, or the next status report
//!   take it and every request already queued (≤ BATCH_REQUESTS_MAX) → ShardCore::handle_*
//!   ShardCore::tick(now)                  scheduling, once for the whole batch (timed)
//!   records = core.take_journal() → committer.submit(batch)  (group commit, fsync)
//!   the job gauges of /metrics            from the queue manager's counts
//!   hand (ticket, snapshot, answers) to the publisher         (≤ COMMITS_IN_FLIGHT_MAX)
//!   hand a status report to the reporter  (when ReportClock says: at most every
//!                                          STATUS_INTERVAL_MIN, but an allowance asked
//!                                          for or returned at once)
//! publisher task, in batch order:
//!   wait for the batch's commit to be durable (its latency counted)
//!   snapshot.store(…)                     reads see the batch's jobs …
//!   answer the batch                      … before their submitters hear back
//!   exec executor: the batch's launches and kills go to the exec task once it is durable
//! ```
//!
//! The core task goes on with the next batch while a commit is in flight (pipelining), so
//! the commit thread finds several batches queued and commits them with one fsync; no
//! answer leaves before its own batch is on disk. A batch with nothing to journal still
//! goes through the publisher, behind the batches before it: an answer never overtakes
//! the commit of something it depends on (a retried submit answered with a job accepted in
//! the batch before). A failed commit stops the shard: its batch's clients hear
//! `Unavailable`, never an acknowledgement.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use shardsched_journal::{CommitTicket, Committer};
use shardsched_proto::failpoint;
use shardsched_proto::msg::shard_coord::{Released, ShardStatus};
use shardsched_telemetry::{ProcessMetrics, ShardMetrics};
use tokio::sync::{mpsc, watch};

pub(crate) use super::commands::Command;
use super::commands::{Answer, handle};
use super::exec_task::ExecRequest;
use super::released::ReleasedQueue;
use super::transitions::TransitionLog;
use crate::core::{ExecAction, ReportClock, ShardCore};
use crate::error::DriverError;
use crate::journal::to_batch;
use crate::limits::{BATCH_REQUESTS_MAX, COMMITS_IN_FLIGHT_MAX};
use crate::snapshot::Snapshot;

/// Longest the task sleeps without looking at the clock again (a wakeup far in the future,
/// e.g. the end of a job of unlimited duration, is re-read after this).
const WAKE_AFTER_MAX: Duration = Duration::from_secs(3600);

/// A batch waiting for its commit before it is published and answered.
struct Publish {
    /// The commit of what the batch changed, and when it was handed to the journal (none:
    /// nothing to journal).
    ticket: Option<(CommitTicket, Instant)>,
    snapshot: Arc<Snapshot>,
    answers: Vec<Answer>,
    /// Launches and kills for the exec task: a job is launched only once its start is
    /// durable, so a restart never runs it twice.
    exec: Vec<ExecRequest>,
    /// `Released` reports, sent once the release is durable.
    released: Vec<Released>,
    /// The status report made with the batch, handed out once the batch is durable: its
    /// allowances (docs/POLICIES.md, "Limits") may say allowance was returned, which the
    /// coordinator may then grant elsewhere.
    status: Option<ShardStatus>,
}

/// Where the core task's side products go besides the journal and the snapshot.
pub(crate) struct Sinks {
    /// The exec task's queue, in exec mode.
    pub(crate) exec: Option<mpsc::Sender<ExecRequest>>,
    /// `transitions.log`.
    pub(crate) log: TransitionLog,
    /// `Released` reports for the coordinator.
    pub(crate) released: ReleasedQueue,
}

/// Runs the core until [`Command::Stop`] or until every sender is gone (`Ok`), or until a
/// journal commit fails (`Err`: the shard must stop). `exec` is the exec task's queue in
/// exec mode.
pub(crate) async fn run(
    mut core: ShardCore,
    mut commands: mpsc::Receiver<Command>,
    snapshot: Arc<ArcSwap<Snapshot>>,
    status: watch::Sender<Option<ShardStatus>>,
    committer: Committer,
    metrics: ShardMetrics,
    sinks: Sinks,
) -> Result<(), DriverError> {
    let Sinks {
        exec,
        mut log,
        released,
    } = sinks;
    if let Some(exec) = &exec {
        // Jobs already running (restored by a restart) are watched like new ones.
        for id in core.running_job_ids() {
            if let Some(job) = core.job(id) {
                let generations = core.generations_of(job);
                let request = ExecRequest::Watch(Box::new(job.clone()), generations);
                let _ = exec.send(request).await;
            }
        }
    }
    let (to_publisher, published) = mpsc::channel(COMMITS_IN_FLIGHT_MAX);
    let mut publisher = tokio::spawn(publish(
        published,
        (snapshot, status),
        exec,
        released,
        metrics.process.clone(),
    ));
    let mut publisher_ended = false;
    let batches = batches(
        &mut core,
        &mut commands,
        &to_publisher,
        &committer,
        &metrics,
        &mut log,
    );
    let outcome = tokio::select! {
        outcome = batches => outcome,
        joined = &mut publisher => {
            publisher_ended = true;
            joined_outcome(joined)
        }
    };
    // What is in flight is published (or refused) before the task ends.
    drop(to_publisher);
    let drained = if publisher_ended {
        Ok(())
    } else {
        joined_outcome(publisher.await)
    };
    tracing::debug!("core task stopped");
    outcome.and(drained)
}

fn joined_outcome(
    joined: Result<Result<(), DriverError>, tokio::task::JoinError>,
) -> Result<(), DriverError> {
    joined.unwrap_or_else(|e| {
        Err(DriverError::CoreStopped(format!(
            "the publisher stopped: {e}"
        )))
    })
}

/// The batch loop of the module documentation (the core task's part).
async fn batches(
    core: &mut ShardCore,
    commands: &mut mpsc::Receiver<Command>,
    to_publisher: &mpsc::Sender<Publish>,
    committer: &Committer,
    metrics: &ShardMetrics,
    log: &mut TransitionLog,
) -> Result<(), DriverError> {
    let mut clock = ReportClock::default();
    let mut answers = Vec::new();
    // What the core changed while it was built (its ownership, a restore) goes first.
    log.write(&core.take_transitions());
    journal(core, committer, to_publisher, Vec::new(), None).await?;
    loop {
        let wake_ms = [core.next_wakeup_ms(), Some(clock.due_ms(core))]
            .into_iter()
            .flatten()
            .min();
        let first = match wake_ms {
            Some(at) => {
                let sleep = tokio::time::sleep_until(until(at));
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(c) => Some(c),
                        None => break,
                    },
                    () = sleep => None,
                }
            }
            None => match commands.recv().await {
                Some(c) => Some(c),
                None => break,
            },
        };
        let now = now_ms();
        let mut stop = false;
        if let Some(command) = first {
            stop = handle(core, now, command, &mut answers);
            log.write(&core.take_transitions());
            let mut taken = 1;
            while !stop && taken < BATCH_REQUESTS_MAX {
                let Ok(command) = commands.try_recv() else {
                    break;
                };
                stop = handle(core, now, command, &mut answers);
                log.write(&core.take_transitions());
                taken += 1;
            }
        }
        tick(core, now, metrics);
        // `released` lines go on file before the reports can leave (after the commit).
        log.write(&core.take_transitions());
        let mut report = None;
        if now >= clock.due_ms(core) {
            let made = core.status(now);
            clock.sent(now, core, &made);
            report = Some(made);
        }
        let answers = std::mem::take(&mut answers);
        journal(core, committer, to_publisher, answers, report).await?;
        if core.take_restart().is_some() {
            // A configuration the core cannot take in place: this batch's answers (its
            // acknowledgement) go out, then the process exits for its supervisor.
            return Err(DriverError::Restart);
        }
        let qm = core.queue_manager();
        metrics.set_jobs(
            count(qm.pending_len() + qm.waiting_len()),
            count(qm.running_len()),
            count(qm.waiting_len()),
        );
        if stop {
            return Ok(());
        }
    }
    Ok(())
}

/// [`ShardCore::tick`], timed: a tick in which the queue manager scheduled (a cycle that was
/// not idle) counts as a scheduling pass, its matches as matches.
fn tick(core: &mut ShardCore, now: u64, metrics: &ShardMetrics) {
    let work = |core: &ShardCore| {
        let stats = core.queue_manager().stats();
        let cycles = stats.cycles_continue + stats.cycles_retry + stats.cycles_replan;
        (cycles, stats.match_allocate + stats.match_reserve)
    };
    let (cycles, matches) = work(core);
    let started = Instant::now();
    if let Err(e) = core.tick(now) {
        tracing::error!(error = %e, "scheduling pass failed");
    }
    let took = started.elapsed();
    let (cycles_after, matches_after) = work(core);
    if cycles_after > cycles {
        metrics.scheduled(took, matches_after.saturating_sub(matches));
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Submits what the core changed to the committer and hands the batch to the publisher.
async fn journal(
    core: &mut ShardCore,
    committer: &Committer,
    to_publisher: &mpsc::Sender<Publish>,
    answers: Vec<Answer>,
    status: Option<ShardStatus>,
) -> Result<(), DriverError> {
    let exec = exec_requests(core);
    let released = core.take_released();
    let records = core.take_journal();
    let ticket = if records.is_empty() {
        None
    } else {
        let batch = to_batch(&records).map_err(|e| {
            DriverError::CoreStopped(format!("a journal record does not encode: {e}"))
        })?;
        let handed = Instant::now();
        Some((committer.submit(batch).await?, handed))
    };
    let publish = Publish {
        ticket,
        snapshot: Arc::new(core.snapshot()),
        answers,
        exec,
        released,
        status,
    };
    to_publisher
        .send(publish)
        .await
        .map_err(|_| DriverError::CoreStopped("the publisher stopped".into()))
}

/// The publisher task: in batch order, waits for each batch's commit, then publishes its
/// snapshot and sends its answers. A failed commit ends it with the error; the answers it
/// held are dropped, so their requesters hear `Unavailable`, not an acknowledgement.
async fn publish(
    mut batches: mpsc::Receiver<Publish>,
    (snapshot, status): (Arc<ArcSwap<Snapshot>>, watch::Sender<Option<ShardStatus>>),
    exec: Option<mpsc::Sender<ExecRequest>>,
    released: ReleasedQueue,
    metrics: ProcessMetrics,
) -> Result<(), DriverError> {
    // The last transaction whose fsync was counted: a group commit answers several batches.
    let mut last_seq = None;
    while let Some(batch) = batches.recv().await {
        if let Some((ticket, submitted)) = batch.ticket {
            let commit = ticket.wait().await?;
            metrics.journal_committed(submitted.elapsed());
            if last_seq.replace(commit.seq) != Some(commit.seq) {
                metrics.journal_fsynced(commit.fsync);
            }
        }
        snapshot.store(batch.snapshot);
        for answer in batch.answers {
            // A client that gave up waiting is not an error.
            let _ = match answer {
                Answer::Client(to, reply) => to.send(reply).is_ok(),
                Answer::Coordinator(to, reply, step) => {
                    if let Some(step) = step {
                        failpoint::hit(format_args!("shard.{step}.before_answer"));
                    }
                    to.send(reply).is_ok()
                }
            };
        }
        released.push(batch.released);
        if let Some(report) = batch.status {
            status.send_replace(Some(report));
        }
        // The exec task never waits on the core task, so this wait is bounded.
        for request in batch.exec {
            let sent = match &exec {
                Some(exec) => exec.send(request).await.is_ok(),
                None => false,
            };
            if !sent {
                tracing::error!("an exec request and no exec task to take it");
            }
        }
    }
    Ok(())
}

/// The core's launches and kills of this batch, as requests for the exec task.
fn exec_requests(core: &mut ShardCore) -> Vec<ExecRequest> {
    core.take_exec_actions()
        .into_iter()
        .filter_map(|action| match action {
            ExecAction::Launch(id) => core
                .job(id)
                .map(|job| ExecRequest::Launch(Box::new(job.clone()), core.generations_of(job))),
            ExecAction::Kill { id, why } => Some(ExecRequest::Kill { id, why }),
            ExecAction::Forget(id) => Some(ExecRequest::Forget(id)),
        })
        .collect()
}

/// The wall clock, ms since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The tokio instant at wall-clock time `at_ms` (at most [`WAKE_AFTER_MAX`] away).
fn until(at_ms: u64) -> tokio::time::Instant {
    let wait = Duration::from_millis(at_ms.saturating_sub(now_ms())).min(WAKE_AFTER_MAX);
    tokio::time::Instant::now() + wait
}
