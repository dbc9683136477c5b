//! Queue and match policies, as a queue's configuration names them: typed on the wire, so
//! a shard never meets a policy name it must reject at run time.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Queue policies (docs/ARCHITECTURE.md, "Queues").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuePolicy {
    /// First come, first served: a blocked job stops the cycle.
    Fcfs,
    /// EASY backfill: one reservation.
    Easy,
    /// `reservation_depth` reservations.
    Hybrid,
    /// A reservation for every considered job.
    Conservative,
}

/// Match policies, as Fluxion names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchPolicy {
    /// Fluxion's `first`.
    First,
    /// `firstnodex`.
    FirstNodeX,
    /// `high`.
    High,
    /// `low`.
    Low,
    /// `hinode`.
    HiNode,
    /// `lonode`.
    LoNode,
    /// `hinodex`.
    HiNodeX,
    /// `lonodex`.
    LoNodeX,
}

impl QueuePolicy {
    /// Every policy.
    pub const ALL: [QueuePolicy; 4] = [
        QueuePolicy::Fcfs,
        QueuePolicy::Easy,
        QueuePolicy::Hybrid,
        QueuePolicy::Conservative,
    ];

    /// Its name in configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            QueuePolicy::Fcfs => "fcfs",
            QueuePolicy::Easy => "easy",
            QueuePolicy::Hybrid => "hybrid",
            QueuePolicy::Conservative => "conservative",
        }
    }

    /// The policy named `name`, or an error naming every policy.
    pub fn parse(name: &str) -> Result<QueuePolicy, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                format!(
                    "unknown queue policy {name:?} (expected fcfs, easy, hybrid or conservative)"
                )
            })
    }
}

impl MatchPolicy {
    /// Every policy.
    pub const ALL: [MatchPolicy; 8] = [
        MatchPolicy::First,
        MatchPolicy::FirstNodeX,
        MatchPolicy::High,
        MatchPolicy::Low,
        MatchPolicy::HiNode,
        MatchPolicy::LoNode,
        MatchPolicy::HiNodeX,
        MatchPolicy::LoNodeX,
    ];

    /// Its name in configuration and on the command line (Fluxion's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            MatchPolicy::First => "first",
            MatchPolicy::FirstNodeX => "firstnodex",
            MatchPolicy::High => "high",
            MatchPolicy::Low => "low",
            MatchPolicy::HiNode => "hinode",
            MatchPolicy::LoNode => "lonode",
            MatchPolicy::HiNodeX => "hinodex",
            MatchPolicy::LoNodeX => "lonodex",
        }
    }

    /// The policy named `name`, or an error naming every policy.
    pub fn parse(name: &str) -> Result<MatchPolicy, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                format!(
                    "unknown match policy {name:?} (expected first, firstnodex, high, low, hinode, \
                 lonode, hinodex or lonodex)"
                )
            })
    }
}

impl fmt::Display for QueuePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for MatchPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_ones_are_refused_naming_the_known() {
        for p in QueuePolicy::ALL {
            assert_eq!(QueuePolicy::parse(p.as_str()), Ok(p));
        }
        for p in MatchPolicy::ALL {
            assert_eq!(MatchPolicy::parse(p.as_str()), Ok(p));
        }
        let err = QueuePolicy::parse("sjf").expect_err("unknown");
        assert!(err.contains("fcfs, easy, hybrid or conservative"), "{err}");
        let err = MatchPolicy::parse("best").expect_err("unknown");
        assert!(err.contains("first, firstnodex, high"), "{err}");
    }
}
