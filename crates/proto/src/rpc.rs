//! Requests and answers over QUIC: one request per bidirectional stream.
//!
//! ```text
//!  client                                        server
//!    | open bi-stream                              |
//!    |--- frame(Req) ---------- FIN -------------->| read_frame (size-checked, timed)
//!    |                                             | decode → role check → handler(peer, req)
//!    |<-------------- frame(Reply<Resp>) --- FIN --|
//! ```
//!
//! The first stream of every connection is the [hello](crate::msg::hello): [`connect`] sends
//! it, [`accept`] answers it. After that either side may open request streams: a client asks
//! a shard or the coordinator; the coordinator asks a shard over the connection the shard
//! opened to register ([`serve`] works on both ends of a connection).
//!
//! A stream whose request cannot be read — announced too large, garbage, truncated, too slow
//! — is reset with a [`StreamCode`]; the connection and its other
//! streams carry on. Every request is checked against the peer's role
//! ([`Role::may`](crate::identity::Role::may)) before the handler sees it.

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument as _;

use crate::budget::{RequestBudget, Reserved};
use crate::codec;
use crate::error::{CloseCode, Error, IdentityError, StreamCode};
use crate::frame::{FrameError, read_frame, read_header, read_payload, write_frame};
use crate::identity::{Peer, Role, peer_of, server_name};
use crate::limits::{
    CLOSE_LINGER, FRAME_BYTES_MAX, FRAME_READ_TIMEOUT, HANDSHAKE_TIMEOUT, HELLO_BYTES_MAX,
    REQUEST_TIMEOUT,
};
use crate::msg::hello::{Hello, HelloReply};
use crate::msg::{Refusal, RefusalCode};
use crate::observe;
use crate::{PROTOCOL_VERSION, PROTOCOL_VERSION_MIN, SOFTWARE};

pub use shardsched_wire::rpc::{Reply, Rpc};

/// An open, authenticated connection that has exchanged hellos.
#[derive(Clone, Debug)]
pub struct Session {
    conn: quinn::Connection,
    peer: Peer,
    seen_as: Option<Peer>,
    /// Counts the connection open (see [`crate::observe`]) while any clone lives.
    _counted: Option<Arc<observe::OpenConnection>>,
}

impl Session {
    /// The other end, from its certificate.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// This end as the server read it from our certificate (client side only).
    pub fn seen_as(&self) -> Option<&Peer> {
        self.seen_as.as_ref()
    }

    /// The QUIC connection.
    pub fn connection(&self) -> &quinn::Connection {
        &self.conn
    }

    /// The other end's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.conn.remote_address()
    }

    /// Sends one request on a new stream and waits for its answer. See [`request`].
    pub async fn request<R: Rpc>(&self, req: &R) -> Result<R::Response, Error> {
        request(&self.conn, req).await
    }

    /// Closes the connection in an orderly way.
    pub fn close(&self) {
        self.conn.close(CloseCode::Done.varint(), b"done");
    }
}

/// Connects to the server whose certificate says `role`/`name` (a shard's name is its queue),
/// and exchanges hellos. The TLS layer checks the server's certificate against the CA and
/// its DNS name against [`server_name`]`(role, name)`.
pub async fn connect(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    role: Role,
    name: &str,
) -> Result<Session, Error> {
    connect_speaking(endpoint, addr, role, name, PROTOCOL_VERSION).await
}

/// [`connect`], announcing `protocol_version` in the hello instead of this build's. For
/// tests and for tools probing compatibility.
pub async fn connect_speaking(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    role: Role,
    name: &str,
    protocol_version: u32,
) -> Result<Session, Error> {
    let connecting = endpoint
        .connect(addr, &server_name(role, name))
        .map_err(|e| Error::Endpoint(e.to_string()))?;
    let work = async {
        let conn = connecting.await?;
        let peer = peer_of(&conn)?;
        if peer.role != role || peer.name != name {
            conn.close(
                CloseCode::NoIdentity.varint(),
                b"unexpected server identity",
            );
            let expected = format!("{role} {name}");
            return Err(IdentityError::WrongPeer {
                expected,
                got: peer.to_string(),
            }
            .into());
        }
        let hello = Hello {
            protocol_version,
            software: SOFTWARE.to_owned(),
        };
        match round_trip::<Hello, HelloReply>(&conn, &hello).await? {
            HelloReply::Welcome { you, .. } => Ok(Session {
                _counted: observe::connection(peer.role),
                conn,
                peer,
                seen_as: Some(you),
            }),
            HelloReply::Unsupported { min, max } => {
                conn.close(CloseCode::VersionUnsupported.varint(), b"version");
                Err(Error::PeerVersionMismatch {
                    ours: protocol_version,
                    peer_min: min,
                    peer_max: max,
                })
            }
        }
    };
    timed(HANDSHAKE_TIMEOUT, "connection handshake", work).await
}

