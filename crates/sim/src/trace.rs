//! The run's trace: a hash of every step's line (and the lines themselves when asked),
//! so that two runs of a seed can be compared by one number.
//!
//! The hash is 64-bit FNV-1a over the lines' bytes: fixed, portable, and unlike std's
//! `DefaultHasher` it is specified to stay the same across Rust releases. Lines hold what
//! happened (actions, answers, refusal codes), never a wall-clock time.

/// FNV-1a's offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Trace {
    hash: u64,
    lines: Option<Vec<String>>,
}

impl Trace {
    /// An empty trace; `keep`: keep the lines too.
    pub(crate) fn new(keep: bool) -> Trace {
        Trace {
            hash: FNV_OFFSET,
            lines: keep.then(Vec::new),
        }
    }

    /// Adds one line at virtual time `now`.
    pub(crate) fn line(&mut self, now: u64, line: &str) {
        for byte in now.to_le_bytes().iter().chain(line.as_bytes()).chain(b"\n") {
            self.hash ^= u64::from(*byte);
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
        if let Some(lines) = &mut self.lines {
            lines.push(format!("t={now} {line}"));
        }
    }

    /// The hash of every line so far.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// The lines, if kept.
    pub(crate) fn take_lines(&mut self) -> Vec<String> {
        self.lines.take().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lines_hash_equal_and_any_change_shows() {
        let mut a = Trace::new(false);
        let mut b = Trace::new(true);
        a.line(1, "deliver");
        b.line(1, "deliver");
        assert_eq!(a.hash(), b.hash());
        b.line(2, "crash");
        assert_ne!(a.hash(), b.hash());
        assert_eq!(b.take_lines(), ["t=1 deliver", "t=2 crash"]);
        // FNV-1a of the empty input is its offset basis.
        assert_eq!(Trace::new(false).hash(), FNV_OFFSET);
    }
}
