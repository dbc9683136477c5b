//! Length-prefixed frames: a big-endian `u32` payload length, then the payload.
//!
//! ```text
//! +----------------+---------------------------+
//! | length: u32 BE | payload: `length` bytes   |
//! +----------------+---------------------------+
//! ```
//!
//! The length is checked against the caller's maximum (normally
//! [`FRAME_BYTES_MAX`](crate::limits::FRAME_BYTES_MAX)) before anything else, and the
//! payload buffer then grows with the bytes that actually arrive, never from the announced
//! length: a header announcing 16 MiB followed by silence costs the reader a few bytes, not
//! 16 MiB, however many streams do it at once. The whole frame must arrive within a timeout.
//!
//! The functions work on any tokio byte stream, so they are tested here on in-memory pipes;
//! over QUIC they run on [`quinn::RecvStream`] / [`quinn::SendStream`].

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::limits::{FRAME_HEADER_BYTES, FRAME_READ_CHUNK_BYTES};

/// A frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The header announced a payload larger than allowed. Nothing was allocated.
    #[error("frame of {announced} bytes announced, more than the {max}-byte limit")]
    TooLarge {
        /// The announced payload length, in bytes.
        announced: u64,
        /// The limit, in bytes.
        max: usize,
    },
    /// The stream ended before the whole frame arrived.
    #[error("stream ended in the middle of a frame")]
    Truncated,
    /// The frame did not arrive in time.
    #[error("frame not received within {} ms", .after.as_millis())]
    Timeout {
        /// The time allowed.
        after: Duration,
    },
    /// The underlying stream failed (over QUIC: reset by the peer, connection lost).
    #[error("stream error: {0}")]
    Io(#[source] io::Error),
}

/// Returns the header for a payload of `len` bytes, or `TooLarge` if `len > max`.
pub fn encode_header(len: usize, max: usize) -> Result<[u8; FRAME_HEADER_BYTES], FrameError> {
    match u32::try_from(len) {
        Ok(n) if len <= max => Ok(n.to_be_bytes()),
        _ => Err(FrameError::TooLarge {
            announced: len as u64,
            max,
        }),
    }
}

/// Reads the payload length out of a header, refusing anything above `max`.
pub fn decode_header(header: [u8; FRAME_HEADER_BYTES], max: usize) -> Result<usize, FrameError> {
    let announced = u32::from_be_bytes(header);
    match usize::try_from(announced) {
        Ok(len) if len <= max => Ok(len),
        _ => Err(FrameError::TooLarge {
            announced: u64::from(announced),
            max,
        }),
    }
}

/// Splits one frame off the front of `buf` without copying: `Ok(Some((payload, used)))` when a
/// whole frame is there, `Ok(None)` when more bytes are needed, `TooLarge` as soon as the
/// header is. For callers that buffer bytes themselves (and for the fuzz target).
pub fn parse_frame(buf: &[u8], max: usize) -> Result<Option<(&[u8], usize)>, FrameError> {
    let Some((header, rest)) = buf.split_first_chunk::<FRAME_HEADER_BYTES>() else {
        return Ok(None);
    };
    let len = decode_header(*header, max)?;
    Ok(rest
        .get(..len)
        .map(|payload| (payload, FRAME_HEADER_BYTES + len)))
}

/// Writes one frame carrying `payload`.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    payload: &[u8],
    max: usize,
) -> Result<(), FrameError> {
    let header = encode_header(payload.len(), max)?;
    writer.write_all(&header).await.map_err(FrameError::Io)?;
    writer.write_all(payload).await.map_err(FrameError::Io)?;
    Ok(())
}

/// Reads one frame and returns its payload. The header is checked against `max` before the
/// payload buffer is allocated; header and payload together must arrive within `timeout`.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
    timeout: Duration,
) -> Result<Vec<u8>, FrameError> {
    match tokio::time::timeout(timeout, read_frame_untimed(reader, max)).await {
        Ok(result) => result,
        Err(_elapsed) => Err(FrameError::Timeout { after: timeout }),
    }
}

async fn read_frame_untimed<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Vec<u8>, FrameError> {
    let len = read_header(reader, max).await?;
    read_payload(reader, len).await
}

/// Reads a frame's header and returns the payload length it announces, refusing anything
/// above `max`. With [`read_payload`], for a reader that must reserve the bytes (a budget)
/// between the two.
pub async fn read_header<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<usize, FrameError> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    reader
        .read_exact(&mut header)
        .await
        .map_err(eof_is_truncated)?;
    decode_header(header, max)
}