/// Completes an incoming connection: TLS handshake (the client certificate is verified
/// against the CA by rustls), identity from the certificate, then the hello on the first
/// stream. A peer that speaks an unsupported version gets a refusal it can print, then the
/// connection is closed.
pub async fn accept(incoming: quinn::Incoming) -> Result<Session, Error> {
    let work = async {
        let conn = incoming.await?;
        let peer = match peer_of(&conn) {
            Ok(peer) => peer,
            Err(e) => {
                conn.close(CloseCode::NoIdentity.varint(), b"no identity");
                return Err(e.into());
            }
        };
        let (mut send, mut recv) = conn.accept_bi().await?;
        let hello: Hello = match read_message(&mut recv, HELLO_BYTES_MAX, FRAME_READ_TIMEOUT).await
        {
            Ok(hello) => hello,
            Err(e) => {
                conn.close(CloseCode::HelloMissing.varint(), b"no hello");
                return Err(Error::HelloMissing(e.to_string()));
            }
        };
        let version = hello.protocol_version;
        if (PROTOCOL_VERSION_MIN..=PROTOCOL_VERSION).contains(&version) {
            let welcome = HelloReply::Welcome {
                protocol_version: version,
                software: SOFTWARE.to_owned(),
                you: peer.clone(),
            };
            write_message(&mut send, &welcome).await?;
            let _ = send.finish();
            tracing::debug!(%peer, version, software = %hello.software, "connection accepted");
            Ok(Session {
                _counted: observe::connection(peer.role),
                conn,
                peer,
                seen_as: None,
            })
        } else {
            let refusal = HelloReply::Unsupported {
                min: PROTOCOL_VERSION_MIN,
                max: PROTOCOL_VERSION,
            };
            write_message(&mut send, &refusal).await?;
            let _ = send.finish();
            let _ = tokio::time::timeout(CLOSE_LINGER, send.stopped()).await;
            conn.close(CloseCode::VersionUnsupported.varint(), b"version");
            Err(Error::VersionUnsupported { peer: version })
        }
    };
    timed(HANDSHAKE_TIMEOUT, "connection handshake", work).await
}

/// Sends `req` on a new bidirectional stream of `conn` and returns the answer. A refusal
/// comes back as [`Error::Refused`]; a stream the server reset as [`Error::StreamReset`].
/// The whole exchange is bounded by [`REQUEST_TIMEOUT`].
pub async fn request<R: Rpc>(conn: &quinn::Connection, req: &R) -> Result<R::Response, Error> {
    round_trip::<R, Reply<R::Response>>(conn, req)
        .await?
        .map_err(Error::Refused)
}

