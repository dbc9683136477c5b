//! A JSON value that keeps object keys in file order, and accessors that report JSON paths.
//!
//! serde_json's `Value` sorts object keys (the workspace does not enable `preserve_order`,
//! and enabling it would change every crate's output). R's `children` object is ordered:
//! `{"core": …, "gpu": …}` makes cores come before gpus, as in Fluxion (jansson iterates
//! objects in insertion order). So the JSON readers parse into [`Json`] instead. serde_json
//! still does the parsing, with its nesting limit, and reports syntax errors by line and
//! column.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{Location, ReadError};

/// A parsed JSON value; objects keep their keys in file order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    /// Integers above `i64::MAX`.
    UInt(u64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses `text`; syntax errors carry the line and column.
    pub(crate) fn parse(text: &str) -> Result<Json, ReadError> {
        serde_json::from_str(text).map_err(|e| {
            let at = Location::LineColumn(e.line(), e.column());
            ReadError::invalid(at, format!("invalid JSON: {e}"))
        })
    }

    /// What kind of value this is, for messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::UInt(_) => "an integer",
            Json::Float(_) => "a number",
            Json::Str(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The value of `key` in an object (the last one when repeated, as jansson keeps).
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A JSON path being read, e.g. `graph.nodes[3].metadata`; builds child paths on demand.
#[derive(Clone, Debug)]
pub(crate) struct At(pub String);

impl At {
    pub(crate) fn key(&self, key: &str) -> At {
        if self.0.is_empty() {
            At(key.to_string())
        } else {
            At(format!("{}.{key}", self.0))
        }
    }

    pub(crate) fn index(&self, i: usize) -> At {
        At(format!("{}[{i}]", self.0))
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> ReadError {
        let at = if self.0.is_empty() {
            Location::None
        } else {
            Location::Path(self.0.clone())
        };
        ReadError::invalid(at, message)
    }

    fn expected(&self, what: &str, found: &Json) -> ReadError {
        self.error(format!("expected {what}, found {}", found.describe()))
    }

    /// `value` as an object.
    pub(crate) fn object<'j>(&self, value: &'j Json) -> Result<&'j [(String, Json)], ReadError> {
        match value {
            Json::Object(entries) => Ok(entries),
            other => Err(self.expected("an object", other)),
        }
    }

    /// `value` as an array.
    pub(crate) fn array<'j>(&self, value: &'j Json) -> Result<&'j [Json], ReadError> {
        match value {
            Json::Array(items) => Ok(items),
            other => Err(self.expected("an array", other)),
        }
    }

    /// `value` as a string.
    pub(crate) fn str<'j>(&self, value: &'j Json) -> Result<&'j str, ReadError> {
        match value {
            Json::Str(s) => Ok(s),
            other => Err(self.expected("a string", other)),
        }
    }

    /// `value` as an integer that fits an `i64`.
    pub(crate) fn int(&self, value: &Json) -> Result<i64, ReadError> {
        match value {
            Json::Int(i) => Ok(*i),
            Json::UInt(_) => Err(self.error("integer out of range")),
            other => Err(self.expected("an integer", other)),
        }
    }

    /// `value` as a boolean.
    pub(crate) fn bool(&self, value: &Json) -> Result<bool, ReadError> {
        match value {
            Json::Bool(b) => Ok(*b),
            other => Err(self.expected("a boolean", other)),
        }
    }

    /// The member `key` of object `value`, required.
    pub(crate) fn member<'j>(&self, value: &'j Json, key: &str) -> Result<&'j Json, ReadError> {
        self.object(value)?;
        value
            .get(key)
            .ok_or_else(|| self.error(format!("missing \"{key}\"")))
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(i64::try_from(v).map_or(Json::UInt(v), Json::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            entries.push((k, v));
        }
        Ok(Json::Object(entries))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order_and_reports_paths() {
        let j = Json::parse(r#"{"gpu": "0", "core": "0-3", "n": 18446744073709551615}"#).unwrap();
        let Json::Object(entries) = &j else { panic!() };
        assert_eq!(
            entries.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["gpu", "core", "n"]
        );
        let at = At(String::new()).key("graph").key("nodes").index(3);
        let e = at.key("size").int(&Json::Str("x".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "graph.nodes[3].size: expected an integer, found a string"
        );
        assert!(At("n".into()).int(j.get("n").unwrap()).is_err());
        let e = Json::parse("{\n  \"a\": [1,\n}").unwrap_err();
        assert!(matches!(e.location(), Location::LineColumn(3, _)), "{e}");
        assert!(Json::parse(&"[".repeat(100_000)).is_err());
    }
}
