//! `up` follows the coordinator's queue table at run time: `queue add` gets its shard
//! started (with a certificate issued as at start), `queue remove` gets its shard stopped,
//! `reload` either. A shard told to restart with a new configuration exits with
//! [`RESTART_EXIT_STATUS`] and is started again at once, not counted as a failure.
//!
//! The queue list is read by a task of its own ([`QueueSync::start`]), so that a
//! coordinator that does not answer (it died, and `up` is about to restart it) never holds
//! up the supervision loop; the loop only looks at the latest list it published.

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use shardsched_proto::msg::client_coord::{Request, Response};
use shardsched_shard::RESTART_EXIT_STATUS;
use tokio::sync::watch;

use super::{SHARD_LABEL_PREFIX, SHUTDOWN_GRACE, Supervised, Supervisor};
use shardsched_client::{Client, StateDir};

/// How often `up` reads the coordinator's queue list to follow added and removed queues.
pub const QUEUE_SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// How long one reading of the queue list (connecting included) may take.
pub const QUEUE_SYNC_TIMEOUT: Duration = Duration::from_secs(2);

/// The latest queue names read from the coordinator, and the task reading them.
pub(super) struct QueueSync {
    names: watch::Receiver<Option<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

/// A shard of a removed queue, told to stop (SIGTERM) and killed if it takes too long.
pub(super) struct Retiring {
    child: Supervised,
    since: Instant,
}

/// Whether a child's exit asks for an immediate restart (a reconfigured shard).
pub(super) fn is_restart(status: ExitStatus) -> bool {
    status.code() == Some(i32::from(RESTART_EXIT_STATUS))
}

impl QueueSync {
    /// Starts reading the queue names of the coordinator at `address` (from its routing
    /// table) every [`QUEUE_SYNC_INTERVAL`], with the client certificate in `dir`.
    pub(super) fn start(dir: StateDir, address: SocketAddr) -> QueueSync {
        let (publish, names) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut client: Option<Client> = None;
            loop {
                tokio::time::sleep(QUEUE_SYNC_INTERVAL).await;
                let read = tokio::time::timeout(QUEUE_SYNC_TIMEOUT, async {
                    if client.is_none() {
                        let creds = dir.credentials().ok()?;
                        client = Client::connect_with(address, &creds).await.ok();
                    }
                    // The routing table names every queue (routed, or offline), and the
                    // coordinator makes it from the queue table alone; the queue list
                    // would count every queue's nodes and write their hostlists, each
                    // second, on the task that also handles moves.
                    match client.as_ref()?.coordinator(&Request::Routes).await {
                        Ok(Response::Routes(table)) => {
                            let routed = table.routes.into_iter().map(|r| r.queue);
                            let mut names: Vec<String> = routed.chain(table.offline).collect();
                            names.sort();
                            Some(names)
                        }
                        _ => None,
                    }
                })
                .await;
                match read {
                    Ok(Some(names)) => {
                        publish.send_if_modified(|last| {
                            let changed = last.as_ref() != Some(&names);
                            *last = Some(names);
                            changed
                        });
                    }
                    // Connect again next time (the coordinator may have restarted).
                    _ => {
                        if let Some(old) = client.take() {
                            old.close().await;
                        }
                    }
                }
            }
        });
        QueueSync { names, task }
    }
}

impl Drop for QueueSync {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Supervisor {
    /// Starts shards of queues the coordinator has and `up` does not run, and asks those
    /// of queues it no longer has to stop; reaps (or, past [`SHUTDOWN_GRACE`], kills) the
    /// shards asked to stop. Never waits.
    pub(super) fn sync_queues(&mut self) {
        self.reap_retiring();
        let Some(address) = self.coordinator else {
            return;
        };
        let Some(sync) = &mut self.queue_sync else {
            return;
        };
        if !sync.names.has_changed().unwrap_or(false) {
            return;
        }
        let Some(queues) = sync.names.borrow_and_update().clone() else {
            return;
        };
        let running: Vec<String> = self
            .children
            .iter()
            .filter_map(|c| c.label.strip_prefix(SHARD_LABEL_PREFIX))
            .map(str::to_owned)
            .collect();
        for queue in queues.iter().filter(|q| !running.contains(q)) {
            match self.spawn_shard(queue, address) {
                Ok(()) => note!("shardsched up: queue {queue} added; started its shard"),
                Err(e) => {
                    note!("shardsched up: queue {queue} added, but its shard did not start: {e:#}")
                }
            }
        }
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.children)
            .into_iter()
            .partition(|c| {
                c.label
                    .strip_prefix(SHARD_LABEL_PREFIX)
                    .is_some_and(|q| !queues.iter().any(|name| name == q))
            });
        self.children = kept;
        for child in gone {
            note!("shardsched up: queue removed; stopping {}", child.label);
            if let Some(process) = &child.process {
                let _ = kill_process(Pid::from_child(process), Signal::TERM);
            }
            self.retiring.push(Retiring {
                child,
                since: Instant::now(),
            });
        }
    }

    /// Forgets retiring shards that exited; kills those past [`SHUTDOWN_GRACE`].
    fn reap_retiring(&mut self) {
        self.retiring.retain_mut(|r| {
            if !matches!(r.child.try_exited(), Ok(None)) {
                return false;
            }
            if r.since.elapsed() >= SHUTDOWN_GRACE
                && let Some(process) = &mut r.child.process
            {
                note!(
                    "shardsched up: {} did not stop within {} s; killing it",
                    r.child.label,
                    SHUTDOWN_GRACE.as_secs()
                );
                let _ = process.kill();
                let _ = process.wait();
                return false;
            }
            true
        });
    }
}

impl Retiring {
    /// The child, for shutdown.
    pub(super) fn into_child(self) -> Supervised {
        self.child
    }

    /// The child, for the supervisor's last-resort kill.
    pub(super) fn child_mut(&mut self) -> &mut Supervised {
        &mut self.child
    }
}
