//! The machine's two output queues, quinn-proto style: journal records first, then the
//! commands that may only leave once every record before them is durable.
//!
//! Each command is stamped with the newest record handed out when it was queued. The driver
//! polls records, writes them (in order, group commit allowed) and reports the last durable
//! token; commands stamped at or before it are released. So no shard ever hears of a
//! generation, a move or a release before the coordinator's journal holds it.

use std::collections::VecDeque;

use super::limits::{JOURNAL_PENDING_MAX, TRANSMIT_PENDING_MAX};
use super::types::{JournalToken, MoveRecord, ShardAssignment, Transmit};

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// Records not yet polled by the driver.
    journal: VecDeque<(JournalToken, MoveRecord)>,
    /// Commands, each waiting for its token to be durable.
    transmit: VecDeque<(JournalToken, Transmit)>,
    /// Registration answers, each waiting for its token to be durable.
    assignments: VecDeque<(JournalToken, ShardAssignment)>,
    /// The last token handed out.
    last: JournalToken,
    /// The last token the driver reported durable.
    durable: JournalToken,
}

impl Outbox {
    /// Queues a record; returns its token.
    pub(crate) fn record(&mut self, record: MoveRecord) -> JournalToken {
        self.last = JournalToken(self.last.0 + 1);
        self.journal.push_back((self.last, record));
        self.last
    }

    /// Whether `count` more records can be queued.
    pub(crate) fn has_room(&self) -> bool {
        self.pending_records() < JOURNAL_PENDING_MAX
    }

    /// Records handed out (or waiting) and not yet durable.
    pub(crate) fn pending_records(&self) -> usize {
        usize::try_from(self.last.0 - self.durable.0).unwrap_or(usize::MAX)
    }

    /// Queues a command behind every record queued so far. Dropped when the queue is full
    /// (it is derived again at the next re-send).
    pub(crate) fn send(&mut self, transmit: Transmit) {
        if self.transmit.len() < TRANSMIT_PENDING_MAX {
            self.transmit.push_back((self.last, transmit));
        }
    }

    /// Queues a registration answer behind every record queued so far. Bounded by the
    /// number of queues: a newer answer for the same queue replaces an older one.
    pub(crate) fn assign(&mut self, assignment: ShardAssignment) {
        self.assignments
            .retain(|(_, a)| a.queue != assignment.queue);
        self.assignments.push_back((self.last, assignment));
    }

    pub(crate) fn poll_assignment(&mut self) -> Option<ShardAssignment> {
        match self.assignments.front() {
            Some((after, _)) if *after <= self.durable => {
                self.assignments.pop_front().map(|(_, a)| a)
            }
            _ => None,
        }
    }

    pub(crate) fn poll_journal(&mut self) -> Option<(JournalToken, MoveRecord)> {
        self.journal.pop_front()
    }

    pub(crate) fn journaled(&mut self, token: JournalToken) {
        self.durable = self.durable.max(token.min(self.last));
    }

    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        match self.transmit.front() {
            Some((after, _)) if *after <= self.durable => self.transmit.pop_front().map(|(_, t)| t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use shardsched_wire::msg::MoveId;
    use shardsched_wire::msg::coord_shard::{Acquire, Request};

    use super::*;

    fn command() -> Transmit {
        Transmit {
            queue: "b".into(),
            request: Request::Acquire(Acquire {
                move_id: MoveId(1),
                nodes: Vec::new(),
                flags: Default::default(),
            }),
        }
    }

    fn record() -> MoveRecord {
        MoveRecord::Acquired {
            move_id: MoveId(1),
            nodes: Vec::new(),
        }
    }

    #[test]
    fn a_command_waits_for_every_record_queued_before_it() {
        let mut out = Outbox::default();
        out.send(command()); // nothing to wait for
        assert!(out.poll_transmit().is_some());
        let first = out.record(record());
        let second = out.record(record());
        out.send(command());
        assert_eq!(out.poll_journal().map(|(t, _)| t), Some(first));
        out.journaled(first);
        assert!(
            out.poll_transmit().is_none(),
            "second record not durable yet"
        );
        out.journaled(second);
        assert!(out.poll_transmit().is_some());
        assert_eq!(out.pending_records(), 0);
    }

    #[test]
    fn a_token_never_handed_out_does_not_release_later_commands() {
        let mut out = Outbox::default();
        out.journaled(JournalToken(5));
        out.record(record());
        out.send(command());
        assert!(out.poll_transmit().is_none());
    }
}
