//! JSON as Fluxion's writers print it: jansson's `json_dumps` with `JSON_INDENT(0)` —
//! keys in insertion order, `", "` and `": "` between items, no newlines, control
//! characters escaped (`\u001F` with capital hex), everything else as is.

use std::fmt::Write as _;

/// An ordered JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An empty object.
    pub fn obj() -> Json {
        Json::Obj(Vec::new())
    }

    /// Sets `key` (replacing its value in place when present, as jansson does).
    pub fn set(&mut self, key: &str, value: Json) {
        if let Json::Obj(items) = self {
            match items.iter_mut().find(|(k, _)| k == key) {
                Some(e) => e.1 = value,
                None => items.push((key.to_string(), value)),
            }
        }
    }

    /// The value at `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(items) => items.iter().find(|(k, _)| k == key).map(|e| &e.1),
            _ => None,
        }
    }

    /// The text jansson prints.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => write_str(out, s),
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Json::Obj(items) => {
                out.push('{');
                for (i, (k, v)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_str(out, k);
                    out.push_str(": ");
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    /// Converts to a `serde_json` value (for callers that parse R).
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            Json::Null => serde_json::Value::Null,
            Json::Bool(b) => serde_json::Value::Bool(*b),
            Json::Int(n) => serde_json::Value::from(*n),
            Json::Str(s) => serde_json::Value::String(s.clone()),
            Json::Arr(items) => {
                serde_json::Value::Array(items.iter().map(Json::to_value).collect())
            }
            Json::Obj(items) => serde_json::Value::Object(
                items
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_like_jansson_indent_0() {
        let mut o = Json::obj();
        o.set("b", Json::Int(1));
        o.set(
            "a",
            Json::Arr(vec![Json::Str("x\u{1}\"".into()), Json::Bool(true)]),
        );
        o.set("b", Json::Int(2));
        assert_eq!(o.dump(), r#"{"b": 2, "a": ["x\u0001\"", true]}"#);
    }
}
