//! One `[queues.NAME]` table as written, validated into a [`QueueDef`], one concern at a
//! time: the name, the definition (`nodes` and `requires`), `owns`, the policies, and the
//! limits (depths and durations). Every error points at the key at fault, or at the table.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;

use serde::Deserialize;
use shardsched_resource::encode_hostlist;
use toml::Spanned;

use super::Errors;
use crate::config::values::{
    self, QUEUE_DEPTH_DEFAULT, RESERVATION_DEPTH_DEFAULT, check_default_within_max,
    default_duration_within, resolve_hostlist,
};
use crate::config::{Cluster, ConfigError, MatchPolicy, QueueDef, QueuePolicy};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQueue {
    nodes: Option<Spanned<String>>,
    requires: Option<Spanned<Vec<String>>>,
    pub(super) owns: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    match_policy: Option<Spanned<String>>,
    queue_depth: Option<Spanned<u32>>,
    reservation_depth: Option<Spanned<u32>>,
    default_duration: Option<Spanned<toml::Value>>,
    max_duration: Option<Spanned<toml::Value>>,
    started: Option<bool>,
    enabled: Option<bool>,
}

/// Errors about one queue: `queue NAME: KEY: message`, at the key's span or the table's.
struct QueueErrors<'a> {
    errors: &'a Errors<'a>,
    name: &'a str,
    span: Range<usize>,
}

impl QueueErrors<'_> {
    fn at(&self, at: Option<Range<usize>>, key: &str, message: impl AsRef<str>) -> ConfigError {
        let message = format!("queue {}: {key}: {}", self.name, message.as_ref());
        self.errors.at(at.or(Some(self.span.clone())), message)
    }
}

/// The limits of a queue: depths and durations.
struct Limits {
    queue_depth: u32,
    reservation_depth: u32,
    default_duration_ms: u64,
    max_duration_ms: u64,
}

/// Validates queue `name`'s table against `cluster` (`by_name`: node name → index).
pub(super) fn queue(
    name: &str,
    raw: Spanned<RawQueue>,
    cluster: &Cluster,
    by_name: &HashMap<&str, usize>,
    errors: &Errors<'_>,
) -> Result<QueueDef, ConfigError> {
    let span = raw.span();
    let raw = raw.into_inner();
    if let Err(e) = shardsched_wire::identity::check_name(name) {
        return Err(errors.at(
            Some(span),
            format!("queue name: {e} (queue names are shard names)"),
        ));
    }
    let err = QueueErrors { errors, name, span };
    let definition = definition(&raw, cluster, by_name, &err)?;
    let owns = owns(&raw, &definition, cluster, by_name, &err)?;
    let (policy, match_policy) = policies(&raw, &err)?;
    let limits = limits(&raw, &err)?;
    Ok(QueueDef {
        name: name.to_owned(),
        policy,
        match_policy,
        queue_depth: limits.queue_depth,
        reservation_depth: limits.reservation_depth,
        default_duration_ms: limits.default_duration_ms,
        max_duration_ms: limits.max_duration_ms,
        definition,
        owns,
        started: raw.started.unwrap_or(true),
        enabled: raw.enabled.unwrap_or(true),
    })
}

/// `nodes` and/or `requires`: the nodes listed that have every property required; not
/// empty.
fn definition(
    raw: &RawQueue,
    cluster: &Cluster,
    by_name: &HashMap<&str, usize>,
    err: &QueueErrors<'_>,
) -> Result<Vec<usize>, ConfigError> {
    let mut definition: Option<BTreeSet<usize>> = None;
    if let Some(nodes) = &raw.nodes {
        let set = resolve_hostlist(nodes.get_ref(), |h| by_name.get(h).copied())
            .map_err(|m| err.at(Some(nodes.span()), "nodes", m))?;
        definition = Some(set);
    }
    if let Some(requires) = &raw.requires {
        let wanted = requires.get_ref();
        let having: BTreeSet<usize> = cluster
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| wanted.iter().all(|p| n.properties.contains(p)))
            .map(|(i, _)| i)
            .collect();
        definition = Some(match definition {
            Some(listed) => listed.intersection(&having).copied().collect(),
            None => having,
        });
    }
    let Some(definition) = definition else {
        return Err(err.at(
            None,
            "nodes",
            "missing: give nodes = \"HOSTLIST\" and/or requires = [\"PROPERTY\", ...]",
        ));
    };
    if definition.is_empty() {
        let (at, key) = match &raw.requires {
            Some(requires) => (Some(requires.span()), "requires"),
            None => (None, "nodes"),
        };
        return Err(err.at(
            at,
            key,
            "the definition is empty (no node of the cluster matches)",
        ));
    }
    Ok(definition.into_iter().collect())
}

