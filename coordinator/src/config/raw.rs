//! The configuration as written (serde, with the span of every value), and its validation
//! into a [`Config`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use shardsched_jobspec::duration::{BareUnit, Fsd, parse_fsd, seconds_to_ms};
use shardsched_resource::{Location, ReadError, decode_hostlist, encode_hostlist};
use toml::Spanned;

use super::{Cluster, Config, ConfigError, MatchPolicy, QueueDef, QueuePolicy};
use crate::QUEUES_MAX;

/// Pending jobs per cycle and reservations, like the qmanager's bound (0 means all).
pub const DEPTH_MAX: u32 = 1_000_000;
/// Defaults of the optional queue keys.
pub(crate) const QUEUE_DEPTH_DEFAULT: u32 = 32;
pub(crate) const RESERVATION_DEPTH_DEFAULT: u32 = 64;
pub(crate) const DEFAULT_DURATION_DEFAULT_MS: u64 = 3_600_000;
/// The most resource types `[cluster] load_allowlist` may name.
pub const LOAD_ALLOWLIST_TYPES_MAX: usize = 32;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    default_queue: Option<Spanned<String>>,
    cluster: Option<Spanned<RawCluster>>,
    queues: Option<Spanned<BTreeMap<String, Spanned<RawQueue>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    spec: Option<Spanned<String>>,
    inline: Option<Spanned<toml::Table>>,
    load_allowlist: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    nodes: Option<Spanned<String>>,
    requires: Option<Spanned<Vec<String>>>,
    owns: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    match_policy: Option<Spanned<String>>,
    queue_depth: Option<Spanned<u32>>,
    reservation_depth: Option<Spanned<u32>>,
    default_duration: Option<Spanned<toml::Value>>,
    max_duration: Option<Spanned<toml::Value>>,
    started: Option<bool>,
    enabled: Option<bool>,
}

/// Builds errors that point into the text.
struct Errors<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Errors<'_> {
    fn at(&self, span: Option<Range<usize>>, message: impl Into<String>) -> ConfigError {
        let at = span.map(|s| match Location::of_offset(self.text, s.start) {
            Location::LineColumn(line, column) => (line, column),
            _ => (1, 1),
        });
        ConfigError::Invalid {
            origin: self.origin.to_owned(),
            at,
            message: message.into(),
        }
    }
}

pub(super) fn parse(text: &str, origin: &str, base_dir: &Path) -> Result<Config, ConfigError> {
    let errors = Errors { text, origin };
    let raw: RawConfig =
        toml::from_str(text).map_err(|e| errors.at(e.span(), e.message().trim_end()))?;
    let cluster = cluster(raw.cluster, &errors, base_dir)?;
    let by_name: HashMap<&str, usize> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();

    let Some(raw_queues) = raw.queues else {
        return Err(errors.at(None, "no [queues.NAME] table: at least one queue is needed"));
    };
    let queues_span = raw_queues.span();
    let raw_queues = raw_queues.into_inner();
    if raw_queues.is_empty() {
        return Err(errors.at(
            Some(queues_span),
            "[queues] is empty: at least one queue is needed",
        ));
    }
    if raw_queues.len() > QUEUES_MAX {
        return Err(errors.at(
            Some(queues_span),
            format!(
                "{} queues, more than the limit of {QUEUES_MAX}",
                raw_queues.len()
            ),
        ));
    }
    let mut queues = Vec::with_capacity(raw_queues.len());
    let mut owns_spans = Vec::with_capacity(raw_queues.len());
    for (name, q) in raw_queues {
        owns_spans.push(q.get_ref().owns.as_ref().map(Spanned::span));
        queues.push(queue(&name, q, &cluster, &by_name, &errors)?);
    }

    let default_queue = match raw.default_queue {
        Some(d) => {
            let span = d.span();
            let d = d.into_inner();
            if !queues.iter().any(|q| q.name == d) {
                let known: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
                return Err(errors.at(
                    Some(span),
                    format!(
                        "default_queue: no queue named {d:?} (queues: {})",
                        known.join(", ")
                    ),
                ));
            }
            d
        }
        None if queues.len() == 1 => queues[0].name.clone(),
        None => {
            return Err(errors.at(
                None,
                "default_queue is required when there is more than one queue",
            ));
        }
    };

    check_owns_disjoint(&queues, &owns_spans, &cluster, &errors)?;
    Ok(Config {
        origin: origin.to_owned(),
        cluster,
        default_queue,
        queues,
    })
}