/// Reads a payload of exactly `len` bytes. The buffer starts at most
/// [`FRAME_READ_CHUNK_BYTES`] long and grows as bytes arrive: the length came from the
/// peer, and what it announced is not yet what it sent.
pub async fn read_payload<R: AsyncRead + Unpin>(
    reader: &mut R,
    len: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut payload = Vec::with_capacity(len.min(FRAME_READ_CHUNK_BYTES));
    let wanted = u64::try_from(len).unwrap_or(u64::MAX);
    (&mut *reader)
        .take(wanted)
        .read_to_end(&mut payload)
        .await
        .map_err(eof_is_truncated)?;
    if payload.len() < len {
        return Err(FrameError::Truncated);
    }
    Ok(payload)
}

fn eof_is_truncated(e: io::Error) -> FrameError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        FrameError::Truncated
    } else {
        FrameError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::FRAME_BYTES_MAX;

    const SHORT: Duration = Duration::from_millis(200);

    #[tokio::test]
    async fn round_trip_over_a_pipe() {
        let (mut a, mut b) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            write_frame(&mut a, b"hello", FRAME_BYTES_MAX).await?;
            write_frame(&mut a, b"", FRAME_BYTES_MAX).await
        });
        assert_eq!(
            read_frame(&mut b, FRAME_BYTES_MAX, SHORT).await.ok(),
            Some(b"hello".to_vec())
        );
        assert_eq!(
            read_frame(&mut b, FRAME_BYTES_MAX, SHORT).await.ok(),
            Some(Vec::new())
        );
        assert!(matches!(writer.await, Ok(Ok(()))));
    }

    #[tokio::test]
    async fn four_gib_header_is_refused_before_reading_the_payload() {
        // Only the header exists: had the reader allocated and waited for the payload, it would
        // report Truncated (end of input), not TooLarge.
        let input: &[u8] = &[0xFF, 0xFF, 0xFF, 0xFF];
        let mut reader = input;
        match read_frame(&mut reader, FRAME_BYTES_MAX, SHORT).await {
            Err(FrameError::TooLarge { announced, max }) => {
                assert_eq!(announced, u64::from(u32::MAX));
                assert_eq!(max, FRAME_BYTES_MAX);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_payload_buffer_grows_with_what_arrives_not_with_what_is_announced() {
        // 16 MiB announced, 3 bytes sent, then silence: nothing near 16 MiB is reserved.
        let (mut writer, mut reader) = tokio::io::duplex(64);
        writer.write_all(&[1, 0, 0, 0, 7, 8, 9]).await.ok();
        let len = read_header(&mut reader, FRAME_BYTES_MAX).await.ok();
        assert_eq!(len, Some(FRAME_BYTES_MAX));
        let mut payload = Vec::with_capacity(FRAME_READ_CHUNK_BYTES);
        let read = tokio::time::timeout(
            SHORT,
            (&mut reader)
                .take(FRAME_BYTES_MAX as u64)
                .read_to_end(&mut payload),
        )
        .await;
        assert!(read.is_err(), "still waiting for the rest");
        assert_eq!(payload, [7, 8, 9]);
        assert!(payload.capacity() <= FRAME_READ_CHUNK_BYTES);
    }

    #[tokio::test]
    async fn short_input_is_truncated_and_silence_times_out() {
        let input: &[u8] = &[0, 0, 0, 9, 1, 2];
        let mut reader = input;
        assert!(matches!(
            read_frame(&mut reader, FRAME_BYTES_MAX, SHORT).await,
            Err(FrameError::Truncated)
        ));
        let (_keep_open, mut silent) = tokio::io::duplex(64);
        assert!(matches!(
            read_frame(&mut silent, FRAME_BYTES_MAX, Duration::from_millis(20)).await,
            Err(FrameError::Timeout { .. })
        ));
    }

    #[test]
    fn parse_frame_splits_buffers() {
        let buf = [0, 0, 0, 2, 7, 8, 0, 0];
        assert_eq!(parse_frame(&buf, 16).ok(), Some(Some((&[7u8, 8][..], 6))));
        assert_eq!(parse_frame(&buf[6..], 16).ok(), Some(None));
        assert_eq!(parse_frame(&buf[..5], 16).ok(), Some(None));
        assert!(matches!(
            parse_frame(&[0xFF, 0xFF, 0xFF, 0xFF], 16),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn writer_refuses_what_the_reader_would_refuse() {
        assert!(encode_header(FRAME_BYTES_MAX, FRAME_BYTES_MAX).is_ok());
        assert!(matches!(
            encode_header(FRAME_BYTES_MAX + 1, FRAME_BYTES_MAX),
            Err(FrameError::TooLarge { .. })
        ));
        assert_eq!(decode_header([0, 0, 1, 0], FRAME_BYTES_MAX).ok(), Some(256));
    }
}
