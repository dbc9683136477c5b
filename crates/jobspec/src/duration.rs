//! Durations as Flux users type them: the one duration parser of the project.
//!
//! A duration is typed as a Flux Standard Duration (RFC 23): a non-negative number with an
//! optional unit, `ms`, `s`, `m`, `h` or `d` (`90s`, `1.5h`, `2d`, `500ms`, `1e3s`), or `inf`
//! / `infinity` (and our `unlimited`) for no limit. What a bare number means depends on where
//! it is typed, so every caller says so with a [`BareUnit`]:
//!
//! - on the command line, `submit -t 60` is 60 **minutes**, as in flux-core and Slurm;
//! - in a configuration file, on flags that mirror its keys, and in a jobspec's
//!   `attributes.system.duration` (RFC 14), a bare number is **seconds**.
//!
//! Every duration becomes whole milliseconds. Zero is allowed (callers give it a meaning:
//! "the queue's default", "unlimited"), but anything else shorter than [`DURATION_MIN_MS`] is
//! refused rather than rounded to zero, where it would silently mean the opposite of what was
//! typed (a `max_duration = "0.4ms"` would lift the limit). Anything longer than
//! [`DURATION_MAX_MS`] is refused, so that arithmetic on times never overflows.
//!
//! ```
//! use shardsched_jobspec::duration::{BareUnit, Fsd, parse_fsd};
//!
//! assert_eq!(parse_fsd("60", BareUnit::Minutes), Ok(Fsd::Finite(3_600_000)));
//! assert_eq!(parse_fsd("90s", BareUnit::Minutes), Ok(Fsd::Finite(90_000)));
//! assert_eq!(parse_fsd("1.5h", BareUnit::Seconds), Ok(Fsd::Finite(5_400_000)));
//! assert_eq!(parse_fsd("inf", BareUnit::Seconds), Ok(Fsd::Unlimited));
//! assert!(parse_fsd("0.4ms", BareUnit::Seconds).is_err());
//! ```

/// The shortest duration other than zero: 1 millisecond.
pub const DURATION_MIN_MS: u64 = 1;
/// The longest duration accepted: 1,000 years (of 365 days), in milliseconds.
pub const DURATION_MAX_MS: u64 = 1000 * 365 * 86_400_000;

/// What a number typed without a unit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BareUnit {
    /// Configuration files, jobspecs (RFC 14) and the flags that mirror them.
    Seconds,
    /// `submit -t`, as flux-core's and Slurm's `-t/--time-limit`.
    Minutes,
}

/// A parsed duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsd {
    /// This many milliseconds: 0, or between [`DURATION_MIN_MS`] and [`DURATION_MAX_MS`].
    Finite(u64),
    /// `inf`, `infinity` or `unlimited`.
    Unlimited,
}

/// Why a duration was refused. Each message quotes what was typed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a number with a unit.
    #[error("{0:?} is not a duration (e.g. 90s, 30m, 1.5h, 2d)")]
    Malformed(String),
    /// A number with a unit that is not one of RFC 23's.
    #[error("{text:?}: unknown unit {unit:?} (use ms, s, m, h or d, e.g. 30m)")]
    UnknownUnit {
        /// What was typed.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// A negative number.
    #[error("{0:?} is negative")]
    Negative(String),
    /// Above zero but below [`DURATION_MIN_MS`]: rounding it would make it zero, which
    /// means something else.
    #[error("{0:?} is shorter than 1ms, the shortest duration (0 is written 0)")]
    TooShort(String),
    /// Longer than [`DURATION_MAX_MS`].
    #[error("{0:?} is longer than 1000 years, the longest duration")]
    TooLong(String),
    /// `inf`, `infinity` or `unlimited` where a finite duration is needed.
    #[error("{0:?}: give a finite duration here")]
    NotFinite(String),
}

impl Fsd {
    /// The milliseconds, refusing [`Fsd::Unlimited`].
    pub fn finite(self, text: &str) -> Result<u64, DurationError> {
        match self {
            Fsd::Finite(ms) => Ok(ms),
            Fsd::Unlimited => Err(DurationError::NotFinite(text.to_owned())),
        }
    }
}

/// Parses a duration typed as text; a number without a unit counts `bare`.
pub fn parse_fsd(text: &str, bare: BareUnit) -> Result<Fsd, DurationError> {
    let t = text.trim();
    if ["inf", "infinity", "unlimited"]
        .iter()
        .any(|word| t.eq_ignore_ascii_case(word))
    {
        return Ok(Fsd::Unlimited);
    }
    // The unit is the alphabetic tail; `e` inside a number (`1e3s`) belongs to the number.
    let split = t
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphabetic())
        .last()
        .map_or(t.len(), |(i, _)| i);
    let (number, unit) = t.split_at(split);
    let ms_per_unit = match unit {
        "" => match bare {
            BareUnit::Seconds => 1000.0,
            BareUnit::Minutes => 60_000.0,
        },
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ if number.is_empty() => return Err(DurationError::Malformed(text.to_owned())),
        _ => {
            return Err(DurationError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            });
        }
    };
    // Only digits, a point, an exponent and a sign: `f64::from_str` would take `inf` and
    // `NaN` too.
    if number.is_empty()
        || !number
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return Err(DurationError::Malformed(text.to_owned()));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::Malformed(text.to_owned()))?;
    to_ms(value * ms_per_unit, text).map(Fsd::Finite)
}