/// `owns`: nodes of the definition the queue owns at first start.
fn owns(
    raw: &RawQueue,
    definition: &[usize],
    cluster: &Cluster,
    by_name: &HashMap<&str, usize>,
    err: &QueueErrors<'_>,
) -> Result<Vec<usize>, ConfigError> {
    let Some(owns) = &raw.owns else {
        return Ok(Vec::new());
    };
    let set = resolve_hostlist(owns.get_ref(), |h| by_name.get(h).copied())
        .map_err(|m| err.at(Some(owns.span()), "owns", m))?;
    let outside: Vec<&str> = set
        .iter()
        .filter(|n| definition.binary_search(n).is_err())
        .map(|&n| cluster.nodes[n].name.as_str())
        .collect();
    if !outside.is_empty() {
        return Err(err.at(
            Some(owns.span()),
            "owns",
            format!(
                "{} not in the queue's definition (owns must be part of nodes/requires)",
                encode_hostlist(&outside)
            ),
        ));
    }
    Ok(set.into_iter().collect())
}

/// `policy` (default fcfs) and `match_policy` (default first).
fn policies(
    raw: &RawQueue,
    err: &QueueErrors<'_>,
) -> Result<(QueuePolicy, MatchPolicy), ConfigError> {
    let policy = match &raw.policy {
        None => QueuePolicy::Fcfs,
        Some(p) => {
            QueuePolicy::parse(p.get_ref()).map_err(|m| err.at(Some(p.span()), "policy", m))?
        }
    };
    let match_policy = match &raw.match_policy {
        None => MatchPolicy::First,
        Some(p) => MatchPolicy::parse(p.get_ref())
            .map_err(|m| err.at(Some(p.span()), "match_policy", m))?,
    };
    Ok((policy, match_policy))
}

/// `queue_depth`, `reservation_depth` (at most [`values::DEPTH_MAX`]), `max_duration` and
/// `default_duration` (no longer than the maximum).
fn limits(raw: &RawQueue, err: &QueueErrors<'_>) -> Result<Limits, ConfigError> {
    let depth = |value: &Option<Spanned<u32>>, key: &str, default: u32| match value {
        None => Ok(default),
        Some(v) => values::depth(*v.get_ref()).map_err(|m| err.at(Some(v.span()), key, m)),
    };
    let duration = |value: &Option<Spanned<toml::Value>>, key: &str, default: u64| match value {
        None => Ok(default),
        Some(v) => values::duration_ms(v.get_ref()).map_err(|m| err.at(Some(v.span()), key, m)),
    };
    let max_duration_ms = duration(&raw.max_duration, "max_duration", 0)?;
    let default_duration_ms = duration(
        &raw.default_duration,
        "default_duration",
        default_duration_within(max_duration_ms),
    )?;
    check_default_within_max(default_duration_ms, max_duration_ms).map_err(|m| {
        let at = raw.default_duration.as_ref().map(Spanned::span);
        err.at(at, "default_duration", m)
    })?;
    Ok(Limits {
        queue_depth: depth(&raw.queue_depth, "queue_depth", QUEUE_DEPTH_DEFAULT)?,
        reservation_depth: depth(
            &raw.reservation_depth,
            "reservation_depth",
            RESERVATION_DEPTH_DEFAULT,
        )?,
        default_duration_ms,
        max_duration_ms,
    })
}

/// Definitions may overlap (started queues' too: that is what makes a move between two
/// running queues possible), but two queues cannot both be told to own a node.
pub(super) fn check_owns_disjoint(
    queues: &[QueueDef],
    spans: &[Option<Range<usize>>],
    cluster: &Cluster,
    errors: &Errors<'_>,
) -> Result<(), ConfigError> {
    let mut owner: Vec<Option<&str>> = vec![None; cluster.nodes.len()];
    for (q, span) in queues.iter().zip(spans) {
        let mut shared: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for &n in &q.owns {
            match owner[n] {
                Some(other) => shared
                    .entry(other)
                    .or_default()
                    .push(cluster.nodes[n].name.as_str()),
                None => owner[n] = Some(&q.name),
            }
        }
        if let Some((other, nodes)) = shared.into_iter().next() {
            return Err(errors.at(
                span.clone(),
                format!(
                    "queue {}: owns: {} already owned by queue {other}; a node has one owner",
                    q.name,
                    encode_hostlist(&nodes)
                ),
            ));
        }
    }
    Ok(())
}
