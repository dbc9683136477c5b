//! The run-time queue table: queues added, removed or redefined by an admin while the
//! coordinator runs (`queue add|remove|update`), as kept in the durable state so that a
//! restart keeps them over the configuration file, until `reload` makes the file
//! authoritative again (docs/CONFIG.md, "Runtime changes").
//!
//! Also the one place a [`QueueSpec`] from the wire becomes a [`QueueDef`], with the
//! configuration file's defaults and value rules (same constants, same parsers).

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::client_coord::QueueSpec;

use crate::config::values::{
    self, QUEUE_DEPTH_DEFAULT, RESERVATION_DEPTH_DEFAULT, check_default_within_max,
    default_duration_within, duration_text_ms, longer_than_max, resolve_hostlist,
};
use crate::config::{Config, MatchPolicy, QueueDef, QueuePolicy};
use crate::records::{QueueDefRecord, QueueTableRecord};

/// The queue table of `config`, as the journal keeps it.
pub fn record_of(config: &Config) -> QueueTableRecord {
    QueueTableRecord {
        default_queue: config.default_queue.clone(),
        queues: config
            .queues
            .iter()
            .map(|q| QueueDefRecord {
                name: q.name.clone(),
                nodes: encode_hostlist(&config.node_names(&q.definition)),
                policy: q.policy.as_str().to_owned(),
                match_policy: q.match_policy.as_str().to_owned(),
                queue_depth: q.queue_depth,
                reservation_depth: q.reservation_depth,
                default_duration_ms: q.default_duration_ms,
                max_duration_ms: q.max_duration_ms,
                started: q.started,
                enabled: q.enabled,
            })
            .collect(),
    }
}

/// `file` (for its cluster) with `table`'s queues instead of its own. Errors name the queue
/// and field that no longer fit the cluster.
pub fn apply_to(table: &QueueTableRecord, file: &Config) -> Result<Config, String> {
    let mut config = file.clone();
    config.default_queue = table.default_queue.clone();
    config.queues = Vec::with_capacity(table.queues.len());
    for q in &table.queues {
        let err = |what: String| format!("run-time queue {}: {what}", q.name);
        let def = QueueDef {
            name: q.name.clone(),
            policy: QueuePolicy::parse(&q.policy).map_err(err)?,
            match_policy: MatchPolicy::parse(&q.match_policy).map_err(err)?,
            queue_depth: q.queue_depth,
            reservation_depth: q.reservation_depth,
            default_duration_ms: q.default_duration_ms,
            max_duration_ms: q.max_duration_ms,
            definition: definition(file, &q.nodes).map_err(err)?,
            // `owns` decides owners at first start only; after a run-time change every
            // owner is kept as an admin's decision, so the table needs none.
            owns: Vec::new(),
            started: q.started,
            enabled: q.enabled,
        };
        config.queues.push(def);
    }
    config.queues.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(config)
}

/// A hostlist resolved to node indices of `config`'s cluster, ascending, without repeats;
/// not empty.
pub fn definition(config: &Config, hostlist: &str) -> Result<Vec<usize>, String> {
    let index_of = |name: &str| config.cluster.nodes.iter().position(|n| n.name == name);
    let set = resolve_hostlist(hostlist, index_of).map_err(|e| format!("nodes: {e}"))?;
    if set.is_empty() {
        return Err("nodes: the definition is empty".into());
    }
    Ok(set.into_iter().collect())
}

/// `spec` applied over `base` (an update), or over the file's defaults when `base` is
/// `None` (an add, which needs `nodes`). Errors name the field.
pub fn queue_def(
    config: &Config,
    base: Option<&QueueDef>,
    spec: &QueueSpec,
) -> Result<QueueDef, String> {
    let definition = match (&spec.nodes, base) {
        (Some(nodes), _) => definition(config, nodes)?,
        (None, Some(base)) => base.definition.clone(),
        (None, None) => {
            return Err("nodes: a new queue needs its definition (--nodes HOSTLIST)".into());
        }
    };
    let policy = match (&spec.policy, base) {
        (Some(p), _) => *p,
        (None, Some(base)) => base.policy,
        (None, None) => QueuePolicy::Fcfs,
    };
    let match_policy = match (&spec.match_policy, base) {
        (Some(p), _) => *p,
        (None, Some(base)) => base.match_policy,
        (None, None) => MatchPolicy::First,
    };
    let depth = |value: Option<u32>, key: &str, old: Option<u32>, default: u32| match value {
        Some(d) => values::depth(d).map_err(|e| format!("{key}: {e}")),
        None => Ok(old.unwrap_or(default)),
    };
    let queue_depth = depth(
        spec.queue_depth,
        "queue_depth",
        base.map(|b| b.queue_depth),
        QUEUE_DEPTH_DEFAULT,
    )?;
    let reservation_depth = depth(
        spec.reservation_depth,
        "reservation_depth",
        base.map(|b| b.reservation_depth),
        RESERVATION_DEPTH_DEFAULT,
    )?;
    let duration = |text: &Option<String>, key: &str| -> Result<Option<u64>, String> {
        text.as_deref()
            .map(|t| duration_text_ms(t).map_err(|e| format!("{key}: {e}")))
            .transpose()
    };
    let max_duration_ms = match duration(&spec.max_duration, "max_duration")? {
        Some(ms) => ms,
        None => base.map_or(0, |b| b.max_duration_ms),
    };
    let default_duration_ms = match duration(&spec.default_duration, "default_duration")? {
        Some(ms) => ms,
        None => match base {
            // An update that lowers the maximum below the default caps the default.
            Some(b) if longer_than_max(b.default_duration_ms, max_duration_ms) => max_duration_ms,
            Some(b) => b.default_duration_ms,
            None => default_duration_within(max_duration_ms),
        },
    };
    check_default_within_max(default_duration_ms, max_duration_ms)
        .map_err(|e| format!("default_duration: {e}"))?;
    Ok(QueueDef {
        name: spec.name.clone(),
        policy,
        match_policy,
        queue_depth,
        reservation_depth,
        default_duration_ms,
        max_duration_ms,
        definition,
        // `owns` is a configuration-file key, read at first start (docs/CONFIG.md).
        owns: Vec::new(),
        started: base.map_or(!spec.stopped, |b| b.started),
        enabled: base.is_none_or(|b| b.enabled),
    })
}
