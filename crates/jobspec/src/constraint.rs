//! RFC 31 job constraints (`attributes.system.constraints`).
//!
//! A constraint is a JSON object with exactly one operator key: `properties`, `hostlist` and
//! `ranks` take lists of strings; `and`, `or` and `not` take lists of constraint objects.
//! As in Fluxion's jobspec library (`libjobspec/constraint.cpp`, `rank_constraint.cpp`,
//! `hostlist_constraint.cpp`): a property name holds none of [`PROPERTY_OPERATOR_CHARS`]
//! (after the leading `^` of a negation), and a rank or hostlist may also be written as a
//! number (`"ranks": [0]`), read as its decimal text.

use serde_json::{Map, Value};

use crate::error::JobspecError;
use crate::read::describe;

/// An RFC 31 constraint on where a job may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// Every listed property is required; `"^p"` means the resource must NOT have `p`.
    Properties(Vec<String>),
    /// Only hosts in these hostlists (e.g. `"node[0-3]"`).
    Hostlist(Vec<String>),
    /// Only these broker ranks (idsets, e.g. `"0-3"`).
    Ranks(Vec<String>),
    /// All of these hold (true when empty).
    And(Vec<Constraint>),
    /// At least one of these holds (false when empty).
    Or(Vec<Constraint>),
    /// None of these holds, i.e. not(and(…)).
    Not(Vec<Constraint>),
}

const OPERATORS: &str = "properties, hostlist, ranks, and, or, not";

/// Characters a property name may not hold (RFC 31 keeps them for a future expression
/// syntax; Fluxion refuses such a name as invalid).
pub const PROPERTY_OPERATOR_CHARS: &[char] = &['!', '&', '\'', '"', '^', '`', '|', '(', ')'];

