//! The journal's record format: versioned, and its own — never the wire's.
//!
//! What a process writes to disk must not change when a message on the wire changes: a
//! journal outlives the build that wrote it, a wire does not. So each process journals
//! record types of its own (plain serde structs defined beside its journal code, not wire
//! messages), encoded by [`encode`] with the journal's own bincode configuration, and every
//! journal carries a format stamp in its meta table ([`FORMAT_META`]):
//!
//! ```text
//! meta format = "shardsched-<kind>-journal v<version>"      e.g. "shardsched-shard-journal v1"
//! ```
//!
//! [`check`] reads the stamp when a process opens its journal and says what it found:
//!
//! | found | [`Stamp`] / error |
//! |---|---|
//! | no stamp, no record | [`Stamp::Fresh`]: write [`stamp_value`] with the first batch |
//! | this kind, this version | [`Stamp::Current`] |
//! | this kind, an older version | [`Stamp::Older`]: the caller upgrades it, or refuses by name |
//! | no stamp but records | refused: written before format v1 (by the wire codec) |
//! | another kind, a newer version, an unreadable stamp | refused, saying which |
//!
//! A change to a record type that changes its bytes is a new format version: the golden
//! journal files each process keeps under its `tests/golden/` fail to open otherwise.
//!
//! ```
//! use shardsched_journal::format::{self, Stamp};
//! use shardsched_journal::{Batch, Journal};
//! let dir = tempfile::tempdir().unwrap();
//! let journal = Journal::open(dir.path().join("journal.redb")).unwrap();
//! assert_eq!(format::check(&journal, "shard", 1).unwrap(), Stamp::Fresh);
//! let mut batch = Batch::new();
//! batch.put_meta(format::FORMAT_META, format::stamp_value("shard", 1));
//! batch.put("jobs", 7, format::encode(&("job", 7u64)).unwrap());
//! journal.commit(&batch).unwrap();
//! assert_eq!(format::check(&journal, "shard", 1).unwrap(), Stamp::Current);
//! let (name, id): (String, u64) = format::decode(&journal.get("jobs", 7).unwrap().unwrap()).unwrap();
//! assert_eq!((name.as_str(), id), ("job", 7));
//! assert!(format::check(&journal, "coordinator", 1).is_err());
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{ErrorKind, JournalError};
use crate::limits::VALUE_BYTES_MAX;
use crate::store::Journal;

/// The meta value holding the journal's format stamp.
pub const FORMAT_META: &str = "format";

/// What [`check`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// An empty journal: the caller stamps it ([`stamp_value`]) with its first batch.
    Fresh,
    /// Stamped with the caller's kind and version.
    Current,
    /// Stamped with the caller's kind and an older version (the number): the caller
    /// upgrades the records it knows how to, or refuses.
    Older(u32),
}

/// A record could not be encoded or decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// serde could not encode the value.
    #[error("cannot encode record: {0}")]
    Encode(String),
    /// The encoded record is larger than a journal value may be.
    #[error("record of {bytes} bytes is over the {VALUE_BYTES_MAX}-byte limit")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The bytes are not a record of the expected type.
    #[error("malformed record: {0}")]
    Decode(String),
    /// A whole record was decoded but bytes were left over.
    #[error("malformed record: {0} unexpected bytes after its end")]
    TrailingBytes(usize),
}

/// The journal's bincode configuration: little-endian varints, no decode past the value
/// limit. Defined here, apart from the wire's, so that neither can change the other.
fn config() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_variable_int_encoding()
        .with_limit::<VALUE_BYTES_MAX>()
}

/// Encodes one record.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, FormatError> {
    let bytes = bincode::serde::encode_to_vec(value, config())
        .map_err(|e| FormatError::Encode(e.to_string()))?;
    if bytes.len() > VALUE_BYTES_MAX {
        return Err(FormatError::TooLarge { bytes: bytes.len() });
    }
    Ok(bytes)
}

/// Decodes one record; every byte must belong to it.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FormatError> {
    let (value, used) = bincode::serde::decode_from_slice(bytes, config())
        .map_err(|e| FormatError::Decode(e.to_string()))?;
    if used != bytes.len() {
        return Err(FormatError::TrailingBytes(bytes.len() - used));
    }
    Ok(value)
}

