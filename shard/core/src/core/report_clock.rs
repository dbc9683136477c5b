//! When a shard sends its next status report. The driver's core task and the simulator's
//! shard both ask [`ReportClock`], so the simulator reports on the driver's schedule.
//!
//! A report leaves at once at first; then [`STATUS_INTERVAL_MIN`] after the last one when
//! something it shows changed ([`ShardCore::status_version`]); [`DEPENDENCY_ASK_INTERVAL`]
//! after it while the shard asks about jobs of other queues; else [`STATUS_INTERVAL_MAX`]
//! after it (a heartbeat). An allowance asked for or returned
//! ([`ShardCore::urgent_reports`], docs/POLICIES.md "Limits") makes it leave at once: a job
//! held by its owner's allowance waits for one round trip to the coordinator, not for the
//! interval as well.

use std::time::Duration;

use shardsched_wire::msg::shard_coord::ShardStatus;

use super::ShardCore;
use crate::limits::{DEPENDENCY_ASK_INTERVAL, STATUS_INTERVAL_MAX, STATUS_INTERVAL_MIN};

/// When the last status report was made, and what it showed.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReportClock {
    /// When (ms since the Unix epoch); `None` before the first.
    last_ms: Option<u64>,
    /// The core's status version then.
    version: u64,
    /// The core's count of urgent reports then.
    urgent: u64,
    /// It asked about jobs of other queues (`ShardStatus::waiting_on`).
    asking: bool,
}

impl ReportClock {
    /// When the next report is due for `core` (ms since the Unix epoch; now or earlier:
    /// due now).
    pub fn due_ms(&self, core: &ShardCore) -> u64 {
        let Some(last) = self.last_ms else {
            return 0;
        };
        let after = |d: Duration| last.saturating_add(u64::try_from(d.as_millis()).unwrap_or(0));
        if core.urgent_reports() != self.urgent {
            last
        } else if core.status_version() != self.version {
            after(STATUS_INTERVAL_MIN)
        } else if self.asking {
            after(DEPENDENCY_ASK_INTERVAL)
        } else {
            after(STATUS_INTERVAL_MAX)
        }
    }

    /// `report`, made from `core` at `now_ms`, is being sent.
    pub fn sent(&mut self, now_ms: u64, core: &ShardCore, report: &ShardStatus) {
        *self = ReportClock {
            last_ms: Some(now_ms),
            version: core.status_version(),
            urgent: core.urgent_reports(),
            asking: !report.waiting_on.is_empty(),
        };
    }
}
