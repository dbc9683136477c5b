//! What the coordinator shows its operators (docs/OPERATIONS.md), kept thin: the status
//! page and the view-derived gauges are computed from the core's own views, asked of the
//! core task like any request ([`StatusHandle`]); the driver counts only what it does
//! itself (journal commits, move steps as they become durable) into [`Counters`].

use std::collections::HashSet;
use std::time::Duration;

use shardsched_journal::CommitInfo;
use shardsched_proto::msg::client_coord::MoveInfo;
use shardsched_telemetry::status::StatusFuture;
use shardsched_telemetry::{ClusterStatus, CoordinatorMetrics, StatusSource, StatusUnavailable};
use tokio::sync::{mpsc, oneshot};

use super::event::Event;
use crate::core::Core;

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
    /// The steps of move nodes already counted (move, node, step), kept while the move
    /// view shows them, so that each is counted once.
    counted: HashSet<(u64, String, &'static str)>,
}

impl Counters {
    /// A journal write of the core task that took `took` until durable.
    pub(super) fn committed(&self, took: Duration, commit: Option<CommitInfo>) {
        self.metrics.process.journal_committed(took);
        if let Some(commit) = commit {
            self.metrics.process.journal_fsynced(commit.fsync);
        }
    }

    /// A journal write made releases or acquisitions durable: each node step the move
    /// view now shows complete, and had not shown before, is counted with its duration.
    pub(super) fn steps_durable(&mut self, moves: &[MoveInfo]) {
        let mut shown = HashSet::new();
        for m in moves {
            for n in &m.nodes {
                let steps = [
                    ("release", Some(n.requested_ms), n.released_ms),
                    ("acquire", n.released_ms, n.acquired_ms),
                ];
                for (step, from, to) in steps {
                    let (Some(from), Some(to)) = (from, to) else {
                        continue;
                    };
                    let key = (m.move_id.0, n.node.clone(), step);
                    if !self.counted.contains(&key) {
                        let took = Duration::from_millis(to.saturating_sub(from));
                        self.metrics.move_step_took(step, took);
                    }
                    shown.insert(key);
                }
            }
        }
        self.counted = shown;
    }
}