impl Constraint {
    /// The operator key of this constraint.
    pub fn operator(&self) -> &'static str {
        match self {
            Constraint::Properties(_) => "properties",
            Constraint::Hostlist(_) => "hostlist",
            Constraint::Ranks(_) => "ranks",
            Constraint::And(_) => "and",
            Constraint::Or(_) => "or",
            Constraint::Not(_) => "not",
        }
    }

    /// The RFC 31 JSON form.
    pub fn to_json(&self) -> Value {
        let args: Vec<Value> = match self {
            Constraint::Properties(v) | Constraint::Hostlist(v) | Constraint::Ranks(v) => {
                v.iter().map(|s| Value::String(s.clone())).collect()
            }
            Constraint::And(v) | Constraint::Or(v) | Constraint::Not(v) => {
                v.iter().map(Constraint::to_json).collect()
            }
        };
        let mut m = Map::new();
        m.insert(self.operator().to_string(), Value::Array(args));
        Value::Object(m)
    }

    /// Reads an RFC 31 constraint from its JSON form; errors name their path below `path`.
    pub fn from_json(value: &Value, path: &str) -> Result<Constraint, JobspecError> {
        let obj = value.as_object().ok_or_else(|| {
            JobspecError::invalid(
                path,
                format!(
                    "expected a constraint object with one key ({OPERATORS}), found {}",
                    describe(value)
                ),
            )
        })?;
        let mut entries = obj.iter();
        let (op, args) = match (entries.next(), entries.next()) {
            (Some(entry), None) => entry,
            (None, _) => {
                return Err(JobspecError::invalid(
                    path,
                    format!("a constraint object needs one key ({OPERATORS}), found none"),
                ));
            }
            (Some(_), Some(_)) => {
                let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
                return Err(JobspecError::invalid(
                    path,
                    format!(
                        "a constraint object has exactly one key, found {}: {}",
                        keys.len(),
                        keys.join(", ")
                    ),
                ));
            }
        };
        let sub = format!("{path}.{op}");
        let list = |what: &str| {
            args.as_array().ok_or_else(|| {
                JobspecError::invalid(
                    &sub,
                    format!("expected a list of {what}, found {}", describe(args)),
                )
            })
        };
        // `numbers`: whether a non-negative integer stands for its decimal text.
        let strings = |what: &str, numbers: bool| -> Result<Vec<String>, JobspecError> {
            list(what)?
                .iter()
                .enumerate()
                .map(|(i, v)| match (v, v.as_u64()) {
                    (Value::String(s), _) if !s.is_empty() => Ok(s.clone()),
                    (Value::Number(_), Some(n)) if numbers => Ok(n.to_string()),
                    _ => Err(JobspecError::invalid(
                        format!("{sub}[{i}]"),
                        format!("expected a non-empty string, found {}", describe(v)),
                    )),
                })
                .collect()
        };
        let nested = || -> Result<Vec<Constraint>, JobspecError> {
            list("constraint objects")?
                .iter()
                .enumerate()
                .map(|(i, v)| Constraint::from_json(v, &format!("{sub}[{i}]")))
                .collect()
        };
        match op.as_str() {
            "properties" => {
                let props = strings("property names", false)?;
                for (i, p) in props.iter().enumerate() {
                    let name = p.strip_prefix('^').unwrap_or(p);
                    if name.is_empty() {
                        return Err(JobspecError::invalid(
                            format!("{sub}[{i}]"),
                            "\"^\" must be followed by a property name",
                        ));
                    }
                    if name.contains(PROPERTY_OPERATOR_CHARS) {
                        return Err(JobspecError::invalid(
                            format!("{sub}[{i}]"),
                            format!(
                                "{p:?} is invalid: a property name holds none of {}",
                                String::from_iter(PROPERTY_OPERATOR_CHARS)
                            ),
                        ));
                    }
                }
                Ok(Constraint::Properties(props))
            }
            "hostlist" => Ok(Constraint::Hostlist(strings("hostlists", true)?)),
            "ranks" => Ok(Constraint::Ranks(strings("rank idsets", true)?)),
            "and" => Ok(Constraint::And(nested()?)),
            "or" => Ok(Constraint::Or(nested()?)),
            "not" => Ok(Constraint::Not(nested()?)),
            other => Err(JobspecError::invalid(
                path,
                format!("unknown constraint operator \"{other}\"; expected one of {OPERATORS}"),
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        Constraint::from_json(&v, "c").unwrap_err().to_string()
    }

    #[test]
    fn parses_all_operators() {
        let v = json!({"and": [
            {"properties": ["ssd", "^slow"]},
            {"or": [{"hostlist": ["node[0-3]"]}, {"ranks": ["4-5"]}]},
            {"not": [{"properties": ["down"]}]}
        ]});
        let c = Constraint::from_json(&v, "c").unwrap();
        assert_eq!(
            c,
            Constraint::And(vec![
                Constraint::Properties(vec!["ssd".into(), "^slow".into()]),
                Constraint::Or(vec![
                    Constraint::Hostlist(vec!["node[0-3]".into()]),
                    Constraint::Ranks(vec!["4-5".into()]),
                ]),
                Constraint::Not(vec![Constraint::Properties(vec!["down".into()])]),
            ])
        );
        assert_eq!(c.to_json(), v);
        assert_eq!(Constraint::from_json(&c.to_json(), "c").unwrap(), c);
    }

    #[test]
    fn errors_name_paths() {
        assert_eq!(
            err(json!(["ssd"])),
            "c: expected a constraint object with one key (properties, hostlist, ranks, and, or, not), found a list"
        );
        assert_eq!(
            err(json!({})),
            "c: a constraint object needs one key (properties, hostlist, ranks, and, or, not), found none"
        );
        assert_eq!(
            err(json!({"hostlist": ["a"], "ranks": ["0"]})),
            "c: a constraint object has exactly one key, found 2: hostlist, ranks"
        );
        assert_eq!(
            err(json!({"and": [{"properties": ["a", 3]}]})),
            "c.and[0].properties[1]: expected a non-empty string, found number 3"
        );
        assert_eq!(
            err(json!({"or": {"ranks": ["0"]}})),
            "c.or: expected a list of constraint objects, found a map"
        );
        assert_eq!(
            err(json!({"nodes": ["a"]})),
            "c: unknown constraint operator \"nodes\"; expected one of properties, hostlist, ranks, and, or, not"
        );
        assert_eq!(
            err(json!({"properties": ["^"]})),
            "c.properties[0]: \"^\" must be followed by a property name"
        );
        assert_eq!(
            err(json!({"properties": ["^arm", "ar^m-v9@core"]})),
            "c.properties[1]: \"ar^m-v9@core\" is invalid: a property name holds none of !&'\"^`|()"
        );
        assert_eq!(
            err(json!({"properties": ["^a|b"]})),
            "c.properties[0]: \"^a|b\" is invalid: a property name holds none of !&'\"^`|()"
        );
        assert_eq!(
            err(json!({"ranks": [-1]})),
            "c.ranks[0]: expected a non-empty string, found number -1"
        );
    }

    #[test]
    fn ranks_and_hosts_may_be_numbers_as_in_fluxion() {
        let c = Constraint::from_json(
            &json!({"or": [{"ranks": [0, "2-3"]}, {"hostlist": [7]}]}),
            "c",
        )
        .unwrap();
        assert_eq!(
            c,
            Constraint::Or(vec![
                Constraint::Ranks(vec!["0".into(), "2-3".into()]),
                Constraint::Hostlist(vec!["7".into()]),
            ])
        );
        assert_eq!(
            err(json!({"properties": [3]})),
            "c.properties[0]: expected a non-empty string, found number 3"
        );
    }
}
