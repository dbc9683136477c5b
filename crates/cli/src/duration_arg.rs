//! Durations typed on the command line, through the project's one duration parser
//! ([`shardsched_jobspec::duration`]): units everywhere (`500ms`, `90s`, `30m`, `2h`, `1d`).
//!
//! A bare number is **minutes** for `submit -t/--time-limit` (as flux-core's and Slurm's
//! `-t`: a user's `-t 60` is an hour), and **seconds** everywhere else (the flags that mirror
//! configuration keys, `--deadline`, `--retention`, …), as in the configuration file.

use std::time::Duration;

use shardsched_jobspec::duration::{BareUnit, DurationError, ms_to_whole_seconds, parse_fsd};

/// `submit -t`: whole seconds (a fraction rounds up); a bare number is minutes; `0` asks for
/// the queue's default.
pub fn time_limit_secs(text: &str) -> Result<u64, DurationError> {
    let ms = parse_fsd(text, BareUnit::Minutes)?.finite(text)?;
    Ok(ms_to_whole_seconds(ms))
}

/// Any other duration flag: a bare number is seconds.
pub fn seconds_or_units(text: &str) -> Result<Duration, DurationError> {
    let ms = parse_fsd(text, BareUnit::Seconds)?.finite(text)?;
    Ok(Duration::from_millis(ms))
}

/// A duration as a flag value that [`seconds_or_units`] reads back exactly.
pub fn to_arg(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_time_limit_is_minutes_as_in_flux_and_slurm() {
        assert_eq!(time_limit_secs("60"), Ok(3600));
        assert_eq!(time_limit_secs("1.5"), Ok(90));
        assert_eq!(time_limit_secs("90s"), Ok(90));
        assert_eq!(time_limit_secs("2h"), Ok(7200));
        assert_eq!(time_limit_secs("1500ms"), Ok(2), "fractions round up");
        assert_eq!(time_limit_secs("0"), Ok(0));
        assert!(time_limit_secs("0.4ms").is_err());
        assert!(time_limit_secs("inf").is_err());
    }

    #[test]
    fn other_bare_durations_are_seconds() {
        assert_eq!(seconds_or_units("90"), Ok(Duration::from_secs(90)));
        assert_eq!(seconds_or_units("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(seconds_or_units("250ms"), Ok(Duration::from_millis(250)));
        assert!(seconds_or_units("0.4ms").is_err());
        let d = Duration::from_millis(1500);
        assert_eq!(seconds_or_units(&to_arg(d)), Ok(d));
    }
}
