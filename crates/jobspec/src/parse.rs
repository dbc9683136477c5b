//! Turning a generic document value into the [`Jobspec`] model.
//!
//! The text has been read into a generic [`serde_json::Value`] (see [`crate::read`]); this
//! module walks it by hand so that every error can name its field path, then checks the
//! model with [`Jobspec::validate`].

use serde_json::{Map, Value};

use crate::constraint::Constraint;
use crate::duration;
use crate::error::JobspecError;
use crate::model::{
    Attributes, Count, CountOp, Jobspec, Resource, Task, TaskCount, VERSION_1, VERSION_GENERAL,
};
use crate::read::{JOBSPEC_DEPTH_MAX, describe, value_depth_exceeds};

const TOP_KEYS: &[&str] = &["version", "resources", "tasks", "attributes"];
const RESOURCE_KEYS: &[&str] = &["type", "count", "with", "exclusive", "label", "unit", "id"];
const COUNT_KEYS: &[&str] = &["min", "max", "operator", "operand"];
const TASK_KEYS: &[&str] = &["command", "slot", "count"];
const ATTRIBUTE_KEYS: &[&str] = &["system", "user"];
const COUNT_SHAPE: &str = "expected an integer or a map with min/max/operator/operand";

/// Reads a jobspec from an already parsed JSON value (e.g. one embedded in another document).
pub fn from_value(value: &Value) -> Result<Jobspec, JobspecError> {
    if value_depth_exceeds(value, JOBSPEC_DEPTH_MAX) {
        return Err(JobspecError::TooDeep {
            max: JOBSPEC_DEPTH_MAX,
            line: 0,
            column: 0,
        });
    }
    let top = value.as_object().ok_or_else(|| {
        JobspecError::invalid(
            "",
            format!(
                "a jobspec is a map with keys version, resources, tasks and attributes; found {}",
                describe(value)
            ),
        )
    })?;
    if let Some(key) = top.keys().find(|k| !TOP_KEYS.contains(&k.as_str())) {
        return Err(JobspecError::invalid(
            key.as_str(),
            "unknown top-level key; a jobspec has only version, resources, tasks and attributes",
        ));
    }
    let version = parse_version(required(top, "", "version")?)?;
    let resources = non_empty_list(required(top, "", "resources")?, "resources", "resources")?
        .iter()
        .enumerate()
        .map(|(i, r)| parse_resource(r, &format!("resources[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let tasks = non_empty_list(required(top, "", "tasks")?, "tasks", "tasks")?
        .iter()
        .enumerate()
        .map(|(i, t)| parse_task(t, &format!("tasks[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let attributes = match top.get("attributes") {
        Some(a) => parse_attributes(a, version)?,
        None if version == VERSION_1 => {
            return Err(JobspecError::invalid(
                "attributes.system.duration",
                "required in version 1",
            ));
        }
        None => Attributes::default(),
    };
    let jobspec = Jobspec {
        version,
        resources,
        tasks,
        attributes,
    };
    jobspec.validate()?;
    Ok(jobspec)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn required<'a>(
    map: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a Value, JobspecError> {
    map.get(key)
        .ok_or_else(|| JobspecError::invalid(join(path, key), "required key is missing"))
}

fn as_map<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, JobspecError> {
    value.as_object().ok_or_else(|| {
        JobspecError::invalid(path, format!("expected a map, found {}", describe(value)))
    })
}

fn check_keys(map: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), JobspecError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(JobspecError::invalid(
            join(path, key),
            format!("unknown key; expected one of {}", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn non_empty_list<'a>(
    value: &'a Value,
    path: &str,
    what: &str,
) -> Result<&'a Vec<Value>, JobspecError> {
    match value.as_array() {
        Some(list) if list.is_empty() => Err(JobspecError::invalid(
            path,
            format!("must list at least one of the {what}"),
        )),
        Some(list) => Ok(list),
        None => Err(JobspecError::invalid(
            path,
            format!("expected a list of {what}, found {}", describe(value)),
        )),
    }
}

fn string(value: &Value, path: &str) -> Result<String, JobspecError> {
    match value.as_str() {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(JobspecError::invalid(
            path,
            format!("expected a non-empty string, found {}", describe(value)),
        )),
    }
}

fn unsigned(value: &Value, path: &str) -> Result<u64, JobspecError> {
    value.as_u64().ok_or_else(|| {
        JobspecError::invalid(
            path,
            format!("expected a non-negative integer, found {}", describe(value)),
        )
    })
}

fn parse_version(value: &Value) -> Result<u32, JobspecError> {
    let n = value.as_u64().ok_or_else(|| {
        JobspecError::invalid(
            "version",
            format!("expected an integer, found {}", describe(value)),
        )
    })?;
    match u32::try_from(n) {
        Ok(v) if v == VERSION_1 || v == VERSION_GENERAL => Ok(v),
        _ => Err(JobspecError::invalid(
            "version",
            format!(
                "unsupported version {n}; supported are {VERSION_1} (RFC 25) and {VERSION_GENERAL} (the general form)"
            ),
        )),
    }
}

fn parse_resource(value: &Value, path: &str) -> Result<Resource, JobspecError> {
    let map = value.as_object().ok_or_else(|| {
        JobspecError::invalid(
            path,
            format!(
                "expected a resource map with type and count, found {}",
                describe(value)
            ),
        )
    })?;
    check_keys(map, RESOURCE_KEYS, path)?;
    let kind_path = join(path, "type");
    let kind = string(required(map, path, "type")?, &kind_path)?;
    let count = parse_count(required(map, path, "count")?, &join(path, "count"))?;
    let with = match map.get("with") {
        None => Vec::new(),
        Some(Value::Array(children)) => children
            .iter()
            .enumerate()
            .map(|(i, c)| parse_resource(c, &format!("{path}.with[{i}]")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(JobspecError::invalid(
                join(path, "with"),
                format!("expected a list of resources, found {}", describe(other)),
            ));
        }
    };
    let exclusive = match map.get("exclusive") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(JobspecError::invalid(
                join(path, "exclusive"),
                format!("expected true or false, found {}", describe(other)),
            ));
        }
    };
    let label = map
        .get("label")
        .map(|v| string(v, &join(path, "label")))
        .transpose()?;
    let unit = map
        .get("unit")
        .map(|v| match v {
            Value::String(s) => Ok(s.clone()),
            other => Err(JobspecError::invalid(
                join(path, "unit"),
                format!("expected a string, found {}", describe(other)),
            )),
        })
        .transpose()?;
    let id = map
        .get("id")
        .map(|v| match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) if n.is_u64() => Ok(n.to_string()),
            other => Err(JobspecError::invalid(
                join(path, "id"),
                format!("expected a string or an integer, found {}", describe(other)),
            )),
        })
        .transpose()?;
    Ok(Resource {
        kind,
        count,
        with,
        exclusive,
        label,
        unit,
        id,
    })
}

fn parse_count(value: &Value, path: &str) -> Result<Count, JobspecError> {
    match value {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(n), _) => Ok(Count::exact(n)),
            (None, Some(neg)) => Err(JobspecError::invalid(
                path,
                format!("must be at least 1, found {neg}"),
            )),
            _ => Err(JobspecError::invalid(
                path,
                format!("{COUNT_SHAPE}, found {}", describe(value)),
            )),
        },
        Value::Object(map) => {
            check_keys(map, COUNT_KEYS, path)?;
            let min = unsigned(required(map, path, "min")?, &join(path, "min"))?;
            let max = match map.get("max") {
                Some(v) => unsigned(v, &join(path, "max"))?,
                None => u64::MAX,
            };
            let operator = match map.get("operator") {
                None => CountOp::Add,
                Some(v) => v.as_str().and_then(CountOp::from_symbol).ok_or_else(|| {
                    JobspecError::invalid(
                        join(path, "operator"),
                        format!("expected \"+\", \"*\" or \"^\", found {}", describe(v)),
                    )
                })?,
            };
            let operand = match map.get("operand") {
                Some(v) => unsigned(v, &join(path, "operand"))?,
                None => 1,
            };
            Ok(Count {
                min,
                max,
                operator,
                operand,
            })
        }
        other => Err(JobspecError::invalid(
            path,
            format!("{COUNT_SHAPE}, found {}", describe(other)),
        )),
    }
}

fn parse_task(value: &Value, path: &str) -> Result<Task, JobspecError> {
    let map = as_map(value, path)?;
    check_keys(map, TASK_KEYS, path)?;
    let command_path = join(path, "command");
    let command = non_empty_list(required(map, path, "command")?, &command_path, "arguments")?
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            Value::String(s) => Ok(s.clone()),
            other => Err(JobspecError::invalid(
                format!("{command_path}[{i}]"),
                format!("expected a string, found {}", describe(other)),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let slot = string(required(map, path, "slot")?, &join(path, "slot"))?;
    let count_path = join(path, "count");
    let count_value = required(map, path, "count")?;
    let shape_error = || {
        JobspecError::invalid(
            &count_path,
            format!(
                "expected {{per_slot: N}} or {{total: N}}, found {}",
                describe(count_value)
            ),
        )
    };
    let count_map = count_value.as_object().ok_or_else(shape_error)?;
    let count = match (
        count_map.len(),
        count_map.get("per_slot"),
        count_map.get("total"),
    ) {
        (1, Some(n), None) => TaskCount::PerSlot(unsigned(n, &join(&count_path, "per_slot"))?),
        (1, None, Some(n)) => TaskCount::Total(unsigned(n, &join(&count_path, "total"))?),
        _ => return Err(shape_error()),
    };
    Ok(Task {
        command,
        slot,
        count,
    })
}

fn parse_attributes(value: &Value, version: u32) -> Result<Attributes, JobspecError> {
    let map = as_map(value, "attributes")?;
    check_keys(map, ATTRIBUTE_KEYS, "attributes")?;
    let mut attributes = Attributes::default();
    if let Some(user) = map.get("user") {
        attributes.user = as_map(user, "attributes.user")?.clone();
    }
    let empty = Map::new();
    let system = match map.get("system") {
        Some(s) => as_map(s, "attributes.system")?,
        None => &empty,
    };
    for (key, v) in system {
        let path = format!("attributes.system.{key}");
        match key.as_str() {
            "duration" => attributes.duration = parse_duration(v, &path)?,
            "queue" => attributes.queue = Some(string(v, &path)?),
            "constraints" => attributes.constraints = Some(Constraint::from_json(v, &path)?),
            _ => {
                attributes.system_other.insert(key.clone(), v.clone());
            }
        }
    }
    crate::options::check(&attributes.system_other)?;
    if version == VERSION_1 && !system.contains_key("duration") {
        return Err(JobspecError::invalid(
            "attributes.system.duration",
            "required in version 1",
        ));
    }
    Ok(attributes)
}

/// `attributes.system.duration`: a number of seconds (RFC 14), as whole seconds rounded up,
/// with the bounds every duration has ([`crate::duration`]).
fn parse_duration(value: &Value, path: &str) -> Result<u64, JobspecError> {
    let Value::Number(n) = value else {
        return Err(JobspecError::invalid(
            path,
            format!("expected a number of seconds, found {}", describe(value)),
        ));
    };
    let secs = n.as_f64().unwrap_or(f64::NAN);
    match duration::seconds_to_ms(secs, &n.to_string()) {
        Ok(ms) => Ok(duration::ms_to_whole_seconds(ms)),
        Err(duration::DurationError::Negative(_) | duration::DurationError::Malformed(_)) => Err(
            JobspecError::invalid(path, format!("must be a number of seconds >= 0, found {n}")),
        ),
        Err(e) => Err(JobspecError::invalid(path, e.to_string())),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
