//! Job ids: Flux's FLUIDs (Flux Locally Unique IDs), made cluster-unique without a round trip.
//!
//! A FLUID is a `u64` laid out as
//!
//! ```text
//!  63                        24 23              10 9            0
//! +----------------------------+------------------+--------------+
//! | timestamp: 40 bits (ms)    | generator: 14 bit| sequence: 10 |
//! +----------------------------+------------------+--------------+
//! ```
//!
//! `timestamp` is milliseconds since [`FLUID_EPOCH_MS`] (enough for about 34 years),
//! `generator` is the id the coordinator assigned to the shard that issued the job (so two
//! shards never issue the same id, and a client can tell which shard owns a job from its
//! id alone), and `sequence` counts ids issued within one millisecond. Ids from one generator
//! strictly increase; ids from all generators sort roughly by submission time.
//!
//! [`FluidGenerator`] is a pure state machine: the caller passes the time in. When more than
//! 1,024 ids are asked for within one millisecond, or the clock steps back, the generator
//! borrows from the next millisecond rather than waiting (it never repeats an id). After a
//! restart, [`FluidGenerator::resume_after`] continues past the last id the journal holds.
//!
//! Ids print in Flux's F58 form (`ƒ` then base-58 digits, e.g. `ƒ2KEkBMqV`); parsing accepts
//! that, the ASCII `f` prefix, and plain decimal.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The FLUID epoch: 2025-01-01T00:00:00Z, in milliseconds since the Unix epoch.
pub const FLUID_EPOCH_MS: u64 = 1_735_689_600_000;
/// Bits of the millisecond timestamp.
pub const TIMESTAMP_BITS: u32 = 40;
/// Bits of the generator id.
pub const GENERATOR_BITS: u32 = 14;
/// Bits of the per-millisecond sequence number.
pub const SEQUENCE_BITS: u32 = 10;
/// Largest timestamp, in milliseconds since the epoch.
pub const TIMESTAMP_MAX_MS: u64 = (1 << TIMESTAMP_BITS) - 1;
/// Largest generator id.
pub const GENERATOR_ID_MAX: u16 = (1 << GENERATOR_BITS) - 1;
/// Largest sequence number.
pub const SEQUENCE_MAX: u16 = (1 << SEQUENCE_BITS) - 1;

const F58_ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const F58_PREFIX: &str = "\u{192}";
const F58_PREFIX_ASCII: &str = "f";

/// A job id. On the wire it is a plain `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fluid(pub u64);

/// A FLUID could not be made or parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FluidError {
    /// The generator id does not fit in 14 bits.
    #[error("generator id {0} is out of range (0..={GENERATOR_ID_MAX})")]
    GeneratorOutOfRange(u32),
    /// The sequence number does not fit in 10 bits.
    #[error("sequence {0} is out of range (0..={SEQUENCE_MAX})")]
    SequenceOutOfRange(u16),
    /// The clock is past the last millisecond a FLUID can carry (about 34 years after the
    /// epoch).
    #[error("FLUID timestamps are exhausted (the clock is past epoch + 2^40 ms)")]
    TimestampExhausted,
    /// The text is neither a decimal nor an F58 job id.
    #[error(
        "{0:?} is not a job id (expected F58 like \u{192}2KEkBMqV, or f2KEkBMqV without the \u{192}, or decimal)"
    )]
    Parse(String),
}

/// Issues FLUIDs for one generator id. Pure: no clock inside.
#[derive(Clone, Debug)]
pub struct FluidGenerator {
    generator_id: u16,
    epoch_ms: u64,
    /// Timestamp and sequence of the last id issued, if any.
    last: Option<(u64, u16)>,
}

