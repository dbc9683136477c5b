//! Fluxion's own reading of a jobspec (its `libjobspec`), for `shardsched query`.
//!
//! resource-query does not hold a jobspec to RFC 25 or to our checks: it wants exactly the
//! four top-level keys (`attributes` may be null), any version from 1 to 9999, resources of
//! any shape — a count is an unsigned integer (0 included) or a map with `min` and either
//! all or none of `max`, `operator`, `operand` — every slot labelled, and tasks with a
//! command and a slot. Its YAML reader takes scalars as untyped text, so `count: "2"` is 2.
//! What it refuses here, it refuses before matching: the job id is not consumed.

use serde_json::{Map, Value};

use crate::constraint::Constraint;
use crate::error::JobspecError;
use crate::model::{Attributes, Count, CountOp, Jobspec, Resource, Task, TaskCount};
use crate::read::{describe, read_value};

/// Parses `text` (YAML or JSON) as Fluxion's jobspec reader does.
pub fn parse_fluxion(text: &str) -> Result<Jobspec, JobspecError> {
    parse_fluxion_noting(text, &mut Vec::new())
}

/// [`parse_fluxion`], noting in `types` every resource type read, in the order Fluxion's
/// reader reads them, up to the error if there is one. Why: that reader refuses a type it
/// does not know as it reads it, before the rest of its resource (the count first) and
/// before every resource after it; which types it knows is the caller's to say (those of
/// its graph), so a caller that gets an error here asks first whether a type read before
/// it was unknown: that is the error Fluxion reports.
pub fn parse_fluxion_noting(text: &str, types: &mut Vec<String>) -> Result<Jobspec, JobspecError> {
    from_value_noting(&read_value(text)?, types)
}

fn from_value_noting(value: &Value, types: &mut Vec<String>) -> Result<Jobspec, JobspecError> {
    let top = value
        .as_object()
        .ok_or_else(|| JobspecError::invalid("", "Top level of jobspec is not a mapping"))?;
    for key in ["version", "resources", "tasks", "attributes"] {
        if !top.contains_key(key) {
            return Err(JobspecError::invalid(
                key,
                format!("Missing key \"{key}\" in top level mapping"),
            ));
        }
    }
    if top.len() != 4 {
        return Err(JobspecError::invalid(
            "",
            "Top mapping in jobspec must have exactly four entries",
        ));
    }
    let version = unsigned(&top["version"], "version")?;
    if !(1..=9999).contains(&version) {
        return Err(JobspecError::invalid(
            "version",
            "Only jobspec \"version\" 1-9999 is supported",
        ));
    }
    let attributes = match &top["attributes"] {
        Value::Null => Attributes::default(),
        a => attributes(a)?,
    };
    let resources = sequence(&top["resources"], "resources")?
        .iter()
        .enumerate()
        .map(|(i, r)| resource(r, &format!("resources[{i}]"), types))
        .collect::<Result<Vec<_>, _>>()?;
    let tasks = sequence(&top["tasks"], "tasks")?
        .iter()
        .enumerate()
        .map(|(i, t)| task(t, &format!("tasks[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Jobspec {
        version: u32::try_from(version).unwrap_or(u32::MAX),
        resources,
        tasks,
        attributes,
    })
}

fn sequence<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, JobspecError> {
    v.as_array()
        .ok_or_else(|| JobspecError::invalid(path, format!("\"{path}\" is not a sequence")))
}

/// A scalar's text, as yaml-cpp sees scalars.
fn scalar(v: &Value, path: &str) -> Result<String, JobspecError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok("~".to_string()),
        other => Err(JobspecError::invalid(
            path,
            format!("expected a scalar, found {}", describe(other)),
        )),
    }
}

/// An unsigned 32-bit integer, as yaml-cpp's `as<unsigned>` reads it.
fn unsigned(v: &Value, path: &str) -> Result<u64, JobspecError> {
    let text = scalar(v, path)?;
    let t = text.trim();
    let parsed = t.strip_prefix("0x").map_or_else(
        || t.parse::<u32>().ok(),
        |h| u32::from_str_radix(h, 16).ok(),
    );
    parsed.map(u64::from).ok_or_else(|| {
        JobspecError::invalid(path, format!("bad conversion of {text:?} to an unsigned"))
    })
}

fn signed(v: &Value, path: &str) -> Result<i64, JobspecError> {
    let text = scalar(v, path)?;
    text.trim()
        .parse::<i32>()
        .map(i64::from)
        .map_err(|_| JobspecError::invalid(path, format!("bad conversion of {text:?} to an int")))
}

