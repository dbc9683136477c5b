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

/// Match policies: every one `shardsched query -P` takes, by Fluxion's name, or by its
/// spelled-out knobs when no name has them.
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
    /// `variation`: lowest `perf_class` first.
    Variation,
    /// Knobs no name stands for (`policy=low stop_on_1_matches=true`): bit 0 high ids
    /// first, bit 1 node-centric, bit 2 node-exclusive, bit 3 stop at the first match
    /// (other bits are ignored).
    Knobs(u8),
}

/// The knob names of [`MatchPolicy::Knobs`], by bit (after `policy=high|low`, bit 0).
const KNOB_NAMES: [&str; 3] = ["node_centric", "node_exclusive", "stop_on_1_matches"];

/// [`MatchPolicy::Knobs`] spelled out, by its bits.
const KNOBS: [&str; 16] = [
    "policy=low node_centric=false node_exclusive=false stop_on_1_matches=false",
    "policy=high node_centric=false node_exclusive=false stop_on_1_matches=false",
    "policy=low node_centric=true node_exclusive=false stop_on_1_matches=false",
    "policy=high node_centric=true node_exclusive=false stop_on_1_matches=false",
    "policy=low node_centric=false node_exclusive=true stop_on_1_matches=false",
    "policy=high node_centric=false node_exclusive=true stop_on_1_matches=false",
    "policy=low node_centric=true node_exclusive=true stop_on_1_matches=false",
    "policy=high node_centric=true node_exclusive=true stop_on_1_matches=false",
    "policy=low node_centric=false node_exclusive=false stop_on_1_matches=true",
    "policy=high node_centric=false node_exclusive=false stop_on_1_matches=true",
    "policy=low node_centric=true node_exclusive=false stop_on_1_matches=true",
    "policy=high node_centric=true node_exclusive=false stop_on_1_matches=true",
    "policy=low node_centric=false node_exclusive=true stop_on_1_matches=true",
    "policy=high node_centric=false node_exclusive=true stop_on_1_matches=true",
    "policy=low node_centric=true node_exclusive=true stop_on_1_matches=true",
    "policy=high node_centric=true node_exclusive=true stop_on_1_matches=true",
];

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
    /// Every named policy.
    pub const ALL: [MatchPolicy; 9] = [
        MatchPolicy::First,
        MatchPolicy::FirstNodeX,
        MatchPolicy::High,
        MatchPolicy::Low,
        MatchPolicy::HiNode,
        MatchPolicy::LoNode,
        MatchPolicy::HiNodeX,
        MatchPolicy::LoNodeX,
        MatchPolicy::Variation,
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
            MatchPolicy::Variation => "variation",
            MatchPolicy::Knobs(bits) => KNOBS[usize::from(bits & 15)],
        }
    }

    /// The policy `name` stands for, or an error naming every policy: a name, or knobs as
    /// resource-query's `-P` takes them (`policy=high|low` required, then `node_centric=`,
    /// `node_exclusive=`, `stop_on_1_matches=` as `true|false`; the matcher reads the same
    /// text), kept by name when a name has the same knobs.
    pub fn parse(name: &str) -> Result<MatchPolicy, String> {
        let unknown = || {
            format!(
                "unknown match policy {name:?} (expected first, firstnodex, high, low, hinode, \
                 lonode, hinodex, lonodex, variation, or knobs such as `policy=low \
                 node_centric=true stop_on_1_matches=true`)"
            )
        };
        if let Some(p) = Self::ALL.into_iter().find(|p| p.as_str() == name) {
            return Ok(p);
        }
        let bits = knob_bits(name).ok_or_else(unknown)?;
        // A name with the same knobs (variation has none).
        Ok(Self::ALL
            .into_iter()
            .find(|p| p.knob_bits() == Some(bits))
            .unwrap_or(MatchPolicy::Knobs(bits)))
    }

    /// The knobs of a policy (none for variation).
    fn knob_bits(self) -> Option<u8> {
        Some(match self {
            MatchPolicy::High => 1,
            MatchPolicy::Low => 0,
            MatchPolicy::HiNode => 3,
            MatchPolicy::LoNode => 2,
            MatchPolicy::HiNodeX => 7,
            MatchPolicy::LoNodeX => 6,
            MatchPolicy::First => 11,
            MatchPolicy::FirstNodeX => 15,
            MatchPolicy::Knobs(bits) => bits & 15,
            MatchPolicy::Variation => return None,
        })
    }
}

/// The bits of knobs spelled out (see [`MatchPolicy::Knobs`]); `None` unless `policy=` is
/// there and every other word is a known knob with `true` or `false`.
fn knob_bits(text: &str) -> Option<u8> {
    let mut bits = 0u8;
    let mut has_policy = false;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let (k, v) = word.split_once('=')?;
        if k == "policy" {
            has_policy = true;
            match v {
                "high" => bits |= 1,
                "low" => bits &= !1,
                _ => return None,
            }
            continue;
        }
        let bit = 2u8 << KNOB_NAMES.iter().position(|&n| n == k)?;
        match v {
            "true" => bits |= bit,
            "false" => bits &= !bit,
            _ => return None,
        }
    }
    has_policy.then_some(bits)
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

    #[test]
    fn knobs_are_kept_by_name_when_a_name_has_them() {
        assert_eq!(
            MatchPolicy::parse("policy=high node_centric=true stop_on_1_matches=true"),
            Ok(MatchPolicy::First)
        );
        assert_eq!(MatchPolicy::parse("policy=low"), Ok(MatchPolicy::Low));
        let knobs = MatchPolicy::parse("policy=low stop_on_1_matches=true").expect("knobs");
        assert_eq!(knobs, MatchPolicy::Knobs(8));
        assert_eq!(
            knobs.as_str(),
            "policy=low node_centric=false node_exclusive=false stop_on_1_matches=true"
        );
        for (bits, text) in (0u8..).zip(KNOBS) {
            let p = MatchPolicy::parse(text).expect("spelled out");
            assert_eq!(p.knob_bits(), Some(bits));
            assert_eq!(MatchPolicy::parse(p.as_str()), Ok(p));
        }
        for bad in [
            "node_centric=true",
            "policy=mid",
            "policy=low x=true",
            "policy",
            "",
        ] {
            assert!(MatchPolicy::parse(bad).is_err(), "{bad:?}");
        }
    }
}