/// A number of seconds (a TOML number, a jobspec's `duration`) in milliseconds, with the
/// bounds of [`parse_fsd`]. `shown` is how the number was written, for the error.
pub fn seconds_to_ms(seconds: f64, shown: &str) -> Result<u64, DurationError> {
    to_ms(seconds * 1000.0, shown)
}

/// Whole seconds, rounding a fraction up (a time limit is never shortened).
pub fn ms_to_whole_seconds(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// Checks and rounds a number of milliseconds to the nearest one.
fn to_ms(ms: f64, text: &str) -> Result<u64, DurationError> {
    if ms.is_nan() {
        return Err(DurationError::Malformed(text.to_owned()));
    }
    if ms < 0.0 {
        return Err(DurationError::Negative(text.to_owned()));
    }
    if ms > 0.0 && ms < DURATION_MIN_MS as f64 {
        return Err(DurationError::TooShort(text.to_owned()));
    }
    if ms > DURATION_MAX_MS as f64 {
        return Err(DurationError::TooLong(text.to_owned()));
    }
    Ok(ms.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str, bare: BareUnit) -> Result<u64, DurationError> {
        parse_fsd(text, bare).and_then(|d| d.finite(text))
    }

    #[test]
    fn bare_numbers_count_the_callers_unit() {
        assert_eq!(ms("60", BareUnit::Minutes), Ok(3_600_000));
        assert_eq!(ms("60", BareUnit::Seconds), Ok(60_000));
        assert_eq!(ms("1.5", BareUnit::Minutes), Ok(90_000));
        assert_eq!(ms("0", BareUnit::Minutes), Ok(0));
        assert_eq!(ms(" 2 ", BareUnit::Seconds), Ok(2000));
    }

    #[test]
    fn units_are_rfc_23s() {
        for bare in [BareUnit::Seconds, BareUnit::Minutes] {
            assert_eq!(ms("500ms", bare), Ok(500));
            assert_eq!(ms("90s", bare), Ok(90_000));
            assert_eq!(ms("30m", bare), Ok(1_800_000));
            assert_eq!(ms("2h", bare), Ok(7_200_000));
            assert_eq!(ms("1d", bare), Ok(86_400_000));
            assert_eq!(ms("1.5h", bare), Ok(5_400_000));
            assert_eq!(ms("1e3s", bare), Ok(1_000_000));
            assert_eq!(ms(".5s", bare), Ok(500));
            assert_eq!(ms("0s", bare), Ok(0));
        }
        for word in ["inf", "INF", "infinity", "unlimited"] {
            assert_eq!(parse_fsd(word, BareUnit::Seconds), Ok(Fsd::Unlimited));
        }
    }

    #[test]
    fn what_is_not_a_duration_is_refused_with_what_was_typed() {
        let refused = |text: &str| match parse_fsd(text, BareUnit::Seconds) {
            Err(e) => e.to_string(),
            Ok(d) => panic!("{text:?} parsed as {d:?}"),
        };
        assert_eq!(
            refused("2w"),
            "\"2w\": unknown unit \"w\" (use ms, s, m, h or d, e.g. 30m)"
        );
        assert_eq!(refused("-1"), "\"-1\" is negative");
        assert_eq!(
            refused("abc"),
            "\"abc\" is not a duration (e.g. 90s, 30m, 1.5h, 2d)"
        );
        for text in ["", "s", "NaN", "nans", "infs", "1..2s", "1 h", "0x10"] {
            assert!(parse_fsd(text, BareUnit::Seconds).is_err(), "{text:?}");
        }
        assert_eq!(
            refused("1001000d"),
            "\"1001000d\" is longer than 1000 years, the longest duration"
        );
        assert_eq!(
            ms("inf", BareUnit::Minutes).map_err(|e| e.to_string()),
            Err("\"inf\": give a finite duration here".to_owned())
        );
    }

    /// Rounded, these would be 0, which means "unlimited" or "the default".
    #[test]
    fn durations_below_a_millisecond_are_refused_not_rounded_to_zero() {
        for text in ["0.4ms", "1e-300", "0.0001s", "1e-9m"] {
            assert_eq!(
                parse_fsd(text, BareUnit::Seconds),
                Err(DurationError::TooShort(text.to_owned())),
            );
        }
        assert_eq!(
            seconds_to_ms(1e-300, "1e-300"),
            Err(DurationError::TooShort("1e-300".to_owned()))
        );
        assert_eq!(ms("1ms", BareUnit::Seconds), Ok(1));
        assert_eq!(ms("1.4ms", BareUnit::Seconds), Ok(1));
        assert_eq!(seconds_to_ms(0.0, "0"), Ok(0));
    }

    #[test]
    fn whole_seconds_round_up() {
        assert_eq!(ms_to_whole_seconds(0), 0);
        assert_eq!(ms_to_whole_seconds(1), 1);
        assert_eq!(ms_to_whole_seconds(90_000), 90);
        assert_eq!(ms_to_whole_seconds(90_001), 91);
    }
}