impl Fluid {
    /// Builds an id from its three fields, checking each range.
    pub fn from_parts(
        timestamp_ms: u64,
        generator_id: u16,
        sequence: u16,
    ) -> Result<Self, FluidError> {
        if timestamp_ms > TIMESTAMP_MAX_MS {
            return Err(FluidError::TimestampExhausted);
        }
        if generator_id > GENERATOR_ID_MAX {
            return Err(FluidError::GeneratorOutOfRange(u32::from(generator_id)));
        }
        if sequence > SEQUENCE_MAX {
            return Err(FluidError::SequenceOutOfRange(sequence));
        }
        let sequence = u64::from(sequence);
        Ok(Fluid(
            (timestamp_ms << (GENERATOR_BITS + SEQUENCE_BITS))
                | (u64::from(generator_id) << SEQUENCE_BITS)
                | sequence,
        ))
    }

    /// Milliseconds since the generator's epoch.
    pub fn timestamp_ms(self) -> u64 {
        self.0 >> (GENERATOR_BITS + SEQUENCE_BITS)
    }

    /// The generator (shard) that issued this id.
    pub fn generator_id(self) -> u16 {
        ((self.0 >> SEQUENCE_BITS) & u64::from(GENERATOR_ID_MAX)) as u16
    }

    /// The sequence number within the millisecond.
    pub fn sequence(self) -> u16 {
        (self.0 & u64::from(SEQUENCE_MAX)) as u16
    }

    /// The id `n` places after this one in its generator's sequence: the sequence counts to
    /// [`SEQUENCE_MAX`], then the timestamp moves on a millisecond (as
    /// [`FluidGenerator::next`] borrows from the next millisecond). An array's elements are
    /// the ids after its own ([`crate::array`]).
    pub fn after(self, n: u64) -> Result<Fluid, FluidError> {
        let per_ms = u64::from(SEQUENCE_MAX) + 1;
        let sequence = u64::from(self.sequence()).saturating_add(n);
        let timestamp = self.timestamp_ms().saturating_add(sequence / per_ms);
        let sequence = u16::try_from(sequence % per_ms).unwrap_or(SEQUENCE_MAX);
        Fluid::from_parts(timestamp, self.generator_id(), sequence)
    }

    /// The F58 form, `ƒ` followed by base-58 digits.
    pub fn to_f58(self) -> String {
        let mut digits = Vec::new();
        let mut n = self.0;
        loop {
            digits.push(F58_ALPHABET[(n % 58) as usize]);
            n /= 58;
            if n == 0 {
                break;
            }
        }
        digits.reverse();
        let mut out = String::from(F58_PREFIX);
        out.extend(digits.into_iter().map(char::from));
        out
    }
}

impl fmt::Display for Fluid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_f58())
    }
}

impl FromStr for Fluid {
    type Err = FluidError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || FluidError::Parse(text.to_owned());
        let digits = text
            .strip_prefix(F58_PREFIX)
            .or_else(|| text.strip_prefix(F58_PREFIX_ASCII));
        let Some(digits) = digits else {
            return text.parse::<u64>().map(Fluid).map_err(|_| bad());
        };
        if digits.is_empty() {
            return Err(bad());
        }
        let mut n: u64 = 0;
        for c in digits.bytes() {
            let value = F58_ALPHABET.iter().position(|&a| a == c).ok_or_else(bad)?;
            n = n
                .checked_mul(58)
                .and_then(|n| n.checked_add(value as u64))
                .ok_or_else(bad)?;
        }
        Ok(Fluid(n))
    }
}

impl FluidGenerator {
    /// A generator for `generator_id` with the cluster epoch [`FLUID_EPOCH_MS`].
    pub fn new(generator_id: u16) -> Result<Self, FluidError> {
        Self::with_epoch(generator_id, FLUID_EPOCH_MS)
    }

    /// A generator with an explicit epoch (milliseconds since the Unix epoch).
    pub fn with_epoch(generator_id: u16, epoch_ms: u64) -> Result<Self, FluidError> {
        if generator_id > GENERATOR_ID_MAX {
            return Err(FluidError::GeneratorOutOfRange(u32::from(generator_id)));
        }
        Ok(FluidGenerator {
            generator_id,
            epoch_ms,
            last: None,
        })
    }

    /// The generator id this generator stamps into its ids.
    pub fn generator_id(&self) -> u16 {
        self.generator_id
    }

