//! The one place that knows the encoding: bincode 2, standard configuration, serde mode.
//!
//! bincode is pinned to exactly `=2.0.1` in the workspace and used nowhere else, so that
//! replacing it (upstream announced it is unmaintained) touches this file only. Its types do
//! not leak: errors are turned into [`CodecError`] with a message.
//!
//! The configuration is bincode's `standard()` (little-endian, variable-length integers) with
//! a decode limit of [`FRAME_BYTES_MAX`]: a length prefix inside a message (a `Vec`, a
//! `String`) that claims more bytes than that is refused before anything is reserved, so
//! decoding untrusted bytes allocates at most about the size of the input.
//!
//! Messages must not use serde features that need a self-describing format
//! (`#[serde(flatten)]`, `untagged`, `skip_serializing_if`, `deserialize_any`): bincode
//! encodes fields by position. Adding, removing or reordering a field or an enum variant is
//! a wire change (see docs/PROTOCOL.md, "Versions").

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::limits::FRAME_BYTES_MAX;

/// A message could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The value could not be encoded (a serde error in a message type).
    #[error("cannot encode message: {0}")]
    Encode(String),
    /// The encoded value is larger than one frame may be.
    #[error("encoded message is {bytes} bytes, more than the {FRAME_BYTES_MAX}-byte frame limit")]
    TooLarge {
        /// Size of the encoding, in bytes.
        bytes: usize,
    },
    /// The bytes are not a valid encoding of the expected message type.
    #[error("malformed message: {0}")]
    Decode(String),
    /// A whole message was decoded but bytes were left over.
    #[error("malformed message: {count} unexpected bytes after the end of the message")]
    TrailingBytes {
        /// How many bytes were left.
        count: usize,
    },
}

/// The bincode configuration of the wire: standard, with the decode limit.
fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<FRAME_BYTES_MAX>()
}

/// Encodes `value`. Fails if it would not fit in one frame.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let bytes = bincode::serde::encode_to_vec(value, config())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    if bytes.len() > FRAME_BYTES_MAX {
        return Err(CodecError::TooLarge { bytes: bytes.len() });
    }
    Ok(bytes)
}

/// How many bytes `value`'s encoding takes, without encoding it into memory (for fitting
/// list replies to a frame). A value that cannot be encoded counts as too large for any
/// frame.
pub fn encoded_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut size = bincode::enc::write::SizeWriter::default();
    match bincode::serde::encode_into_writer(value, &mut size, config()) {
        Ok(()) => size.bytes_written,
        Err(_) => usize::MAX,
    }
}

/// Decodes one `T` that must span all of `bytes`. Never panics, whatever the input.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    if bytes.len() > FRAME_BYTES_MAX {
        return Err(CodecError::TooLarge { bytes: bytes.len() });
    }
    let (value, used) = bincode::serde::decode_from_slice::<T, _>(bytes, config())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    if used != bytes.len() {
        return Err(CodecError::TrailingBytes {
            count: bytes.len() - used,
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_trailing_bytes() {
        let value = (7u64, String::from("node3"), vec![1u8, 2, 3]);
        let mut bytes = encode(&value).expect("encode");
        assert_eq!(decode::<(u64, String, Vec<u8>)>(&bytes), Ok(value));
        bytes.push(0);
        assert_eq!(
            decode::<(u64, String, Vec<u8>)>(&bytes),
            Err(CodecError::TrailingBytes { count: 1 })
        );
    }

    #[test]
    fn huge_length_prefix_is_refused_without_allocating() {
        // A Vec<u8> whose varint length claims u64::MAX elements (0xFF = u64 follows).
        let bytes = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        let err = decode::<Vec<u8>>(&bytes).expect_err("must refuse");
        assert!(matches!(err, CodecError::Decode(_)), "{err}");
    }

    #[test]
    fn encoded_len_is_the_encodings_length() {
        let value = (7u64, String::from("node3"), vec![1u8, 2, 3]);
        assert_eq!(
            encoded_len(&value),
            encode(&value).map(|b| b.len()).unwrap_or(0)
        );
    }

    #[test]
    fn oversized_value_is_refused_at_encode() {
        let big = "x".repeat(FRAME_BYTES_MAX + 1);
        assert!(matches!(encode(&big), Err(CodecError::TooLarge { .. })));
    }
}
