//! The driver's side of job history (`crate::history`): pulling each shard's ended jobs
//! into the store — after a shard's status report once [`HISTORY_PULL_INTERVAL`] has
//! passed, and a last time before its queue is removed — and answering `jobs --since` and
//! `usage` from it. Pulls and reads run off the core task (the store blocks), one pull per
//! queue at a time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use shardsched_proto::Fluid;
use shardsched_proto::msg::client_coord::Response as ClientResponse;
use shardsched_proto::msg::coord_shard;
use shardsched_proto::msg::history::{
    HISTORY_RECORDS_PER_PULL_MAX, HistoryCursor, HistoryPull, HistoryRecord,
};
use shardsched_proto::msg::{Refusal, RefusalCode};
use shardsched_proto::{Peer, Reply, Session};
use tokio::sync::Mutex;

use super::core_task::{After, CoreTask};
use super::event::ClientReply;
use super::link::ask;
use super::{SHARD_COMMAND_TIMEOUT, now_ms};
use crate::core::ConnId;
use crate::history::{HistoryError, HistoryStore};

/// How often a shard's ended jobs are pulled (at its status reports).
pub const HISTORY_PULL_INTERVAL: Duration = Duration::from_secs(2);

/// The store, when each queue was last pulled, and the lock that makes pulls one at a time.
pub(super) struct History {
    store: Arc<HistoryStore>,
    pulled_ms: HashMap<String, u64>,
    pulling: Arc<Mutex<()>>,
}

/// What a client asks of the store.
pub(super) enum HistoryAsk {
    Jobs(shardsched_proto::msg::history::HistoryQuery),
    Usage(shardsched_proto::msg::history::UsageQuery),
}

impl History {
    pub(super) fn new(store: HistoryStore) -> History {
        History {
            store: Arc::new(store),
            pulled_ms: HashMap::new(),
            pulling: Arc::default(),
        }
    }

    /// The store, for a removal's last pull.
    pub(super) fn store(&self) -> Arc<HistoryStore> {
        Arc::clone(&self.store)
    }

    /// The lock that makes pulls one at a time: see [`pull`].
    pub(super) fn pulling(&self) -> Arc<Mutex<()>> {
        Arc::clone(&self.pulling)
    }
}

impl CoreTask {
    /// `queue`'s shard (on `conn`) reported: pull its ended jobs if it is time.
    pub(super) fn history_due(&mut self, now: u64, queue: &str, conn: ConnId) {
        let interval = u64::try_from(HISTORY_PULL_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        let last = self.history.pulled_ms.get(queue).copied().unwrap_or(0);
        if now < last.saturating_add(interval) {
            return;
        }
        let Some(link) = self.links.get(&conn) else {
            return;
        };
        self.history.pulled_ms.insert(queue.to_owned(), now);
        let (store, pulling) = (self.history.store(), self.history.pulling());
        let (queue, session) = (queue.to_owned(), link.session().clone());
        self.after.push(After::Spawn(Box::pin(async move {
            // A pull under way (a slow shard, a removal's) does this one's work.
            let Ok(_one_at_a_time) = pulling.try_lock() else {
                return;
            };
            if let Err(refusal) = pull_locked(&queue, &session, &store).await {
                tracing::warn!(%queue, error = %refusal, "job history not pulled; tried again later");
            }
        })));
    }

    /// `jobs --since` and `usage`, read off the core task.
    pub(super) fn history_ask(&mut self, peer: &Peer, ask: HistoryAsk, reply: ClientReply) {
        let store = self.history.store();
        let requester = peer.name.clone();
        self.after.push(After::Spawn(Box::pin(async move {
            let read = tokio::task::spawn_blocking(move || match ask {
                HistoryAsk::Jobs(q) => store.jobs(&requester, &q).map(ClientResponse::History),
                HistoryAsk::Usage(q) => store.usage(&requester, &q).map(ClientResponse::Usage),
            })
            .await;
            let answer: Reply<ClientResponse> = match read {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(e)) => Err(unavailable(&e)),
                Err(e) => Err(Refusal::new(RefusalCode::Unavailable, e.to_string())),
            };
            let _ = reply.send(answer);
        })));
    }
}

fn unavailable(e: &HistoryError) -> Refusal {
    Refusal::new(RefusalCode::Unavailable, e.to_string())
}

/// Pulls `queue`'s ended jobs after the store's cursor until the shard has no more. Pulls
/// run one at a time (`pulling`): one under way makes this one wait for it and then pull
/// from where it left off, so a removal's last pull sees everything that ended before it.
pub(super) async fn pull(
    queue: &str,
    session: &Session,
    store: &Arc<HistoryStore>,
    pulling: &Arc<Mutex<()>>,
) -> Result<(), Refusal> {
    let _one_at_a_time = pulling.lock().await;
    pull_locked(queue, session, store).await
}

/// [`pull`], the lock held.
async fn pull_locked(
    queue: &str,
    session: &Session,
    store: &Arc<HistoryStore>,
) -> Result<(), Refusal> {
    let at = Arc::clone(store);
    let q = queue.to_owned();
    // From the last millisecond pulled again: a shard stamps ends with its clock, which
    // never goes back, but two batches may end jobs in the same millisecond, and one of
    // the second with a smaller id would sort before the cursor.
    let mut after = blocking(move || at.cursor(&q))
        .await?
        .map(|c| HistoryCursor {
            end_ms: c.end_ms.saturating_sub(1),
            id: Fluid(u64::MAX),
        });
    loop {
        let request = coord_shard::Request::History(HistoryPull {
            after,
            limit: HISTORY_RECORDS_PER_PULL_MAX,
        });
        let records = match ask(session, &request, SHARD_COMMAND_TIMEOUT).await? {
            coord_shard::Response::History(records) => records,
            other => {
                return Err(Refusal::new(
                    RefusalCode::Unavailable,
                    format!("queue {queue}'s shard answered a history pull with {other:?}"),
                ));
            }
        };
        let more = records.len() >= HISTORY_RECORDS_PER_PULL_MAX as usize;
        if records.is_empty() {
            return Ok(());
        }
        after = records.last().map(HistoryRecord::cursor);
        let at = Arc::clone(store);
        let q = queue.to_owned();
        blocking(move || at.insert(&q, &records, now_ms())).await?;
        if !more {
            return Ok(());
        }
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HistoryError> + Send + 'static,
) -> Result<T, Refusal> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(unavailable(&e)),
        Err(e) => Err(Refusal::new(RefusalCode::Unavailable, e.to_string())),
    }
}
