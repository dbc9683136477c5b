//! The values a queue is made of, parsed and checked one way whether they come from the
//! configuration file (`raw`) or from a run-time change on the wire
//! ([`crate::queue_table`]): hostlists, depths, durations, and the defaults of the keys
//! left out. Each function answers a message without the key's name; the caller prefixes
//! the key (and, for the file, the place).

use std::collections::BTreeSet;

use shardsched_jobspec::duration::{BareUnit, Fsd, parse_fsd, seconds_to_ms};
use shardsched_resource::{decode_hostlist, encode_hostlist};

/// Pending jobs per cycle and reservations, like the qmanager's bound (0 means all).
pub const DEPTH_MAX: u32 = 1_000_000;
/// `queue_depth` of a queue that names none.
pub(crate) const QUEUE_DEPTH_DEFAULT: u32 = 32;
/// `reservation_depth` of a queue that names none.
pub(crate) const RESERVATION_DEPTH_DEFAULT: u32 = 64;
/// `default_duration` of a queue that names none (and has no shorter maximum): an hour.
const DEFAULT_DURATION_DEFAULT_MS: u64 = 3_600_000;

/// A depth, at most [`DEPTH_MAX`].
pub(crate) fn depth(depth: u32) -> Result<u32, String> {
    if depth > DEPTH_MAX {
        return Err(format!(
            "{depth} is more than the limit of {DEPTH_MAX} (0 means all)"
        ));
    }
    Ok(depth)
}

/// A hostlist resolved to node indices (`index_of`: a node name's index in the cluster);
/// the message names the hosts not in the cluster.
pub(crate) fn resolve_hostlist(
    text: &str,
    index_of: impl Fn(&str) -> Option<usize>,
) -> Result<BTreeSet<usize>, String> {
    let hosts = decode_hostlist(text).map_err(|e| e.to_string())?;
    let mut set = BTreeSet::new();
    let mut missing = Vec::new();
    for host in &hosts {
        match index_of(host) {
            Some(i) => {
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

/// A duration in milliseconds: an integer or float of seconds, or a Flux duration
/// (`"90s"`, `"30m"`, `"1.5h"`, `"2d"`; a bare `"3600"` is seconds); `0`, `"0"`,
/// `"unlimited"` and `"inf"` mean none. One parser for every duration:
/// [`shardsched_jobspec::duration`].
pub fn duration_ms(value: &toml::Value) -> Result<u64, String> {
    let parsed = match value {
        toml::Value::Integer(s) => seconds_to_ms(*s as f64, &s.to_string()),
        toml::Value::Float(s) => seconds_to_ms(*s, &format!("{s:?}")),
        toml::Value::String(s) => return duration_text_ms(s),
        other => {
            return Err(format!(
                "expected seconds or a duration like \"1h\", found a {}",
                other.type_str()
            ));
        }
    };
    parsed.map_err(|e| e.to_string())
}

/// A duration as text (a run-time change's `--max-duration 2h`), read as [`duration_ms`]
/// reads a string.
pub(crate) fn duration_text_ms(text: &str) -> Result<u64, String> {
    parse_fsd(text, BareUnit::Seconds)
        .map(|d| match d {
            Fsd::Finite(ms) => ms,
            Fsd::Unlimited => 0,
        })
        .map_err(|e| e.to_string())
}

/// The default duration of a queue that names none: an hour, or its maximum if shorter.
pub(crate) fn default_duration_within(max_duration_ms: u64) -> u64 {
    match max_duration_ms {
        0 => DEFAULT_DURATION_DEFAULT_MS,
        max => DEFAULT_DURATION_DEFAULT_MS.min(max),
    }
}

/// Whether a default duration breaks the maximum (0 is unlimited, for both).
pub(crate) fn longer_than_max(default_duration_ms: u64, max_duration_ms: u64) -> bool {
    max_duration_ms > 0 && (default_duration_ms == 0 || default_duration_ms > max_duration_ms)
}

/// Refuses a default duration longer than the maximum, naming both as a user writes them.
pub(crate) fn check_default_within_max(
    default_duration_ms: u64,
    max_duration_ms: u64,
) -> Result<(), String> {
    if longer_than_max(default_duration_ms, max_duration_ms) {
        return Err(format!(
            "{} is longer than max_duration ({})",
            show_ms(default_duration_ms),
            show_ms(max_duration_ms)
        ));
    }
    Ok(())
}

/// A duration as a user would write it: `2h`, `30m`, `90s`, `1500ms`, `unlimited`.
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