fn cluster(
    raw: Option<Spanned<RawCluster>>,
    errors: &Errors<'_>,
    base_dir: &Path,
) -> Result<Cluster, ConfigError> {
    let cluster_error = |error: ReadError| ConfigError::Cluster {
        origin: errors.origin.to_owned(),
        error,
    };
    let Some(raw) = raw else {
        return Cluster::embedded_default().map_err(cluster_error);
    };
    let span = raw.span();
    let raw = raw.into_inner();
    let load_allowlist =
        match &raw.load_allowlist {
            Some(list) => Some(check_load_allowlist(list.get_ref()).map_err(|m| {
                errors.at(Some(list.span()), format!("[cluster] load_allowlist: {m}"))
            })?),
            None => None,
        };
    let mut cluster = match raw {
        RawCluster {
            spec: None,
            inline: None,
            load_allowlist: Some(_),
        } => Cluster::embedded_default().map_err(cluster_error),
        RawCluster {
            spec: Some(spec),
            inline: None,
            ..
        } => {
            let path = base_dir.join(spec.get_ref());
            let text = std::fs::read_to_string(&path).map_err(|e| {
                errors.at(
                    Some(spec.span()),
                    format!("[cluster] spec: cannot read {}: {e}", path.display()),
                )
            })?;
            Cluster::from_spec(text).map_err(|e| cluster_error(e.in_file(&path)))
        }
        RawCluster {
            spec: None,
            inline: Some(inline),
            ..
        } => {
            let at = inline.span();
            let text = toml::to_string(inline.get_ref()).map_err(|e| {
                errors.at(Some(at.clone()), format!("[cluster.inline]: {e}"))
            })?;
            Cluster::from_spec(text).map_err(|e| {
                errors.at(Some(at), format!("[cluster.inline]: {}", read_error_message(&e)))
            })
        }
        RawCluster {
            spec: Some(_),
            inline: Some(_),
            ..
        } => Err(errors.at(
            Some(span),
            "[cluster]: give either spec = \"FILE\" or [cluster.inline], not both",
        )),
        RawCluster {
            spec: None,
            inline: None,
            load_allowlist: None,
        } => Err(errors.at(
            Some(span),
            "[cluster]: give spec = \"FILE\" or [cluster.inline] (or leave [cluster] out for the default cluster)",
        )),
    }?;
    if let Some(list) = load_allowlist {
        cluster.load_allowlist = list;
    }
    Ok(cluster)
}

/// `[cluster] load_allowlist`: resource type names, at most [`LOAD_ALLOWLIST_TYPES_MAX`],
/// with `node` (shards own and schedule nodes). Duplicates are dropped.
fn check_load_allowlist(list: &[String]) -> Result<Vec<String>, String> {
    if list.len() > LOAD_ALLOWLIST_TYPES_MAX {
        return Err(format!(
            "{} types, more than the limit of {LOAD_ALLOWLIST_TYPES_MAX}",
            list.len()
        ));
    }
    let mut kept: Vec<String> = Vec::with_capacity(list.len());
    for kind in list {
        let valid = !kind.is_empty()
            && kind.len() <= shardsched_proto::limits::NAME_BYTES_MAX
            && kind
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "{kind:?} is not a resource type name (letters, digits, `-`, `_`)"
            ));
        }
        if !kept.contains(kind) {
            kept.push(kind.clone());
        }
    }
    if !kept.iter().any(|k| k == "node") {
        return Err("must include \"node\": shards own and schedule nodes".to_owned());
    }
    Ok(kept)
}

