//! How many request bytes a server holds for one connection and for one peer.
//!
//! A request frame is read only once its announced length is reserved from two budgets: its
//! connection's ([`CONNECTION_REQUEST_BYTES_MAX`]) and its peer's, shared by every connection
//! with the same certificate in this process ([`PEER_REQUEST_BYTES_MAX`]). The reservation
//! lasts until the reply is written. A request that does not fit waits for earlier ones to
//! finish; while it waits its bytes are not read, so QUIC flow control stops the peer from
//! sending more ([`CONNECTION_RECEIVE_WINDOW_BYTES`]). So one connection, or one peer with
//! many connections, cannot make a server hold more than its budget in requests, however
//! many streams it opens.
//!
//! [`CONNECTION_RECEIVE_WINDOW_BYTES`]: crate::limits::CONNECTION_RECEIVE_WINDOW_BYTES

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::identity::Peer;
use crate::limits::{CONNECTION_REQUEST_BYTES_MAX, PEER_REQUEST_BYTES_MAX};

/// The budgets of every peer this process serves. Process-wide on purpose: a peer's budget
/// spans all its connections, whichever endpoint or task serves them; an entry goes when
/// the peer's last connection does.
static PEERS: LazyLock<Mutex<HashMap<Peer, Weak<Semaphore>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// One connection's request budget, and its peer's.
#[derive(Clone, Debug)]
pub struct RequestBudget {
    connection: Arc<Semaphore>,
    peer: Arc<Semaphore>,
    /// The most one reservation may take (the smaller budget): a larger one could never be
    /// granted, so it is granted this much instead.
    largest: usize,
}

/// Bytes reserved for one request; given back when dropped.
#[derive(Debug)]
pub struct Reserved {
    _connection: Option<OwnedSemaphorePermit>,
    _peer: Option<OwnedSemaphorePermit>,
}

impl RequestBudget {
    /// The budget of a new connection of `peer`: its own, and the peer's shared one.
    pub fn for_connection(peer: &Peer) -> RequestBudget {
        let mut peers = PEERS.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = match peers.get(peer).and_then(Weak::upgrade) {
            Some(shared) => shared,
            None => {
                peers.retain(|_, budget| budget.strong_count() > 0);
                let shared = Arc::new(Semaphore::new(PEER_REQUEST_BYTES_MAX));
                peers.insert(peer.clone(), Arc::downgrade(&shared));
                shared
            }
        };
        RequestBudget::new(
            Arc::new(Semaphore::new(CONNECTION_REQUEST_BYTES_MAX)),
            shared,
        )
    }

    /// A budget over the given semaphores (one permit per byte), for tests.
    pub fn new(connection: Arc<Semaphore>, peer: Arc<Semaphore>) -> RequestBudget {
        let largest = connection.available_permits().min(peer.available_permits());
        RequestBudget {
            connection,
            peer,
            largest,
        }
    }

    /// Waits until `bytes` fit both budgets and reserves them (the connection's first, so a
    /// connection waiting on itself does not hold its peer's bytes).
    pub async fn reserve(&self, bytes: usize) -> Reserved {
        let n = u32::try_from(bytes.min(self.largest)).unwrap_or(u32::MAX);
        // The semaphores are never closed, so acquiring does not fail (`None` if it did).
        let connection = Arc::clone(&self.connection).acquire_many_owned(n).await;
        let peer = Arc::clone(&self.peer).acquire_many_owned(n).await;
        Reserved {
            _connection: connection.ok(),
            _peer: peer.ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::identity::Role;

    const SOON: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn a_connection_and_a_peer_hold_no_more_than_their_budgets() {
        let peer = Arc::new(Semaphore::new(100));
        let a = RequestBudget::new(Arc::new(Semaphore::new(60)), Arc::clone(&peer));
        let b = RequestBudget::new(Arc::new(Semaphore::new(60)), Arc::clone(&peer));
        let first = a.reserve(50).await;
        // a's own budget is the bound: 50 + 20 > 60.
        assert!(tokio::time::timeout(SOON, a.reserve(20)).await.is_err());
        let second = b.reserve(50).await;
        // Both connections together: the peer's 100 are taken.
        assert!(tokio::time::timeout(SOON, b.reserve(1)).await.is_err());
        drop(first);
        let third = tokio::time::timeout(SOON, b.reserve(10)).await;
        assert!(third.is_ok(), "bytes given back are reserved again");
        drop(second);
        // More than a budget can ever hold is granted as the whole budget, not refused.
        drop(third);
        assert!(tokio::time::timeout(SOON, a.reserve(1_000)).await.is_ok());
    }

    #[test]
    fn a_peers_connections_share_one_budget_until_the_last_goes() {
        let alice = Peer::new(Role::User, "budget-alice").expect("peer");
        let one = RequestBudget::for_connection(&alice);
        let two = RequestBudget::for_connection(&alice);
        assert!(Arc::ptr_eq(&one.peer, &two.peer));
        assert!(!Arc::ptr_eq(&one.connection, &two.connection));
        let shared = Arc::downgrade(&one.peer);
        drop((one, two));
        assert_eq!(shared.strong_count(), 0);
        let three = RequestBudget::for_connection(&alice);
        assert_eq!(three.peer.available_permits(), PEER_REQUEST_BYTES_MAX);
    }
}