    /// Makes every later id greater than `last` (an id issued before a restart, read back
    /// from the journal). Ids lower than what was already issued are ignored.
    pub fn resume_after(&mut self, last: Fluid) {
        let seen = (last.timestamp_ms(), last.sequence());
        if self.last.is_none_or(|mine| seen > mine) {
            self.last = Some(seen);
        }
    }

    /// Issues the next id at time `now_ms` and reserves the `count` ids after it
    /// ([`Fluid::after`]): the next id issued comes after them. An array's id and its
    /// elements' ([`crate::array`]).
    pub fn next_block(&mut self, now_ms: u64, count: u64) -> Result<Fluid, FluidError> {
        let first = self.next(now_ms)?;
        let last = first.after(count)?;
        self.last = Some((last.timestamp_ms(), last.sequence()));
        Ok(first)
    }

    /// Issues the next id at time `now_ms` (milliseconds since the Unix epoch).
    pub fn next(&mut self, now_ms: u64) -> Result<Fluid, FluidError> {
        let now = now_ms.saturating_sub(self.epoch_ms);
        let (timestamp, sequence) = match self.last {
            Some((last_ts, _)) if now > last_ts => (now, 0),
            None => (now, 0),
            Some((last_ts, seq)) if seq < SEQUENCE_MAX => (last_ts, seq + 1),
            Some((last_ts, _)) => (last_ts + 1, 0),
        };
        let id = Fluid::from_parts(timestamp, self.generator_id, sequence)?;
        self.last = Some((timestamp, sequence));
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_increasing_even_in_one_millisecond() {
        let mut generator = FluidGenerator::new(5).expect("generator");
        let now = FLUID_EPOCH_MS + 1_000;
        let mut previous = None;
        // 3,000 ids in one millisecond, then the clock steps back, then forward.
        let times = std::iter::repeat_n(now, 3_000)
            .chain(std::iter::repeat_n(now - 500, 10))
            .chain(std::iter::repeat_n(now + 10, 10));
        for t in times {
            let id = generator.next(t).expect("id");
            assert_eq!(id.generator_id(), 5);
            if let Some(p) = previous {
                assert!(id > p, "{id:?} after {p:?}");
            }
            previous = Some(id);
        }
    }

    #[test]
    fn generators_never_collide_and_fields_round_trip() {
        let mut a = FluidGenerator::new(1).expect("a");
        let mut b = FluidGenerator::new(2).expect("b");
        let t = FLUID_EPOCH_MS + 42;
        let (x, y) = (a.next(t).expect("x"), b.next(t).expect("y"));
        assert_ne!(x, y);
        assert_eq!(
            (x.timestamp_ms(), x.generator_id(), x.sequence()),
            (42, 1, 0)
        );
        assert!(FluidGenerator::new(GENERATOR_ID_MAX + 1).is_err());
    }

    #[test]
    fn resume_continues_past_the_journal() {
        let mut before = FluidGenerator::new(3).expect("gen");
        let t = FLUID_EPOCH_MS + 7;
        let last = (0..2_000)
            .map(|_| before.next(t))
            .last()
            .expect("some")
            .expect("id");
        let mut after = FluidGenerator::new(3).expect("gen");
        after.resume_after(last);
        assert!(after.next(t).expect("id") > last);
    }

    #[test]
    fn f58_and_decimal_parse() {
        for n in [0u64, 1, 57, 58, 123_456_789, u64::MAX] {
            let id = Fluid(n);
            assert_eq!(id.to_f58().parse::<Fluid>(), Ok(id));
            assert_eq!(n.to_string().parse::<Fluid>(), Ok(id));
        }
        assert_eq!(Fluid(0).to_string(), "\u{192}1");
        assert_eq!("f2".parse::<Fluid>(), Ok(Fluid(1)));
        assert!("ƒ0".parse::<Fluid>().is_err());
        assert!("ƒ".parse::<Fluid>().is_err());
        assert!("ƒzzzzzzzzzzzzzz".parse::<Fluid>().is_err());
        assert_eq!(
            FluidError::TimestampExhausted,
            Fluid::from_parts(TIMESTAMP_MAX_MS + 1, 0, 0).expect_err("too late")
        );
    }
}
