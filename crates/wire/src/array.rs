//! Job arrays: one submission of many like jobs (`submit --array 1-1000%50`, Slurm's
//! `sbatch --array`), each element a job of its own, `ID[N]`.
//!
//! An array is submitted in one request and accepted in one journal commit. The shard
//! issues the array's id `ID` and reserves the ids after it, so that the element of index
//! `N` is the job [`element_id`]`(ID, N)` = the id `N + 1` places after `ID` in its
//! shard's sequence: anyone who knows `ID[N]` knows the element's job id without asking
//! (`cancel ID[3]`), and the element's id names the same shard as the array's (its FLUID
//! generator field). Indices are below the configured `array_elements_max` (as Slurm's are
//! below `MaxArraySize`), so an array reserves at most that many ids.
//!
//! ```
//! use shardsched_wire::array::{ArraySpec, JobRef};
//! use shardsched_wire::Fluid;
//!
//! let spec: ArraySpec = "1-9:4,20%2".parse().unwrap();
//! assert_eq!(spec.indices().collect::<Vec<_>>(), vec![1, 5, 9, 20]);
//! assert_eq!((spec.len(), spec.max_running), (4, 2));
//! assert_eq!(spec.to_string(), "1-9:4,20%2");
//!
//! let element: JobRef = "ƒ2KEkBMqV[5]".parse().unwrap();
//! assert_eq!(element.index, Some(5));
//! assert_eq!(element.job_id(), Ok(element.id.after(6).unwrap()));
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::fluid::{Fluid, FluidError};
use crate::limits::{ARRAY_ELEMENTS_MAX, ARRAY_RANGES_MAX};

/// The indices of an array and how many of its elements may run at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArraySpec {
    /// The indices, as ranges in the order written (at most [`ARRAY_RANGES_MAX`]).
    pub ranges: Vec<IndexRange>,
    /// At most this many elements run at once (`%N`); 0: no limit.
    pub max_running: u32,
}

/// `first-last:step`: `first`, `first + step`, … up to `last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IndexRange {
    /// The first index.
    pub first: u32,
    /// The last index (the last one the step reaches is the range's end).
    pub last: u32,
    /// At least 1.
    pub step: u32,
}

/// An array's indices could not be read, or break a bound.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    /// Not `A`, `A-B` or `A-B:S`, comma-separated, with an optional `%N`.
    #[error("{0:?} is not an array's indices (e.g. 1-1000, 0-15:4, 1,5,9, 1-1000%50)")]
    Malformed(String),
    /// A range ending before it starts, or with a step of 0.
    #[error("{0:?}: a range must not end before it starts, and its step must be at least 1")]
    BadRange(String),
    /// More elements than allowed.
    #[error("{count} elements, more than the limit of {max} (array_elements_max)")]
    TooManyElements {
        /// How many the spec makes.
        count: u64,
        /// The limit.
        max: u32,
    },
    /// An index at or above the limit.
    #[error("index {index} is not below the limit of {max} (array_elements_max)")]
    IndexTooLarge {
        /// The index.
        index: u32,
        /// The limit.
        max: u32,
    },
    /// More ranges than [`ARRAY_RANGES_MAX`].
    #[error("{0} ranges, more than the limit of {ARRAY_RANGES_MAX}")]
    TooManyRanges(usize),
    /// The same index twice.
    #[error("index {0} appears twice")]
    Duplicate(u32),
}

/// Which array a job is an element of, and its index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArrayElement {
    /// The array's id (`ID` of `ID[N]`).
    pub array: Fluid,
    /// Its index (`N`).
    pub index: u32,
}

/// A job as a person names it: `ID`, or an array's element `ID[N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobRef {
    /// The job's (or the array's) id.
    pub id: Fluid,
    /// The element's index, for `ID[N]`.
    pub index: Option<u32>,
}

/// The job id of element `index` of array `array`: the id `index + 1` places after the
/// array's (see the module documentation).
pub fn element_id(array: Fluid, index: u32) -> Result<Fluid, FluidError> {
    array.after(u64::from(index) + 1)
}

impl ArraySpec {
    /// Every index, in the order written.
    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges
            .iter()
            .flat_map(|r| (r.first..=r.last).step_by(r.step.max(1) as usize))
    }

    /// How many elements (indices) it makes.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|r| u64::from((r.last - r.first.min(r.last)) / r.step.max(1)) + 1)
            .sum()
    }

    /// Whether it makes no element (never, once [`ArraySpec::check`]ed).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The largest index.
    pub fn max_index(&self) -> Option<u32> {
        self.indices().max()
    }

    /// Checks the spec against `elements_max` (the configured `array_elements_max`): at
    /// least one element and at most `elements_max`, every index below it, ranges well
    /// formed and at most [`ARRAY_RANGES_MAX`], no index twice.
    pub fn check(&self, elements_max: u32) -> Result<(), ArrayError> {
        if self.ranges.len() > ARRAY_RANGES_MAX {
            return Err(ArrayError::TooManyRanges(self.ranges.len()));
        }
        if let Some(r) = self.ranges.iter().find(|r| r.step == 0 || r.last < r.first) {
            return Err(ArrayError::BadRange(r.to_string()));
        }
        let count = self.len();
        if count == 0 || count > u64::from(elements_max) {
            return Err(ArrayError::TooManyElements {
                count,
                max: elements_max,
            });
        }
        if let Some(index) = self.max_index().filter(|&i| i >= elements_max) {
            return Err(ArrayError::IndexTooLarge {
                index,
                max: elements_max,
            });
        }
        let mut all: Vec<u32> = self.indices().collect();
        all.sort_unstable();
        match all.windows(2).find(|w| w[0] == w[1]) {
            Some(w) => Err(ArrayError::Duplicate(w[0])),
            None => Ok(()),
        }
    }
}