/// A spec reader's message without its place (which would point into text the user never
/// wrote: the inline table re-serialized).
fn read_error_message(e: &ReadError) -> String {
    match e {
        ReadError::Invalid { message, .. } => message.clone(),
        ReadError::Limit { what, limit, .. } => format!("{what} would exceed the limit of {limit}"),
        other => other.to_string(),
    }
}

fn queue(
    name: &str,
    raw: Spanned<RawQueue>,
    cluster: &Cluster,
    by_name: &HashMap<&str, usize>,
    errors: &Errors<'_>,
) -> Result<QueueDef, ConfigError> {
    let span = raw.span();
    let raw = raw.into_inner();
    let err = |at: Option<Range<usize>>, key: &str, message: String| {
        errors.at(
            at.or(Some(span.clone())),
            format!("queue {name}: {key}: {message}"),
        )
    };
    if let Err(e) = shardsched_proto::identity::check_name(name) {
        return Err(errors.at(
            Some(span),
            format!("queue name: {e} (queue names are shard names)"),
        ));
    }

    let mut definition: Option<BTreeSet<usize>> = None;
    if let Some(nodes) = &raw.nodes {
        let set = resolve_hostlist(nodes.get_ref(), by_name)
            .map_err(|m| err(Some(nodes.span()), "nodes", m))?;
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
    let definition: Vec<usize> = match definition {
        None => {
            return Err(err(
                None,
                "nodes",
                "missing: give nodes = \"HOSTLIST\" and/or requires = [\"PROPERTY\", ...]".into(),
            ));
        }
        Some(d) => d.into_iter().collect(),
    };
    if definition.is_empty() {
        let at = raw.requires.as_ref().map(Spanned::span);
        let key = if raw.requires.is_some() {
            "requires"
        } else {
            "nodes"
        };
        return Err(err(
            at,
            key,
            "the definition is empty (no node of the cluster matches)".into(),
        ));
    }

    let owns = match &raw.owns {
        None => Vec::new(),
        Some(owns) => {
            let set = resolve_hostlist(owns.get_ref(), by_name)
                .map_err(|m| err(Some(owns.span()), "owns", m))?;
            let outside: Vec<&str> = set
                .iter()
                .filter(|n| definition.binary_search(n).is_err())
                .map(|&n| cluster.nodes[n].name.as_str())
                .collect();
            if !outside.is_empty() {
                return Err(err(
                    Some(owns.span()),
                    "owns",
                    format!(
                        "{} not in the queue's definition (owns must be part of nodes/requires)",
                        encode_hostlist(&outside)
                    ),
                ));
            }
            set.into_iter().collect()
        }
    };

    let policy = match &raw.policy {
        None => QueuePolicy::Fcfs,
        Some(p) => QueuePolicy::parse(p.get_ref()).ok_or_else(|| {
            err(
                Some(p.span()),
                "policy",
                format!(
                    "unknown queue policy {:?} (expected fcfs, easy, hybrid or conservative)",
                    p.get_ref()
                ),
            )
        })?,
    };
    let match_policy = match &raw.match_policy {
        None => MatchPolicy::First,
        Some(p) => MatchPolicy::parse(p.get_ref()).ok_or_else(|| {
            err(
                Some(p.span()),
                "match_policy",
                format!(
                    "unknown match policy {:?} (expected first, firstnodex, high, low, hinode, lonode, hinodex, lonodex, variation, or knobs as `policy=high node_centric=true node_exclusive=false stop_on_1_matches=true`)",
                    p.get_ref()
                ),
            )
        })?,
    };
    let depth = |value: &Option<Spanned<u32>>, key: &str, default: u32| match value {
        None => Ok(default),
        Some(v) if *v.get_ref() > DEPTH_MAX => Err(err(
            Some(v.span()),
            key,
            format!(
                "{} is more than the limit of {DEPTH_MAX} (0 means all)",
                v.get_ref()
            ),
        )),
        Some(v) => Ok(*v.get_ref()),
    };
    let queue_depth = depth(&raw.queue_depth, "queue_depth", QUEUE_DEPTH_DEFAULT)?;
    let reservation_depth = depth(
        &raw.reservation_depth,
        "reservation_depth",
        RESERVATION_DEPTH_DEFAULT,
    )?;
    let duration = |value: &Option<Spanned<toml::Value>>, key: &str, default: u64| match value {
        None => Ok(default),
        Some(v) => duration_ms(v.get_ref()).map_err(|m| err(Some(v.span()), key, m)),
    };
    let max_duration_ms = duration(&raw.max_duration, "max_duration", 0)?;
    let default_default = if max_duration_ms == 0 {
        DEFAULT_DURATION_DEFAULT_MS
    } else {
        DEFAULT_DURATION_DEFAULT_MS.min(max_duration_ms)
    };
    let default_duration_ms = duration(&raw.default_duration, "default_duration", default_default)?;
    if max_duration_ms > 0 && (default_duration_ms == 0 || default_duration_ms > max_duration_ms) {
        let at = raw.default_duration.as_ref().map(Spanned::span);
        return Err(err(
            at,
            "default_duration",
            format!(
                "{} is longer than max_duration ({})",
                show_ms(default_duration_ms),
                show_ms(max_duration_ms)
            ),
        ));
    }
    Ok(QueueDef {
        name: name.to_owned(),
        policy,
        match_policy,
        queue_depth,
        reservation_depth,
        default_duration_ms,
        max_duration_ms,
        definition,
        owns,
        started: raw.started.unwrap_or(true),
        enabled: raw.enabled.unwrap_or(true),
    })
}

/// A hostlist resolved to node indices; the message names the hosts not in the cluster.
fn resolve_hostlist(text: &str, by_name: &HashMap<&str, usize>) -> Result<BTreeSet<usize>, String> {
    let hosts = decode_hostlist(text).map_err(|e| e.to_string())?;
    let mut set = BTreeSet::new();
    let mut missing = Vec::new();
    for host in &hosts {
        match by_name.get(host.as_str()) {
            Some(&i) => {
                set.insert(i);
            }
            None => missing.push(host.as_str()),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "{} not in the cluster ({} node{})",
            encode_hostlist(&missing),
            missing.len(),
            if missing.len() == 1 { "" } else { "s" }
        ));
    }
    Ok(set)
}

