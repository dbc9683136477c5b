//! `up` follows the coordinator's queue table at run time: `queue add` gets its shard
//! started (with a certificate issued as at start), `queue remove` gets its shard stopped,
//! `reload` either. A shard told to restart with a new configuration exits with
//! [`RESTART_EXIT_STATUS`] and is started again at once, not counted as a failure.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_shard::RESTART_EXIT_STATUS;

use super::{SHARD_LABEL_PREFIX, Supervisor, stop_all};
use crate::client::Client;

/// How often `up` reads the coordinator's queue list to follow added and removed queues.
pub const QUEUE_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// The connection `up` reads the queue list with, and when it last did.
#[derive(Default)]
pub(super) struct QueueSync {
    client: Option<Client>,
    last: Option<Instant>,
}

/// Whether a child's exit asks for an immediate restart (a reconfigured shard).
pub(super) fn is_restart(status: ExitStatus) -> bool {
    status.code() == Some(i32::from(RESTART_EXIT_STATUS))
}

impl Supervisor {
    /// Starts shards of queues the coordinator has and `up` does not run, stops those of
    /// queues it no longer has. At most once per [`QUEUE_SYNC_INTERVAL`]; a coordinator
    /// that does not answer (restarting) is asked again next time.
    pub(super) async fn sync_queues(&mut self) {
        if self
            .queue_sync
            .last
            .is_some_and(|at| at.elapsed() < QUEUE_SYNC_INTERVAL)
        {
            return;
        }
        self.queue_sync.last = Some(Instant::now());
        let Some(address) = self.coordinator else {
            return;
        };
        if self.queue_sync.client.is_none() {
            let Ok(creds) = self.dir.credentials() else {
                return;
            };
            match Client::connect_with(address, &creds).await {
                Ok(client) => self.queue_sync.client = Some(client),
                Err(_) => return,
            }
        }
        let Some(client) = &self.queue_sync.client else {
            return;
        };
        let queues = match client.coordinator(&Request::Queues).await {
            Ok(Response::Queues(queues)) => queues,
            _ => {
                // Connect again next time (the coordinator may have restarted).
                if let Some(client) = self.queue_sync.client.take() {
                    client.close().await;
                }
                return;
            }
        };
        let running: Vec<String> = self
            .children
            .iter()
            .filter_map(|c| c.label.strip_prefix(SHARD_LABEL_PREFIX))
            .map(str::to_owned)
            .collect();
        for queue in &queues {
            if running.iter().any(|r| r == &queue.name) {
                continue;
            }
            match self.spawn_shard(&queue.name, address) {
                Ok(()) => eprintln!(
                    "shardsched up: queue {} added; started its shard",
                    queue.name
                ),
                Err(e) => eprintln!(
                    "shardsched up: queue {} added, but its shard did not start: {e:#}",
                    queue.name
                ),
            }
        }
        let gone: Vec<String> = running
            .into_iter()
            .filter(|r| !queues.iter().any(|q| &q.name == r))
            .collect();
        if gone.is_empty() {
            return;
        }
        let (mut stopping, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.children)
            .into_iter()
            .partition(|c| {
                c.label
                    .strip_prefix(SHARD_LABEL_PREFIX)
                    .is_some_and(|q| gone.iter().any(|g| g == q))
            });
        self.children = kept;
        stop_all(stopping.iter_mut()).await;
        for child in stopping {
            eprintln!("shardsched up: queue removed; stopped {}", child.label);
        }
    }
}
