//! Times typed on the command line: `submit --begin-time` (a time to come) and `jobs
//! --since` (a time past), as Flux and Slurm users type them.
//!
//! | typed | means |
//! |---|---|
//! | `+30m`, `+90` | that long from now (a bare number is seconds: Flux's `--begin-time`) |
//! | `7d`, `90m` (`--since`) | that long ago |
//! | `2026-03-01T09:00:00Z`, `…+01:00` | that instant (RFC 3339) |
//! | `2026-03-01T09:00`, `2026-03-01 09:00[:30]`, `2026-03-01` | that local time (midnight for a date) |
//! | `09:00[:30]` | today at that local time (for a begin time already past today: tomorrow) |
//! | `now` | now |
//!
//! Durations go through the project's one parser ([`shardsched_jobspec::duration`]); the
//! result is ms since the Unix epoch.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use shardsched_jobspec::duration::{BareUnit, parse_fsd};

/// `--begin-time`: a time to come (or now).
pub fn begin_time_ms(text: &str, now_ms: u64) -> Result<u64, String> {
    if let Some(ahead) = text.strip_prefix('+') {
        let ms = duration_ms(ahead)?;
        return Ok(now_ms.saturating_add(ms));
    }
    absolute_ms(text, now_ms, true)
}

fn duration_ms(text: &str) -> Result<u64, String> {
    parse_fsd(text, BareUnit::Seconds)
        .and_then(|d| d.finite(text))
        .map_err(|e| e.to_string())
}

/// An instant, a local date and time, a date, or a time of day (`tomorrow_if_past`: a time
/// of day already past today means tomorrow's).
fn absolute_ms(text: &str, now_ms: u64, tomorrow_if_past: bool) -> Result<u64, String> {
    if text == "now" {
        return Ok(now_ms);
    }
    let zone = TimeZone::system();
    let local = |dt: DateTime| -> Result<u64, String> {
        let zoned = dt.to_zoned(zone.clone()).map_err(|e| e.to_string())?;
        u64::try_from(zoned.timestamp().as_millisecond())
            .map_err(|_| format!("{text:?} is before 1970"))
    };
    if let Ok(t) = text.parse::<Timestamp>() {
        return u64::try_from(t.as_millisecond()).map_err(|_| format!("{text:?} is before 1970"));
    }
    if let Ok(dt) = text.parse::<DateTime>() {
        return local(dt);
    }
    if let Ok(date) = text.parse::<Date>() {
        return local(date.to_datetime(Time::midnight()));
    }
    if let Ok(time) = text.parse::<Time>() {
        let now = Timestamp::from_millisecond(i64::try_from(now_ms).unwrap_or(i64::MAX))
            .map_err(|e| e.to_string())?
            .to_zoned(zone.clone());
        let today = local(now.date().to_datetime(time))?;
        if tomorrow_if_past && today < now_ms {
            let tomorrow = now.date().checked_add(1.day()).map_err(|e| e.to_string())?;
            return local(tomorrow.to_datetime(time));
        }
        return Ok(today);
    }
    Err(format!(
        "{text:?} is not a time (e.g. +30m, 2026-03-01T09:00, 09:00, or an RFC 3339 instant)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2027-01-15T08:00:00Z.
    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn relative_times_count_from_now() {
        assert_eq!(begin_time_ms("+30m", NOW), Ok(NOW + 1_800_000));
        assert_eq!(begin_time_ms("+90", NOW), Ok(NOW + 90_000));
        assert_eq!(begin_time_ms("now", NOW), Ok(NOW));
        assert!(begin_time_ms("+soon", NOW).is_err());
    }

    #[test]
    fn instants_and_local_times_read_as_typed() {
        assert_eq!(
            begin_time_ms("2027-01-15T09:00:00Z", NOW),
            Ok(NOW + 3_600_000)
        );
        let local = begin_time_ms("2030-06-01T12:00", NOW).expect("local");
        let date = begin_time_ms("2030-06-01", NOW).expect("date");
        assert_eq!(local - date, 12 * 3_600_000, "the same local day");
        let at = begin_time_ms("12:30", NOW).expect("time");
        assert!(at > NOW && at <= NOW + 86_400_000, "the next 12:30");
    }
}