/// The value of `key` in `map` (a `what` at `path`), or Fluxion's error for a missing key.
fn required<'a>(
    map: &'a Map<String, Value>,
    path: &str,
    key: &str,
    what: &str,
) -> Result<&'a Value, JobspecError> {
    map.get(key)
        .ok_or_else(|| JobspecError::invalid(path, format!("Key \"{key}\" missing from {what}")))
}

fn resource(v: &Value, path: &str, types: &mut Vec<String>) -> Result<Resource, JobspecError> {
    let map = v
        .as_object()
        .ok_or_else(|| JobspecError::invalid(path, "resource is not a mapping"))?;
    let kind = scalar(
        required(map, path, "type", "resource")?,
        &format!("{path}.type"),
    )?;
    types.push(kind.clone());
    let count = count(
        required(map, path, "count", "resource")?,
        &format!("{path}.count"),
    )?;
    let mut fields = 2;
    let mut r = Resource::new(kind, count);
    if let Some(u) = map.get("unit") {
        fields += 1;
        r.unit = Some(scalar(u, &format!("{path}.unit"))?);
    }
    if let Some(x) = map.get("exclusive") {
        fields += 1;
        r.exclusive = Some(match scalar(x, &format!("{path}.exclusive"))?.as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(JobspecError::invalid(
                    format!("{path}.exclusive"),
                    "Value of \"exclusive\" must be either \"true\" or \"false\"",
                ));
            }
        });
    }
    if let Some(w) = map.get("with") {
        fields += 1;
        let with_path = format!("{path}.with");
        r.with = sequence(w, &with_path)?
            .iter()
            .enumerate()
            .map(|(i, c)| resource(c, &format!("{with_path}[{i}]"), types))
            .collect::<Result<Vec<_>, _>>()?;
    }
    if let Some(l) = map.get("label") {
        fields += 1;
        r.label = Some(scalar(l, &format!("{path}.label"))?);
    } else if r.kind == "slot" {
        return Err(JobspecError::invalid(path, "All slots must be labeled"));
    }
    if let Some(i) = map.get("id") {
        fields += 1;
        r.id = Some(scalar(i, &format!("{path}.id"))?);
    }
    if fields != map.len() {
        return Err(JobspecError::invalid(
            path,
            "Unrecognized key in resource mapping",
        ));
    }
    Ok(r)
}

fn count(v: &Value, path: &str) -> Result<Count, JobspecError> {
    let Some(map) = v.as_object() else {
        if v.is_array() {
            return Err(JobspecError::invalid(path, "count is not a mapping"));
        }
        let n = unsigned(v, path)?;
        return Ok(Count::exact(n));
    };
    let min_v = required(map, path, "min", "count")?;
    let extra = ["max", "operator", "operand"];
    let present = extra.iter().filter(|k| map.contains_key(**k)).count();
    let mut c = Count {
        min: 0,
        max: u64::from(u32::MAX),
        operator: CountOp::Add,
        operand: 1,
    };
    if present > 0 {
        if present != extra.len() {
            return Err(JobspecError::invalid(
                path,
                "All or none of \"max\", \"operator\", and \"operand\" must be specified",
            ));
        }
        c.max = unsigned(&map["max"], &format!("{path}.max"))?;
        let op = scalar(&map["operator"], &format!("{path}.operator"))?;
        let operand = signed(&map["operand"], &format!("{path}.operand"))?;
        let op_char = op.chars().next().unwrap_or(' ');
        c.operator = match op_char {
            '+' => CountOp::Add,
            '*' => CountOp::Mul,
            '^' => CountOp::Pow,
            _ => return Err(JobspecError::invalid(path, "Invalid count operator")),
        };
        let least = c.operator.min_operand();
        if operand < i64::try_from(least).unwrap_or(2) {
            return Err(JobspecError::invalid(
                format!("{path}.operand"),
                format!(
                    "\"operand\" must be at least {least} for operator '{}'",
                    c.operator.symbol()
                ),
            ));
        }
        c.operand = u64::try_from(operand).unwrap_or(1);
    }
    c.min = unsigned(min_v, &format!("{path}.min"))?;
    if c.min < 1 {
        return Err(JobspecError::invalid(
            format!("{path}.min"),
            "\"min\" must be greater than zero",
        ));
    }
    if present > 0 && c.max < c.min {
        return Err(JobspecError::invalid(
            format!("{path}.max"),
            "\"max\" must be greater than or equal to \"min\"",
        ));
    }
    if c.operator == CountOp::Pow && c.min < 2 {
        return Err(JobspecError::invalid(
            format!("{path}.min"),
            "\"min\" must be greater than one for exponentiation '^'",
        ));
    }
    Ok(c)
}

