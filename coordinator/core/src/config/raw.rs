//! The configuration as written (serde, with the span of every value), and its validation
//! into a [`Config`].

mod queue;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use shardsched_resource::{Location, ReadError};
use shardsched_wire::limits::{ARRAY_ELEMENTS_DEFAULT, ARRAY_ELEMENTS_MAX};
use shardsched_wire::msg::quota::{LimitKind, LimitScope, LimitTable};
use toml::Spanned;

use super::{
    AgentsConfig, Cluster, Config, ConfigError, FAIRSHARE_HALF_LIFE_DEFAULT_MS,
    FAIRSHARE_HALF_LIFE_MIN_MS, FAIRSHARE_URGENCY_WEIGHT_DEFAULT, FAIRSHARE_WEIGHT_DEFAULT,
    FairShareConfig, HEARTBEAT_TIMEOUT_MAX_MS, HEARTBEAT_TIMEOUT_MIN_MS, HISTORY_DAYS_DEFAULT,
    HISTORY_DAYS_MAX, values,
};
use crate::QUEUES_MAX;
use queue::{RawQueue, check_owns_disjoint};
use shardsched_wire::msg::fairshare::FairShareWeights;

/// The most resource types `[cluster] load_allowlist` may name.
pub const LOAD_ALLOWLIST_TYPES_MAX: usize = 32;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    default_queue: Option<Spanned<String>>,
    array_elements_max: Option<Spanned<u32>>,
    history_days: Option<Spanned<u32>>,
    cluster: Option<Spanned<RawCluster>>,
    queues: Option<Spanned<BTreeMap<String, Spanned<RawQueue>>>>,
    agents: Option<RawAgents>,
    http: Option<Spanned<RawHttp>>,
    limits: Option<Spanned<RawLimits>>,
    fairshare: Option<Spanned<RawFairShare>>,
}

/// `[fairshare]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFairShare {
    half_life: Option<toml::Value>,
    weight: Option<u64>,
    urgency_weight: Option<u64>,
}

/// `[limits]`: every user's default, then `[limits.users.NAME]` and `[limits.queues.NAME]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_running: Option<u64>,
    max_nodes: Option<u64>,
    max_cores: Option<u64>,
    max_pending: Option<u64>,
    users: Option<BTreeMap<String, RawLimitSet>>,
    queues: Option<BTreeMap<String, RawLimitSet>>,
}

/// One set of limits.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimitSet {
    max_running: Option<u64>,
    max_nodes: Option<u64>,
    max_cores: Option<u64>,
    max_pending: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgents {
    required: Option<bool>,
    heartbeat_timeout: Option<Spanned<toml::Value>>,
    return_to_service: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    spec: Option<Spanned<String>>,
    inline: Option<Spanned<toml::Table>>,
    load_allowlist: Option<Spanned<Vec<String>>>,
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
        queues.push(queue::queue(&name, q, &cluster, &by_name, &errors)?);
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
    let array_elements_max = within(
        raw.array_elements_max,
        "array_elements_max",
        ARRAY_ELEMENTS_DEFAULT,
        ARRAY_ELEMENTS_MAX,
        &errors,
    )?;
    let history_days = within(
        raw.history_days,
        "history_days",
        HISTORY_DAYS_DEFAULT,
        HISTORY_DAYS_MAX,
        &errors,
    )?;
    let agents = agents(raw.agents, &errors)?;
    let limits = match raw.limits {
        Some(raw) => {
            let span = raw.span();
            limits(raw.into_inner()).map_err(|refusal| {
                errors.at(Some(span), format!("[limits]: {}", refusal.message))
            })?
        }
        None => LimitTable::default(),
    };
    let http_listen = match raw.http.and_then(|h| h.into_inner().listen) {
        Some(listen) => {
            let span = listen.span();
            let text = listen.into_inner();
            Some(text.parse().map_err(|_| {
                errors.at(
                    Some(span),
                    format!("[http] listen: {text:?} is not an address (ip:port)"),
                )
            })?)
        }
        None => None,
    };
    let fairshare = match raw.fairshare {
        Some(raw) => {
            let span = raw.span();
            let fairshare = fairshare(raw.into_inner())
                .map_err(|message| errors.at(Some(span), format!("[fairshare]: {message}")))?;
            Some(fairshare)
        }
        None => None,
    };
    Ok(Config {
        origin: origin.to_owned(),
        cluster,
        default_queue,
        queues,
        array_elements_max,
        history_days,
        agents,
        http_listen,
        limits,
        fairshare,
    })
}

