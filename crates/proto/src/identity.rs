//! Who a peer is, read from the certificate it presented: the identity types live in
//! [`shardsched_wire::identity`] (re-exported here); this module reads them out of X.509
//! certificates and QUIC connections.

pub use shardsched_wire::identity::*;

use crate::error::IdentityError;

/// Reads the identity out of a DER certificate (already verified against the CA by TLS).
pub fn peer_of_certificate(der: &[u8]) -> Result<Peer, IdentityError> {
    use x509_parser::extensions::GeneralName;

    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| IdentityError::BadCertificate(e.to_string()))?;
    let sans = cert
        .subject_alternative_name()
        .map_err(|e| IdentityError::BadCertificate(e.to_string()))?;
    let prefix = format!("{IDENTITY_URI_SCHEME}://");
    let mut uris = sans
        .iter()
        .flat_map(|ext| ext.value.general_names.iter())
        .filter_map(|g| match g {
            GeneralName::URI(uri) if uri.starts_with(&prefix) => Some(*uri),
            _ => None,
        });
    match (uris.next(), uris.next()) {
        (Some(uri), None) => Peer::from_uri(uri),
        (None, _) => Err(IdentityError::NoIdentity),
        (Some(_), Some(_)) => Err(IdentityError::AmbiguousIdentity),
    }
}

/// The identity of the peer at the other end of an established connection, from the
/// certificate it presented in the handshake.
pub fn peer_of(conn: &quinn::Connection) -> Result<Peer, IdentityError> {
    let identity = conn
        .peer_identity()
        .ok_or(IdentityError::NoPeerCertificate)?;
    let chain = identity
        .downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
        .map_err(|_| IdentityError::NoPeerCertificate)?;
    let leaf = chain.first().ok_or(IdentityError::NoPeerCertificate)?;
    peer_of_certificate(leaf)
}