fn task(v: &Value, path: &str) -> Result<Task, JobspecError> {
    let map = v
        .as_object()
        .ok_or_else(|| JobspecError::invalid(path, "task is not a mapping"))?;
    let command = match required(map, path, "command", "task")? {
        Value::Array(args) => args
            .iter()
            .enumerate()
            .map(|(i, a)| scalar(a, &format!("{path}.command[{i}]")))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(JobspecError::invalid(
                format!("{path}.command"),
                "\"command\" value must be a sequence",
            ));
        }
    };
    let slot = scalar(
        required(map, path, "slot", "task")?,
        &format!("{path}.slot"),
    )?;
    let mut count = TaskCount::PerSlot(1);
    if let Some(c) = map.get("count") {
        let cm = c.as_object().ok_or_else(|| {
            JobspecError::invalid(
                format!("{path}.count"),
                "\"count\" in task is not a mapping",
            )
        })?;
        let mut entries = cm.iter();
        let (Some((k, n)), None) = (entries.next(), entries.next()) else {
            return Err(JobspecError::invalid(
                format!("{path}.count"),
                "\"count\" in task must have exactly one entry",
            ));
        };
        let n = scalar(n, &format!("{path}.count.{k}"))?
            .trim()
            .parse::<u64>()
            .unwrap_or(1);
        count = if k == "total" {
            TaskCount::Total(n)
        } else {
            TaskCount::PerSlot(n)
        };
    }
    for key in ["distribution"] {
        if let Some(d) = map.get(key) {
            scalar(d, &format!("{path}.{key}"))?;
        }
    }
    if let Some(a) = map.get("attributes")
        && !a.is_object()
    {
        return Err(JobspecError::invalid(
            format!("{path}.attributes"),
            "\"attributes\" in task is not a mapping",
        ));
    }
    if !(3..=5).contains(&map.len()) {
        return Err(JobspecError::invalid(
            path,
            "impossible number of entries in task mapping",
        ));
    }
    Ok(Task {
        command,
        slot,
        count,
    })
}

fn attributes(v: &Value) -> Result<Attributes, JobspecError> {
    let map = v
        .as_object()
        .ok_or_else(|| JobspecError::invalid("attributes", "\"attributes\" is not a map"))?;
    let mut out = Attributes::default();
    for (key, value) in map {
        match key.as_str() {
            "user" => {
                if let Value::Object(u) = value {
                    out.user = u.clone();
                }
            }
            "system" => system(value, &mut out)?,
            _ => {
                return Err(JobspecError::invalid(
                    format!("attributes.{key}"),
                    "Unknown key in \"attributes\"",
                ));
            }
        }
    }
    Ok(out)
}

