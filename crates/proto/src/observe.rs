//! What a process counts of its wire — requests answered and refused, connections open — for
//! its metrics. The process sets one [`WireObserver`] at start ([`set_observer`]: the
//! coordinator's and the shards' binaries do); without one (clients, tests) nothing is
//! counted and nothing costs more than a check of an empty cell.
//!
//! Counting lives here because [`serve`](crate::serve), [`accept`](crate::accept) and
//! [`connect`](crate::connect) are the one path every request and connection of either
//! process takes, refusals by role and bounds included, which no handler sees.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::identity::Role;
use crate::msg::RefusalCode;

/// Told of each request answered and each connection opened and closed.
pub trait WireObserver: Send + Sync + 'static {
    /// A request of `kind` was answered; `refused` with its code when it was refused.
    fn answered(&self, kind: &'static str, refused: Option<RefusalCode>);
    /// A connection with a peer of role `peer` completed its hello.
    fn connected(&self, peer: Role);
    /// That connection's last [`Session`](crate::Session) handle was dropped.
    fn disconnected(&self, peer: Role);
}

static OBSERVER: OnceLock<Arc<dyn WireObserver>> = OnceLock::new();

/// Sets the process's observer; `false` (and nothing changes) when one is set already.
pub fn set_observer(observer: Arc<dyn WireObserver>) -> bool {
    OBSERVER.set(observer).is_ok()
}

pub(crate) fn answered(kind: &'static str, refused: Option<RefusalCode>) {
    if let Some(observer) = OBSERVER.get() {
        observer.answered(kind, refused);
    }
}

/// Counts a connection open until the returned value (shared by a session's clones) is
/// dropped.
pub(crate) fn connection(peer: Role) -> Option<Arc<OpenConnection>> {
    let observer = OBSERVER.get()?;
    observer.connected(peer);
    Some(Arc::new(OpenConnection {
        observer: Arc::clone(observer),
        peer,
    }))
}

/// One counted connection.
pub(crate) struct OpenConnection {
    observer: Arc<dyn WireObserver>,
    peer: Role,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.observer.disconnected(self.peer);
    }
}

impl fmt::Debug for OpenConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenConnection({})", self.peer.as_str())
    }
}
