//! QUIC endpoint configuration: TLS 1.3 only, mutual certificates, ALPN `shardsched/1`.
//!
//! Both directions verify against the cluster CA only (no system roots): the server with
//! rustls's `WebPkiClientVerifier` (a client certificate is mandatory), the client with the
//! CA as its single root and the server's DNS name ([`server_name`](crate::identity::server_name)).
//! The crypto provider is ring. 0-RTT is off, so no request can be replayed.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::ALPN;
use crate::error::{Error, IdentityError, TlsError};
use crate::identity::{Peer, peer_of_certificate};
use crate::limits::{
    CONNECTION_RECEIVE_WINDOW_BYTES, IDLE_TIMEOUT, KEEP_ALIVE_INTERVAL, STREAMS_CONCURRENT_MAX,
};

/// What one process needs to speak the wire: the cluster CA, its certificate, its key.
#[derive(Debug)]
pub struct Credentials {
    ca: CertificateDer<'static>,
    cert: CertificateDer<'static>,
    /// `cert` as it was read, for passing on (a signed jobspec carries it).
    cert_pem: String,
    key: PrivateKeyDer<'static>,
}

impl Clone for Credentials {
    fn clone(&self) -> Self {
        Credentials {
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            cert_pem: self.cert_pem.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Credentials {
    /// Credentials from PEM text: the CA certificate, this process's certificate, its key.
    pub fn from_pem(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<Self, TlsError> {
        let pem = |what: &'static str| {
            move |e: rustls_pki_types::pem::Error| TlsError::Pem {
                what,
                detail: e.to_string(),
            }
        };
        Ok(Credentials {
            ca: CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(pem("CA certificate"))?,
            cert: CertificateDer::from_pem_slice(cert_pem.as_bytes())
                .map_err(pem("certificate"))?,
            cert_pem: cert_pem.to_owned(),
            key: PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(pem("private key"))?,
        })
    }

    /// Credentials from three PEM files.
    pub fn load(ca_path: &Path, cert_path: &Path, key_path: &Path) -> Result<Self, TlsError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| TlsError::Io {
                path: path.to_owned(),
                source,
            })
        };
        Credentials::from_pem(&read(ca_path)?, &read(cert_path)?, &read(key_path)?)
    }

    /// This process's certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate, this process's certificate and its key.
    pub(crate) fn parts(
        &self,
    ) -> (
        &CertificateDer<'static>,
        &CertificateDer<'static>,
        &PrivateKeyDer<'static>,
    ) {
        (&self.ca, &self.cert, &self.key)
    }

    /// The identity in this process's own certificate.
    pub fn identity(&self) -> Result<Peer, IdentityError> {
        peer_of_certificate(&self.cert)
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, TlsError> {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.ca.clone())
            .map_err(|e| TlsError::Config(format!("CA certificate: {e}")))?;
        Ok(Arc::new(roots))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn config_error(e: impl std::fmt::Display) -> TlsError {
    TlsError::Config(e.to_string())
}

/// The QUIC transport settings shared by both ends: idle timeout, keep-alive, stream limits,
/// and the connection's receive window (what a peer may make QUIC buffer unread).
pub fn transport_config() -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(STREAMS_CONCURRENT_MAX))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(0))
        .receive_window(quinn::VarInt::from_u32(CONNECTION_RECEIVE_WINDOW_BYTES))
        .keep_alive_interval(Some(KEEP_ALIVE_INTERVAL));
    // IDLE_TIMEOUT is 60 s, far inside QUIC's varint range, so the conversion cannot fail.
    if let Ok(idle) = quinn::IdleTimeout::try_from(IDLE_TIMEOUT) {
        transport.max_idle_timeout(Some(idle));
    }
    transport
}

/// The rustls server configuration: TLS 1.3, client certificate required and verified
/// against the CA, ALPN `shardsched/1`.
pub fn rustls_server_config(creds: &Credentials) -> Result<rustls::ServerConfig, TlsError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(creds.roots()?, provider())
        .build()
        .map_err(config_error)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![creds.cert.clone()], creds.key.clone_key())
        .map_err(config_error)?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// The rustls client configuration: TLS 1.3, the CA as the only root, our certificate as
/// the client certificate, ALPN `shardsched/1`.
pub fn rustls_client_config(creds: &Credentials) -> Result<rustls::ClientConfig, TlsError> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(config_error)?
        .with_root_certificates(creds.roots()?)
        .with_client_auth_cert(vec![creds.cert.clone()], creds.key.clone_key())
        .map_err(config_error)?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// A quinn server configuration from a rustls one (with [`transport_config`]).
pub fn quic_server_config(tls: rustls::ServerConfig) -> Result<quinn::ServerConfig, TlsError> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(config_error)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config()));
    Ok(config)
}

/// A quinn client configuration from a rustls one (with [`transport_config`]).
pub fn quic_client_config(tls: rustls::ClientConfig) -> Result<quinn::ClientConfig, TlsError> {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(config_error)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config()));
    Ok(config)
}

/// The quinn server configuration for `creds`.
pub fn server_config(creds: &Credentials) -> Result<quinn::ServerConfig, TlsError> {
    quic_server_config(rustls_server_config(creds)?)
}

/// The quinn client configuration for `creds`.
pub fn client_config(creds: &Credentials) -> Result<quinn::ClientConfig, TlsError> {
    quic_client_config(rustls_client_config(creds)?)
}

