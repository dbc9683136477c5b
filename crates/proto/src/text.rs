//! Untrusted text in logs: every process's log field formatter escapes control characters
//! with [`escape_control`] (the escaping itself lives in [`shardsched_wire::text`],
//! re-exported here, so that pure crates and terminals use the same function).

use std::fmt;

use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::FormatFields;

pub use shardsched_wire::text::*;

/// The field formatter of every process's log (`tracing_subscriber::fmt().fmt_fields(..)`):
/// fields as the default formatter writes them (`message`, then `name=value` separated by
/// spaces), each value passed through [`escape_control`], so that a reason or a name logged
/// with `%` cannot put control characters into a log file or a terminal.
pub fn log_fields() -> impl for<'writer> FormatFields<'writer> + Send + Sync + 'static {
    tracing_subscriber::fmt::format::debug_fn(
        |writer: &mut tracing_subscriber::fmt::format::Writer<'_>,
         field: &tracing::field::Field,
         value: &dyn fmt::Debug| {
            let text = format!("{value:?}");
            if field.name() == "message" {
                write!(writer, "{}", Escaped(&text))
            } else {
                write!(writer, "{field}={}", Escaped(&text))
            }
        },
    )
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_carry_no_control_character() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0
                    .lock()
                    .map_err(|_| std::io::ErrorKind::Other)?
                    .extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .fmt_fields(log_fields())
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let reason = "disk\x1b[2J\nFORGED line";
            tracing::info!(%reason, nodes = 3, "drain \x07{}", "x");
        });
        let bytes = sink.0.lock().map(|b| b.clone()).unwrap_or_default();
        let line = String::from_utf8(bytes).unwrap_or_default();
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        assert!(!line.trim_end().chars().any(is_unsafe_char), "{line:?}");
        assert!(
            line.contains("drain \\u{7}x reason=disk\\u{1b}[2J\\u{a}FORGED line nodes=3"),
            "{line:?}"
        );
    }
}