/// Definitions may overlap (started queues' too: that is what makes a move between two
/// running queues possible), but two queues cannot both be told to own a node.
fn check_owns_disjoint(
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

/// A duration in milliseconds: an integer or float of seconds, or a Flux duration
/// (`"90s"`, `"30m"`, `"1.5h"`, `"2d"`; a bare `"3600"` is seconds); `0`, `"0"`,
/// `"unlimited"` and `"inf"` mean none. One parser for every duration:
/// [`shardsched_jobspec::duration`].
pub fn duration_ms(value: &toml::Value) -> Result<u64, String> {
    let parsed = match value {
        toml::Value::Integer(s) => seconds_to_ms(*s as f64, &s.to_string()),
        toml::Value::Float(s) => seconds_to_ms(*s, &format!("{s:?}")),
        toml::Value::String(s) => parse_fsd(s, BareUnit::Seconds).map(|d| match d {
            Fsd::Finite(ms) => ms,
            Fsd::Unlimited => 0,
        }),
        other => {
            return Err(format!(
                "expected seconds or a duration like \"1h\", found a {}",
                other.type_str()
            ));
        }
    };
    parsed.map_err(|e| e.to_string())
}

fn show_ms(ms: u64) -> String {
    if ms == 0 {
        "unlimited".into()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}
