//! A removal's end: its change made, or refused with its held queues' state back.

use shardsched_wire::msg::{Refusal, RefusalCode};

use super::{Change, RemovalDone, RemovalId};
use crate::core::{Core, QueueCommand};

impl Core {
    /// Ends removal `id`: with its change made when `held` is `Ok` (and the change is
    /// accepted), else refused, its held queues given their state back.
    pub(super) fn end_removal(&mut self, id: RemovalId, held: Result<(), Refusal>, now_ms: u64) {
        let Some(r) = self.removals.active.remove(&id) else {
            return;
        };
        // A shard that re-registered since it was held may have taken submissions again.
        let still_held = r
            .held
            .iter()
            .all(|(queue, conn)| self.shard(queue).is_some_and(|l| l.conn == *conn));
        let held = held.and_then(|()| {
            if still_held {
                Ok(())
            } else {
                Err(Refusal::new(
                    RefusalCode::Unavailable,
                    "a removed queue's shard reconnected during the removal; ask again",
                ))
            }
        });
        if held.is_ok() {
            for (queue, _) in &r.held {
                self.saw_idle(queue);
            }
        }
        let done = held.and_then(|()| match r.change {
            Change::Remove(queue) => self.remove_queue(now_ms, &queue, None),
            Change::Reload(file) => self.reload(*file),
        });
        let (outcome, re_enable) = match done {
            Ok(done) => {
                let done = match r.giving {
                    Some(mut giving) => {
                        giving.changes.extend(done.changes);
                        giving.restart = done.restart;
                        giving.stop = done.stop;
                        giving.journal |= done.journal;
                        giving
                    }
                    None => done,
                };
                (Ok(done), Vec::new())
            }
            Err(refusal) => {
                // Only shards still on the connection that held them: one that
                // reconnected takes its state from its registration.
                let re_enable = r
                    .held
                    .iter()
                    .filter(|(queue, conn)| self.shard(queue).is_some_and(|l| l.conn == *conn))
                    .filter_map(|(queue, conn)| {
                        let (enabled, started) = self.queue_flags(queue)?;
                        Some(QueueCommand {
                            queue: queue.clone(),
                            conn: *conn,
                            enabled,
                            started,
                        })
                    })
                    .collect();
                (Err(refusal), re_enable)
            }
        };
        self.removals.done.push(RemovalDone {
            removal: id,
            outcome,
            re_enable,
        });
    }
}