/// Serves requests of type `R` on `session` until the connection closes: each stream gets
/// its own task, which reads the request, checks the peer's role and the request's bounds,
/// calls `handler(peer, request)` and writes the reply. Returns `Ok(())` on an orderly close.
pub async fn serve<R, H, F>(session: Session, handler: H) -> Result<(), Error>
where
    R: Rpc,
    H: Fn(Peer, R) -> F + Send + Sync + 'static,
    F: Future<Output = Reply<R::Response>> + Send + 'static,
{
    let handler = Arc::new(handler);
    let budget = RequestBudget::for_connection(&session.peer);
    loop {
        let (send, recv) = match session.conn.accept_bi().await {
            Ok(streams) => streams,
            Err(quinn::ConnectionError::LocallyClosed) => return Ok(()),
            Err(quinn::ConnectionError::ApplicationClosed(close))
                if close.error_code == CloseCode::Done.varint() =>
            {
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let peer = session.peer.clone();
        // The stream's task carries on the caller's span (the process's, the connection's).
        tokio::spawn(
            serve_stream::<R, H, F>(peer, send, recv, Arc::clone(&handler), budget.clone())
                .in_current_span(),
        );
    }
}

async fn serve_stream<R, H, F>(
    peer: Peer,
    send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    handler: Arc<H>,
    budget: RequestBudget,
) where
    R: Rpc,
    H: Fn(Peer, R) -> F + Send + Sync + 'static,
    F: Future<Output = Reply<R::Response>> + Send + 'static,
{
    let mut reply_to = ReplyStream { send, done: false };
    // The request's bytes stay reserved until its reply is written.
    let (req, _reserved): (R, Reserved) = match read_budgeted(&mut recv, &budget).await {
        Ok(read) => read,
        Err(e) => {
            let code = e.stream_code();
            tracing::debug!(%peer, error = %e, "refusing request stream");
            let _ = recv.stop(code.varint());
            reply_to.reset(code);
            return;
        }
    };
    let kind = req.kind();
    let op = req.op();
    // A span per request: what its handler logs says which request and whose.
    let span = tracing::info_span!("request", kind, %peer);
    let reply = if !peer.may(op) {
        tracing::info!(parent: &span, "forbidden");
        Err(Refusal::forbidden(&peer, op))
    } else if let Err(refusal) = req.check() {
        Err(refusal)
    } else {
        handler(peer.clone(), req).instrument(span).await
    };
    observe::answered(kind, reply.as_ref().err().map(|refusal| refusal.code));
    let bytes = match codec::encode(&reply) {
        Ok(bytes) => bytes,
        // Lists are fitted to a frame where they are made; should an answer still not fit,
        // the asker gets a refusal saying so rather than a reset stream.
        Err(e) => {
            tracing::warn!(%peer, kind, error = %e, "reply too large; refusing instead");
            let refusal: Reply<R::Response> = Err(Refusal::new(
                RefusalCode::Internal,
                format!("the answer to {kind} does not fit one message: {e}"),
            ));
            match codec::encode(&refusal) {
                Ok(bytes) => bytes,
                Err(_) => return,
            }
        }
    };
    let written = timed(REQUEST_TIMEOUT, "writing a reply", async {
        write_frame(&mut reply_to.send, &bytes, FRAME_BYTES_MAX)
            .await
            .map_err(Error::from_frame)
    })
    .await;
    match written {
        Ok(()) => reply_to.finish(),
        Err(e) => {
            tracing::debug!(%peer, kind, error = %e, "reply not delivered");
            reply_to.reset(StreamCode::Internal);
        }
    }
}

/// The send half of a request stream; reset with [`StreamCode::Internal`] if dropped
/// unanswered (the handler panicked or the task was cancelled).
struct ReplyStream {
    send: quinn::SendStream,
    done: bool,
}

impl ReplyStream {
    fn finish(&mut self) {
        self.done = true;
        let _ = self.send.finish();
    }

    fn reset(&mut self, code: StreamCode) {
        self.done = true;
        let _ = self.send.reset(code.varint());
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.send.reset(StreamCode::Internal.varint());
        }
    }
}

async fn round_trip<Q: Serialize, A: DeserializeOwned>(
    conn: &quinn::Connection,
    question: &Q,
) -> Result<A, Error> {
    let bytes = codec::encode(question)?;
    let work = async {
        let (mut send, mut recv) = conn.open_bi().await?;
        write_frame(&mut send, &bytes, FRAME_BYTES_MAX)
            .await
            .map_err(Error::from_frame)?;
        let _ = send.finish();
        read_message(&mut recv, FRAME_BYTES_MAX, REQUEST_TIMEOUT).await
    };
    timed(REQUEST_TIMEOUT, "request", work).await
}

async fn read_message<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
    max: usize,
    timeout: Duration,
) -> Result<T, Error> {
    let bytes = read_frame(recv, max, timeout)
        .await
        .map_err(Error::from_frame)?;
    Ok(codec::decode(&bytes)?)
}

/// Reads and decodes one request frame within [`FRAME_READ_TIMEOUT`], its announced length
/// reserved from `budget` before its payload is read (see [`crate::budget`]).
async fn read_budgeted<T: DeserializeOwned>(
    recv: &mut quinn::RecvStream,
    budget: &RequestBudget,
) -> Result<(T, Reserved), Error> {
    let work = async {
        let len = read_header(recv, FRAME_BYTES_MAX).await?;
        let reserved = budget.reserve(len).await;
        let payload = read_payload(recv, len).await?;
        Ok((payload, reserved))
    };
    let (payload, reserved) = match tokio::time::timeout(FRAME_READ_TIMEOUT, work).await {
        Ok(read) => read.map_err(Error::from_frame)?,
        Err(_elapsed) => {
            return Err(Error::Frame(FrameError::Timeout {
                after: FRAME_READ_TIMEOUT,
            }));
        }
    };
    Ok((codec::decode(&payload)?, reserved))
}

async fn write_message<T: Serialize>(send: &mut quinn::SendStream, value: &T) -> Result<(), Error> {
    let bytes = codec::encode(value)?;
    write_frame(send, &bytes, FRAME_BYTES_MAX)
        .await
        .map_err(Error::from_frame)
}

async fn timed<T>(
    after: Duration,
    what: &'static str,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(after, work)
        .await
        .unwrap_or(Err(Error::Timeout { what, after }))
}