/// An endpoint listening on `listen` that can also connect out with the same certificate
/// (a shard serves clients and connects to the coordinator). Its stateless-reset key comes
/// from the certificate's private key (see [`server_endpoint_with_reset_secret`]), which a
/// shard keeps across restarts. Needs a tokio runtime.
pub fn server_endpoint(creds: &Credentials, listen: SocketAddr) -> Result<quinn::Endpoint, Error> {
    server_endpoint_with_reset_secret(creds, listen, creds.key.secret_der())
}

/// [`server_endpoint`], with the QUIC stateless-reset key derived from `secret`.
///
/// Why: a process killed with SIGKILL closes none of its connections, so its peers would
/// only notice at the idle timeout. When the process restarts on the same address with the
/// same secret, it answers their next packet (a keep-alive at the latest) with a stateless
/// reset they can authenticate, and they reconnect at once instead of a minute later. The
/// secret must persist across restarts and stay private: the key of a certificate that is
/// kept, or the CA key.
pub fn server_endpoint_with_reset_secret(
    creds: &Credentials,
    listen: SocketAddr,
    secret: &[u8],
) -> Result<quinn::Endpoint, Error> {
    let socket = std::net::UdpSocket::bind(listen)
        .map_err(|e| Error::Endpoint(format!("cannot listen on {listen}: {e}")))?;
    enlarge_receive_buffer(&socket);
    let runtime = quinn::default_runtime()
        .ok_or_else(|| Error::Endpoint("no async runtime for the QUIC endpoint".to_owned()))?;
    let mut config = quinn::EndpointConfig::new(Arc::new(reset_key(secret)));
    // The connection ids carry a hash that lets an endpoint drop packets for ids it never
    // issued; keyed from the same secret, a restarted endpoint accepts its predecessor's ids
    // far enough to answer them with the stateless reset.
    let cid_key = u64::from_le_bytes(
        derive(b"connection id", secret)[..8]
            .try_into()
            .unwrap_or_default(),
    );
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    let mut endpoint = quinn::Endpoint::new(config, Some(server_config(creds)?), socket, runtime)
        .map_err(|e| Error::Endpoint(format!("cannot listen on {listen}: {e}")))?;
    endpoint.set_default_client_config(client_config(creds)?);
    Ok(endpoint)
}

/// The receive buffer a server endpoint asks of the kernel for its UDP socket, bytes.
///
/// Why: every client's handshake arrives on one socket (a shard's takes every submit's), and
/// on a loaded host the process may not run for tens of milliseconds while a burst of
/// submits keeps sending. The kernel's default (`net.core.rmem_default`, 208 KiB on Linux)
/// holds about 90 loopback datagrams of 1,200 bytes; past it, datagrams are dropped
/// (`RcvbufErrors` in `netstat -su`), and a lost handshake packet costs its client QUIC's
/// retransmission timeout, doubled at each loss. The kernel caps the request at
/// `net.core.rmem_max` without an error.
pub const SERVER_RECEIVE_BUFFER_BYTES: usize = 4 << 20;

/// Asks for [`SERVER_RECEIVE_BUFFER_BYTES`] of receive buffer on `socket`; a refusal only
/// leaves the kernel's default, so it is logged, not fatal.
fn enlarge_receive_buffer(socket: &std::net::UdpSocket) {
    let set = quinn::udp::UdpSocketState::new(socket.into()).and_then(|state| {
        state.set_recv_buffer_size(socket.into(), SERVER_RECEIVE_BUFFER_BYTES)?;
        state.recv_buffer_size(socket.into())
    });
    match set {
        Ok(bytes) => tracing::debug!(bytes, "UDP receive buffer"),
        Err(e) => tracing::warn!(error = %e, "cannot enlarge the UDP receive buffer"),
    }
}

/// The HMAC key for stateless resets.
fn reset_key(secret: &[u8]) -> ring::hmac::Key {
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &derive(b"stateless reset", secret))
}

/// A hash of `secret` under a label of its own, so that no key is ever the secret itself
/// and no two uses share one.
fn derive(label: &[u8], secret: &[u8]) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(b"shardsched quic v1\0");
    context.update(label);
    context.update(b"\0");
    context.update(secret);
    let mut out = [0u8; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

/// An endpoint that only connects out, bound to `bind` (use port 0). Needs a tokio runtime.
pub fn client_endpoint(creds: &Credentials, bind: SocketAddr) -> Result<quinn::Endpoint, Error> {
    let mut endpoint = quinn::Endpoint::client(bind)
        .map_err(|e| Error::Endpoint(format!("cannot bind {bind}: {e}")))?;
    endpoint.set_default_client_config(client_config(creds)?);
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive_buffer(socket: &std::net::UdpSocket) -> usize {
        quinn::udp::UdpSocketState::new(socket.into())
            .and_then(|state| state.recv_buffer_size(socket.into()))
            .expect("receive buffer size")
    }

    /// A server socket gets the larger buffer, as far as the kernel's cap allows (Linux
    /// reports twice what was granted, for its own bookkeeping).
    #[test]
    fn a_server_socket_gets_a_larger_receive_buffer() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let default = receive_buffer(&socket);
        enlarge_receive_buffer(&socket);
        let enlarged = receive_buffer(&socket);
        let cap = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok());
        match cap {
            Some(cap) if cap > default => assert!(
                enlarged >= SERVER_RECEIVE_BUFFER_BYTES.min(cap),
                "asked {SERVER_RECEIVE_BUFFER_BYTES} under a cap of {cap}, got {enlarged}"
            ),
            _ => assert!(enlarged >= default, "{enlarged} < {default}"),
        }
    }
}
