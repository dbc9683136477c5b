//! Status reports as changes: the node rows a shard's last acknowledged report carried, so
//! that the next one sends only the rows that differ (wire `ShardStatus.nodes_complete`,
//! `.nodes_gone`). A shard of 8,192 nodes where one node moved sends one row, and the
//! coordinator's single task reads one, instead of 8,192 every report.
//!
//! The core makes every report whole ([`ShardCore::status`](crate::ShardCore::status));
//! the task that sends them on one connection keeps a [`SentRows`] and turns each into
//! the change since the last one the coordinator acknowledged. Reports on a connection go
//! one at a time (each waits for its `Ack`), so the coordinator applies each to the one
//! before. A report that got no `Ack` may or may not have been applied: the next is whole.

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

impl SentRows {
    /// Turns `report` (whole, as the core makes it) into the change since the last
    /// acknowledged report, or leaves it whole when there is none. Returns its rows, for
    /// [`SentRows::acknowledged`] once the coordinator has it. One pass over both sorted
    /// lists: only changed rows are copied.
    pub fn reduce(&self, report: &mut ShardStatus) -> PendingRows {
        let mut rows = std::mem::take(&mut report.nodes);
        rows.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        report.nodes_gone = Vec::new();
        let Some(before) = &self.acknowledged else {
            report.nodes = rows.clone();
            report.nodes_complete = true;
            return PendingRows(rows);
        };
        report.nodes_complete = false;
        let (mut old, mut new) = (before.iter().peekable(), rows.iter().peekable());
        loop {
            match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some(o), Some(n)) if o.name == n.name => {
                    if o != n {
                        report.nodes.push((*n).clone());
                    }
                    old.next();
                    new.next();
                }
                (Some(o), Some(n)) if o.name > n.name => {
                    report.nodes.push((*n).clone());
                    new.next();
                }
                (Some(o), _) => {
                    report.nodes_gone.push(o.name.clone());
                    old.next();
                }
                (None, Some(n)) => {
                    report.nodes.push((*n).clone());
                    new.next();
                }
            }
        }
        PendingRows(rows)
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
    use shardsched_wire::msg::{Generation, MatchPolicy, NodeState, QueuePolicy, QueueStatus};

    use super::*;

    fn row(name: &str, state: NodeState) -> NodeStatus {
        NodeStatus {
            name: name.to_owned(),
            queue: Some("batch".to_owned()),
            state,
            generation: Generation(1),
            jobs_running: 0,
            reason: None,
            usage: Default::default(),
        }
    }

    fn report(rows: &[(&str, NodeState)]) -> ShardStatus {
        ShardStatus {
            time_ms: 0,
            queue: QueueStatus {
                name: "batch".into(),
                enabled: true,
                started: true,
                queue_policy: QueuePolicy::Easy,
                match_policy: MatchPolicy::First,
                nodes_defined: 0,
                nodes_owned: 0,
                nodes_up: 0,
                jobs_pending: 0,
                jobs_running: 0,
                online: true,
                definition: String::new(),
                owned: String::new(),
                reason: String::new(),
                pending_reasons: Default::default(),
            },
            nodes: rows.iter().map(|(n, s)| row(n, *s)).collect(),
            nodes_complete: true,
            nodes_gone: Vec::new(),
            waiting_on: Vec::new(),
            allowances: Vec::new(),
            usage: None,
            factors_version: 0,
        }
    }

    fn names(report: &ShardStatus) -> Vec<&str> {
        report.nodes.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn reports_after_an_acknowledged_one_carry_only_what_changed() {
        let mut sent = SentRows::default();
        let mut first = report(&[("n1", NodeState::Up), ("n2", NodeState::Up)]);
        let rows = sent.reduce(&mut first);
        assert!(first.nodes_complete);
        assert_eq!(names(&first), ["n1", "n2"]);
        sent.acknowledged(rows);

        // n2 went down, n1 left, n3 is arriving.
        let mut second = report(&[("n2", NodeState::Down), ("n3", NodeState::Incoming)]);
        let rows = sent.reduce(&mut second);
        assert!(!second.nodes_complete);
        assert_eq!(names(&second), ["n2", "n3"]);
        assert_eq!(second.nodes[0].state, NodeState::Down);
        assert_eq!(second.nodes_gone, ["n1"]);
        sent.acknowledged(rows);

        // Nothing changed: no row at all.
        let mut third = report(&[("n2", NodeState::Down), ("n3", NodeState::Incoming)]);
        let rows = sent.reduce(&mut third);
        assert!(!third.nodes_complete && third.nodes.is_empty() && third.nodes_gone.is_empty());

        // That one got no answer: the next is whole again.
        drop(rows);
        sent.forget();
        let mut fourth = report(&[("n2", NodeState::Down), ("n3", NodeState::Incoming)]);
        sent.reduce(&mut fourth);
        assert!(fourth.nodes_complete);
        assert_eq!(names(&fourth), ["n2", "n3"]);
    }

    #[test]
    fn an_unacknowledged_change_is_sent_again_against_the_last_acknowledged_report() {
        let mut sent = SentRows::default();
        let rows = sent.reduce(&mut report(&[("n1", NodeState::Up)]));
        sent.acknowledged(rows);
        // A change is reduced but not acknowledged (its rows are dropped unused)...
        let mut lost = report(&[("n1", NodeState::Drained)]);
        let _ = sent.reduce(&mut lost);
        assert_eq!(names(&lost), ["n1"]);
        // ...so the next report still differs from what the coordinator has.
        let mut next = report(&[("n1", NodeState::Drained)]);
        sent.reduce(&mut next);
        assert_eq!(names(&next), ["n1"]);
    }

    proptest::proptest! {
        /// Applying each change to the rows before it, as the coordinator does, gives the
        /// rows of the whole report, whatever came, went or changed.
        #[test]
        fn each_change_applied_to_the_last_rows_gives_the_whole_report(
            reports in proptest::collection::vec(
                proptest::collection::btree_map(0u8..24, 0u8..3, 0..16), 1..6)
        ) {
            let state = |s: u8| [NodeState::Up, NodeState::Down, NodeState::Drained][usize::from(s)];
            let mut sent = SentRows::default();
            let mut seen: std::collections::BTreeMap<String, NodeStatus> = Default::default();
            for rows in reports {
                let whole: Vec<(String, NodeState)> =
                    rows.iter().map(|(n, s)| (format!("n{n}"), state(*s))).collect();
                let borrowed: Vec<(&str, NodeState)> =
                    whole.iter().map(|(n, s)| (n.as_str(), *s)).collect();
                let mut change = report(&borrowed);
                let kept = sent.reduce(&mut change);
                if change.nodes_complete {
                    seen.clear();
                }
                for gone in &change.nodes_gone {
                    seen.remove(gone);
                }
                for row in change.nodes {
                    seen.insert(row.name.clone(), row);
                }
                let expected: Vec<NodeStatus> = report(&borrowed).nodes;
                let mut expected = expected;
                expected.sort_by(|a, b| a.name.cmp(&b.name));
                proptest::prop_assert_eq!(seen.values().cloned().collect::<Vec<_>>(), expected);
                sent.acknowledged(kept);
            }
        }
    }
}
