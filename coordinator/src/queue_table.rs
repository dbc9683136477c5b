//! The run-time queue table: queues added, removed or redefined by an admin while the
//! coordinator runs (`queue add|remove|update`), as kept in the durable state so that a
//! restart keeps them over the configuration file, until `reload` makes the file
//! authoritative again (docs/CONFIG.md, "Runtime changes").
//!
//! Also the one place a [`QueueSpec`] from the wire becomes a [`QueueDef`], with the
//! configuration file's defaults and value rules (same constants, same parsers).

use serde::{Deserialize, Serialize};
use shardsched_proto::msg::client_coord::QueueSpec;
use shardsched_resource::{decode_hostlist, encode_hostlist};

use crate::config::{Config, MatchPolicy, QueueDef, QueuePolicy};
use crate::config::{
    DEFAULT_DURATION_DEFAULT_MS, DEPTH_MAX, QUEUE_DEPTH_DEFAULT, RESERVATION_DEPTH_DEFAULT,
    raw_duration_ms,
};

/// The whole queue table as last changed at run time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeQueues {
    /// Where a submit without `-q` goes.
    pub default_queue: String,
    /// Every queue, by name.
    #[serde(default)]
    pub queue: Vec<DurableQueue>,
}

/// One queue of [`RuntimeQueues`]: a [`QueueDef`] with its definition as node names, so
/// that it survives a change of the cluster's node order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurableQueue {
    /// Queue name.
    pub name: String,
    /// The definition, as a hostlist.
    pub nodes: String,
    /// Queue policy name.
    pub policy: String,
    /// Match policy name.
    pub match_policy: String,
    /// Pending jobs considered per cycle.
    pub queue_depth: u32,
    /// Reservations made by `hybrid`.
    pub reservation_depth: u32,
    /// Milliseconds (0: unlimited).
    pub default_duration_ms: u64,
    /// Milliseconds (0: unlimited).
    pub max_duration_ms: u64,
    /// Started when the coordinator starts.
    pub started: bool,
    /// Enabled when the coordinator starts.
    pub enabled: bool,
}

impl RuntimeQueues {
    /// The table of `config`.
    pub fn of(config: &Config) -> RuntimeQueues {
        RuntimeQueues {
            default_queue: config.default_queue.clone(),
            queue: config
                .queues
                .iter()
                .map(|q| DurableQueue {
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

    /// `file` (for its cluster) with this table's queues instead of its own. Errors name
    /// the queue and field that no longer fit the cluster.
    pub fn apply_to(&self, file: &Config) -> Result<Config, String> {
        let mut config = file.clone();
        config.default_queue = self.default_queue.clone();
        config.queues = Vec::with_capacity(self.queue.len());
        for q in &self.queue {
            let err = |what: String| format!("run-time queue {}: {what}", q.name);
            let def = QueueDef {
                name: q.name.clone(),
                policy: QueuePolicy::parse(&q.policy)
                    .ok_or_else(|| err(format!("unknown policy {:?}", q.policy)))?,
                match_policy: MatchPolicy::parse(&q.match_policy)
                    .ok_or_else(|| err(format!("unknown match policy {:?}", q.match_policy)))?,
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
}

/// A hostlist resolved to node indices of `config`'s cluster, ascending, without repeats.
pub fn definition(config: &Config, hostlist: &str) -> Result<Vec<usize>, String> {
    let names = decode_hostlist(hostlist).map_err(|e| format!("nodes: {e}"))?;
    let mut missing = Vec::new();
    let mut indices = Vec::with_capacity(names.len());
    for name in &names {
        match config.cluster.nodes.iter().position(|n| &n.name == name) {
            Some(i) => indices.push(i),
            None => missing.push(name.as_str()),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "nodes: {} not in the cluster ({} nodes)",
            encode_hostlist(&missing),
            config.cluster.nodes.len()
        ));
    }
    indices.sort_unstable();
    indices.dedup();
    if indices.is_empty() {
        return Err("nodes: the definition is empty".into());
    }
    Ok(indices)
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
        (Some(p), _) => QueuePolicy::parse(p).ok_or_else(|| {
            format!(
                "policy: unknown queue policy {p:?} (expected fcfs, easy, hybrid or conservative)"
            )
        })?,
        (None, Some(base)) => base.policy,
        (None, None) => QueuePolicy::Fcfs,
    };
    let match_policy = match (&spec.match_policy, base) {
        (Some(p), _) => MatchPolicy::parse(p).ok_or_else(|| {
            let known: Vec<&str> = MatchPolicy::ALL.iter().map(|m| m.as_str()).collect();
            format!(
                "match_policy: unknown match policy {p:?} (expected {})",
                known.join(", ")
            )
        })?,
        (None, Some(base)) => base.match_policy,
        (None, None) => MatchPolicy::First,
    };
    let depth = |value: Option<u32>, key: &str, old: Option<u32>, default: u32| match value {
        Some(d) if d > DEPTH_MAX => Err(format!("{key}: {d} is more than {DEPTH_MAX}")),
        Some(d) => Ok(d),
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
            .map(|t| {
                raw_duration_ms(&toml::Value::String(t.to_owned()))
                    .map_err(|e| format!("{key}: {e}"))
            })
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
            Some(b)
                if max_duration_ms > 0
                    && (b.default_duration_ms == 0 || b.default_duration_ms > max_duration_ms) =>
            {
                max_duration_ms
            }
            Some(b) => b.default_duration_ms,
            None if max_duration_ms == 0 => DEFAULT_DURATION_DEFAULT_MS,
            None => DEFAULT_DURATION_DEFAULT_MS.min(max_duration_ms),
        },
    };
    if max_duration_ms > 0 && (default_duration_ms == 0 || default_duration_ms > max_duration_ms) {
        return Err(format!(
            "default_duration: {default_duration_ms} ms is longer than max_duration ({max_duration_ms} ms)"
        ));
    }
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
