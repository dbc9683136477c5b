//! The one way a process waits between attempts: a doubling backoff, capped.
//!
//! A client retrying a restarting coordinator, `up` restarting a child that died and a
//! shard reconnecting to its coordinator all wait `first`, then twice that, and so on up to
//! `max`. What each gives up after (a time window, a count of failures) is its own business;
//! the waits are this type's. It holds no clock, so it is the same under virtual time.
//!
//! ```
//! use std::time::Duration;
//! use shardsched_proto::backoff::Backoff;
//!
//! let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(300));
//! assert_eq!(backoff.next_wait(), Duration::from_millis(100));
//! assert_eq!(backoff.next_wait(), Duration::from_millis(200));
//! assert_eq!(backoff.next_wait(), Duration::from_millis(300));
//! assert_eq!(backoff.after(1), Duration::from_millis(100)); // what a count of failures waits
//! ```

use std::time::Duration;

/// Waits that double from `first` to at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff whose next wait is `first`.
    pub const fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The wait before the next attempt, without taking it.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Takes the wait before the next attempt; the one after it is twice as long (capped).
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        wait
    }

    /// Starts over from `first` (after a success).
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// The wait after `failures` consecutive failures: `first` after one (or none),
    /// doubled for each further one, capped at `max`.
    pub fn after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(32);
        self.first
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(30);

    #[test]
    fn waits_double_and_are_capped() {
        let mut backoff = Backoff::new(FIRST, MAX);
        assert_eq!(backoff.peek(), FIRST);
        assert_eq!(backoff.next_wait(), FIRST);
        assert_eq!(backoff.next_wait(), FIRST * 2);
        assert_eq!(backoff.peek(), FIRST * 4);
        for _ in 0..100 {
            backoff.next_wait();
        }
        assert_eq!(backoff.next_wait(), MAX);
        backoff.reset();
        assert_eq!(backoff.next_wait(), FIRST);
    }

    #[test]
    fn waits_after_failures_double_and_are_capped() {
        let backoff = Backoff::new(FIRST, MAX);
        assert_eq!(backoff.after(0), FIRST);
        assert_eq!(backoff.after(1), FIRST);
        assert_eq!(backoff.after(2), FIRST * 2);
        assert_eq!(backoff.after(3), FIRST * 4);
        assert_eq!(backoff.after(50), MAX);
        assert_eq!(backoff.after(u32::MAX), MAX);
    }
}
