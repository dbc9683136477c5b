//! Every bound of the wire, with its unit in its name or its type.
//!
//! Nothing that comes from the network may grow without one of these limits. They are
//! constants rather than configuration on purpose: both ends of a connection must agree on
//! them, and a change is a protocol change (bump [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)
//! when one shrinks).

use std::time::Duration;

/// Size of a frame header: the payload length as a big-endian `u32`.
pub const FRAME_HEADER_BYTES: usize = 4;

/// Largest frame payload a peer may announce: 16 MiB. A header announcing more is refused
/// before any payload byte is read or any buffer is allocated. It is also the decoder's
/// byte limit, so no message can make the decoder reserve more than this.
pub const FRAME_BYTES_MAX: usize = 16 * 1024 * 1024;

/// How long a peer may take to deliver one whole frame (header and payload) once the stream
/// is open. A stream that dribbles bytes slower than this is reset.
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client waits for the answer to one request, from opening the stream to the
/// last byte of the response. Covers the server's work (a journal fsync, a match).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a QUIC + TLS handshake and the hello exchange may take together.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the refusing side waits for its refusal to reach the peer before closing the
/// connection (version mismatch, missing hello).
pub const CLOSE_LINGER: Duration = Duration::from_millis(500);

/// A connection with no traffic for this long is closed. Keep-alives keep healthy
/// long-lived connections (shard to coordinator) open.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Interval between QUIC keep-alive pings on an otherwise idle connection.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Requests a peer may have in flight on one connection at once (bidirectional streams).
/// QUIC flow control enforces it: the peer cannot open stream number `N + 1` until one of
/// the first `N` is done.
pub const STREAMS_CONCURRENT_MAX: u32 = 1024;

/// Longest certificate name (a queue, shard, user or admin name), in bytes. A name is also a
/// DNS label in server certificates, hence 63.
pub const NAME_BYTES_MAX: usize = 63;

/// Largest jobspec (canonical JSON text) a submit may carry, in bytes: 1 MiB.
pub const JOBSPEC_BYTES_MAX: usize = 1024 * 1024;

/// Longest free-text message in a [`Refusal`](crate::msg::Refusal), in bytes; longer ones are
/// cut when built with [`Refusal::new`](crate::msg::Refusal::new).
pub const REFUSAL_MESSAGE_BYTES_MAX: usize = 4096;

/// Validity of the cluster CA certificate, in days (about ten years).
pub const CA_VALIDITY_DAYS: i64 = 3653;

/// Validity of an issued (leaf) certificate, in days. `shardsched up` re-issues its own
/// certificates on every start; user and admin certificates are re-issued by an admin.
pub const CERT_VALIDITY_DAYS: i64 = 365;

/// Back-dating of `not_before` on every issued certificate, in days, so that a peer whose
/// clock is slightly behind the issuer's still accepts a fresh certificate.
pub const CERT_BACKDATE_DAYS: i64 = 1;

/// Most jobs one list response carries; a server stops there and sets `truncated`.
pub const JOBS_PER_RESPONSE_MAX: usize = 50_000;

/// Most job ids one request may name (cancel).
pub const IDS_PER_REQUEST_MAX: usize = 10_000;

/// Longest idempotency key, in bytes.
pub const IDEMPOTENCY_KEY_BYTES: usize = 16;
