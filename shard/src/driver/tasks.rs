//! The shard's tasks around its core: building the core from the coordinator's assignment
//! and the journal, starting the committer, the core task, the exec task (exec mode), the
//! client accept loop and the journal statistics, and stopping them in order.

use std::sync::Arc;

use arc_swap::ArcSwap;
use shardsched_journal::{Committer, Journal};
use shardsched_proto::msg::shard_coord::{Assignment, ShardStatus};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::core_task::{self, Command};
use super::output::OutputSource;
use super::{Executor, ShardOptions, exec_task, released, serve, stats, transitions};
use crate::core::{CoreExecutor, CoreOptions, ShardCore};
use crate::error::DriverError;
use crate::journal::Restored;
use crate::limits::{COMMAND_QUEUE_CAPACITY, EXEC_QUEUE_CAPACITY, OUTPUT_ASKS_QUEUED_MAX};
use crate::snapshot::Snapshot;

/// The running tasks, and the handles the coordinator's link uses.
pub(super) struct Tasks {
    /// The core task's queue.
    pub(super) commands: mpsc::Sender<Command>,
    /// The published snapshot reads are served from.
    pub(super) snapshot: Arc<ArcSwap<Snapshot>>,
    /// The status reports the core task hands out.
    pub(super) status: watch::Receiver<Option<ShardStatus>>,
    /// `Released` reports waiting for the coordinator.
    pub(super) released: released::ReleasedQueue,
    /// The registration connection to the coordinator, for the agents executor's questions.
    pub(super) coordinator: watch::Sender<Option<shardsched_proto::Session>>,
    core_task: JoinHandle<Result<(), DriverError>>,
    /// `false` once the core task has ended (and been joined).
    core_running: bool,
    clients: JoinHandle<()>,
    journal_stats: JoinHandle<()>,
}

/// The core for `assignment`: a first start, or (the journal has something) a restart.
pub(super) fn build_core(
    options: &ShardOptions,
    assignment: &Assignment,
    restored: Restored,
) -> Result<ShardCore, DriverError> {
    let core_options = CoreOptions {
        time_scale: options.time_scale,
        executor: match options.executor {
            Executor::Sim => CoreExecutor::Sim,
            Executor::Exec(_) => CoreExecutor::Exec {
                jobs_dir: exec_task::jobs_dir(&options.state_dir),
            },
            Executor::Agents(_) => CoreExecutor::Agents,
        },
        retention_ms: u64::try_from(options.retention.as_millis()).unwrap_or(u64::MAX),
        journal: true,
        ..CoreOptions::default()
    };
    let core = ShardCore::start(assignment, core_options, core_task::now_ms(), &restored)?;
    tracing::info!(
        generator_id = assignment.generator_id,
        owned = core.owned().len(),
        enabled = assignment.queue.enabled,
        started = assignment.queue.started,
        "registered"
    );
    Ok(core)
}

impl Tasks {
    /// Starts every task around `core`, which the core task then owns.
    pub(super) fn start(
        options: &ShardOptions,
        endpoint: &quinn::Endpoint,
        journal: Journal,
        core: ShardCore,
    ) -> Result<Tasks, DriverError> {
        let log = transitions::TransitionLog::open(&options.state_dir, &options.queue);
        let released = released::ReleasedQueue::default();
        let committer = Committer::start(journal)?;
        let journal_stats = tokio::spawn(stats::write_periodically(
            committer.clone(),
            options.state_dir.clone(),
        ));
        let snapshot = Arc::new(ArcSwap::from_pointee(core.snapshot()));
        let (commands, queue) = mpsc::channel(COMMAND_QUEUE_CAPACITY);
        let (status_tx, status) = watch::channel(None);
        let (coordinator, coordinator_rx) = watch::channel(None);
        let mut output = OutputSource::None;
        let exec = match &options.executor {
            Executor::Sim => None,
            Executor::Agents(agents_options) => {
                let (exec_tx, exec_rx) = mpsc::channel(EXEC_QUEUE_CAPACITY);
                let (asks_tx, asks) = mpsc::channel(OUTPUT_ASKS_QUEUED_MAX);
                output = OutputSource::Agents(asks_tx);
                tokio::spawn(crate::agents::task::run(
                    crate::agents::task::Inputs {
                        queue: options.queue.clone(),
                        options: agents_options.clone(),
                        endpoint: endpoint.clone(),
                        coordinator: coordinator_rx,
                        requests: exec_rx,
                        outputs: asks,
                    },
                    commands.clone(),
                ));
                Some(exec_tx)
            }
            Executor::Exec(exec_options) => {
                output = OutputSource::Exec(exec_task::jobs_dir(&options.state_dir));
                let (exec_tx, exec_rx) = mpsc::channel(EXEC_QUEUE_CAPACITY);
                exec_task::start_thread(exec_task::run(
                    options.queue.clone(),
                    exec_options.clone(),
                    exec_task::jobs_dir(&options.state_dir),
                    exec_rx,
                    commands.clone(),
                ))?;
                Some(exec_tx)
            }
        };
        let core_task = tokio::spawn(core_task::run(
            core,
            queue,
            Arc::clone(&snapshot),
            status_tx,
            committer,
            options.metrics.clone(),
            core_task::Sinks {
                exec,
                log,
                released: released.clone(),
            },
        ));
        let clients = tokio::spawn(serve::clients(
            endpoint.clone(),
            commands.clone(),
            Arc::clone(&snapshot),
            output,
        ));
        Ok(Tasks {
            coordinator,
            commands,
            snapshot,
            status,
            released,
            core_task,
            core_running: true,
            clients,
            journal_stats,
        })
    }

    /// Resolves when the core task ends on its own (a failed commit, or a bug): always an
    /// error, since only [`Tasks::stop`] may end it.
    pub(super) async fn core_ended(&mut self) -> Result<(), DriverError> {
        let joined = (&mut self.core_task).await;
        self.core_running = false;
        match joined {
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => Err(DriverError::CoreStopped("it returned".to_owned())),
            Err(e) => Err(DriverError::CoreStopped(e.to_string())),
        }
    }

    /// Stops every task; the core task finishes its batch first. Returns `outcome`, or the
    /// core task's error if there was none.
    pub(super) async fn stop(self, outcome: Result<(), DriverError>) -> Result<(), DriverError> {
        self.clients.abort();
        self.journal_stats.abort();
        let _ = self.journal_stats.await;
        if self.core_running {
            let _ = self.commands.send(Command::Stop).await;
            match self.core_task.await {
                Ok(Err(e)) if outcome.is_ok() => return Err(e),
                Ok(Err(e)) => tracing::error!(error = %e, "stopping the core task"),
                _ => {}
            }
        }
        outcome
    }
}