/// The stamp of a `kind` journal (`shard`, `coordinator`, …) of format `version`.
pub fn stamp_value(kind: &str, version: u32) -> Vec<u8> {
    format!("shardsched-{kind}-journal v{version}").into_bytes()
}

/// Reads `journal`'s format stamp and says whether a `kind` process that writes format
/// `version` may use it (see the module documentation). Errors name the file.
pub fn check(journal: &Journal, kind: &str, version: u32) -> Result<Stamp, JournalError> {
    let refuse = |why: String| Err(JournalError::new(journal.path(), ErrorKind::Format(why)));
    let Some(stamp) = journal.meta(FORMAT_META)? else {
        if journal.state()?.records == 0 {
            return Ok(Stamp::Fresh);
        }
        return refuse(format!(
            "written before journal format v1 (its records are in the wire's encoding, which \
             this build does not read); this build reads {kind} journal format v{version}: \
             move the state directory aside to start afresh, or run the shardsched that \
             wrote it"
        ));
    };
    let text = String::from_utf8_lossy(&stamp);
    let parsed = text
        .strip_prefix("shardsched-")
        .and_then(|rest| rest.split_once("-journal v"))
        .and_then(|(k, v)| Some((k, v.parse::<u32>().ok()?)));
    let Some((found_kind, found)) = parsed else {
        return refuse(format!("unreadable format stamp {text:?}"));
    };
    if found_kind != kind {
        return refuse(format!(
            "a {found_kind} journal, not a {kind} one (is the state directory right?)"
        ));
    }
    match found.cmp(&version) {
        std::cmp::Ordering::Equal => Ok(Stamp::Current),
        std::cmp::Ordering::Less => Ok(Stamp::Older(found)),
        std::cmp::Ordering::Greater => refuse(format!(
            "{kind} journal format v{found}, written by a newer shardsched; this build reads \
             up to v{version}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Batch;

    fn journal() -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path().join("journal.redb")).expect("open");
        (dir, journal)
    }

    #[test]
    fn a_journal_without_a_stamp_but_with_records_is_refused_as_pre_v1() {
        let (_dir, journal) = journal();
        journal.put("jobs", 1, b"old bytes").expect("put");
        let err = check(&journal, "shard", 1).expect_err("pre-v1");
        let text = err.to_string();
        assert!(text.contains("journal.redb"), "{text}");
        assert!(text.contains("written before journal format v1"), "{text}");
        assert!(err.is_unreadable(), "a restart would fail the same way");
    }

    #[test]
    fn stamps_of_other_kinds_newer_versions_and_garbage_are_refused() {
        let (_dir, journal) = journal();
        let mut batch = Batch::new();
        batch.put_meta(FORMAT_META, stamp_value("shard", 3));
        journal.commit(&batch).expect("commit");
        assert_eq!(check(&journal, "shard", 3).expect("same"), Stamp::Current);
        assert_eq!(check(&journal, "shard", 4).expect("older"), Stamp::Older(3));
        let newer = check(&journal, "shard", 2).expect_err("newer").to_string();
        assert!(newer.contains("written by a newer shardsched"), "{newer}");
        let other = check(&journal, "coordinator", 3)
            .expect_err("kind")
            .to_string();
        assert!(
            other.contains("a shard journal, not a coordinator one"),
            "{other}"
        );
        let mut batch = Batch::new();
        batch.put_meta(FORMAT_META, b"v1".to_vec());
        journal.commit(&batch).expect("commit");
        let garbage = check(&journal, "shard", 1)
            .expect_err("garbage")
            .to_string();
        assert!(garbage.contains("unreadable format stamp"), "{garbage}");
    }

    #[test]
    fn records_round_trip_and_trailing_bytes_are_refused() {
        let value = (String::from("node7"), 42u64, vec![1u32, 2, 3]);
        let mut bytes = encode(&value).expect("encode");
        assert_eq!(decode::<(String, u64, Vec<u32>)>(&bytes), Ok(value));
        bytes.push(0);
        assert_eq!(
            decode::<(String, u64, Vec<u32>)>(&bytes),
            Err(FormatError::TrailingBytes(1))
        );
        assert!(matches!(
            decode::<u64>(&[0xff]),
            Err(FormatError::Decode(_))
        ));
    }
}
