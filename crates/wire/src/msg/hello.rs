//! The hello: the first request of every connection, frozen across protocol versions.
//!
//! ALPN (`shardsched/1`) already guarantees both ends speak wire generation 1; the hello
//! carries the exact protocol version so that a newer build can refuse an older one with a
//! clear message instead of a decode error. These two types must never change shape: every
//! future version must still decode an old peer's `Hello` and be able to answer it.

use serde::{Deserialize, Serialize};

use crate::identity::Peer;

/// Sent by the connecting side on the first bidirectional stream. It claims nothing about
/// identity: that is the certificate's job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol version the sender speaks ([`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)).
    pub protocol_version: u32,
    /// Free text for logs, e.g. `shardsched 0.1.0`.
    pub software: String,
}

/// The accepting side's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelloReply {
    /// The connection is open for requests.
    Welcome {
        /// The version both ends will speak.
        protocol_version: u32,
        /// Free text for logs.
        software: String,
        /// The sender's identity as the accepting side read it from the certificate.
        you: Peer,
    },
    /// The version is not spoken here; the connection will be closed.
    Unsupported {
        /// Oldest version spoken here.
        min: u32,
        /// Newest version spoken here.
        max: u32,
    },
}
