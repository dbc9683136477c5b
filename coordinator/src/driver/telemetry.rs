//! What the coordinator shows its operators (docs/OPERATIONS.md), kept thin: the status
//! page and the view-derived gauges are computed from the core's own views, asked of the
//! core task like any request ([`StatusHandle`]); the driver counts only what it does
//! itself (journal commits, move steps as they become durable) into [`Counters`].

use std::time::Duration;

use shardsched_journal::CommitInfo;
use shardsched_telemetry::status::StatusFuture;
use shardsched_telemetry::{ClusterStatus, CoordinatorMetrics, StatusSource, StatusUnavailable};
use tokio::sync::{mpsc, oneshot};

use super::event::Event;
use crate::core::Core;
use crate::moves::StepTook;

/// The status page's source: asks the core task for its views.
pub(super) struct StatusHandle {
    pub(super) events: mpsc::Sender<Event>,
}

impl StatusSource for StatusHandle {
    fn status(&self) -> StatusFuture<'_> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let stopping = || StatusUnavailable("the coordinator is stopping".into());
            self.events
                .send(Event::Status { reply })
                .await
                .map_err(|_| stopping())?;
            answer.await.map_err(|_| stopping())
        })
    }
}

/// The core's views at `now_ms`: `queue list`, `resource list`, `queue moves`.
pub(super) fn cluster_status(core: &Core, now_ms: u64) -> ClusterStatus {
    ClusterStatus {
        time_ms: now_ms,
        default_queue: core.routes().default_queue,
        queues: core.queue_list(),
        // Every node: a refusal is only for an unknown queue, and none is named.
        nodes: core.resources(None).unwrap_or_default(),
        moves: core.move_list().0,
    }
}

/// What the driver counts itself.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) metrics: CoordinatorMetrics,
}

impl Counters {
    /// A journal write of the core task that took `took` until durable.
    pub(super) fn committed(&self, took: Duration, commit: Option<CommitInfo>) {
        self.metrics.process.journal_committed(took);
        if let Some(commit) = commit {
            self.metrics.process.journal_fsynced(commit.fsync);
        }
    }

    /// A journal write made these node steps (releases, acquisitions) durable: each is
    /// counted with its duration. They come from the write's own records, so this work
    /// follows the nodes that moved, not the moves the coordinator remembers (it used to
    /// rebuild the whole `queue moves` view after every such write: 25 ms per move with
    /// two finished 8,192-node moves remembered, between a release and its `Acquire`).
    pub(super) fn steps_durable(&self, steps: &[StepTook]) {
        for s in steps {
            self.metrics
                .move_step_took(s.step, Duration::from_millis(s.took_ms));
        }
    }
}
