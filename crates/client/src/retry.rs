//! How a client rides out a restart: bounded retries with a doubling backoff.
//!
//! A coordinator or shard that restarts (`up` restarts a dead one in about a second; a
//! coordinator is back, with its shards registered, in about ten) must not fail the commands
//! that arrive meanwhile. So a client:
//!
//! - retries its first connection to the coordinator, and every later one;
//! - opens a **new** connection for each retry (the old one died with the process);
//! - repeats a request only when doing it twice is harmless ([`safe_to_repeat`]: reads, node
//!   flags) or when it was never sent (the connection could not be made); a submit is
//!   repeated with its idempotency key, which makes the shard return the first job;
//! - and gives up after [`RETRY_WINDOW`], saying what it waited for.
//!
//! Waits double from [`RETRY_BACKOFF`] to [`RETRY_BACKOFF_MAX`]; each connection attempt is
//! itself bounded by [`CONNECT_TIMEOUT`](super::CONNECT_TIMEOUT), so a command waits at most
//! about `RETRY_WINDOW + CONNECT_TIMEOUT` before it fails.

use std::time::Duration;

use tokio::time::Instant;

use shardsched_proto::backoff::Backoff;
use shardsched_proto::msg::client_coord::Request;
use shardsched_proto::{CloseCode, Error as WireError};
use shardsched_proto::{Op, Rpc};

/// How long a client keeps retrying a coordinator that does not answer, or waits for an
/// offline queue's shard, before it gives up.
pub const RETRY_WINDOW: Duration = Duration::from_secs(30);
/// Wait before the first retry; doubled for each later one.
pub const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Longest wait between two retries.
pub const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Bounded retries: [`Retry::wait`] sleeps before the next attempt until [`RETRY_WINDOW`]
/// is spent.
#[derive(Debug)]
pub struct Retry {
    started: Instant,
    backoff: Backoff,
}

impl Retry {
    /// The window starts now.
    pub fn new() -> Retry {
        Retry {
            started: Instant::now(),
            backoff: Backoff::new(RETRY_BACKOFF, RETRY_BACKOFF_MAX),
        }
    }

    /// Whether the next attempt would start past [`RETRY_WINDOW`]: time to give up.
    pub fn spent(&self) -> bool {
        self.started.elapsed() + self.backoff.peek() > RETRY_WINDOW
    }

    /// Sleeps before the next attempt and returns `true`, or returns `false` at once when
    /// the window is [spent](Retry::spent).
    pub async fn wait(&mut self) -> bool {
        if self.spent() {
            return false;
        }
        tokio::time::sleep(self.backoff.next_wait()).await;
        true
    }

    /// Time since the first attempt.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry::new()
    }
}

/// Whether a failure may go away by itself: the connection or stream broke, or nothing
/// answered in time. Refusals, certificate and version mismatches fail the same way again.
pub fn retryable(e: &WireError) -> bool {
    match e {
        WireError::ConnectionLost(_)
        | WireError::Timeout { .. }
        | WireError::StreamReset { .. }
        | WireError::Endpoint(_) => true,
        WireError::Closed(code) => {
            !matches!(code, CloseCode::VersionUnsupported | CloseCode::NoIdentity)
        }
        _ => false,
    }
}

/// Whether asking the coordinator `request` twice does what asking it once does: reads, and
/// setting a node flag to a value. Other changes (a move, a queue change) are not repeated
/// after they may have been sent; the error says so and the admin decides.
pub fn safe_to_repeat(request: &Request) -> bool {
    request.op() == Op::ReadStatus
        || matches!(
            request,
            Request::SetNodeState { .. } | Request::SetNodeDrain { .. }
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_double_their_wait_and_stop_at_the_window() {
        let mut retry = Retry::new();
        assert!(!retry.spent());
        assert!(retry.wait().await);
        assert_eq!(retry.backoff.peek(), RETRY_BACKOFF * 2);
        let late = Retry {
            started: Instant::now() - (RETRY_WINDOW - RETRY_BACKOFF_MAX / 2),
            backoff: Backoff::new(RETRY_BACKOFF_MAX, RETRY_BACKOFF_MAX),
        };
        assert!(late.spent(), "a wait would end past the window");
        let mut late = late;
        assert!(!late.wait().await);
    }

    #[test]
    fn only_harmless_requests_are_repeated() {
        assert!(safe_to_repeat(&Request::Routes));
        assert!(!safe_to_repeat(&Request::Reload));
        assert!(retryable(&WireError::ConnectionLost("reset".into())));
        assert!(!retryable(&WireError::Closed(CloseCode::NoIdentity)));
    }
}