impl FromStr for ArraySpec {
    type Err = ArrayError;

    /// `1-1000`, `0-15:4`, `1,5,9`, `1-10,20-30`, each with an optional `%N`; checked
    /// against the wire's [`ARRAY_ELEMENTS_MAX`] (the configured bound is the shard's).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = || ArrayError::Malformed(text.to_owned());
        let (list, max_running) = match text.split_once('%') {
            Some((list, n)) => (list, n.parse::<u32>().map_err(|_| malformed())?),
            None => (text, 0),
        };
        let number = |s: &str| -> Result<u32, ArrayError> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed());
            }
            s.parse().map_err(|_| malformed())
        };
        let mut ranges = Vec::new();
        for part in list.split(',') {
            let (span, step) = match part.split_once(':') {
                Some((span, step)) => (span, number(step)?),
                None => (part, 1),
            };
            let (first, last) = match span.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => (number(span)?, number(span)?),
            };
            ranges.push(IndexRange { first, last, step });
            if ranges.len() > ARRAY_RANGES_MAX {
                return Err(ArrayError::TooManyRanges(ranges.len()));
            }
        }
        let spec = ArraySpec {
            ranges,
            max_running,
        };
        spec.check(ARRAY_ELEMENTS_MAX)?;
        Ok(spec)
    }
}

impl fmt::Display for IndexRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.first == self.last, self.step) {
            (true, _) => write!(f, "{}", self.first),
            (false, 1) => write!(f, "{}-{}", self.first, self.last),
            (false, step) => write!(f, "{}-{}:{step}", self.first, self.last),
        }
    }
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{range}")?;
        }
        if self.max_running > 0 {
            write!(f, "%{}", self.max_running)?;
        }
        Ok(())
    }
}

impl fmt::Display for ArrayElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.array, self.index)
    }
}

impl JobRef {
    /// The job id it names: the id itself, or its element's.
    pub fn job_id(self) -> Result<Fluid, FluidError> {
        match self.index {
            Some(index) => element_id(self.id, index),
            None => Ok(self.id),
        }
    }
}

impl FromStr for JobRef {
    type Err = FluidError;

    /// `ƒ2KEkBMqV`, `f2KEkBMqV`, decimal, each with an optional `[N]`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let Some(open) = text.strip_suffix(']') else {
            return Ok(JobRef {
                id: text.parse()?,
                index: None,
            });
        };
        let (id, index) = open
            .split_once('[')
            .ok_or_else(|| FluidError::Parse(text.to_owned()))?;
        let index = index
            .parse::<u32>()
            .map_err(|_| FluidError::Parse(text.to_owned()))?;
        Ok(JobRef {
            id: id.parse()?,
            index: Some(index),
        })
    }
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(index) => write!(f, "{}[{index}]", self.id),
            None => write!(f, "{}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_read_as_slurm_writes_them() {
        let spec: ArraySpec = "1-1000%50".parse().expect("spec");
        assert_eq!((spec.len(), spec.max_running), (1000, 50));
        assert_eq!(spec.indices().take(3).collect::<Vec<_>>(), [1, 2, 3]);
        let spec: ArraySpec = "0-15:4".parse().expect("spec");
        assert_eq!(spec.indices().collect::<Vec<_>>(), [0, 4, 8, 12]);
        assert_eq!(spec.len(), 4);
        let spec: ArraySpec = "0-14:4".parse().expect("spec");
        assert_eq!((spec.len(), spec.max_index()), (4, Some(12)));
        for bad in [
            "", "a", "1-", "-3", "1-5%", "5-1", "1-3:0", "1,,2", "1-2,2", "1 - 2",
        ] {
            assert!(bad.parse::<ArraySpec>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bounds_are_checked_by_name() {
        let spec: ArraySpec = "0-99".parse().expect("spec");
        assert!(spec.check(100).is_ok());
        assert_eq!(
            spec.check(50).expect_err("too many").to_string(),
            "100 elements, more than the limit of 50 (array_elements_max)"
        );
        let high: ArraySpec = "500".parse().expect("spec");
        assert!(matches!(
            high.check(100),
            Err(ArrayError::IndexTooLarge {
                index: 500,
                max: 100
            })
        ));
        let big = format!("0-{ARRAY_ELEMENTS_MAX}");
        assert!(big.parse::<ArraySpec>().is_err());
    }

    #[test]
    fn elements_are_named_and_found_from_the_arrays_id() {
        let array = Fluid::from_parts(5, 3, 1020).expect("id");
        let element: JobRef = format!("{array}[7]").parse().expect("ref");
        let id = element.job_id().expect("id");
        assert_eq!(
            (id.timestamp_ms(), id.sequence()),
            (6, 4),
            "across a millisecond"
        );
        assert_eq!(id.generator_id(), 3);
        assert_eq!(element.to_string(), format!("{array}[7]"));
        let plain: JobRef = array.to_string().parse().expect("ref");
        assert_eq!(plain.job_id(), Ok(array));
        assert!("f2KEk[x]".parse::<JobRef>().is_err());
    }
}
