//! Queue parameters: the queue policy and the knobs that bound a scheduling cycle.
//!
//! The four policies are one algorithm with one knob, as in Fluxion's qmanager: walk the
//! pending jobs in order and give the first *reservation depth* jobs that cannot start now a
//! reservation (allocate-or-else-reserve); later jobs may only start now (plain allocate),
//! which the reservations in the calendars make safe: they can never delay a reserved job.
//!
//! | policy | jobs that get a reservation | a blocked job … |
//! |---|---|---|
//! | fcfs | none | … stops the cycle |
//! | easy | the first blocked job | … is passed by later jobs that fit around the reservation |
//! | hybrid | the first `reservation_depth` blocked jobs | … likewise |
//! | conservative | every considered blocked job | … likewise |

use std::fmt;
use std::str::FromStr;

use shardsched_matcher::MatchPolicy;

use crate::error::QueueError;

/// Fluxion's default queue depth: jobs considered per cycle.
pub const QUEUE_DEPTH_DEFAULT: usize = 32;
/// Fluxion's default reservation depth for the hybrid policy.
pub const RESERVATION_DEPTH_DEFAULT: usize = 64;
/// The largest queue or reservation depth accepted (Fluxion's `MAX_QUEUE_DEPTH`); 0 means
/// unlimited.
pub const DEPTH_MAX: usize = 1_000_000;

/// How a queue orders its work: see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueuePolicy {
    Fcfs,
    Easy,
    Hybrid,
    Conservative,
}

impl QueuePolicy {
    /// Every policy, in the order the docs list them.
    pub const ALL: [QueuePolicy; 4] = [
        QueuePolicy::Fcfs,
        QueuePolicy::Easy,
        QueuePolicy::Hybrid,
        QueuePolicy::Conservative,
    ];

    /// The policy's name as flux-sched spells it.
    pub fn name(self) -> &'static str {
        match self {
            QueuePolicy::Fcfs => "fcfs",
            QueuePolicy::Easy => "easy",
            QueuePolicy::Hybrid => "hybrid",
            QueuePolicy::Conservative => "conservative",
        }
    }
}

impl fmt::Display for QueuePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QueuePolicy {
    type Err = QueueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        QueuePolicy::ALL
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| {
                QueueError::BadParams(format!(
                    "unknown queue policy {s:?}; expected fcfs, easy, hybrid or conservative"
                ))
            })
    }
}

/// Everything that configures one queue manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub policy: QueuePolicy,
    /// Pending jobs considered per cycle, in order; 0 = all of them. Jobs waiting for
    /// resources that are down do not count.
    pub queue_depth: usize,
    /// Blocked jobs that get a reservation under `hybrid`; 0 = all considered. Ignored by the
    /// other policies (fcfs 0, easy 1, conservative all).
    pub reservation_depth: usize,
    /// The match policy of the queue's matcher.
    pub match_policy: MatchPolicy,
    /// Duration in seconds given to a job that asks for none; 0 = unlimited (then
    /// `max_duration` when that is set).
    pub default_duration: u64,
    /// Jobs asking for longer are denied; 0 = no maximum.
    pub max_duration: u64,
    /// Run every cycle exactly as defined, with none of the shortcuts of [`crate::cycle`]:
    /// cancel and re-plan every reservation and retry every considered job on every cycle,
    /// search reservations from `now`, and ask the matcher about every job. Much slower;
    /// exists to verify that the shortcuts change no decision.
    pub exhaustive: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            policy: QueuePolicy::Fcfs,
            queue_depth: QUEUE_DEPTH_DEFAULT,
            reservation_depth: RESERVATION_DEPTH_DEFAULT,
            match_policy: MatchPolicy::default(),
            default_duration: 0,
            max_duration: 0,
            exhaustive: false,
        }
    }
}

impl Params {
    /// Default parameters with `policy`.
    pub fn with_policy(policy: QueuePolicy) -> Params {
        Params {
            policy,
            ..Params::default()
        }
    }

    /// Refuses depths beyond [`DEPTH_MAX`] and a default duration above the maximum.
    pub fn validate(&self) -> Result<(), QueueError> {
        if self.queue_depth > DEPTH_MAX {
            return Err(QueueError::BadParams(format!(
                "queue-depth {} is above the maximum {DEPTH_MAX}",
                self.queue_depth
            )));
        }
        if self.reservation_depth > DEPTH_MAX {
            return Err(QueueError::BadParams(format!(
                "reservation-depth {} is above the maximum {DEPTH_MAX}",
                self.reservation_depth
            )));
        }
        if self.max_duration > 0 && self.default_duration > self.max_duration {
            return Err(QueueError::BadParams(format!(
                "default duration {} s is above the maximum duration {} s",
                self.default_duration, self.max_duration
            )));
        }
        Ok(())
    }

    /// How many blocked jobs get a reservation per cycle (`usize::MAX` = all).
    pub fn reservations_max(&self) -> usize {
        match self.policy {
            QueuePolicy::Fcfs => 0,
            QueuePolicy::Easy => 1,
            QueuePolicy::Hybrid if self.reservation_depth > 0 => self.reservation_depth,
            QueuePolicy::Hybrid | QueuePolicy::Conservative => usize::MAX,
        }
    }

    /// The duration a job asking for `asked` seconds (0 = nothing asked) runs under, or
    /// `None` when it is above the maximum.
    pub fn effective_duration(&self, asked: u64) -> Option<u64> {
        let d = if asked > 0 {
            asked
        } else if self.default_duration > 0 {
            self.default_duration
        } else {
            self.max_duration
        };
        (self.max_duration == 0 || d <= self.max_duration).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip() {
        for p in QueuePolicy::ALL {
            assert_eq!(p.name().parse::<QueuePolicy>().ok(), Some(p));
        }
        assert!("sjf".parse::<QueuePolicy>().is_err());
    }

    #[test]
    fn reservation_depth_per_policy() {
        let p = |policy, reservation_depth| Params {
            policy,
            reservation_depth,
            ..Params::default()
        };
        assert_eq!(p(QueuePolicy::Fcfs, 5).reservations_max(), 0);
        assert_eq!(p(QueuePolicy::Easy, 5).reservations_max(), 1);
        assert_eq!(p(QueuePolicy::Hybrid, 5).reservations_max(), 5);
        assert_eq!(p(QueuePolicy::Hybrid, 0).reservations_max(), usize::MAX);
        assert_eq!(
            p(QueuePolicy::Conservative, 5).reservations_max(),
            usize::MAX
        );
    }

    #[test]
    fn durations() {
        let p = Params {
            default_duration: 60,
            max_duration: 3600,
            ..Params::default()
        };
        assert_eq!(p.effective_duration(0), Some(60));
        assert_eq!(p.effective_duration(3600), Some(3600));
        assert_eq!(p.effective_duration(3601), None);
        let unlimited = Params::default();
        assert_eq!(unlimited.effective_duration(0), Some(0));
        let max_only = Params {
            max_duration: 100,
            ..Params::default()
        };
        assert_eq!(max_only.effective_duration(0), Some(100));
        let bad = Params {
            default_duration: 200,
            max_duration: 100,
            ..Params::default()
        };
        assert!(bad.validate().is_err());
        assert!(p.validate().is_ok());
    }
}
