//! What the commands print for people: text that cannot carry a control character, tables,
//! times and durations, and writes that do not panic on a closed pipe or terminal.
//!
//! Text for people never carries a control character from what users typed (job names,
//! reasons, queue and node names, servers' refusals): every table cell and message on
//! standard error goes through [`escape_control`] (JSON escapes them itself).

use std::time::{SystemTime, UNIX_EPOCH};

use shardsched_proto::text::escape_control;

/// Writes `text` to standard output. A closed pipe (`shardsched jobs | head`) ends the output
/// quietly, as it does for other Unix tools, instead of panicking as `print!` would.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => anyhow::Context::context(other, "writing to standard output"),
    }
}

/// Writes `message` to standard error after `shardsched: `, escaped line by line
/// ([`escape_lines`]): errors and warnings quote what servers and users wrote.
pub fn say(message: impl std::fmt::Display) {
    // Not `eprintln!`, which panics when stderr is closed (a terminal gone, `| tee` stopped).
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "shardsched: {}",
        escape_lines(&message.to_string())
    );
}

/// `text` with control characters escaped ([`escape_control`]) line by line, keeping its
/// own line breaks (a multi-line message stays readable, no line of it can forge another).
pub fn escape_lines(text: &str) -> String {
    text.split('\n')
        .map(escape_control)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell or value for people: `text` escaped, without a copy when it needs none.
pub fn escaped(text: String) -> String {
    match escape_control(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(safe) => safe,
    }
}

/// A table printed with left-aligned columns separated by two spaces. Cells are escaped
/// ([`escape_control`]): a name or reason cannot forge a row or move the cursor.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Adds a row (one cell per header), escaped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.into_iter().map(escaped).collect());
    }

    /// The table as text, one line per row, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A time as UTC ISO 8601 with milliseconds, `2026-11-30T05:17:15.123Z`: unambiguous in logs
/// and bug reports whatever the reader's time zone. A time past what a calendar date can say
/// (year 9999) reads as its milliseconds.
pub fn utc_timestamp(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(
            || format!("{ms} ms after 1970-01-01T00:00:00Z"),
            |t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        )
}

/// A time in the reader's local time zone (the system's: `TZ`, else `/etc/localtime`):
/// `14:05:03 CET` on `now_ms`'s day, with the date before it otherwise.
pub fn local_time(ms: u64, now_ms: u64) -> String {
    let zone = jiff::tz::TimeZone::system();
    let zoned = |ms: u64| {
        jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap_or(i64::MAX))
            .ok()
            .map(|t| t.to_zoned(zone.clone()))
    };
    match (zoned(ms), zoned(now_ms)) {
        (Some(at), Some(now)) if at.date() == now.date() => at.strftime("%H:%M:%S %Z").to_string(),
        (Some(at), _) => at.strftime("%Y-%m-%d %H:%M:%S %Z").to_string(),
        (None, _) => utc_timestamp(ms),
    }
}

/// A duration for people: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(12_340), "12.3s");
        assert_eq!(human_duration(245_000), "4m05s");
        assert_eq!(human_duration(7_380_000), "2h03m");
        assert_eq!(human_duration(273_600_000), "3d04h");
    }

    #[test]
    fn timestamps_are_utc_iso_8601() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_timestamp(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_timestamp(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(utc_timestamp(1_800_000_000_000), "2027-01-15T08:00:00.000Z");
        assert!(utc_timestamp(u64::MAX).starts_with("18446744073709551615 ms"));
    }

    #[test]
    fn what_users_wrote_is_escaped_in_tables_texts_and_messages() {
        let mut t = Table::new(&["NAME", "INFO"]);
        t.row(vec!["evil\x1b[2J".into(), "x\nƒFORGED  alice  R".into()]);
        let text = t.render();
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(text.contains("evil\\u{1b}[2J"), "{text:?}");
        assert_eq!(escape_lines("a\x07\nb"), "a\\u{7}\nb");
    }

    #[test]
    fn tables_align_and_trim() {
        let mut t = Table::new(&["A", "LONGER"]);
        t.row(vec!["xyz".into(), "1".into()]);
        t.row(vec!["".into(), "".into()]);
        assert_eq!(t.render(), "A    LONGER\nxyz  1\n\n");
    }
}
