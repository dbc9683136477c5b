//! Error types, and the numeric codes the wire uses to close streams and connections.
//!
//! A library error is a type with a message a person can act on; binaries add context.
//! TLS alerts and QUIC close codes are turned into [`HandshakeFailure`] so that "the server
//! refused my certificate" reads as such, not as `CRYPTO_ERROR 0x130`.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::codec::CodecError;
use crate::frame::FrameError;
use crate::msg::Refusal;
use crate::{ALPN_STR, PROTOCOL_VERSION};

/// A request, a connection or a served stream failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The TLS handshake failed (certificates, ALPN).
    #[error("{0}")]
    Handshake(#[from] HandshakeFailure),
    /// The connection closed or broke for another reason.
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// The peer closed the connection with one of our close codes.
    #[error("peer closed the connection: {}", .0.meaning())]
    Closed(CloseCode),
    /// Something did not happen in time.
    #[error("{what} timed out after {} ms", .after.as_millis())]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// The time allowed.
        after: Duration,
    },
    /// A frame could not be read or written.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A message could not be encoded or decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The peer reset the stream carrying this request.
    #[error("peer reset the stream: {}", stream_meaning(*.code))]
    StreamReset {
        /// The application error code (see [`StreamCode`]).
        code: u64,
    },
    /// The peer answered, and the answer is a refusal.
    #[error("refused by peer: {0}")]
    Refused(Refusal),
    /// The peer asked for a protocol version this build does not speak (server side).
    #[error("protocol version {peer} not supported (this build speaks {PROTOCOL_VERSION})")]
    VersionUnsupported {
        /// The version the peer asked for.
        peer: u32,
    },
    /// The peer does not speak our protocol version (client side).
    #[error("peer does not support protocol version {ours} (it speaks {})", version_range(*.peer_min, *.peer_max))]
    PeerVersionMismatch {
        /// The version this side asked for.
        ours: u32,
        /// Oldest version the peer speaks.
        peer_min: u32,
        /// Newest version the peer speaks.
        peer_max: u32,
    },
    /// The first stream of a connection was not a valid hello.
    #[error("peer did not open the connection with a hello: {0}")]
    HelloMissing(String),
    /// The peer answered with a response of the wrong kind.
    #[error("unexpected response to {request}: {got}")]
    UnexpectedResponse {
        /// The request's name.
        request: &'static str,
        /// A short description of what came back.
        got: String,
    },
    /// The peer's certificate carries no usable identity.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Local TLS or certificate setup failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The local endpoint could not be created or used (socket, configuration).
    #[error("endpoint: {0}")]
    Endpoint(String),
}

/// Why a TLS handshake failed. "Peer" is the other end; "our" is this process.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeFailure {
    /// We require a client certificate and the peer presented none.
    #[error("peer presented no client certificate")]
    PeerPresentedNoCertificate,
    /// The peer requires a client certificate and we presented none.
    #[error("the peer requires a client certificate and none was presented")]
    CertificateRequired,
    /// The peer's certificate does not chain to our CA.
    #[error("certificate not signed by this cluster's CA (the peer's certificate)")]
    PeerUnknownCa,
    /// The peer says our certificate does not chain to its CA.
    #[error("certificate not signed by this cluster's CA (the peer refused ours)")]
    RefusedUnknownCa,
    /// We refused the peer's certificate for another reason (expired, wrong name, usage).
    #[error("peer certificate refused: {0}")]
    PeerCertificateInvalid(String),
    /// The peer refused our certificate for another reason.
    #[error("the peer refused our certificate: {0}")]
    CertificateRefused(String),
    /// The peer does not speak our ALPN protocol.
    #[error("peer does not speak {ALPN_STR} (ALPN mismatch)")]
    NoApplicationProtocol,
    /// Any other handshake failure.
    #[error("TLS handshake failed: {0}")]
    Other(String),
}

pub use shardsched_wire::IdentityError;

