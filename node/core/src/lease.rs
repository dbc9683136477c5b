//! The lease a shard holds on the jobs it runs on this node.
//!
//! A shard renews it with every request (launch, kill, renewal, forget). The agent kills
//! the shard's jobs once `lease_ms` (half the heartbeat timeout) has passed since the last
//! renewal. The shard, for its part, may take the jobs as gone only once nothing has left
//! it for this agent for its request timeout (past which an unanswered request's
//! connection is closed, so it arrives by then or never), `lease_ms`, the kill grace and a
//! margin: counting from the last *answer* would be wrong, as requests whose answers are
//! lost still renew the lease (shard/core's `agents` module has the argument).
//!
//! A restarted agent must not extend a lease, so the last renewal's time is persisted —
//! lazily, at most every `lease_ms / LEASE_PERSIST_FRACTION` — and the persisted time is
//! never later than the real one: a restarted agent's deadline can only come sooner.

/// The persisted renewal time lags the real one by at most `lease_ms` divided by this.
pub const LEASE_PERSIST_FRACTION: u64 = 4;

/// One shard's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    /// When the shard was last heard from, ms (wall clock, as passed in).
    pub heard_ms: u64,
    /// The renewal time last persisted (or recovered), ms.
    pub persisted_ms: u64,
    /// The lease ran out and the shard's jobs were told to stop; cleared by a renewal.
    pub expired: bool,
}

impl Lease {
    /// A lease renewed at `now_ms` whose persisted time is `persisted_ms`.
    pub fn new(now_ms: u64, persisted_ms: u64) -> Lease {
        Lease {
            heard_ms: now_ms,
            persisted_ms,
            expired: false,
        }
    }

    /// The shard was heard from at `now_ms`.
    pub fn renew(&mut self, now_ms: u64) {
        self.heard_ms = self.heard_ms.max(now_ms);
        self.expired = false;
    }

    /// When it runs out.
    pub fn deadline_ms(&self, lease_ms: u64) -> u64 {
        self.heard_ms.saturating_add(lease_ms)
    }

    /// Whether the renewal time should be persisted now.
    pub fn persist_due(&self, lease_ms: u64) -> bool {
        self.heard_ms > self.persisted_ms
            && self.heard_ms - self.persisted_ms >= lease_ms / LEASE_PERSIST_FRACTION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_never_go_back_and_persist_lazily() {
        let mut lease = Lease::new(1_000, 1_000);
        lease.renew(900);
        assert_eq!(
            lease.heard_ms, 1_000,
            "a late-arriving older time changes nothing"
        );
        assert_eq!(lease.deadline_ms(15_000), 16_000);
        lease.renew(4_000);
        assert!(!lease.persist_due(15_000), "3 s < 15 s / 4");
        lease.renew(4_750);
        assert!(lease.persist_due(15_000));
    }
}
