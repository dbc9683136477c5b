//! The label sets of the series (each a struct, so that a series cannot be given another
//! label by mistake).

use prometheus_client::encoding::EncodeLabelSet;

/// A queue and a state (jobs, nodes).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueStateLabels {
    /// The queue (empty for a node no queue owns).
    pub queue: String,
    /// `pending`, `running`; `up`, `down`, `drained`, …
    pub state: String,
}

/// A state alone (a shard's jobs: the queue is the shard's constant label).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// `pending`, `running`, `blocked`, …
    pub state: String,
}

/// A queue alone.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue.
    pub queue: String,
}

/// A move step.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    /// `outgoing`, `released`, `returning`; for durations `release` or `acquire`.
    pub step: String,
}

/// The peer of a connection, by its certificate's role.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabels {
    /// `coordinator`, `shard`, `admin` or `user`.
    pub peer: String,
}

/// A request kind (the wire's, e.g. `client_shard.submit`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The request kind.
    pub kind: String,
}

/// A refused request: its kind and why.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// The request kind.
    pub kind: String,
    /// The refusal code: `denied`, `invalid`, `forbidden`, `policy`, `unavailable`, …
    pub reason: String,
}

/// The version of the binary, as a constant series of value 1.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: String,
}
