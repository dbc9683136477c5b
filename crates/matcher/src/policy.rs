//! Match policies: Fluxion's named policies as compositions of four knobs.
//!
//! | policy | preference | node-centric | node-exclusive | stop at first |
//! |---|---|---|---|---|
//! | high / low | high / low | | | |
//! | hinode / lonode | high / low | ✓ | | |
//! | hinodex / lonodex | high / low | ✓ | ✓ | |
//! | first | high | ✓ | | ✓ |
//! | firstnodex | high | ✓ | ✓ | ✓ |
//!
//! Two more stand apart: `variation` (scores by `perf_class`) and `locality` (`high`, but
//! the top-level choice by runs of contiguous ids).
//!
//! Preference decides whether higher or lower ids win among candidates of one type.
//! Node-centric scoring adds a large per-node term to every vertex below a node, so that the
//! choice between nodes dominates the choice between their children (Fluxion's multilevel
//! score factor `node, add 1, multiply 10000`). Node-exclusive allocation takes every node the
//! match passes through whole.

use std::fmt;

/// The four knobs of a match policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchPolicy {
    /// Higher ids first (`true`) or lower ids first (`false`).
    pub prefer_high: bool,
    /// Score vertices by their node first.
    pub node_centric: bool,
    /// Every node on a match's path is allocated whole and exclusively.
    pub node_exclusive: bool,
    /// Stop-on-1 (Fluxion's `first`): children are visited in a learned order and the
    /// visit of a vertex's children stops as soon as its requests are met.
    pub stop_at_first: bool,
    /// Fluxion's variation-aware policy: vertices scored by their `perf_class` property,
    /// lowest class first; the four knobs above are off.
    pub variation: bool,
    /// Fluxion's `locality` (greater-interval-first, `policies/dfu_match_locality.cpp`):
    /// `high`, but the top-level choice ranks each candidate by the run of contiguous
    /// scores (ids) it belongs to among its type's candidates, the run starting highest
    /// first; candidates of one run are alike to its sort.
    pub locality: bool,
}

/// Weight of a node's id in node-centric scores (Fluxion: multiply by 10000).
pub const NODE_SCORE_FACTOR: i64 = 10_000;

/// Why a policy string was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "unknown match policy {0:?}; expected one of first, firstnodex, high, low, hinode, lonode, hinodex, lonodex, variation, locality, or knobs like `policy=high node_centric=true node_exclusive=false stop_on_k_matches=1`"
)]
pub struct PolicyError(pub String);

impl MatchPolicy {
    /// Whether a walk may stop early by the id scores' order in the graph
    /// ([`crate::dfu::ScoreOrder`]): not under `first`, which stops at its own first
    /// match, nor under the variation policy, whose scores are not ids.
    pub fn stops_by_score_order(&self) -> bool {
        !self.stop_at_first && !self.variation && !self.locality
    }

    /// Parses a policy name, or Fluxion's spelled-out knobs
    /// (`policy=low node_centric=true node_exclusive=true stop_on_k_matches=0`).
    pub fn parse(s: &str) -> Result<MatchPolicy, PolicyError> {
        let named = |prefer_high, node_centric, node_exclusive, stop_at_first| MatchPolicy {
            prefer_high,
            node_centric,
            node_exclusive,
            stop_at_first,
            variation: false,
            locality: false,
        };
        let p = match s.trim() {
            "high" => named(true, false, false, false),
            "low" => named(false, false, false, false),
            "hinode" => named(true, true, false, false),
            "lonode" => named(false, true, false, false),
            "hinodex" => named(true, true, true, false),
            "lonodex" => named(false, true, true, false),
            "first" => named(true, true, false, true),
            "firstnodex" => named(true, true, true, true),
            "variation" => MatchPolicy {
                variation: true,
                ..named(false, false, false, false)
            },
            "locality" => MatchPolicy {
                locality: true,
                ..named(true, false, false, false)
            },
            other if other.contains('=') => return Self::parse_knobs(other),
            other => return Err(PolicyError(other.to_string())),
        };
        Ok(p)
    }

    /// Fluxion's spelled-out knobs: `policy=high|low` (required), `node_centric=`,
    /// `node_exclusive=`, `stop_on_1_matches=` (`true|false`); our own
    /// `stop_on_k_matches=0|1` is accepted too.
    fn parse_knobs(s: &str) -> Result<MatchPolicy, PolicyError> {
        let bad = || PolicyError(s.to_string());
        let mut p = MatchPolicy::parse("high")?;
        let mut has_policy = false;
        for kv in s.split(' ').filter(|w| !w.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            let flag = || match v {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad()),
            };
            match k {
                "policy" => {
                    has_policy = true;
                    match v {
                        "high" => p.prefer_high = true,
                        "low" => p.prefer_high = false,
                        _ => return Err(bad()),
                    }
                }
                "node_centric" => p.node_centric = flag()?,
                "node_exclusive" => p.node_exclusive = flag()?,
                "stop_on_1_matches" => p.stop_at_first = flag()?,
                "stop_on_k_matches" => p.stop_at_first = v.parse::<u32>().map_err(|_| bad())? > 0,
                _ => return Err(bad()),
            }
        }
        if !has_policy {
            return Err(bad());
        }
        Ok(p)
    }

    /// Orders two candidate scores: `Less` means `a` is preferred.
    #[inline]
    pub fn better(&self, a: i64, b: i64) -> std::cmp::Ordering {
        if self.prefer_high {
            b.cmp(&a)
        } else {
            a.cmp(&b)
        }
    }
}

impl Default for MatchPolicy {
    fn default() -> Self {
        MatchPolicy {
            prefer_high: true,
            node_centric: true,
            node_exclusive: false,
            stop_at_first: true,
            variation: false,
            locality: false,
        }
    }
}

impl fmt::Display for MatchPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.variation {
            return f.write_str("variation");
        }
        if self.locality {
            return f.write_str("locality");
        }
        write!(
            f,
            "policy={} node_centric={} node_exclusive={} stop_on_1_matches={}",
            if self.prefer_high { "high" } else { "low" },
            self.node_centric,
            self.node_exclusive,
            self.stop_at_first
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_policies_and_knobs_agree() {
        assert_eq!(
            MatchPolicy::parse("hinodex"),
            MatchPolicy::parse(
                "policy=high node_centric=true node_exclusive=true stop_on_1_matches=false"
            )
        );
        assert_eq!(MatchPolicy::parse("first"), Ok(MatchPolicy::default()));
        assert!(
            !MatchPolicy::parse("lonode")
                .map(|p| p.prefer_high)
                .unwrap_or(true)
        );
        assert!(MatchPolicy::parse("bogus").is_err());
        assert!(MatchPolicy::parse("policy=sideways").is_err());
        let p = MatchPolicy::parse("low").unwrap_or_default();
        assert_eq!(MatchPolicy::parse(&p.to_string()), Ok(p));
        let locality = MatchPolicy::parse("locality").unwrap_or_default();
        assert!(locality.locality && locality.prefer_high && !locality.node_centric);
        assert!(!locality.stops_by_score_order());
        assert_eq!(locality.to_string(), "locality");
    }
}