/// The CA, a certificate or a TLS configuration could not be created or loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// `Ca::create` found a CA key already there.
    #[error("a CA already exists in {} (refusing to overwrite its key)", .0.display())]
    CaExists(PathBuf),
    /// A private key file is readable by others.
    #[error("{} is readable by group or others (mode {mode:o}); run chmod 600", .path.display())]
    KeyPermissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A PEM file holds no usable certificate or key.
    #[error("cannot read {what}: {detail}")]
    Pem {
        /// What was being read ("CA certificate", "private key").
        what: &'static str,
        /// Why it failed.
        detail: String,
    },
    /// rcgen could not generate a key or certificate.
    #[error("certificate generation failed: {0}")]
    Generate(String),
    /// rustls or quinn refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
    /// A name or role is not acceptable in a certificate.
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

/// Application error codes with which a server resets a request stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum StreamCode {
    /// The request frame announced more than [`FRAME_BYTES_MAX`](crate::limits::FRAME_BYTES_MAX).
    FrameTooLarge = 0x10,
    /// The request bytes are not a valid message (garbage, truncated frame, trailing bytes).
    Malformed = 0x11,
    /// The request frame did not arrive within [`FRAME_READ_TIMEOUT`](crate::limits::FRAME_READ_TIMEOUT).
    Timeout = 0x12,
    /// The server failed to produce an answer (its handler failed or was cancelled).
    Internal = 0x13,
}

/// Application error codes with which a connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CloseCode {
    /// Orderly close.
    Done = 0,
    /// The hello asked for an unsupported protocol version.
    VersionUnsupported = 0x20,
    /// The first stream was not a valid hello.
    HelloMissing = 0x21,
    /// The peer's certificate carries no usable identity.
    NoIdentity = 0x22,
}

impl StreamCode {
    /// All codes.
    pub const ALL: [StreamCode; 4] = [
        StreamCode::FrameTooLarge,
        StreamCode::Malformed,
        StreamCode::Timeout,
        StreamCode::Internal,
    ];

    /// The QUIC varint of this code.
    pub fn varint(self) -> quinn::VarInt {
        quinn::VarInt::from_u32(self as u32)
    }

    /// The code for a wire value, if it is one of ours.
    pub fn from_u64(code: u64) -> Option<StreamCode> {
        StreamCode::ALL.into_iter().find(|c| *c as u64 == code)
    }

    /// What the code means, for error messages.
    pub fn meaning(self) -> &'static str {
        match self {
            StreamCode::FrameTooLarge => "frame larger than the limit",
            StreamCode::Malformed => "malformed request",
            StreamCode::Timeout => "request not received in time",
            StreamCode::Internal => "server failed to answer",
        }
    }
}

impl CloseCode {
    /// All codes.
    pub const ALL: [CloseCode; 4] = [
        CloseCode::Done,
        CloseCode::VersionUnsupported,
        CloseCode::HelloMissing,
        CloseCode::NoIdentity,
    ];

    /// The QUIC varint of this code.
    pub fn varint(self) -> quinn::VarInt {
        quinn::VarInt::from_u32(self as u32)
    }

    /// The code for a wire value, if it is one of ours.
    pub fn from_u64(code: u64) -> Option<CloseCode> {
        CloseCode::ALL.into_iter().find(|c| *c as u64 == code)
    }

    /// What the code means, for error messages.
    pub fn meaning(self) -> &'static str {
        match self {
            CloseCode::Done => "done",
            CloseCode::VersionUnsupported => "protocol version not supported",
            CloseCode::HelloMissing => "no hello",
            CloseCode::NoIdentity => "certificate carries no shardsched identity",
        }
    }
}

fn version_range(min: u32, max: u32) -> String {
    if min == max {
        min.to_string()
    } else {
        format!("{min} to {max}")
    }
}

fn stream_meaning(code: u64) -> String {
    match StreamCode::from_u64(code) {
        Some(c) => c.meaning().to_owned(),
        None => format!("unknown code {code:#x}"),
    }
}

/// TLS alert numbers (RFC 8446 §6) that we name in errors.
mod alert {
    pub const BAD_CERTIFICATE: u8 = 42;
    pub const CERTIFICATE_EXPIRED: u8 = 45;
    pub const UNKNOWN_CA: u8 = 48;
    pub const CERTIFICATE_REQUIRED: u8 = 116;
    pub const NO_APPLICATION_PROTOCOL: u8 = 120;
}

