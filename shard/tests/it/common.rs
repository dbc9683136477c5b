//! Fixtures the shard's integration tests share (each test crate includes this module).

use shardsched_proto::msg::QueueConfig;

/// Queue `batch` over `definition`: easy, lonode, 32 deep, one reservation, jobs of 60 s
/// by default and at most an hour, enabled and started.
pub fn queue(definition: &[&str]) -> QueueConfig {
    QueueConfig {
        name: "batch".into(),
        queue_policy: shardsched_proto::msg::QueuePolicy::Easy,
        match_policy: shardsched_proto::msg::MatchPolicy::LoNode,
        queue_depth: 32,
        reservation_depth: 1,
        default_duration_ms: 60_000,
        max_duration_ms: 3_600_000,
        definition: definition.iter().map(|n| n.to_string()).collect(),
        enabled: true,
        started: true,
        array_elements_max: shardsched_proto::limits::ARRAY_ELEMENTS_DEFAULT,
    }
}
