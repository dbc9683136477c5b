//! Every process's log: `tracing` to stderr (under `up`, the process's log file), filtered
//! by `RUST_LOG` (default `info`), as text for people or as one JSON object per line
//! (`--log-format json`) for programs.
//!
//! Spans carry the context, so a line need not repeat it: a root span per process
//! (`coordinator`, `shard{queue=batch}`), a span per request (`request{kind=… peer=…}`),
//! per job (`job{job=ƒ… queue=…}`) and per move (`move{move_id=… nodes=…}`); text lines show
//! them as a prefix, JSON lines as `span` and `spans`. Colour only when stderr is a
//! terminal, so log files hold no escape codes; and every value from outside is escaped
//! ([`log_fields`]) so that a name or a reason cannot put control characters into a file.

use std::fmt;
use std::io::IsTerminal as _;
use std::str::FromStr;

use shardsched_resource::encode_hostlist;
use shardsched_wire::msg::coord_shard;
use shardsched_wire::text::Escaped;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::FormatFields;

/// The filter when `RUST_LOG` is not set.
pub const DEFAULT_FILTER: &str = "info";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// For people: time, level, spans, message, fields.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `fields`, `target`, `span`, `spans`.
    Json,
}

/// A `--log-format` that is neither `text` nor `json`.
#[derive(Debug, thiserror::Error)]
#[error("log format {0:?}: expected `text` or `json`")]
pub struct UnknownLogFormat(String);

impl LogFormat {
    /// The word on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;

    fn from_str(s: &str) -> Result<LogFormat, UnknownLogFormat> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.to_owned())),
        }
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Installs the process's logger (once; later calls do nothing). The binary calls it; the
/// libraries never do.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let _ = match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .fmt_fields(log_fields())
            .with_writer(std::io::stderr)
            // Colour only for a terminal: under `up`, stderr is a log file.
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init(),
    };
}

/// The span of a move command's log lines, on the coordinator that sends it and on the
/// shard that applies it: `move{move_id nodes step}` (`nodes` a hostlist). A request that
/// is no move command gets a disabled span.
pub fn move_span(request: &coord_shard::Request, step: &str) -> tracing::Span {
    match request.move_nodes() {
        Some((move_id, nodes)) => tracing::info_span!(
            "move",
            move_id = move_id.0,
            nodes = %encode_hostlist(&nodes),
            step
        ),
        None => tracing::Span::none(),
    }
}

/// The field formatter of text logs: fields as the default formatter writes them
/// (`message`, then `name=value` separated by spaces), each value escaped
/// ([`shardsched_wire::text::escape_control`]), so that a reason or a name logged with `%`
/// cannot put control characters into a log file or a terminal. (JSON logs need no such
/// thing: JSON strings escape them.)
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
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::{Arc, Mutex};

    use shardsched_wire::text::is_unsafe_char;

    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn log_lines_carry_no_control_character() {
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
        let line = sink.text();
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
        assert!(!line.trim_end().chars().any(is_unsafe_char), "{line:?}");
        assert!(
            line.contains("drain \\u{7}x reason=disk\\u{1b}[2J\\u{a}FORGED line nodes=3"),
            "{line:?}"
        );
    }

    #[test]
    fn json_lines_parse_and_carry_their_spans() {
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let _process = tracing::info_span!("shard", queue = "batch").entered();
            let _job = tracing::info_span!("job", job = "ƒ2KEkBMqV").entered();
            tracing::info!(reason = "a\x1bb", "started");
        });
        let text = sink.text();
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["fields"]["message"], "started");
        assert_eq!(line["fields"]["reason"], "a\u{1b}b");
        assert_eq!(line["span"]["job"], "ƒ2KEkBMqV");
        assert_eq!(line["spans"][0]["name"], "shard");
        assert_eq!(line["spans"][0]["queue"], "batch");
        assert!(!text.contains('\x1b'), "raw escape in {text:?}");
    }

    #[test]
    fn log_formats_read_as_typed() {
        assert_eq!("json".parse::<LogFormat>().unwrap(), LogFormat::Json);
        assert_eq!("text".parse::<LogFormat>().unwrap(), LogFormat::Text);
        assert!("yaml".parse::<LogFormat>().is_err());
    }
}