/// QUIC carries TLS alerts as transport error codes `0x100 + alert` (RFC 9001 §4.8).
fn crypto_alert(code: quinn::TransportErrorCode) -> Option<u8> {
    let code = u64::from(code);
    (0x100..0x200).contains(&code).then(|| (code - 0x100) as u8)
}

fn alert_name(alert: u8) -> String {
    match alert {
        alert::BAD_CERTIFICATE => "bad certificate".into(),
        alert::CERTIFICATE_EXPIRED => "certificate expired or not yet valid".into(),
        alert::UNKNOWN_CA => "unknown CA".into(),
        other => format!("TLS alert {other}"),
    }
}

impl From<quinn::ConnectionError> for Error {
    fn from(e: quinn::ConnectionError) -> Self {
        use quinn::ConnectionError as C;
        match e {
            // We detected the failure and sent the alert: the peer's certificate is at fault.
            C::TransportError(t) => match crypto_alert(t.code) {
                Some(alert::CERTIFICATE_REQUIRED) => {
                    HandshakeFailure::PeerPresentedNoCertificate.into()
                }
                Some(alert::UNKNOWN_CA) => HandshakeFailure::PeerUnknownCa.into(),
                Some(alert::NO_APPLICATION_PROTOCOL) => {
                    HandshakeFailure::NoApplicationProtocol.into()
                }
                Some(_) => HandshakeFailure::PeerCertificateInvalid(t.reason).into(),
                None => Error::ConnectionLost(t.to_string()),
            },
            // The peer sent the alert: it refused something of ours.
            C::ConnectionClosed(c) => match crypto_alert(c.error_code) {
                Some(alert::CERTIFICATE_REQUIRED) => HandshakeFailure::CertificateRequired.into(),
                Some(alert::UNKNOWN_CA) => HandshakeFailure::RefusedUnknownCa.into(),
                Some(alert::NO_APPLICATION_PROTOCOL) => {
                    HandshakeFailure::NoApplicationProtocol.into()
                }
                Some(a) => HandshakeFailure::CertificateRefused(alert_name(a)).into(),
                None => Error::ConnectionLost(c.to_string()),
            },
            C::ApplicationClosed(a) => match CloseCode::from_u64(a.error_code.into_inner()) {
                Some(code) => Error::Closed(code),
                None => Error::ConnectionLost(a.to_string()),
            },
            other => Error::ConnectionLost(other.to_string()),
        }
    }
}

impl From<quinn::ReadError> for Error {
    fn from(e: quinn::ReadError) -> Self {
        match e {
            quinn::ReadError::Reset(code) => Error::StreamReset {
                code: code.into_inner(),
            },
            quinn::ReadError::ConnectionLost(c) => c.into(),
            other => Error::ConnectionLost(other.to_string()),
        }
    }
}

impl From<quinn::WriteError> for Error {
    fn from(e: quinn::WriteError) -> Self {
        match e {
            quinn::WriteError::Stopped(code) => Error::StreamReset {
                code: code.into_inner(),
            },
            quinn::WriteError::ConnectionLost(c) => c.into(),
            other => Error::ConnectionLost(other.to_string()),
        }
    }
}

impl Error {
    /// Recovers the QUIC cause of a frame I/O error (tokio's traits wrap quinn's errors in
    /// `io::Error`), so a reset stream reads as [`Error::StreamReset`].
    pub(crate) fn from_frame(e: FrameError) -> Error {
        let FrameError::Io(io) = e else {
            return Error::Frame(e);
        };
        let inner = io.get_ref();
        if let Some(read) = inner.and_then(|i| i.downcast_ref::<quinn::ReadError>()) {
            return read.clone().into();
        }
        if let Some(write) = inner.and_then(|i| i.downcast_ref::<quinn::WriteError>()) {
            return write.clone().into();
        }
        Error::Frame(FrameError::Io(io))
    }

    /// The stream code a server resets a request stream with when reading it failed this way.
    pub(crate) fn stream_code(&self) -> StreamCode {
        match self {
            Error::Frame(FrameError::TooLarge { .. }) => StreamCode::FrameTooLarge,
            Error::Frame(FrameError::Timeout { .. }) | Error::Timeout { .. } => StreamCode::Timeout,
            Error::Frame(FrameError::Truncated) | Error::Codec(_) => StreamCode::Malformed,
            _ => StreamCode::Internal,
        }
    }
}
