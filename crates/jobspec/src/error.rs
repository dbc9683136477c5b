//! The one error type of this crate.
//!
//! Every error that comes from the content of a jobspec names the field path it is about
//! (`resources[0].with[1].count`, `attributes.system.constraints.and[0]`, …); syntax errors
//! carry the line and column reported by the YAML or JSON parser.

use std::fmt;

/// The text format a syntax error was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// YAML, read with serde-saphyr.
    Yaml,
    /// JSON, read with serde_json.
    Json,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
        })
    }
}

/// Why a jobspec (or a [`Shorthand`](crate::Shorthand)) was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobspecError {
    /// The text is longer than [`JOBSPEC_BYTES_MAX`](crate::JOBSPEC_BYTES_MAX).
    #[error("jobspec is {len} bytes long, more than the limit of {max} bytes")]
    TooLarge {
        /// Length of the refused text in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Lists and maps nest deeper than [`JOBSPEC_DEPTH_MAX`](crate::JOBSPEC_DEPTH_MAX).
    #[error("{}", located(&format!("jobspec nests lists and maps deeper than {max} levels"), *line, *column))]
    TooDeep {
        /// The limit.
        max: usize,
        /// 1-based line where the limit was crossed (0 if unknown).
        line: u64,
        /// 1-based column where the limit was crossed (0 if unknown).
        column: u64,
    },
    /// The text is not well-formed YAML or JSON.
    #[error("{}", located(&format!("{format} syntax error"), *line, *column) + ": " + message)]
    Syntax {
        /// Which parser refused the text.
        format: Format,
        /// 1-based line (0 if the parser did not say).
        line: u64,
        /// 1-based column (0 if the parser did not say).
        column: u64,
        /// The parser's message, without its position.
        message: String,
    },
    /// The document is well-formed but is not a valid jobspec.
    #[error("{}", if path.is_empty() { message.clone() } else { format!("{path}: {message}") })]
    Invalid {
        /// Field path, e.g. `resources[0].with[1].count`; empty for the document itself.
        path: String,
        /// What is wrong with it.
        message: String,
    },
}

fn located(what: &str, line: u64, column: u64) -> String {
    if line == 0 {
        what.to_string()
    } else {
        format!("{what} at line {line}, column {column}")
    }
}

impl JobspecError {
    /// An [`Invalid`](JobspecError::Invalid) error about `path`.
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        JobspecError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The field path this error is about, for content errors.
    pub fn path(&self) -> Option<&str> {
        match self {
            JobspecError::Invalid { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// Removes a trailing position (`" at line 3, column 4"` or `" at line 3 column 4"`) that a
/// parser put into its message, since [`JobspecError::Syntax`] prints its own.
pub(crate) fn strip_position(message: &str) -> String {
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        let looks_like_position = tail
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == ' ' || "column".contains(c));
        if looks_like_position && tail.contains("column") {
            return message[..at].to_string();
        }
    }
    message.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_display_names_the_path() {
        let e = JobspecError::invalid("resources[0].count", "must be at least 1");
        assert_eq!(e.to_string(), "resources[0].count: must be at least 1");
        assert_eq!(e.path(), Some("resources[0].count"));
        let e = JobspecError::invalid("", "empty document");
        assert_eq!(e.to_string(), "empty document");
    }

    #[test]
    fn syntax_display_has_position() {
        let e = JobspecError::Syntax {
            format: Format::Yaml,
            line: 3,
            column: 7,
            message: "unclosed bracket".into(),
        };
        assert_eq!(
            e.to_string(),
            "YAML syntax error at line 3, column 7: unclosed bracket"
        );
        let e = JobspecError::Syntax {
            format: Format::Json,
            line: 0,
            column: 0,
            message: "EOF".into(),
        };
        assert_eq!(e.to_string(), "JSON syntax error: EOF");
    }

    #[test]
    fn strips_parser_positions() {
        assert_eq!(strip_position("oops at line 2, column 1"), "oops");
        assert_eq!(
            strip_position("EOF while parsing at line 1 column 5"),
            "EOF while parsing"
        );
        assert_eq!(
            strip_position("key at line of sight"),
            "key at line of sight"
        );
    }
}
