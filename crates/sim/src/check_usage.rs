//! I7, fair-share's usage counted once (docs/POLICIES.md, "Fair-share"): the coordinator's
//! usage table never holds more than the usage batches shards delivered to it, each
//! counted once.
//!
//! Every batch a shard's status report delivers to the coordinator is recorded here by its
//! connection and number (a repeat, a duplicate or a reordered copy is the same batch);
//! decay and the table's user bound only ever lower the coordinator's total, so a total
//! above the sum of the distinct batches delivered means a batch was counted twice.

use std::collections::BTreeMap;

use shardsched_coordinator_core::core::{ConnId, Core};
use shardsched_wire::msg::fairshare::UsageBatch;

use crate::check::{Invariant, Violation, broken};

/// The usage batches delivered to the coordinator, by connection and number.
#[derive(Debug, Default)]
pub(crate) struct UsageDelivered {
    batches: BTreeMap<(ConnId, u64), u64>,
}

impl UsageDelivered {
    /// A status report carrying `batch` reached the coordinator on `conn`.
    pub(crate) fn delivered(&mut self, conn: ConnId, batch: &UsageBatch) {
        let total = batch
            .users
            .iter()
            .fold(0u64, |sum, u| sum.saturating_add(u.core_ms));
        self.batches.insert((conn, batch.seq), total);
    }

    /// I7 against the coordinator core's table now.
    pub(crate) fn check(&self, core: &Core) -> Result<(), Violation> {
        let delivered = self
            .batches
            .values()
            .fold(0u64, |a, &b| a.saturating_add(b));
        let counted = core.fairshare_total();
        if counted > delivered {
            return Err(broken(
                Invariant::I7,
                format!(
                    "the coordinator counts {counted} core-ms of usage, more than the \
                     {delivered} its {} distinct batches carried",
                    self.batches.len()
                ),
            ));
        }
        Ok(())
    }
}