fn system(v: &Value, out: &mut Attributes) -> Result<(), JobspecError> {
    let empty = Map::new();
    let map = match v {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => {
            return Err(JobspecError::invalid(
                "attributes.system",
                format!("expected a map, found {}", describe(other)),
            ));
        }
    };
    for (key, value) in map {
        let path = format!("attributes.system.{key}");
        match key.as_str() {
            "duration" => out.duration = duration(value, &path)?,
            "queue" => out.queue = Some(scalar(value, &path)?).filter(|q| !q.is_empty()),
            "constraints" => out.constraints = Some(Constraint::from_json(value, &path)?),
            _ => {
                out.system_other.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(())
}

/// A duration as a double, rounded up to whole seconds. Negative or not-a-number durations
/// are refused here (Fluxion refuses them when matching, without consuming the job id
/// either).
fn duration(v: &Value, path: &str) -> Result<u64, JobspecError> {
    let text = scalar(v, path)?;
    let secs: f64 = text.trim().parse().map_err(|_| {
        JobspecError::invalid(path, format!("bad conversion of {text:?} to a double"))
    })?;
    if secs.is_nan() || secs < 0.0 {
        return Err(JobspecError::invalid(
            path,
            format!("invalid duration {text}"),
        ));
    }
    let up = secs.ceil();
    if up >= 18_446_744_073_709_551_616.0 {
        return Err(JobspecError::invalid(
            path,
            format!("is too large, found {text}"),
        ));
    }
    Ok(up as u64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_types_read_before_an_error_are_noted_in_reading_order() {
        // The first resource's children are read before the second resource; the second's
        // type before its count, which is refused; the tasks are never read.
        let text = "version: 9999\nresources:\n  - type: slot\n    count: 1\n    label: s\n    with:\n      - {type: core, count: 1}\n      - {type: bb, count: 1}\n  - type: gpu\n    count: {min: 1, max: 1}\ntasks: [{command: [a], slot: s, count: {per_slot: 1}}]\nattributes: {}\n";
        let mut types = Vec::new();
        let err = parse_fluxion_noting(text, &mut types).unwrap_err();
        assert!(err.to_string().contains("All or none of"), "{err}");
        assert_eq!(types, ["slot", "core", "bb", "gpu"]);
        // A jobspec that parses notes every type.
        let good = text.replace("{min: 1, max: 1}", "1");
        let mut types = Vec::new();
        parse_fluxion_noting(&good, &mut types).unwrap();
        assert_eq!(types, ["slot", "core", "bb", "gpu"]);
    }

    #[test]
    fn version_1_is_not_held_to_rfc_25() {
        let js = parse_fluxion(
            "version: 1\nresources:\n  - type: socket\n    count: 2\n    with:\n      - {type: core, count: 3}\n      - {type: memory, count: 4}\ntasks:\n  - command: [app]\n    slot: s\n    count: {per_slot: 1}\nattributes: null\n",
        )
        .unwrap();
        assert_eq!(js.version, 1);
        assert_eq!(js.resources[0].with.len(), 2);
        assert_eq!(js.attributes.duration, 0);
    }

    #[test]
    fn counts_read_as_libjobspec_reads_them() {
        let top = |count: &str| {
            format!(
                "version: 9999\nresources: [{{type: node, count: {count}}}]\ntasks: [{{command: [a], slot: s, count: {{per_slot: 1}}}}]\nattributes: {{}}\n"
            )
        };
        let c = |count: &str| parse_fluxion(&top(count)).map(|j| j.resources[0].count);
        assert_eq!(c("0").unwrap(), Count::exact(0));
        assert_eq!(c("'3'").unwrap(), Count::exact(3));
        assert_eq!(c("{min: 2}").unwrap().max, u64::from(u32::MAX));
        assert!(
            c("{min: 2, max: 4}").is_err(),
            "all or none of max/operator/operand"
        );
        assert!(c("{min: 1, max: 4, operator: '^', operand: 2}").is_err());
        assert!(c("{min: 0}").is_err());
        assert!(c("-1").is_err());
    }

    #[test]
    fn refusals_follow_libjobspec() {
        let base = "version: 9999\nresources: [{type: slot, count: 1, with: [{type: core, count: 1}]}]\ntasks: [{command: [a], slot: s, count: {per_slot: 1}}]\nattributes: {}\n";
        assert!(parse_fluxion(base).is_err(), "a slot needs a label");
        assert!(parse_fluxion("version: 9999\nresources: []\ntasks: []\n").is_err());
        let extra = "version: 9999\nresources: [{type: core, count: 1, color: red}]\ntasks: []\nattributes: {}\n";
        assert!(parse_fluxion(extra).is_err());
        let v0 = "version: 0\nresources: []\ntasks: []\nattributes: {}\n";
        assert!(parse_fluxion(v0).is_err());
    }

    #[test]
    fn a_missing_key_is_named_as_libjobspec_names_it() {
        let doc = |resource: &str, task: &str| {
            format!("version: 9999\nresources: [{resource}]\ntasks: [{task}]\nattributes: {{}}\n")
        };
        let task = "{command: [a], slot: s, count: {per_slot: 1}}";
        let message = |text: String| parse_fluxion(&text).unwrap_err().to_string();
        let cases = [
            (
                doc("{count: 1}", task),
                "Key \"type\" missing from resource",
            ),
            (
                doc("{type: core}", task),
                "Key \"count\" missing from resource",
            ),
            (
                doc("{type: core, count: {max: 2}}", task),
                "Key \"min\" missing from count",
            ),
            (
                doc("{type: core, count: 1}", "{slot: s}"),
                "Key \"command\" missing from task",
            ),
            (
                doc("{type: core, count: 1}", "{command: [a]}"),
                "Key \"slot\" missing from task",
            ),
        ];
        for (text, expected) in cases {
            let got = message(text);
            assert!(
                got.ends_with(expected),
                "{got:?} should end with {expected:?}"
            );
        }
    }
}
