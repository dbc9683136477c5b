//! Status reports as changes: the node rows a shard's last acknowledged report carried, so
//! that the next one sends only the rows that differ (wire `ShardStatus.nodes_complete`,
//! `.nodes_gone`). A shard of 8,192 nodes where one node moved sends one row, and the
//! coordinator's single task reads one, instead of 8,192 every report.
//!
//! The core makes every report whole ([`ShardCore::status`](crate::ShardCore::status));
//! the task that sends them on one connection keeps a [`SentRows`] and turns each into
//! the change since the last one the coordinator acknowledged. Reports on a connection go
//! one at a time (each waits for its `Ack`), so the coordinator applies each to the one
//! before. A report that got no `Ack` may or may not have been applied: the next is whole;
//! and should the unanswered one arrive after it, its lower number (`ShardStatus.seq`, set
//! by the same task) has the coordinator drop it.

use shardsched_wire::msg::NodeStatus;
use shardsched_wire::msg::shard_coord::ShardStatus;

/// The node rows of the last report acknowledged on one connection, sorted by node name;
/// none before the first (or after a report that may not have arrived).
#[derive(Debug, Default)]
pub struct SentRows {
    acknowledged: Option<Vec<NodeStatus>>,
}

/// The rows of a report being sent (every row, sorted by name), kept until it is
/// acknowledged.
#[derive(Debug)]
pub struct PendingRows(Vec<NodeStatus>);

/// What a report says of its nodes (wire `ShardStatus.nodes`, `.nodes_complete`,
/// `.nodes_gone`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RowsChange {
    /// Every row when `complete`, else the rows that differ from the last acknowledged.
    pub nodes: Vec<NodeStatus>,
    /// Whether `nodes` is every row.
    pub complete: bool,
    /// The names the last acknowledged report had and this one has not.
    pub gone: Vec<String>,
}

impl SentRows {
    /// Turns `report` (whole, as the core makes it) into the change since the last
    /// acknowledged report ([`SentRows::change`]). Returns its rows, for
    /// [`SentRows::acknowledged`] once the coordinator has it.
    pub fn reduce(&self, report: &mut ShardStatus) -> PendingRows {
        let (change, rows) = self.change(std::mem::take(&mut report.nodes));
        report.nodes = change.nodes;
        report.nodes_complete = change.complete;
        report.nodes_gone = change.gone;
        rows
    }

    /// The change from the last acknowledged rows to `rows` (every row, whole when none is
    /// acknowledged), and `rows` sorted by name. One pass over both sorted lists: only
    /// changed rows are copied.
    pub fn change(&self, mut rows: Vec<NodeStatus>) -> (RowsChange, PendingRows) {
        rows.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let Some(before) = &self.acknowledged else {
            let change = RowsChange {
                nodes: rows.clone(),
                complete: true,
                gone: Vec::new(),
            };
            return (change, PendingRows(rows));
        };
        let mut change = RowsChange::default();
        let (mut old, mut new) = (before.iter().peekable(), rows.iter().peekable());
        loop {
            match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some(o), Some(n)) if o.name == n.name => {
                    if o != n {
                        change.nodes.push((*n).clone());
                    }
                    old.next();
                    new.next();
                }
                (Some(o), Some(n)) if o.name > n.name => {
                    change.nodes.push((*n).clone());
                    new.next();
                }
                (Some(o), _) => {
                    change.gone.push(o.name.clone());
                    old.next();
                }
                (None, Some(n)) => {
                    change.nodes.push((*n).clone());
                    new.next();
                }
            }
        }
        (change, PendingRows(rows))
    }

    /// The report whose rows these are was acknowledged: the next is a change to it.
    pub fn acknowledged(&mut self, rows: PendingRows) {
        self.acknowledged = Some(rows.0);
    }

    /// A report may not have arrived: the next is whole.
    pub fn forget(&mut self) {
        self.acknowledged = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use shardsched_wire::msg::{Generation, NodeState};

    use super::*;

    fn rows(rows: &[(&str, NodeState)]) -> Vec<NodeStatus> {
        rows.iter()
            .map(|(name, state)| NodeStatus {
                name: (*name).to_owned(),
                queue: Some("batch".to_owned()),
                state: *state,
                generation: Generation(1),
                jobs_running: 0,
                reason: None,
                usage: Default::default(),
            })
            .collect()
    }

    fn names(change: &RowsChange) -> Vec<&str> {
        change.nodes.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn reports_after_an_acknowledged_one_carry_only_what_changed() {
        let mut sent = SentRows::default();
        let (first, kept) = sent.change(rows(&[("n2", NodeState::Up), ("n1", NodeState::Up)]));
        assert!(first.complete);
        assert_eq!(names(&first), ["n1", "n2"]);
        sent.acknowledged(kept);

        // n2 went down, n1 left, n3 is arriving.
        let now = [("n2", NodeState::Down), ("n3", NodeState::Incoming)];
        let (second, kept) = sent.change(rows(&now));
        assert!(!second.complete);
        assert_eq!(names(&second), ["n2", "n3"]);
        assert_eq!(second.nodes[0].state, NodeState::Down);
        assert_eq!(second.gone, ["n1"]);
        sent.acknowledged(kept);

        // Nothing changed: no row at all.
        let (third, _) = sent.change(rows(&now));
        assert_eq!(third, RowsChange::default());

        // That one got no answer: the next is whole again.
        sent.forget();
        let (fourth, _) = sent.change(rows(&now));
        assert!(fourth.complete);
        assert_eq!(names(&fourth), ["n2", "n3"]);
    }

    #[test]
    fn an_unacknowledged_change_is_sent_again_against_the_last_acknowledged_report() {
        let mut sent = SentRows::default();
        let (_, kept) = sent.change(rows(&[("n1", NodeState::Up)]));
        sent.acknowledged(kept);
        // A change is made but not acknowledged (its rows are dropped unused)...
        let (lost, _) = sent.change(rows(&[("n1", NodeState::Drained)]));
        assert_eq!(names(&lost), ["n1"]);
        // ...so the next report still differs from what the coordinator has.
        let (next, _) = sent.change(rows(&[("n1", NodeState::Drained)]));
        assert_eq!(names(&next), ["n1"]);
    }

    proptest::proptest! {
        /// Applying each change to the rows before it, as the coordinator does, gives the
        /// whole report's rows, whatever came, went or changed.
        #[test]
        fn each_change_applied_to_the_last_rows_gives_the_whole_report(
            reports in proptest::collection::vec(
                proptest::collection::btree_map(0u8..24, 0u8..3, 0..16), 1..6)
        ) {
            let states = [NodeState::Up, NodeState::Down, NodeState::Drained];
            let mut sent = SentRows::default();
            let mut seen: BTreeMap<String, NodeStatus> = BTreeMap::new();
            for report in reports {
                let named: Vec<(String, NodeState)> = report
                    .iter()
                    .map(|(n, s)| (format!("n{n}"), states[usize::from(*s)]))
                    .collect();
                let whole = rows(&named.iter().map(|(n, s)| (n.as_str(), *s)).collect::<Vec<_>>());
                let (change, kept) = sent.change(whole.clone());
                if change.complete {
                    seen.clear();
                }
                for gone in &change.gone {
                    seen.remove(gone);
                }
                for row in change.nodes {
                    seen.insert(row.name.clone(), row);
                }
                let mut expected = whole;
                expected.sort_by(|a, b| a.name.cmp(&b.name));
                proptest::prop_assert_eq!(seen.values().cloned().collect::<Vec<_>>(), expected);
                sent.acknowledged(kept);
            }
        }
    }
}