/// `[fairshare]` with its defaults, each value within its bound.
fn fairshare(raw: RawFairShare) -> Result<FairShareConfig, String> {
    let half_life_ms = match &raw.half_life {
        Some(value) => values::duration_ms(value).map_err(|e| format!("half_life: {e}"))?,
        None => FAIRSHARE_HALF_LIFE_DEFAULT_MS,
    };
    if half_life_ms < FAIRSHARE_HALF_LIFE_MIN_MS {
        return Err(format!(
            "half_life: {half_life_ms} ms, less than {FAIRSHARE_HALF_LIFE_MIN_MS} ms (and not unlimited)"
        ));
    }
    let weights = FairShareWeights {
        weight: raw.weight.unwrap_or(FAIRSHARE_WEIGHT_DEFAULT),
        urgency_weight: raw
            .urgency_weight
            .unwrap_or(FAIRSHARE_URGENCY_WEIGHT_DEFAULT),
    };
    weights.check().map_err(|r| r.message)?;
    Ok(FairShareConfig {
        half_life_ms,
        weights,
    })
}

/// `[limits]` as a table of limits (names and counts bounded as `limits set` bounds them).
fn limits(raw: RawLimits) -> Result<LimitTable, shardsched_wire::msg::Refusal> {
    let mut table = LimitTable::default();
    let mut put = |scope: LimitScope, set: RawLimitSet| {
        let values = [
            (LimitKind::MaxRunning, set.max_running),
            (LimitKind::MaxNodes, set.max_nodes),
            (LimitKind::MaxCores, set.max_cores),
            (LimitKind::MaxPending, set.max_pending),
        ];
        values
            .into_iter()
            .try_for_each(|(kind, value)| match value {
                Some(v) => table.set(kind, scope.clone(), Some(v)),
                None => Ok(()),
            })
    };
    let each_user = RawLimitSet {
        max_running: raw.max_running,
        max_nodes: raw.max_nodes,
        max_cores: raw.max_cores,
        max_pending: raw.max_pending,
    };
    put(LimitScope::EachUser, each_user)?;
    for (user, set) in raw.users.unwrap_or_default() {
        put(LimitScope::User(user), set)?;
    }
    for (queue, set) in raw.queues.unwrap_or_default() {
        put(LimitScope::Queue(queue), set)?;
    }
    Ok(table)
}

/// `[agents]`, with its defaults.
fn agents(raw: Option<RawAgents>, errors: &Errors<'_>) -> Result<AgentsConfig, ConfigError> {
    let mut agents = AgentsConfig::default();
    let Some(raw) = raw else {
        return Ok(agents);
    };
    agents.required = raw.required.unwrap_or(agents.required);
    agents.return_to_service = raw.return_to_service.unwrap_or(agents.return_to_service);
    if let Some(value) = raw.heartbeat_timeout {
        let ms = values::duration_ms(value.get_ref()).map_err(|m| {
            errors.at(
                Some(value.span()),
                format!("[agents] heartbeat_timeout: {m}"),
            )
        })?;
        if !(HEARTBEAT_TIMEOUT_MIN_MS..=HEARTBEAT_TIMEOUT_MAX_MS).contains(&ms) {
            return Err(errors.at(
                Some(value.span()),
                format!(
                    "[agents] heartbeat_timeout: {ms} ms is outside {HEARTBEAT_TIMEOUT_MIN_MS} ms \
                     to {HEARTBEAT_TIMEOUT_MAX_MS} ms"
                ),
            ));
        }
        agents.heartbeat_timeout_ms = ms;
    }
    Ok(agents)
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
/// A top-level count: `default` when absent, else within `1..=max`.
fn within(
    value: Option<Spanned<u32>>,
    key: &str,
    default: u32,
    max: u32,
    errors: &Errors<'_>,
) -> Result<u32, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if (1..=max).contains(v.get_ref()) => Ok(v.into_inner()),
        Some(v) => Err(errors.at(
            Some(v.span()),
            format!("{key} = {}: must be 1..={max}", v.get_ref()),
        )),
    }
}

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
            && kind.len() <= shardsched_wire::limits::NAME_BYTES_MAX
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
