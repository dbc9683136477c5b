//! Reading jobspec text into a generic [`serde_json::Value`], under the size and depth limits.
//!
//! YAML goes through serde-saphyr (with its depth budget set to [`JOBSPEC_DEPTH_MAX`]), JSON
//! through serde_json after a bracket-depth scan, so no input can overflow the stack.

use serde_json::Value;
use serde_saphyr::granit_parser::ErrorKind;

use crate::error::{Format, JobspecError, strip_position};
use crate::model::Jobspec;
use crate::parse::from_value;

/// Longest jobspec text accepted, in bytes (1 MiB).
pub const JOBSPEC_BYTES_MAX: usize = 1024 * 1024;
/// Deepest nesting of lists and maps accepted (the top-level map is level 1).
pub const JOBSPEC_DEPTH_MAX: usize = 64;

/// Parses a jobspec, YAML or JSON: JSON when the first non-blank character is `{`.
pub fn parse(text: &str) -> Result<Jobspec, JobspecError> {
    let body = text.trim_start_matches('\u{feff}').trim_start();
    if body.starts_with('{') {
        parse_json(text)
    } else {
        parse_yaml(text)
    }
}

/// Parses a YAML jobspec.
pub fn parse_yaml(text: &str) -> Result<Jobspec, JobspecError> {
    from_value(&yaml_value(text)?)
}

/// Reads jobspec text, YAML or JSON (JSON when the first non-blank character is `{`), into
/// a generic value, under the size and depth limits.
pub(crate) fn read_value(text: &str) -> Result<Value, JobspecError> {
    let body = text.trim_start_matches('\u{feff}').trim_start();
    if body.starts_with('{') {
        json_value(text)
    } else {
        yaml_value(text)
    }
}

fn yaml_value(text: &str) -> Result<Value, JobspecError> {
    check_size(text)?;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = JOBSPEC_DEPTH_MAX;
    // The scanner reads flow collections ahead of the depth budget; cap them as well.
    budget.flow_nesting_limit = JOBSPEC_DEPTH_MAX;
    let options = serde_saphyr::options! {
        budget: Some(budget),
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options(text, options).map_err(yaml_error)
}

/// Parses a JSON jobspec.
pub fn parse_json(text: &str) -> Result<Jobspec, JobspecError> {
    from_value(&json_value(text)?)
}

fn json_value(text: &str) -> Result<Value, JobspecError> {
    check_size(text)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    check_json_depth(text)?;
    serde_json::from_str(text).map_err(|e| JobspecError::Syntax {
        format: Format::Json,
        line: e.line() as u64,
        column: e.column() as u64,
        message: strip_position(&e.to_string()),
    })
}

fn check_size(text: &str) -> Result<(), JobspecError> {
    if text.len() > JOBSPEC_BYTES_MAX {
        return Err(JobspecError::TooLarge {
            len: text.len(),
            max: JOBSPEC_BYTES_MAX,
        });
    }
    Ok(())
}

fn yaml_error(e: serde_saphyr::Error) -> JobspecError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0));
    // Look through the wrappers that add a snippet or alias locations.
    let mut inner = &e;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = inner
    {
        inner = error;
    }
    let too_deep = match inner {
        serde_saphyr::Error::Budget {
            breach: serde_saphyr::budget::BudgetBreach::Depth { .. },
            ..
        } => true,
        serde_saphyr::Error::ExternalMessage { source, .. } => matches!(
            source.as_ref(),
            serde_saphyr::ExternalMessageSource::Parser(scan)
                if matches!(scan.kind(), ErrorKind::RecursionLimitExceeded)
        ),
        _ => false,
    };
    if too_deep {
        return JobspecError::TooDeep {
            max: JOBSPEC_DEPTH_MAX,
            line,
            column,
        };
    }
    JobspecError::Syntax {
        format: Format::Yaml,
        line,
        column,
        message: strip_position(&e.to_string()),
    }
}

/// Refuses JSON text whose brackets nest deeper than [`JOBSPEC_DEPTH_MAX`], before any
/// recursive parsing happens.
fn check_json_depth(text: &str) -> Result<(), JobspecError> {
    let (mut depth, mut line, mut column) = (0usize, 1u64, 0u64);
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                if depth > JOBSPEC_DEPTH_MAX {
                    return Err(JobspecError::TooDeep {
                        max: JOBSPEC_DEPTH_MAX,
                        line,
                        column,
                    });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// True when `value` nests lists and maps deeper than `max` (checked without recursion).
pub(crate) fn value_depth_exceeds(value: &Value, max: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        if d > max {
            return true;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    false
}

/// A short description of a value for error messages: `string "x"`, `number 3`, `a map`, …
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => {
            let mut short: String = s.chars().take(40).collect();
            if short.len() < s.len() {
                short.push('…');
            }
            format!("string {}", Value::String(short))
        }
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "a map".to_string(),
    }
}
