//! Untrusted text on a terminal or in a log: the one escaping function.
//!
//! Job names, reasons, queue and node names and refusal messages come from users and admins.
//! Printed raw, a control character in one of them can clear an admin's screen, move the
//! cursor to overwrite lines, or start a new line that forges a row of `jobs -A`; a
//! bidirectional override can make text read differently than it is. Every human output
//! (the CLI's tables and texts, its error messages) and every log line passes such text
//! through [`escape_control`], which writes each of those characters as a Rust-style escape
//! (`\u{1b}`) and leaves everything else as it is. JSON output needs nothing: its encoder
//! escapes control characters already.
//!
//! ```
//! use shardsched_wire::text::escape_control;
//! assert_eq!(escape_control("disk\x1b[2J\nnode7  R"), "disk\\u{1b}[2J\\u{a}node7  R");
//! assert_eq!(escape_control("plain text, ünïcode"), "plain text, ünïcode");
//! ```

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// Whether `c` must not reach a terminal raw: a control character (C0, DEL, C1; newline and
/// tab included, since they forge lines and columns) or a bidirectional formatting mark.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every [unsafe](is_unsafe_char) character written as `\u{XX}`; borrowed when
/// there is none (the common case costs no allocation).
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_control`] as a `Display` adapter, for `format!` and log fields.
#[derive(Clone, Copy, Debug)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_control(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped_and_the_rest_is_kept() {
        assert_eq!(
            escape_control("a\tb\r\n\x07\x7f\u{9b}"),
            "a\\u{9}b\\u{d}\\u{a}\\u{7}\\u{7f}\\u{9b}"
        );
        assert_eq!(
            escape_control("admin\u{202E}txt.exe"),
            "admin\\u{202e}txt.exe"
        );
        assert!(matches!(
            escape_control("node[0-3] (disk)"),
            Cow::Borrowed(_)
        ));
        assert_eq!(Escaped("x\x1by").to_string(), "x\\u{1b}y");
    }
}
