//! The configurations most tests start `up` with.

/// Two queues over disjoint halves of an 8-node cluster (1 socket × 4 cores per node):
/// alpha (fcfs) on node[0-3], beta (easy) on node[4-7], both with a default duration of
/// 60 s. [`two_queues`] gives the same with another default duration.
pub fn two_queues_config() -> String {
    with_alpha(
        "node[0-7]",
        r#"
[queues.beta]
nodes = "node[4-7]"
policy = "easy"
default_duration = "60s"
max_duration = "2h"
"#,
    )
}

/// A cluster of `hosts` (1 socket × 4 cores per node) with queue alpha (fcfs, node[0-3],
/// the default) and the queue sections `queues` (TOML) after it: the shape most tests
/// start from.
pub fn with_alpha(hosts: &str, queues: &str) -> String {
    format!(
        r#"
default_queue = "alpha"

[cluster.inline]
name = "tiny"

[[cluster.inline.nodes]]
hosts = "{hosts}"
sockets = 1
cores_per_socket = 4

[queues.alpha]
nodes = "node[0-3]"
policy = "fcfs"
default_duration = "60s"
max_duration = "2h"
{queues}"#
    )
}

/// [`two_queues_config`] with jobs lasting `default_duration` (e.g. `"10s"`) when they
/// give none.
pub fn two_queues(default_duration: &str) -> String {
    two_queues_config().replace(
        "default_duration = \"60s\"",
        &format!("default_duration = \"{default_duration}\""),
    )
}

/// Queues batch (fcfs, node[0-5], the default) and debug (fcfs, node[4-7]) on an 8-node
/// cluster (1 socket × 4 cores per node): their definitions overlap on node[4-5], which
/// batch owns at start, so those can move to debug while both run. Batch's match policy
/// `low` fills its nodes from node0 up.
pub fn batch_and_debug() -> String {
    r#"
default_queue = "batch"

[cluster.inline]
name = "tiny"

[[cluster.inline.nodes]]
hosts = "node[0-7]"
sockets = 1
cores_per_socket = 4

[queues.batch]
nodes = "node[0-5]"
policy = "fcfs"
match_policy = "low"
default_duration = "1h"
max_duration = "2h"

[queues.debug]
nodes = "node[4-7]"
policy = "fcfs"
default_duration = "1h"
max_duration = "2h"
"#
    .to_owned()
}
